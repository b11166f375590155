"""What jitload.check runs a candidate on, and how it ends: each test plants a candidate that is wrong only
where a kernel plausibly is (a vector path, a width, a layout, a grad_output, a magnitude), hangs, exits, or
hands back memory it should not, and asserts the check names it. CPU candidates; the same code checks CUDA
ones (tests/test_checker.py has the CUDA twins)."""

import math
import os
import threading
import time

import pytest
import torch

from jitload import kernels
from jitload.harness.checker import DEFAULT_SIZES, GRAD_OUTPUTS, check
from jitload.harness.layouts import MIXED


def reference_add(a, b):
    return a + b


def make_inputs(size, dtype, device):
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def _fast(**kwargs):
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("trials", 1)
    return kwargs


# --- the sizes and shapes it runs ------------------------------------------------------------------------------

def wrong_on_the_vector_path(a, b):
    # A kernel that takes 4-wide loads when numel % 4 == 0 and gets their tail wrong.
    out = a + b
    if out.numel() % 4 == 0 and out.numel():
        out.view(-1)[-1] += 1
    return out


def test_default_sizes_take_every_vector_path():
    assert all(n % 2 for n in (1, 7, 1023, 2**20 + 3))  # the sizes before: none would take it
    report = check(wrong_on_the_vector_path, reference_add, make_inputs, sizes=DEFAULT_SIZES,
                   **_fast(layouts=("contiguous",)))
    failed = {f.size for f in report.failures}
    assert failed == {n for n in DEFAULT_SIZES if n and n % 4 == 0}, report
    assert {4, 8, 16, 1024, 2**20} <= failed


def test_timed_sizes_are_checked_in_the_timed_layout():
    report = check(wrong_on_the_vector_path, reference_add, make_inputs, sizes=(7,), timed_sizes=(2**16,),
                   **_fast(layouts=("contiguous",)))
    (failure,) = report.failures
    assert failure.size == 2**16 and failure.layout == "contiguous"
    timed = report.table[report.table["timed"]]
    assert list(timed["size"]) == [2**16] and not timed["ok"].any()


def softmax_wrong_on_vector_widths(x):
    out = torch.softmax(x, -1)
    return out * 1.01 if x.shape[-1] % 4 == 0 and x.numel() else out


def test_softmax_spec_checks_the_widths_its_kernel_changes_path_at():
    softmax = kernels.get("softmax")
    report = softmax.check(softmax_wrong_on_vector_widths, dtypes=[torch.float32], device="cpu", trials=1,
                           layouts=("contiguous",))
    widths = {f.size[-1] for f in report.failures if isinstance(f.size, tuple)}
    assert {32, 1024, 4096, 32768, 32776} <= widths, report
    assert 2**20 in {f.size for f in report.failures}  # 256 rows of 4096, as bench makes them
    assert not any(f.size == (16, 129) for f in report.failures)


# --- layouts -----------------------------------------------------------------------------------------------------

def reads_b_as_dense_when_a_is(a, b):
    if a.is_contiguous():  # the path a kernel picks from its first input alone
        b_dense = torch.as_strided(b, b.shape, a.stride(), b.storage_offset())
        return a + b_dense
    return a + b


def test_mixed_layouts_catch_a_kernel_that_trusts_its_first_input():
    rows = lambda size, dtype, device: tuple(torch.randn(8, 64, dtype=dtype, device=device) for _ in range(2))  # noqa: E731
    plain = check(reads_b_as_dense_when_a_is, reference_add, rows, sizes=(512,),
                  **_fast(layouts=("contiguous", "strided", "padded", "transposed")))
    assert plain.ok, plain  # every input in one layout: it works
    mixed = check(reads_b_as_dense_when_a_is, reference_add, rows, sizes=(512,), **_fast(layouts=MIXED))
    assert {f.layout for f in mixed.failures} == set(MIXED)


def reads_b_through_a_dense_pointer_when_a_is_contiguous(a, b):
    if a.is_contiguous():  # b's elements taken as the len(b) after its data pointer
        return a + torch.as_strided(b, b.shape, torch.empty(b.shape).stride(), b.storage_offset())
    return a + b


