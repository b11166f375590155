"""jitload.check against planted bad candidates, in Python and as a small C++ extension: each is flagged
with its own reason, and the good ones pass."""

import time

import pytest
import torch
from extensions import write

import jitload
from jitload.checker import TOLERANCES, check

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
    kwargs.setdefault("sizes", SIZES)
    kwargs.setdefault("trials", 1)
    kwargs.setdefault("device", "cpu")
    return check(fn, reference_add, make_inputs, **kwargs)


def test_good_candidate_passes_with_a_row_per_case():
    report = _check(torch.add, trials=2)
    assert report.ok, report
    assert len(report.table) == len(SIZES) * 2 * 2  # sizes x trials x (contiguous, strided)
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
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("good_add", &good_add); m.def("uninit_add", &uninit_add);
    m.def("odd_add", &odd_add); m.def("inplace_add", &inplace_add);
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
