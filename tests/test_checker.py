"""jitload.check against planted bad candidates, in Python and as a small C++ extension: each is flagged
with its own reason, and the good ones pass."""

import time

import pytest
import torch
from extensions import write

import jitload
from jitload.harness.checker import EVERY_TRIAL, LAYOUTS, TOLERANCES, check
from jitload.harness.layouts import MIXED

SIZES = (0, 1, 7, 1023, 2**20 + 3)


def reference_add(a, b):
    return a + b


def make_inputs(size, dtype, device):
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def uninitialised(a, b):
    out = torch.empty_like(a)
    half = out.numel() // 2
    out.view(-1)[:half] = (a + b).reshape(-1)[:half]
    return out


def wrong_on_odd_sizes(a, b):
    return a + b + (a.numel() % 2)


def modifies_input(a, b):
    out = a + b
    a.mul_(2)
    return out


def beyond_tolerance(a, b):
    rtol = TOLERANCES[a.dtype][0]
    return (a + b) * (1 + 4 * rtol) + 4 * rtol


def within_tolerance(a, b):
    rtol = TOLERANCES[a.dtype][0]
    return (a + b) * (1 + rtol / 4)


def returns_nan(a, b):
    out = a + b
    if out.numel():
        out.view(-1)[out.numel() // 2] = float("nan")
    return out


def wrong_dtype(a, b):
    return (a + b).double()


def wrong_shape(a, b):
    return (a + b).reshape(-1)[1:]


def wrong_only_when_strided(a, b):
    return a + b if a.is_contiguous() else a + b + 1


def raises(a, b):
    raise RuntimeError("kernel launch failed")


def good_but_slow(a, b):
    time.sleep(0.002)
    return a + b


def _check(fn, **kwargs):
    # The planted bugs below are about values, not layouts: the layouts have tests of their own.
    kwargs.setdefault("layouts", EVERY_TRIAL)
    kwargs.setdefault("sizes", SIZES)
    kwargs.setdefault("trials", 1)
    kwargs.setdefault("device", "cpu")
    return check(fn, reference_add, make_inputs, **kwargs)


def test_good_candidate_passes_with_a_row_per_case():
    report = _check(torch.add, trials=2, layouts=tuple(LAYOUTS))
    assert report.ok, report
    # sizes x (every layout on the first trial + contiguous and strided on the second), less the other layouts
    # at the largest size, less the mixed ones that leave 1-D inputs contiguous: padded (only offset) and
    # transposed at every size, every mixed one at sizes 0 and 1
    first_trial = [n for n in SIZES if n != max(SIZES)]
    contiguous_mixed = 2 * len(first_trial) + (len(MIXED) + 1 - 2) * sum(n <= 1 for n in first_trial)
    assert len(report.table) == len(SIZES) * (len(LAYOUTS) + len(EVERY_TRIAL)) - (
        len(LAYOUTS) - len(EVERY_TRIAL)) - contiguous_mixed
    assert set(report.table["layout"]) == set(LAYOUTS) - {"mixed_padded", "mixed_transposed"}
    assert {"size", "dtype", "trial", "layout", "max_abs_err", "max_rel_err", "worst_index", "ok", "seed"} <= set(
        report.table.columns)
    report.raise_if_failed()


@pytest.mark.parametrize("candidate, reason", [
    (uninitialised, "unwritten_output"),
    (wrong_on_odd_sizes, "wrong_values"),
    (modifies_input, "modified_input"),
    (beyond_tolerance, "wrong_values"),
    (returns_nan, "nan_or_inf"),
    (wrong_dtype, "wrong_dtype"),
    (wrong_shape, "wrong_shape"),
    (raises, "raised"),
])
def test_bad_candidate_is_flagged_with_its_reason(candidate, reason):
    report = _check(candidate)
    assert not report.ok
    assert report.reasons == {reason}, report


def test_odd_sizes_only_fail_on_odd_sizes():
    report = _check(wrong_on_odd_sizes)
    assert {f.size for f in report.failures} == {1, 7, 1023, 2**20 + 3}


def test_a_layout_bug_shows_on_strided_inputs_only():
    report = _check(wrong_only_when_strided)
    assert report.reasons == {"wrong_values"}
    assert {f.layout for f in report.failures} == {"strided"}


def test_failure_names_index_values_and_seed():
    report = _check(wrong_on_odd_sizes, sizes=(7,))
    failure = report.failures[0]
    assert failure.seed is not None and f"seed={failure.seed}" in str(failure)
    assert failure.mismatches and failure.mismatches[0][0] == (0,)
    with pytest.raises(AssertionError, match=r"index \(0,\): got .*, expected "):
        report.raise_if_failed()
    assert "wrong_values" in report._repr_html_()


def test_same_seed_same_inputs_new_trial_new_inputs():
    seen = []

    def record(a, b):
        seen.append(a.clone())
        return a + b

    check(record, reference_add, make_inputs, sizes=(16,), trials=2, device="cpu", layouts=("contiguous",))
    check(record, reference_add, make_inputs, sizes=(16,), trials=1, device="cpu", layouts=("contiguous",))
    assert not torch.equal(seen[0], seen[1]) and torch.equal(seen[0], seen[2])


def test_zero_inputs_are_rejected():
    report = check(torch.add, reference_add, lambda n, dt, dev: (torch.zeros(n), torch.zeros(n)), sizes=(8,),
                   trials=1, device="cpu")
    assert report.reasons == {"degenerate_inputs"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_candidate_within_tolerance_passes(dtype):
    def accumulates_in_float32(a, b):
        return (a.float() + b.float()).to(dtype)

    assert _check(accumulates_in_float32, dtypes=(dtype,), sizes=(1023, 2**16)).ok
    assert _check(within_tolerance, dtypes=(dtype,), sizes=(1023,)).ok
    assert _check(beyond_tolerance, dtypes=(dtype,), sizes=(1023,)).reasons == {"wrong_values"}


class _DoubleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad, grad


def test_grad_checks_pass_a_correct_backward_and_catch_a_wrong_one():
    assert _check(torch.add, sizes=(7,), grad=True).ok
    report = _check(_DoubleGrad.apply, sizes=(7,), grad=True)
    assert report.reasons == {"gradcheck_failed", "wrong_grad"}


@torch.library.custom_op("jitload_test::add_with_fake", mutates_args=())
def add_with_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


@add_with_fake.register_fake
def _(a, b):
    return torch.empty_like(a)


@torch.library.custom_op("jitload_test::add_no_fake", mutates_args=())
def add_no_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def test_registered_ops_get_opcheck():
    assert _check(torch.ops.jitload_test.add_with_fake.default, sizes=(7,)).ok
    report = _check(torch.ops.jitload_test.add_no_fake.default, sizes=(7,))
    assert report.reasons == {"opcheck_failed"}


PLANTED_CPP = r"""
#include <torch/extension.h>
#include <csignal>
torch::Tensor good_add(const torch::Tensor& a, const torch::Tensor& b) { return a + b; }
torch::Tensor uninit_add(const torch::Tensor& a, const torch::Tensor& b) {
    auto out = torch::empty_like(a);  // the classic bug: half the output is never written
    auto ac = a.contiguous(), bc = b.contiguous();
    for (int64_t i = 0; i < out.numel() / 2; ++i)
        out.data_ptr<float>()[i] = ac.data_ptr<float>()[i] + bc.data_ptr<float>()[i];
    return out;
}
torch::Tensor odd_add(const torch::Tensor& a, const torch::Tensor& b) { return a + b + (a.numel() % 2); }
torch::Tensor inplace_add(torch::Tensor a, const torch::Tensor& b) { return a.add_(b).clone(); }
// Writes `extra` elements past the end of its output: the slack of the allocator's block hides a few.
torch::Tensor past_end_add(const torch::Tensor& a, const torch::Tensor& b, int64_t extra) {
    auto out = torch::empty_like(a);
    auto ac = a.contiguous(), bc = b.contiguous();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < out.numel() + extra; ++i)
        o[i] = i < out.numel() ? ac.data_ptr<float>()[i] + bc.data_ptr<float>()[i] : 0.0f;
    return out;
}
torch::Tensor crash_on_odd(const torch::Tensor& a, const torch::Tensor& b) {
    if (a.numel() % 2) std::raise(SIGSEGV);
    return a + b;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("good_add", &good_add); m.def("uninit_add", &uninit_add);
    m.def("odd_add", &odd_add); m.def("inplace_add", &inplace_add);
    m.def("past_end_add", &past_end_add); m.def("crash_on_odd", &crash_on_odd);
}
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    return jitload.load("planted", [write(folder / "planted.cpp", PLANTED_CPP)], build_directory=str(folder / "b"))


@pytest.mark.parametrize("name, reasons", [
    ("good_add", set()),
    ("uninit_add", {"unwritten_output"}),
    ("odd_add", {"wrong_values"}),
    ("inplace_add", {"modified_input"}),
])
def test_planted_cpp_candidates(planted, name, reasons):
    assert _check(getattr(planted, name)).reasons == reasons


@pytest.mark.cuda
@pytest.mark.parametrize("candidate, reason", [
    (uninitialised, "unwritten_output"),
    (wrong_on_odd_sizes, "wrong_values"),
    (modifies_input, "modified_input"),
    (returns_nan, "nan_or_inf"),
])
def test_bad_candidates_on_cuda(candidate, reason):
    assert _check(candidate, device="cuda").reasons == {reason}


@pytest.mark.cuda
def test_good_candidate_on_cuda_default_sizes():
    report = check(torch.add, reference_add, make_inputs, device="cuda")
    assert report.ok, report
    assert 2**24 + 1 in set(report.table["size"])


@pytest.mark.cuda
def test_side_stream_work_left_unsynchronised_is_caught():
    side = torch.cuda.Stream()

    def on_side_stream(a, b):
        out = torch.empty_like(a)
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)  # tens of ms of GPU time before the add runs
            torch.add(a, b, out=out)
        return out

    report = _check(on_side_stream, device="cuda", sizes=(2**20 + 3,), layouts=("contiguous",))
    assert report.reasons == {"unsynchronized"}, report


@pytest.mark.parametrize("extra", [1, 16])
def test_writes_past_an_output_are_caught_by_guard_bytes(planted, extra):
    report = _check(lambda a, b: planted.past_end_add(a, b, extra), layouts=("contiguous",))
    assert report.reasons == {"out_of_bounds_write"}
    assert len(report.failures) == len(SIZES)  # size 0 too: its write lands in a guard, not at a null pointer
    assert f"elements +1..+{extra}" in str(report.failures[0])


def test_a_crashing_candidate_is_a_failure_when_isolated(planted):
    # size 7 is the first odd size: the child dies there, the parent reports it and lives on
    report = _check(planted.crash_on_odd, layouts=("contiguous",), isolate=True)
    assert report.reasons == {"crashed"}
    (failure,) = report.failures
    assert (failure.size, failure.layout) == (1, "contiguous") and "SIGSEGV" in failure.detail
    assert list(report.table["ok"]) == [True, False]


def test_isolated_check_matches_the_in_process_one():
    seen = []
    isolated = _check(wrong_on_odd_sizes, isolate=True, on_case=seen.append)
    direct = _check(wrong_on_odd_sizes)
    assert [str(f) for f in isolated.failures] == [str(f) for f in direct.failures]
    assert len(seen) == len(isolated.table) == len(direct.table)


def softmax_reference(x):
    return torch.softmax(x, -1)


def rows_inputs(size, dtype, device):
    return (torch.randn(max(size // 64, 1), 64, dtype=dtype, device=device),)


def softmax_inner_stride_only(x):
    # The classic row-kernel bug: it copies x only when the inner stride is not 1, then walks rows `width` apart.
    xc = x if x.stride(-1) == 1 else x.contiguous()
    return torch.softmax(torch.as_strided(xc, xc.shape, (xc.shape[-1], 1)), -1)


def test_padded_rows_catch_a_kernel_that_assumes_row_stride_equals_width():
    assert check(softmax_inner_stride_only, softmax_reference, rows_inputs, sizes=(64 * 33,), device="cpu",
                 trials=1, layouts=("contiguous", "strided")).ok
    report = check(softmax_inner_stride_only, softmax_reference, rows_inputs, sizes=(64 * 33,), device="cpu",
                   trials=1)
    # The padded rows' gaps hold NaN (as fresh allocations do): walking into them shows as NaN out. Expanded
    # rows have stride 0: the kernel reads past the one real row, into other values.
    assert {(f.layout, f.reason) for f in report.failures} == {("padded", "nan_or_inf"), ("expanded", "wrong_values")}


def test_transposed_and_expanded_inputs_run_through_a_correct_kernel():
    report = check(softmax_reference, softmax_reference, rows_inputs, sizes=(64 * 33,), device="cpu", trials=1,
                   layouts=("transposed", "expanded"))
    assert report.ok, report
    # a kernel that trusts the row stride but assumes elements within a row are adjacent
    assert not check(lambda x: torch.softmax(torch.as_strided(x, x.shape, (x.stride(0), 1)), -1), softmax_reference,
                     rows_inputs,
                     sizes=(64 * 33,), device="cpu", trials=1, layouts=("transposed",)).ok


def relu_of_sum(a, b):
    return torch.relu(a + b)


def nan_to_zero_relu(a, b):
    s = a + b
    return torch.where(s > 0, s, 0)


def test_planted_nan_and_inf_must_match_the_reference():
    assert check(nan_to_zero_relu, relu_of_sum, make_inputs, sizes=SIZES, device="cpu", trials=1,
                 layouts=("contiguous", "strided")).ok
    report = check(nan_to_zero_relu, relu_of_sum, make_inputs, sizes=SIZES, device="cpu", trials=1)
    assert {f.layout for f in report.failures} == {"nonfinite"}
    assert report.reasons == {"wrong_values"}
    assert check(relu_of_sum, relu_of_sum, make_inputs, sizes=SIZES, device="cpu", trials=1).ok


def test_unknown_layout_is_refused():
    with pytest.raises(ValueError, match="unknown layout"):
        _check(torch.add, layouts=("diagonal",))


def add_into_a_resized_output(a, b):
    out = torch.empty(0, dtype=a.dtype)  # the at::empty({0}) + out= pattern: torch resizes it, correctly
    return torch.add(a, b, out=out)


def zeros_then_one_past_the_end(a, b):
    out = torch.zeros_like(a)  # a factory that fills is guarded too
    torch.as_strided(out, (out.numel() + 1,), (1,), out.storage_offset())[:-1] = a.reshape(-1) + b.reshape(-1)
    torch.as_strided(out, (out.numel() + 1,), (1,), out.storage_offset())[-1] = 0
    return out


def test_guards_tell_a_resized_output_from_a_write_past_the_end():
    assert _check(add_into_a_resized_output, layouts=("contiguous",)).ok
    report = _check(zeros_then_one_past_the_end, layouts=("contiguous",))
    assert report.reasons == {"out_of_bounds_write"} and len(report.failures) == len(SIZES)


def sum_with_neginf_as_zero(a, b):
    s = a + b
    return torch.where(torch.isneginf(s), torch.zeros_like(s), s)


def test_a_nonfinite_mismatch_names_the_element_that_differs():
    # The planted NaNs match (NaN = NaN); the -infs planted in a (last) and in b (one before) do not, and the
    # report names the first.
    report = check(sum_with_neginf_as_zero, reference_add, make_inputs, sizes=(7,), dtypes=[torch.float32],
                   device="cpu", trials=1, layouts=("nonfinite",))
    assert report.reasons == {"wrong_values"}
    assert "2 of 7 elements" in report.failures[0].detail
    assert "worst at (5,): got 0.0, expected -inf" in report.failures[0].detail


def test_a_check_leaves_the_deterministic_mode_as_it_found_it_and_still_poisons_new_memory():
    # The poisoning switches deterministic algorithms on around each call; the user's setting comes back after.
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    report = jitload.check(lambda a: torch.empty_like(a), lambda a: a * 2, lambda n, dt, dev: (torch.randn(n, dtype=dt,
                           device=dev),), sizes=[16], device="cpu", layouts=["contiguous"], trials=1)
    assert not report.ok
    after = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    assert after == before