def test_every_other_input_is_mixed_in_each_layout_that_leaves_it_non_contiguous():
    report = check(reads_b_through_a_dense_pointer_when_a_is_contiguous, reference_add, make_inputs,
                   **_fast(sizes=DEFAULT_SIZES))
    # A 1-D b padded is only offset, transposed unchanged, and of 0 or 1 elements contiguous under any layout:
    # read as dense it reads right, so those cases are not run; strided and expanded (stride 0) b read wrong.
    assert {f.layout for f in report.failures} == {"mixed_expanded", "mixed_strided"}, report
    mixed = report.table[report.table["layout"].isin(MIXED)]
    assert set(mixed["layout"]) == {"mixed_expanded", "mixed_strided"}
    assert set(mixed["size"]) == {n for n in DEFAULT_SIZES if n > 1} - {max(DEFAULT_SIZES)}
    assert not mixed["ok"].any()
    assert check(reference_add, reference_add, make_inputs, **_fast(sizes=DEFAULT_SIZES)).ok


def wrong_when_misaligned(a, b):
    out = a + b
    if a.storage_offset() % 4:  # a vector load of a start that is not 16-byte aligned
        out = out + 1
    return out


def test_a_misaligned_start_is_checked_for_every_rank():
    rows = lambda size, dtype, device: (torch.randn(8, 64, dtype=dtype, device=device),) * 2  # noqa: E731
    report = check(wrong_when_misaligned, reference_add, rows, sizes=(512,), **_fast(layouts=("contiguous", "offset")))
    assert {f.layout for f in report.failures} == {"offset"}


def ignores_nan_in_b(a, b):
    return a + torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)


def test_nonfinite_values_are_planted_in_every_floating_input():
    report = check(ignores_nan_in_b, reference_add, make_inputs, sizes=(7, 1023), **_fast(layouts=("nonfinite",)))
    assert report.reasons == {"wrong_values"} and {f.layout for f in report.failures} == {"nonfinite"}


def naive_softmax(x):
    e = torch.exp(x.float())  # no max subtraction: exp overflows past 88
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def test_a_large_magnitude_trial_catches_an_overflowing_softmax():
    rows = lambda size, dtype, device: (3 * torch.randn(4, 256, dtype=dtype, device=device),)  # noqa: E731
    ref = lambda x: torch.softmax(x, -1)  # noqa: E731
    layouts = ("contiguous", "strided", "padded", "offset", "transposed", "expanded")
    assert check(naive_softmax, ref, rows, sizes=(1024,), **_fast(layouts=layouts)).ok
    report = check(naive_softmax, ref, rows, sizes=(1024,), **_fast(layouts=("large",)))
    assert report.reasons == {"nan_or_inf"} and "inputs x100" in report.failures[0].detail


def test_a_large_trial_is_skipped_where_the_reference_overflows_too():
    rows = lambda size, dtype, device: (5 * torch.randn(4, 256, dtype=dtype, device=device),)  # noqa: E731
    report = check(torch.exp, torch.exp, rows, sizes=(1024,), **_fast(layouts=("contiguous", "large")))
    assert report.ok and list(report.table["layout"]) == ["contiguous"]


# --- backward as training runs it ---------------------------------------------------------------------------------

class _AddFunction(torch.autograd.Function):
    """a + b with a backward of its own: the subclasses plant a backward bug each."""

    @staticmethod
    def forward(ctx, a, b):
        return a + b


class _Add(_AddFunction):
    @staticmethod
    def backward(ctx, grad):
        if 0 in grad.stride() and grad.numel() > 1:
            # A backward that reads grad_output as dense: the stride-0 grad of loss.sum() it reads as if each
            # element had its own value, here the first element's only (what a raw pointer walk sees).
            grad = torch.as_strided(grad, grad.shape, [0] * grad.dim()) * 0.5
        return grad, grad


def test_backward_gets_the_stride_zero_grad_output_of_sum():
    report = check(_Add.apply, reference_add, make_inputs, sizes=(7,), grad=True,
                   **_fast(layouts=("contiguous",), dtypes=[torch.float32]))
    kinds = {f.layout for f in report.failures}
    assert kinds == {GRAD_OUTPUTS[1]}, report
    assert report.reasons == {"wrong_grad"}
    backward = report.table[report.table["test"] == "backward"]
    assert set(backward["layout"]) == set(GRAD_OUTPUTS) and 1024 in set(backward["size"])


# --- time limits and exits ----------------------------------------------------------------------------------------

def loops_in_python(a, b):
    while True:
        pass


def test_a_python_loop_times_out_and_is_named():
    report = check(loops_in_python, reference_add, make_inputs, sizes=(7,),
                   **_fast(layouts=("contiguous",), timeout=0.5))
    (failure,) = report.failures
    assert failure.reason == "timed_out" and failure.size == 7 and "0.5 s" in failure.detail


def sleeps_in_c(a, b):
    time.sleep(3600)  # stuck outside the interpreter: nothing in its process can interrupt it


def test_an_isolated_candidate_stuck_outside_python_is_killed():
    started = time.monotonic()
    report = check(sleeps_in_c, reference_add, make_inputs, sizes=(7, 1023), isolate=True,
                   **_fast(layouts=("contiguous",), timeout=0.5))
    assert time.monotonic() - started < 60
    (failure,) = report.failures
    assert failure.reason == "timed_out" and failure.size == 7
    assert "ran past the case's limit" in failure.detail


def calls_sys_exit(a, b):
    raise SystemExit(0)


def test_sys_exit_in_a_candidate_is_a_failure():
    report = check(calls_sys_exit, reference_add, make_inputs, sizes=(7,), **_fast(layouts=("contiguous",)))
    assert report.reasons == {"exited"} and "sys.exit(0)" in report.failures[0].detail


def calls_os_exit(a, b):
    os._exit(0)


def test_os_exit_in_an_isolated_candidate_is_a_failure_naming_its_case():
    report = check(calls_os_exit, reference_add, make_inputs, sizes=(7,), isolate=True,
                   **_fast(layouts=("contiguous",)))
    (failure,) = report.failures
    assert failure.reason == "exited" and failure.size == 7 and "exit code 0" in failure.detail


def _leaves_a_thread(a, b):
    threading.Thread(target=time.sleep, args=(3600,)).start()  # not a daemon: a normal exit would wait on it
    return a + b


def _forks_a_grandchild(pid_file):
    def candidate(a, b):
        pid = os.fork()
        if pid == 0:  # holds the pipe to the parent open, and sleeps
            time.sleep(3600)
            os._exit(0)
        with open(pid_file, "a") as f:
            f.write(f"{pid}\n")
        return a + b
    return candidate


def test_an_isolated_check_returns_past_threads_and_grandchildren(tmp_path):
    started = time.monotonic()
    assert check(_leaves_a_thread, reference_add, make_inputs, sizes=(7,), isolate=True,
                 **_fast(layouts=("contiguous",))).ok
    pids = tmp_path / "pids"
    assert check(_forks_a_grandchild(str(pids)), reference_add, make_inputs, sizes=(7,), isolate=True,
                 **_fast(layouts=("contiguous",))).ok
    assert time.monotonic() - started < 60
    for pid in map(int, pids.read_text().split()):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the candidate's child {pid} outlived the check")


# --- outputs and inputs ------------------------------------------------------------------------------------------

def resized_then_one_past_the_end(a, b):
    out = torch.empty(0, dtype=a.dtype)
    out.resize_(a.shape)  # the at::empty({0}) + resize_ pattern
    flat = torch.as_strided(out, (out.numel() + 1,), (1,), out.storage_offset())
    flat[:-1] = (a + b).reshape(-1)
    flat[-1] = 0
    return out


def test_a_resized_output_keeps_its_guards():
    report = check(resized_then_one_past_the_end, reference_add, make_inputs, sizes=(7, 1023),
                   **_fast(layouts=("contiguous",)))
    assert report.reasons == {"out_of_bounds_write"} and len(report.failures) == 2


def adds_in_place(a, b):
    return a.add_(b)  # right values, in the caller's tensor


def test_an_output_in_an_input_buffer_is_a_failure():
    report = check(adds_in_place, reference_add, make_inputs, sizes=(7,), **_fast(layouts=("contiguous",)))
    # it also changed the input; the shared memory is the reason given first
    assert report.reasons == {"aliased_output"}, report


_STATIC: dict = {}


def one_buffer_for_every_call(a, b):
    key = (a.shape, a.dtype)
    if key not in _STATIC:
        _STATIC[key] = torch.empty_like(a)
    return torch.add(a, b, out=_STATIC[key])


def test_the_same_output_buffer_on_two_calls_is_a_failure():
    report = check(one_buffer_for_every_call, reference_add, make_inputs, sizes=(7, 1023),
                   **_fast(layouts=("contiguous", "strided")))
    assert report.reasons == {"reused_output"}
    assert {f.layout for f in report.failures} == {"strided"}  # the second call of each size


def test_complex_outputs_are_compared_whole():
    cplx = lambda size, dtype, device: (torch.randn(size, dtype=torch.complex64, device=device),)  # noqa: E731
    report = check(torch.conj_physical, lambda x: x.clone(), cplx, sizes=(7,), **_fast(layouts=("contiguous",)))
    assert report.reasons == {"wrong_values"}, report
    assert check(lambda x: x * 1, lambda x: x.clone(), cplx, sizes=(7,), **_fast(layouts=("contiguous",))).ok


def neginf_to_min(a, b):
    out = a + b
    a.nan_to_num_(nan=float("nan"), posinf=float("inf"), neginf=torch.finfo(a.dtype).min)
    return out


def writes_into_padding(a, b):
    out = a + b
    if a.dim() == 2 and a.stride(0) > a.shape[1]:  # a padded row: the gap after it
        torch.as_strided(a, (1,), (1,), a.storage_offset() + a.shape[1]).fill_(0)
    return out


def test_changes_to_an_inputs_infinities_or_padding_are_seen():
    report = check(neginf_to_min, reference_add, make_inputs, sizes=(7,), **_fast(layouts=("nonfinite",)))
    assert report.reasons == {"modified_input"}
    rows = lambda size, dtype, device: (torch.randn(8, 64, dtype=dtype, device=device),) * 2  # noqa: E731
    report = check(writes_into_padding, reference_add, rows, sizes=(512,), **_fast(layouts=("contiguous", "padded")))
    assert report.reasons == {"modified_input"} and {f.layout for f in report.failures} == {"padded"}


@pytest.mark.parametrize("kwargs, says", [
    ({"dtypes": []}, "dtypes is empty"),
    ({"trials": 0}, "at least one trial"),
    ({"sizes": []}, "sizes is empty"),
    ({"layouts": ()}, "layouts is empty"),
    ({"timeout": 0}, "positive number of seconds"),
])
def test_a_check_of_nothing_is_an_error(kwargs, says):
    with pytest.raises(ValueError, match=says):
        check(torch.add, reference_add, make_inputs, **{"device": "cpu", **kwargs})


def test_a_report_with_no_case_is_not_a_pass():
    one = lambda size, dtype, device: (torch.randn(size, dtype=dtype, device=device),)  # noqa: E731
    report = check(torch.neg, torch.neg, one, sizes=(7,), **_fast(layouts=MIXED))  # one input: nothing mixed
    assert not report.ok and report.summary() == "FAIL: no case ran"
    assert math.isfinite(len(report.table))


# --- the CUDA twins: a real vectorised kernel, wrong only on its vector path ----------------------------------------

VECTOR_BUG_CU = r"""
#include <torch/extension.h>
// float4 loads when the size is a multiple of 4 and every pointer is 16-byte aligned; the vector path's grid
// forgets its last vector, so the last 4 elements are never written. The scalar path is right.
__global__ void add_vec(const float4* a, const float4* b, float4* out, int64_t vectors) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < vectors - 1) {
        const float4 x = a[i], y = b[i];
        out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}
__global__ void add_scalar(const float* a, const float* b, float* out, int64_t n) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add(const torch::Tensor& a_, const torch::Tensor& b_) {
    auto a = a_.contiguous(), b = b_.contiguous();
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    if (n == 0) return out;
    const bool aligned = (reinterpret_cast<uintptr_t>(a.data_ptr()) | reinterpret_cast<uintptr_t>(b.data_ptr()) |
                          reinterpret_cast<uintptr_t>(out.data_ptr())) % 16 == 0;
    if (n % 4 == 0 && aligned) {
        const int64_t v = n / 4;
        add_vec<<<(v + 255) / 256, 256>>>((const float4*)a.data_ptr<float>(), (const float4*)b.data_ptr<float>(),
                                          (float4*)out.data_ptr<float>(), v);
    } else {
        add_scalar<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    }
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
"""


@pytest.fixture(scope="module")
def vector_bug(tmp_path_factory):
    from extensions import write

    import jitload

    folder = tmp_path_factory.mktemp("vector_bug")
    return jitload.load("vector_bug", [write(folder / "vector_bug.cu", VECTOR_BUG_CU)],
                        build_directory=str(folder / "b"))


@pytest.mark.cuda
def test_a_cuda_kernel_wrong_on_its_vector_path_fails_at_the_vector_sizes(vector_bug):
    report = check(vector_bug.add, reference_add, make_inputs, device="cuda", trials=1,
                   layouts=("contiguous", "strided", "offset"))
    failed = {(f.size, f.layout) for f in report.failures}
    # contiguous inputs at every multiple of 4 take the vector path; strided ones are copied, so they do too;
    # a start one element into its buffer is misaligned and takes the scalar path, which is right
    vector_sizes = {n for n in DEFAULT_SIZES if n and n % 4 == 0}
    assert {size for size, _ in failed} == vector_sizes, report
    assert {layout for _, layout in failed} == {"contiguous", "strided"}
    assert report.reasons == {"unwritten_output"}


@pytest.mark.cuda
def test_a_cuda_kernel_wrong_only_at_a_timed_size_is_caught_before_timing(vector_bug):
    report = check(vector_bug.add, reference_add, make_inputs, device="cuda", trials=1, sizes=(7, 1023),
                   timed_sizes=(2**24,), layouts=("contiguous",))
    (failure,) = report.failures
    assert failure.size == 2**24 and bool(report.table.loc[report.table["size"] == 2**24, "timed"].all())


# --- candidates wrong where a first version of these cases looked away ----------------------------------------------

def softmax_dropping_small_values(x):
    out = torch.softmax(x, -1)
    return torch.where(out < 5e-6, torch.zeros_like(out), out)  # below float32's atol: most of a wide row


def test_small_outputs_get_an_atol_of_their_own_scale():
    rows = lambda size, dtype, device: (3 * torch.randn(4, 4096, dtype=dtype, device=device),)  # noqa: E731
    ref = lambda x: torch.softmax(x, -1)  # noqa: E731
    assert check(ref, ref, rows, sizes=(4 * 4096,), **_fast(layouts=("contiguous",))).ok
    report = check(softmax_dropping_small_values, ref, rows, sizes=(4 * 4096,), **_fast(layouts=("contiguous",)))
    assert report.reasons == {"wrong_values"}, report


def test_generators_are_read_once():
    wrong = lambda a, b: a + b + 1  # noqa: E731
    report = check(wrong, reference_add, make_inputs, sizes=(n for n in (1, 7)), dtypes=(d for d in [torch.float32]),
                   layouts=(la for la in ("contiguous",)), **_fast())
    assert len(report.failures) == 2 and set(report.table["test"]) == {"forward"}


_BUFFERS: dict = {}


def two_buffers_in_turn(a, b):
    key = (a.shape, a.dtype)
    pair = _BUFFERS.setdefault(key, [torch.empty_like(a), torch.empty_like(a), 0])
    out = pair[pair[2] % 2]
    pair[2] += 1
    return torch.add(a, b, out=out)


def test_buffers_handed_out_in_turn_are_seen():
    report = check(two_buffers_in_turn, reference_add, make_inputs, sizes=(7,), trials=3,
                   **{"device": "cpu", "layouts": ("contiguous", "strided")})
    assert report.reasons == {"reused_output"}


class _AddReluReadsSavedAsDense(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.relu(a + b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        dense = lambda t: torch.as_strided(t, t.shape, torch.empty(t.shape).stride(), t.storage_offset())  # noqa: E731
        mask = (dense(a) + dense(b)) > 0  # reads the saved inputs as if contiguous
        return grad * mask, grad * mask


def test_backward_runs_on_strided_inputs_too():
    report = check(_AddReluReadsSavedAsDense.apply, lambda a, b: torch.relu(a + b), make_inputs, sizes=(7,),
                   grad=True, **_fast(layouts=("contiguous",)))
    assert {f.layout for f in report.failures} == {"inputs strided"}, report


def clone_then_one_past_the_end(a, b):
    out = a.clone()  # an in-place kernel run on a copy of its input
    out.add_(b)
    torch.as_strided(out, (out.numel() + 1,), (1,), out.storage_offset())[-1] = 0
    return out


def test_a_cloned_output_is_guarded():
    report = check(clone_then_one_past_the_end, reference_add, make_inputs, sizes=(7, 1023),
                   **_fast(layouts=("contiguous",)))
    assert report.reasons == {"out_of_bounds_write"}


def _aligned16(t):
    return (t.data_ptr() % 16) == 0


def checks_8_byte_alignment_only(a, b):
    # takes its 16-byte path whenever the start is 8-byte aligned: wrong when it is not 16-byte aligned
    if a.data_ptr() % 8 == 0 and not _aligned16(a):
        raise RuntimeError("misaligned address")
    return a + b


def test_a_start_8_bytes_in_is_checked():
    report = check(checks_8_byte_alignment_only, reference_add, make_inputs, sizes=(1024,),
                   **_fast(layouts=("contiguous", "offset", "offset8")))
    assert {f.layout for f in report.failures} == {"offset8"}


class _AddWithAlignedGrad(_AddFunction):
    @staticmethod
    def backward(ctx, grad):
        if grad.is_contiguous() and grad.data_ptr() % 8 == 0 and not _aligned16(grad):
            raise RuntimeError("misaligned address")
        return grad, grad


def test_a_grad_output_8_bytes_into_its_buffer_is_checked():
    report = check(_AddWithAlignedGrad.apply, reference_add, make_inputs, sizes=(1024,), grad=True,
                   **_fast(layouts=("contiguous",)))
    assert {f.layout for f in report.failures} == {"grad_output offset"}, report


def saturates_bfloat16(a, b):
    out = a + b
    return out.clamp(-256, 256) if out.dtype == torch.bfloat16 else out


def test_the_large_trial_keeps_a_relative_tolerance_that_catches_saturation():
    report = check(saturates_bfloat16, reference_add, make_inputs, sizes=(1023,),
                   **_fast(layouts=("large",), dtypes=[torch.bfloat16]))
    assert report.reasons == {"wrong_values"}


def retries_forever(a, b):
    while True:
        try:
            time.sleep(0.01)
            raise RuntimeError("launch failed")
        except Exception:
            continue  # a retry loop: it must not swallow the time limit


def test_a_candidate_that_catches_exceptions_still_times_out():
    report = check(retries_forever, reference_add, make_inputs, sizes=(7,), **_fast(layouts=("contiguous",),
                                                                                     timeout=0.5))
    assert report.reasons == {"timed_out"}


@pytest.mark.parametrize("kwargs, says", [
    ({"tolerances": {torch.float32: (-1e-5, 1e-5)}}, "finite number >= 0"),
    ({"tolerances": {torch.float32: (float("nan"), 1e-5)}}, "finite number >= 0"),
    ({"sizes": [0, (3, 0)]}, "every size is empty"),
])
def test_arguments_that_would_check_nothing_or_blame_the_candidate_are_refused(kwargs, says):
    with pytest.raises(ValueError, match=says):
        check(torch.add, reference_add, make_inputs, **{"device": "cpu", **kwargs})


def test_a_limit_too_large_for_a_timer_is_no_limit():
    assert check(torch.add, reference_add, make_inputs, sizes=(7,), **_fast(layouts=("contiguous",),
                                                                             timeout=1e300)).ok


def test_a_notebook_shows_the_cases_grouped_not_all_of_them():
    report = check(torch.add, reference_add, make_inputs, sizes=(7, 1024), grad=True, **_fast())
    grouped = report.by_layout()
    assert grouped["cases"].sum() == len(report.table) and not grouped["failed"].any()
    assert ("backward", "grad_output stride 0 (sum)") in set(zip(grouped["test"], grouped["layout"], strict=True))
    shown = report._repr_html_()
    assert "cases by test and layout" in shown and shown.count("<tr") == len(grouped) + 1
