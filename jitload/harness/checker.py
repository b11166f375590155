"""``jitload.check``: compare a candidate kernel with its reference in ways a wrong kernel cannot slip through.

Each case (size x dtype x trial x layout) gets fresh seeded random inputs and runs the candidate with torch's
uninitialised-memory fill on (``torch.use_deterministic_algorithms`` + ``fill_uninitialized_memory``: every
``empty``/``empty_like``, also inside C++ extensions, comes back full of NaN), so output a kernel never
wrote shows up. The inputs are compared with copies taken before the call; the output is compared on the
current stream *before* any synchronisation, so work left running on a side stream reads as wrong. Every
failure names its reason and its seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ..builder import torch_compat
from ..builder.toolchain import default_device
from .deadline import CaseTimedOut, time_limit
from .guards import GuardedAllocations
from .isolate import ChildDied, ChildOverdue, run_forked
from .layouts import EVERY_TRIAL, LARGE_SCALES, LAYOUTS, offset8, scaled, strided

__all__ = ["EVERY_TRIAL", "LAYOUTS", "TOLERANCES", "CheckReport", "Failure", "check", "default_sizes"]

# rtol = about one rounding of the output in the dtype (eps: float32 1.2e-7, float16 9.8e-4, bfloat16 7.8e-3)
# times the few roundings a fused kernel may do in a different order than its reference; float32 gets 1e-5
# (~80 ulps) because a reference and a kernel may accumulate in different orders. atol = rtol, since inputs
# are O(1) (randn) and cancellation near zero leaves an absolute error of about one ulp of the operands.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
}
Size = int | tuple[int, ...]  # an element count, or a shape make_inputs reads as one
LARGE_SIZE = {"cuda": 2**24 + 1, "cpu": 2**22 + 1}
# Empty, one element, multiples of every vector width a kernel may use (2, 4, 8, 16 elements: 16 bytes of
# float32 to bfloat16) with the sizes one below and above, the same around 1024 (a block of threads) and a
# multi-block multiple and an odd size past a million.
DEFAULT_SIZES = (0, 1, 2, 4, 7, 8, 15, 16, 17, 1023, 1024, 1025, 2**20, 2**20 + 3)  # plus LARGE_SIZE
GRADCHECK_SIZES = (1, 7, 33)  # float64 gradcheck costs a forward per input element
GRAD_SIZES = (1, 2, 4, 7, 8, 15, 16, 17, 33, 1024, 1025)
# How a backward case calls it: grad_output random and contiguous, expanded (stride 0: loss.sum()), strided, or
# starting 8 bytes into its buffer (the second operand of a torch.cat); or the inputs strided.
GRAD_OUTPUTS = ("grad_output contiguous", "grad_output stride 0 (sum)", "grad_output strided", "grad_output offset",
                "inputs strided")
# A case's time limit unless timeout= is given: this many times the reference's time on the case, at least
# the floor (a first call may compile: Triton's JIT, a CUDA module's lazy load).
TIMEOUT_FACTOR = 100
TIMEOUT_FLOOR_S = 30.0
ISOLATED_GRACE_S = 5.0  # an isolated child stops a Python loop itself; the parent kills it this much later
MAX_SHOWN = 5
UNWRITTEN_SENTINEL = 1234.5
MAX_TIMEOUT_S = 1e7  # threading.Timer overflows on larger limits; this many seconds is no limit
# The large-magnitude trial scales atol with its inputs (absolute rounding errors grow with them) and rtol by at
# most this much (a softmax's exp(x - max) is off by a few more ulps of x); overflow fails at any tolerance.
LARGE_RTOL_GROWTH = 10.0
# The outputs of this many previous calls are held, so a candidate that hands out a few buffers in turn is seen;
# outputs larger than HELD_BYTES only the last call's.
HELD_CALLS = 3
HELD_BYTES = 64 * 2**20

REASONS = {
    "wrong_values": "values differ from the reference beyond the dtype's tolerance",
    "nan_or_inf": "NaN or Inf where the reference has none",
    "unwritten_output": "output elements the candidate never wrote (they hold whatever memory held)",
    "wrong_shape": "output shape differs from the reference's",
    "wrong_dtype": "output dtype differs from the reference's",
    "wrong_device": "output is on another device than the reference's",
    "not_a_tensor": "the candidate returned something other than a tensor",
    "modified_input": "the candidate changed one of its inputs",
    "unsynchronized": "right only after torch.cuda.synchronize(): work left running on another stream",
    "raised": "the candidate raised an exception",
    "degenerate_inputs": "make_inputs returned all-zero inputs, which test almost nothing",
    "gradcheck_failed": "torch.autograd.gradcheck failed in float64",
    "wrong_grad": "gradients differ from the reference's",
    "opcheck_failed": "torch.library.opcheck failed for the registered op",
    "out_of_bounds_write": "the candidate wrote outside a tensor it allocated (guard bytes changed)",
    "crashed": "the process running the candidate died (a signal such as SIGSEGV, or glibc's abort)",
    "timed_out": "the case did not finish within its time limit (the candidate hangs, or is far too slow)",
    "exited": "the candidate called sys.exit() (or the process exited before the check finished)",
    "aliased_output": "an output shares memory with an input",
    "reused_output": "the output is the same buffer as the previous call's: a second call overwrites the first",
}


@dataclass
class Failure:
    """One failed case: why, where, and the first mismatching elements as (index, got, expected)."""

    reason: str
    detail: str
    size: Size | None = None
    dtype: str | None = None
    layout: str | None = None
    seed: int | None = None
    mismatches: list[tuple[tuple[int, ...], float, float]] = field(default_factory=list)

    def __str__(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in (("size", self.size), ("dtype", self.dtype),
                                                   ("layout", self.layout), ("seed", self.seed)) if v is not None)
        return f"[{self.reason}] {where}: {self.detail}"


@dataclass
class CheckReport:
    """What :func:`check` found: ``.ok``, ``.failures`` and ``.table`` (one row per case)."""

    table: pd.DataFrame
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No failure, and at least one case ran (a check of nothing is not a pass)."""
        return not self.failures and len(self.table) > 0

    @property
    def reasons(self) -> set[str]:
        return {f.reason for f in self.failures}

    def raise_if_failed(self) -> None:
        """Raise AssertionError with the first failures and their mismatching elements."""
        if self.ok:
            return
        lines = [f"check failed in {len(self.failures)} case(s):"]
        for failure in self.failures[:MAX_SHOWN]:
            lines.append(f"  {failure}")
            lines.extend(f"      index {idx}: got {got!r}, expected {exp!r}" for idx, got, exp in failure.mismatches)
        raise AssertionError("\n".join(lines))

    def summary(self) -> str:
        """One line: PASS with the case count, or FAIL with the count of each reason."""
        cases = len(self.table)
        if cases == 0 and not self.failures:
            return "FAIL: no case ran"
        if self.ok:
            return f"PASS: {cases} cases"
        counts = pd.Series([f.reason for f in self.failures]).value_counts()
        return f"FAIL: {len(self.failures)} failure(s) in {cases} cases (" + ", ".join(
            f"{r}: {n}" for r, n in counts.items()) + ")"

    def __repr__(self) -> str:
        lines = [f"CheckReport {self.summary()}"]
        lines.extend(f"  {f}" for f in self.failures[:MAX_SHOWN])
        if len(self.failures) > MAX_SHOWN:
            lines.append(f"  ... and {len(self.failures) - MAX_SHOWN} more")
        return "\n".join(lines)

    def by_layout(self) -> pd.DataFrame:
        """The cases counted by test and layout: how many ran, how many failed, and the sizes they covered
        (``.table`` has every case)."""
        if self.table.empty:
            return pd.DataFrame(columns=["test", "layout", "cases", "failed", "sizes"])
        table = self.table.assign(failed=~self.table["ok"].astype(bool))
        grouped = table.groupby(["test", "layout"], sort=False)
        return pd.DataFrame({"cases": grouped.size(), "failed": grouped["failed"].sum(),
                             "sizes": grouped["size"].agg(lambda s: len(set(map(str, s))))}).reset_index()

    def _repr_html_(self) -> str:
        # The cases grouped, not all of them: a check runs about a thousand, which would make every notebook
        # that shows a report carry a table of that length.
        color = "#070" if self.ok else "#b00"
        items = "".join(f"<li><code>{html.escape(f.reason)}</code> {html.escape(str(f))}</li>"
                        for f in self.failures[:MAX_SHOWN])
        return (f"<b style='color:{color}'>CheckReport {html.escape(self.summary())}</b><ul>{items}</ul>"
                f"<details><summary>cases by test and layout (every case: <code>.table</code>)</summary>"
                f"{self.by_layout().to_html(index=False)}</details>")


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Fill every new tensor's memory with NaN (floats) or the max value (ints) inside the block."""
    import torch.utils.deterministic as det

    enabled, warn_only = torch.are_deterministic_algorithms_enabled(), \
        torch.is_deterministic_algorithms_warn_only_enabled()
    fill = det.fill_uninitialized_memory
    try:
        # warn_only: a nondeterministic op inside the candidate must not turn into an error here.
        torch.use_deterministic_algorithms(True, warn_only=True)
        det.fill_uninitialized_memory = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        det.fill_uninitialized_memory = fill
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _mismatches(got: torch.Tensor, exp: torch.Tensor, bad: torch.Tensor) -> list[tuple[tuple[int, ...], float, float]]:
    found = []
    for flat in bad.flatten().nonzero().flatten()[:MAX_SHOWN].tolist():
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)) if got.dim() else ()
        found.append((idx, got.flatten()[flat].item(), exp.flatten()[flat].item()))
    return found


@dataclass
class _Comparison:
    reason: str | None
    detail: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst: tuple[int, ...] | None = None
    mismatches: list = field(default_factory=list)
    nan_mask: torch.Tensor | None = None
    output: int | None = None  # which output failed, for ops that return several


def _compare(got: Any, exp: Any, rtol: float, atol: float) -> _Comparison:
    """Compare one output, or each of a tuple of outputs (the first that fails is reported)."""
    if not isinstance(exp, (tuple, list)):
        return _compare_one(got, exp, rtol, atol)
    if not isinstance(got, (tuple, list)) or len(got) != len(exp):
        return _Comparison("not_a_tensor", f"returned {type(got).__name__}, expected a tuple of {len(exp)} tensors")
    results = [_compare_one(g, e, rtol, atol) for g, e in zip(got, exp, strict=True)]
    worst = max(results, key=lambda c: c.max_abs)
    for i, cmp in enumerate(results):
        if cmp.reason:
            cmp.detail, cmp.output = f"output {i}: {cmp.detail}", i
            return cmp
    return _Comparison(None, "", worst.max_abs, max(c.max_rel for c in results), worst.worst)


def _compare_one(got: Any, exp: torch.Tensor, rtol: float, atol: float) -> _Comparison:
    if not isinstance(got, torch.Tensor):
        return _Comparison("not_a_tensor", f"returned {type(got).__name__}")
    for what, reason in (("shape", "wrong_shape"), ("dtype", "wrong_dtype"), ("device", "wrong_device")):
        if getattr(got, what) != getattr(exp, what):
            return _Comparison(reason, f"got {getattr(got, what)}, expected {getattr(exp, what)}")
    if got.numel() == 0:
        return _Comparison(None)
    if exp.is_complex():  # real and imaginary parts side by side, each compared
        cmp = _compare_one(torch.view_as_real(got.resolve_conj()), torch.view_as_real(exp.resolve_conj()), rtol, atol)
        cmp.detail = cmp.detail and f"(real, imaginary) parts: {cmp.detail}"
        return cmp
    g, e = got.double(), exp.double()
    diff = (g - e).abs()
    finite_ref = torch.isfinite(e)
    if finite_ref.any():
        # atol is sized for outputs of order 1; an output small as a whole (a softmax over 4096 columns holds
        # ~1/4096 a value) gets it scaled by its root mean square, or zeroing every value below atol would pass.
        rms = float(e[finite_ref].pow(2).mean().sqrt())
        atol = atol * min(1.0, rms) if rms > 0 else atol
    nonfinite = ~torch.isfinite(g) & finite_ref
    # NaN where the reference has NaN, and an infinity equal to the reference's, match (diff 0): the worst
    # element is one that differs, not a NaN - NaN or inf - inf; any other NaN difference is the worst there is.
    same = (g == e) | (torch.isnan(g) & torch.isnan(e))
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    diff = torch.where(same, torch.zeros_like(diff), diff)
    scaled = torch.where(finite_ref, diff / (atol + rtol * e.abs()), diff)  # an infinite reference: inf / inf
    worst_flat = int(scaled.flatten().argmax())
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst_flat), got.shape))
    max_abs = float(diff[finite_ref].max()) if finite_ref.any() else 0.0
    tiny = torch.finfo(exp.dtype).tiny if exp.is_floating_point() else 1.0
    max_rel = float((diff / e.abs().clamp_min(tiny))[finite_ref].max()) if finite_ref.any() else 0.0
    base = _Comparison(None, "", max_abs, max_rel, worst)
    if nonfinite.any():
        base.reason, base.nan_mask = "nan_or_inf", nonfinite
        base.detail = f"{int(nonfinite.sum())} of {got.numel()} elements are NaN/Inf where the reference is finite"
        base.mismatches = _mismatches(got, exp, nonfinite)
        return base
    bad = ~torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        base.reason = "wrong_values"
        base.detail = (f"{int(bad.sum())} of {got.numel()} elements beyond rtol={rtol:g}, atol={atol:g}; worst at "
                       f"{worst}: got {got[worst].item()!r}, expected {exp[worst].item()!r}")
        base.mismatches = _mismatches(got, exp, bad)
    return base


def _floating(inputs: tuple) -> list[torch.Tensor]:
    return [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _outputs(got: Any) -> list[torch.Tensor]:
    items = got if isinstance(got, (tuple, list)) else (got,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _numel(size: Size) -> int:
    return size if isinstance(size, int) else math.prod(size)


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@dataclass
class _Snapshot:
    """An input as it was before the call: its geometry and every byte of its buffer (values, and the gaps a
    padded or strided layout leaves), so any write into it is seen, NaN and infinities included."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    data: torch.Tensor

    @classmethod
    def of(cls, t: torch.Tensor) -> _Snapshot:
        return cls(tuple(t.shape), t.stride(), t.storage_offset(), _storage_bytes(t).clone())

    def same_as(self, t: torch.Tensor) -> bool:
        return (tuple(t.shape), t.stride(), t.storage_offset()) == (self.shape, self.stride, self.offset) and \
            bool(torch.equal(_storage_bytes(t), self.data))


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


@dataclass
class _Case:
    """One case of the check. A forward case's inputs come from make_inputs(size, dtype) under seed, re-laid
    by layout; a backward case's layout is the kind of grad_output."""

    test: str  # forward, backward, gradcheck or opcheck
    size: Size
    dtype: torch.dtype
    trial: int
    layout: str
    seed: int
    rtol: float
    atol: float
    timed: bool = False  # a shape `jitload bench` times

    def row(self) -> dict:
        return {"test": self.test, "size": self.size, "dtype": _dtype_name(self.dtype), "trial": self.trial,
                "layout": self.layout, "seed": self.seed, "timed": self.timed}

    def fail(self, reason: str, detail: str, mismatches: list | None = None) -> Failure:
        return Failure(reason, detail, self.size, _dtype_name(self.dtype), self.layout, self.seed, mismatches or [])


def default_sizes(device: str | torch.device) -> list[Size]:
    """The sizes check() uses when none are given: :data:`DEFAULT_SIZES` and the device's large size."""
    return [*DEFAULT_SIZES, LARGE_SIZE.get(torch.device(device).type, LARGE_SIZE["cpu"])]


def _cases(sizes: list[Size], timed_sizes: Sequence[Size], dtypes: Sequence[torch.dtype], trials: int,
           layouts: Sequence[str], seed: int, tols: dict[torch.dtype, tuple[float, float]]) -> Iterator[_Case]:
    # The layouts beyond EVERY_TRIAL test how a kernel walks memory, not its arithmetic: once (the first trial),
    # and not at the largest of several sizes (a multi-block size below it walks the same paths, at a fraction
    # of the time).
    largest = max(sizes, key=_numel) if len(sizes) > 1 else None
    for d, dtype in enumerate(dtypes):
        rtol, atol = tols.get(dtype, (1e-5, 1e-5))
        for s, size in enumerate(sizes):
            for trial in range(trials):
                case_seed = seed + 7919 * trial + 104729 * s + 31 * d
                for layout in layouts:
                    if layout in EVERY_TRIAL or (trial == 0 and size != largest):
                        yield _Case("forward", size, dtype, trial, layout, case_seed, rtol, atol)
        # what `jitload bench` times: make_inputs' own layout, as bench calls it
        for t, size in enumerate(timed_sizes):
            yield _Case("forward", size, dtype, 0, "contiguous", seed + 1000003 * (t + 1) + 31 * d, rtol, atol,
                        timed=True)


def _grad_cases(dtypes: Sequence[torch.dtype], seed: int,
                tols: dict[torch.dtype, tuple[float, float]]) -> Iterator[_Case]:
    for size in GRADCHECK_SIZES:
        yield _Case("gradcheck", size, torch.float64, 0, "contiguous", seed + size, 1e-3, 1e-5)
    for d, dtype in enumerate(dtypes):
        rtol, atol = tols.get(dtype, (1e-5, 1e-5))
        for size in GRAD_SIZES:
            for kind in GRAD_OUTPUTS:
                yield _Case("backward", size, dtype, 0, kind, seed + size + 31 * d, rtol, atol)


def _validate(dtypes: Sequence[torch.dtype], trials: int, sizes: Sequence[Size] | None, timed_sizes: Sequence[Size],
              layouts: Sequence[str], timeout: float | None,
              tolerances: dict[torch.dtype, tuple[float, float]] | None) -> None:
    """Refuse arguments under which nothing, or not what was asked, would be checked."""
    unknown = [layout for layout in layouts if layout not in LAYOUTS]
    if unknown:
        raise ValueError(f"unknown layout(s) {unknown}: choose from {list(LAYOUTS)}")
    if not list(dtypes):
        raise ValueError("dtypes is empty: no case would run (a check of nothing is not a PASS)")
    if trials < 1:
        raise ValueError(f"trials={trials}: at least one trial is needed for any case to run")
    if sizes is not None and not list(sizes) and not list(timed_sizes):
        raise ValueError("sizes is empty: no case would run (pass None for the default sizes)")
    if not list(layouts):
        raise ValueError(f"layouts is empty: no case would run (choose from {list(LAYOUTS)})")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout={timeout!r}: a case's limit must be a positive number of seconds "
                         "(float('inf') for none)")
    if sizes is not None and sizes and not timed_sizes and all(_numel(s) == 0 for s in sizes):
        raise ValueError(f"sizes={sizes}: every size is empty, so no element would be compared")
    for dtype, tol in (tolerances or {}).items():
        if len(tol) != 2 or not all(math.isfinite(t) and t >= 0 for t in tol):
            raise ValueError(f"tolerances[{dtype}]={tol!r}: (rtol, atol), each a finite number >= 0")


def check(
    candidate: Callable[..., Any],
    reference: Callable[..., torch.Tensor],
    make_inputs: Callable[[Any, torch.dtype, torch.device], tuple],
    *,
    sizes: Sequence[Size] | None = None,
    dtypes: Sequence[torch.dtype] = (torch.float32,),
    device: str | torch.device | None = None,
    trials: int = 3,
    grad: bool = False,
    seed: int = 0,
    tolerances: dict[torch.dtype, tuple[float, float]] | None = None,
    layouts: Sequence[str] = tuple(LAYOUTS),
    guards: bool = True,
    isolate: bool = False,
    timed_sizes: Sequence[Size] = (),
    timeout: float | None = None,
    on_case: Callable[[dict], None] | None = None,
    _events: Callable[[str, dict, Failure | None], None] | None = None,
) -> CheckReport:
    """Check ``candidate(*make_inputs(size, dtype, device))`` against ``reference`` on the same inputs.

    Default sizes (:func:`default_sizes`): 0, 1, 2, 4, 7, 8, 15, 16, 17, 1023, 1024, 1025 (multiples of every
    vector width, one below and one above), 2^20, 2^20+3 and a large one (2^24+1 on CUDA, 2^22+1 on CPU); a size
    may also be a tuple, which ``make_inputs`` reads as a shape. Every trial runs the inputs as made and in a
    non-contiguous layout; the first trial also runs them, at every size but the largest, padded, one element
    into their buffers (misaligned), transposed in memory, expanded (stride 0), mixed (the first input as made,
    the others in each of those non-contiguous layouts in turn, and the reverse), with NaN, +inf and -inf planted
    in every floating input, and scaled up where the reference stays finite (the tolerance scaled alike;
    ``layouts`` picks among :data:`jitload.harness.layouts.LAYOUTS`). ``timed_sizes`` adds cases in make_inputs'
    own layout (what ``jitload bench`` times).

    A failure names its reason (:data:`REASONS`), case and seed. ``guards`` places every tensor the candidate
    allocates between guard bytes and fails a case that writes past them (:mod:`jitload.harness.guards`). An output
    that shares memory with an input, or with the candidate's previous output, fails.

    Each case has a time limit: ``timeout`` seconds, by default 100 times the reference's time on the case with
    a floor of 30 s. Past it a candidate looping in Python is stopped and the case fails; one stuck in compiled
    or GPU code cannot be stopped in this process (a message says so), which is what ``isolate`` is for: it
    runs the cases in a forked process, so a candidate that crashes, hangs or exits becomes a failure naming
    its case and the process and anything it started are killed (CPU, or CUDA in a process that has not
    initialised CUDA yet; ``jitload check`` isolates by default).

    ``grad=True`` adds float64 gradcheck on small sizes and a comparison of gradients with the reference's at
    the vector sizes, for a random contiguous grad_output, a stride-0 one (``out.sum().backward()``) and a
    non-contiguous one. A registered torch op (``torch.ops.ns.name``) also gets ``torch.library.opcheck``.
    Tolerances default to :data:`TOLERANCES` (rtol, atol) per dtype. ``on_case`` is called with each case's
    row (and its ``timeout_s``) before the candidate runs. Arguments under which no case would run are refused.
    """
    device = torch.device(device) if device is not None else default_device()
    # once, here: a generator passed for any of them would be used up by the first look
    dtypes, timed_sizes, layouts = list(dtypes), list(timed_sizes), list(layouts)
    sizes = list(sizes) if sizes is not None else None
    tolerances = dict(tolerances) if tolerances is not None else None
    _validate(dtypes, trials, sizes, timed_sizes, layouts, timeout, tolerances)
    if timeout is not None and timeout > MAX_TIMEOUT_S:
        timeout = float("inf")  # past what a timer can count: no limit, as asked
    options = dict(sizes=sizes, dtypes=dtypes, device=device, trials=trials, grad=grad, seed=seed,
                   tolerances=tolerances, layouts=layouts, guards=guards, timed_sizes=timed_sizes, timeout=timeout)
    if isolate:
        return _check_isolated(candidate, reference, make_inputs, on_case, uses_cuda=device.type == "cuda",
                               options=options)
    sizes = list(sizes) if sizes is not None else default_sizes(device)
    tols = {**TOLERANCES, **(tolerances or {})}
    run = _Runner(candidate, reference, make_inputs, device, guards=guards, timeout=timeout, on_case=on_case,
                  events=_events)
    for case in _cases(sizes, timed_sizes, dtypes, trials, layouts, seed, tols):
        if run.lost:
            break
        run.forward(case)
    if grad:
        for case in _grad_cases(dtypes, seed, tols):
            if not run.lost:
                run.backward(case)
    if torch_compat.is_op(candidate):
        for dtype in dtypes:
            if not run.lost:
                run.opcheck(_Case("opcheck", 7, dtype, 0, "contiguous", seed, 0.0, 0.0))
    return CheckReport(pd.DataFrame(run.rows), run.failures)


class _Runner:
    """Runs the cases of one check in this process and keeps their rows and failures. It holds the
    candidate's previous outputs, so that one buffer handed out on every call is seen (it cannot be freed and
    reused while held), and learns from a CUDA error whether the context is gone (the cases after it cannot
    run)."""

    def __init__(self, candidate, reference, make_inputs, device: torch.device, *, guards: bool,
                 timeout: float | None, on_case, events) -> None:
        self.candidate, self.reference, self.make_inputs = candidate, reference, make_inputs
        self.device, self.guards, self.timeout = device, guards, timeout
        self.on_case, self.events = on_case, events
        self.rows: list[dict] = []
        self.failures: list[Failure] = []
        self.previous: list[list[torch.Tensor]] = []  # the outputs of the last HELD_CALLS calls
        self.lost = False

    # --- bookkeeping -----------------------------------------------------------------------------------------
    def limit(self, reference_s: float) -> float:
        return self.timeout if self.timeout is not None else max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * reference_s)

    def start(self, row: dict, limit: float) -> None:
        announced = {**row, "timeout_s": limit}
        if self.on_case is not None:
            self.on_case(dict(announced))
        if self.events is not None:  # isolate=True's child: the parent learns where a crash or hang happened
            self.events("start", announced, None)

    def record(self, row: dict, failure: Failure | None) -> None:
        row["ok"] = failure is None
        row["reason"] = failure.reason if failure else ""
        self.rows.append(row)
        if failure:
            self.failures.append(failure)
        if self.events is not None:
            self.events("end", dict(row), failure)

    def _timed(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        t0 = time.perf_counter()
        out = fn()
        _sync(self.device)
        return out, time.perf_counter() - t0

    def _guarded(self, case: _Case, row: dict, limit: float, judge: Callable[[], Failure | None]) -> Failure | None:
        """``judge()`` (which calls the candidate) under the case's time limit, its escapes turned into
        failures."""
        where = ", ".join(f"{k}={row[k]}" for k in ("test", "size", "dtype", "layout", "seed"))
        try:
            with time_limit(limit, f"the case {where}"):
                return judge()
        except CaseTimedOut:
            why = "" if self.timeout is not None else " (100x the reference's time, at least 30 s; timeout= sets it)"
            return case.fail("timed_out", f"did not finish within {limit:.1f} s{why}")
        except SystemExit as exc:  # sys.exit() in the candidate ends a check, or a notebook's kernel, otherwise
            return case.fail("exited", f"the candidate called sys.exit({exc.code!r})")
        except Exception as exc:  # a candidate that raises is a failed case, not a crashed check
            return case.fail("raised", _first_line(exc) + self._context_lost(exc))

    def _context_lost(self, exc: Exception) -> str:
        if self.device.type != "cuda" or "CUDA" not in str(exc):
            return ""
        try:
            torch.cuda.synchronize(self.device)
            return ""
        except Exception:
            self.lost = True
            return "; the CUDA context is lost, so the cases after it did not run"

    # --- forward ---------------------------------------------------------------------------------------------
    def _prepare(self, case: _Case) -> tuple[tuple, Any, float, float] | Failure | None:
        """The case's inputs, the reference's output on them, its time and the factor the inputs were scaled
        by; a Failure for degenerate inputs; None where the layout tests nothing new."""
        torch.manual_seed(case.seed)
        made = tuple(self.make_inputs(case.size, case.dtype, self.device))
        with poisoned_allocations():  # the gaps of a padded or strided buffer hold NaN, not whatever memory held
            inputs = LAYOUTS[case.layout](made)
        if inputs is None:
            return None
        floats = _floating(made)
        if _numel(case.size) > 0 and floats and all(not bool(t.any()) for t in floats):
            return case.fail("degenerate_inputs", "every floating input is all zeros")
        if case.layout != "large":
            expected, seconds = self._timed(lambda: self.reference(*inputs))
            return inputs, expected, seconds, 1.0
        for factor in LARGE_SCALES:
            big = scaled(inputs, factor)
            expected, seconds = self._timed(lambda big=big: self.reference(*big))
            if all(bool(torch.isfinite(t).all()) for t in _outputs(expected) if t.is_floating_point()):
                return big, expected, seconds, factor
        return None  # the reference itself overflows at every scale: nothing to compare with

    def forward(self, case: _Case) -> None:
        try:
            prepared = self._prepare(case)
        except Exception as exc:  # outside the candidate's call: a CUDA error here means the context is gone
            if self.device.type != "cuda" or "CUDA" not in str(exc):
                raise
            self.lost = True
            prepared = case.fail("raised", f"the CUDA context was lost ({_first_line(exc)}); the cases after it "
                                           "did not run")
        if prepared is None:
            return
        row = case.row()
        if isinstance(prepared, Failure):
            self.record(row, prepared)
            return
        inputs, expected, reference_s, factor = prepared
        if factor != 1.0:
            # Inputs k times larger carry k times larger absolute rounding errors into every op of them (see
            # LARGE_RTOL_GROWTH). What this trial is for, overflow to inf or NaN, fails at any tolerance.
            case = dataclasses.replace(case, rtol=case.rtol * min(factor, LARGE_RTOL_GROWTH), atol=case.atol * factor)
        limit = self.limit(reference_s)
        self.start(row, limit)
        failure = self._guarded(case, row, limit, lambda: self._judge(case, row, inputs, expected))
        if failure is not None and factor != 1.0:
            failure.detail = f"inputs x{factor:g}: {failure.detail}"
        self.record(row, failure)

    def _judge(self, case: _Case, row: dict, inputs: tuple, expected: Any) -> Failure | None:
        before = [_Snapshot.of(t) if isinstance(t, torch.Tensor) else None for t in inputs]
        _sync(self.device)
        guard = GuardedAllocations() if self.guards else contextlib.nullcontext()
        with poisoned_allocations():
            with guard:
                got = self.candidate(*inputs)
            # No synchronize here: a result must already be right on the current stream.
            cmp = _compare(got, expected, case.rtol, case.atol)
        row.update(max_abs_err=cmp.max_abs, max_rel_err=cmp.max_rel, worst_index=cmp.worst)
        if self.guards:
            _sync(self.device)  # a write left running on a side stream lands before the guards are read
            if outside := guard.violations():
                return case.fail("out_of_bounds_write", "; ".join(outside))
        if found := self._shared_memory(got, inputs):
            return case.fail(*found)
        modified = [i for i, (t, b) in enumerate(zip(inputs, before, strict=True))
                    if b is not None and not b.same_as(t)]
        if modified:
            return case.fail("modified_input", f"input(s) {modified} changed during the call (their values, shape, "
                                               "or bytes of their buffers outside the view)")
        return self._values(case, inputs, got, expected, cmp)

    def _shared_memory(self, got: Any, inputs: tuple) -> tuple[str, str] | None:
        """An output in an input's buffer, or in the buffer of an output of one of the previous calls (held)."""
        outs = [t for t in _outputs(got) if t.untyped_storage().data_ptr() != 0]
        held = [t for call in self.previous for t in call]
        self.previous.append(list(_outputs(got)))
        small = all(t.untyped_storage().nbytes() <= HELD_BYTES for t in _outputs(got))
        del self.previous[:-HELD_CALLS if small else -1]
        for i, out in enumerate(outs):
            lo, hi = _storage_range(out)
            for j, t in enumerate(inputs):
                if isinstance(t, torch.Tensor) and t.device == out.device and _overlap((lo, hi), _storage_range(t)):
                    return "aliased_output", f"output {i} shares memory with input {j}"
            if any(p.device == out.device and _overlap((lo, hi), _storage_range(p)) for p in held):
                return "reused_output", (f"output {i} is in a buffer an earlier call's output (still alive) is in: "
                                         "a later call overwrites an earlier call's result")
        return None

    def _values(self, case: _Case, inputs: tuple, got: Any, expected: Any, cmp: _Comparison) -> Failure | None:
        if cmp.reason is None:
            return None
        if self.device.type == "cuda" and cmp.reason in ("wrong_values", "nan_or_inf"):
            _sync(self.device)
            if _compare(got, expected, case.rtol, case.atol).reason is None:
                return case.fail("unsynchronized", "the output was wrong when read on the current stream and "
                                                   "right after torch.cuda.synchronize()")
        if cmp.reason == "nan_or_inf" and cmp.nan_mask is not None and \
                _unwritten(self.candidate, inputs, cmp.output, cmp.nan_mask, self.device):
            where = "" if cmp.output is None else f"output {cmp.output}: "
            return case.fail("unwritten_output", f"{where}{int(cmp.nan_mask.sum())} of {cmp.nan_mask.numel()} "
                                                 "elements were never written: they hold the NaN poison, and other "
                                                 "values when memory differs", cmp.mismatches)
        return case.fail(cmp.reason, cmp.detail, cmp.mismatches)

    # --- backward and op checks ------------------------------------------------------------------------------
    def backward(self, case: _Case) -> None:
        row = case.row()
        if case.test == "gradcheck":
            limit = self.limit(0.0)
            self.start(row, limit)
            self.record(row, self._guarded(case, row, limit, lambda: _gradcheck(
                self.candidate, self.make_inputs, case, self.device)))
            return
        torch.manual_seed(case.seed)
        base = tuple(self.make_inputs(case.size, case.dtype, self.device))
        try:
            expected, reference_s = self._timed(lambda: _grads(self.reference, base, case.seed, case.layout))
        except Exception as exc:
            self.record(row, case.fail("wrong_grad", f"the reference's backward raised {_first_line(exc)}"))
            return
        limit = self.limit(reference_s)
        self.start(row, limit)
        self.record(row, self._guarded(case, row, limit, lambda: _compare_grads(
            _grads(self.candidate, base, case.seed, case.layout), expected, case)))

    def opcheck(self, case: _Case) -> None:
        row = case.row()
        torch.manual_seed(case.seed)
        args = tuple(self.make_inputs(case.size, case.dtype, self.device))
        limit = self.limit(0.0)
        self.start(row, limit)

        def judge() -> Failure | None:
            try:
                torch.library.opcheck(self.candidate, args)
            except Exception as exc:
                return case.fail("opcheck_failed", _first_line(exc))
            return None

        self.record(row, self._guarded(case, row, limit, judge))


def _check_isolated(candidate, reference, make_inputs, on_case, *, uses_cuda: bool, options: dict) -> CheckReport:
    """check() in a forked child (:mod:`jitload.harness.isolate`); a crash, a hang past the case's limit or an exit
    becomes a failure at its case."""
    rows: list[dict] = []
    failures: list[Failure] = []
    current: list[tuple[dict, float]] = []  # the case running now, and when it started

    def on_event(event: tuple[str, dict, Failure | None]) -> None:
        kind, row, failure = event
        if kind == "start":
            current[:] = [(row, time.monotonic())]
            if on_case is not None:
                on_case(dict(row))
            return
        current.clear()
        rows.append(row)
        if failure is not None:
            failures.append(failure)

    def overdue() -> str | None:
        # The child stops a case that loops in Python itself; this catches one stuck in compiled or GPU code.
        if not current:
            return None
        row, started = current[0]
        limit = row["timeout_s"] + ISOLATED_GRACE_S
        return f"ran past the case's limit ({limit:.1f} s)" if time.monotonic() - started > limit else None

    def work(emit: Callable[[Any], None]) -> CheckReport:
        return check(candidate, reference, make_inputs, **options, _events=lambda *event: emit(event))

    try:
        return run_forked(work, on_event, uses_cuda=uses_cuda, overdue=overdue)
    except (ChildDied, ChildOverdue) as ended:
        reason = "timed_out" if isinstance(ended, ChildOverdue) else \
            "exited" if ended.how.startswith("exited") else "crashed"
        if not current:
            failures.append(Failure(reason, f"the checking process {ended.how} outside any case"))
        else:
            row = current[0][0]
            failures.append(Failure(reason, f"the process {ended.how} while running this case (it and every "
                                            "process it started were killed); the cases after it did not run",
                                    row["size"], row["dtype"], row["layout"], row["seed"]))
            rows.append({**{k: v for k, v in row.items() if k != "timeout_s"}, "ok": False, "reason": reason})
        return CheckReport(pd.DataFrame(rows), failures)


def _unwritten(candidate, inputs, output, nan_mask, device) -> bool:
    """Rerun with new tensors holding a finite sentinel instead of NaN: elements nobody writes now hold it."""
    try:
        with GuardedAllocations(fill=UNWRITTEN_SENTINEL):
            again = candidate(*inputs)
        _sync(device)
    except Exception:
        return False
    if output is not None:
        again = again[output] if isinstance(again, (tuple, list)) and len(again) > output else None
    return isinstance(again, torch.Tensor) and again.shape == nan_mask.shape and bool(
        torch.isfinite(again[nan_mask]).any())


def _gradcheck(candidate, make_inputs, case: _Case, device) -> Failure | None:
    torch.manual_seed(case.seed)
    inputs = tuple(t.detach().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                   for t in make_inputs(case.size, torch.float64, device))
    try:
        if torch.autograd.gradcheck(candidate, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=False):
            return None
        detail = "numerical and analytical Jacobians differ"
    except Exception as exc:
        detail = _first_line(exc)
    return case.fail("gradcheck_failed", detail)


def _grads(fn, base: tuple, seed: int, kind: str) -> tuple:
    """fn's gradients for every floating input, under the grad_output ``kind`` (:data:`GRAD_OUTPUTS`)."""
    relay = strided if kind == GRAD_OUTPUTS[4] else lambda t: t.clone()
    args = tuple(relay(t.detach()).requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                 for t in base)
    outs = [t for t in _outputs(fn(*args)) if t.requires_grad]
    diffable = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    if kind == GRAD_OUTPUTS[1]:  # loss.sum().backward(): torch hands the backward an expanded (stride 0) one
        return torch.autograd.grad(sum(o.sum() for o in outs), diffable, allow_unused=True)
    torch.manual_seed(seed)
    weights = [torch.randn_like(o) for o in outs]
    if kind == GRAD_OUTPUTS[2]:
        weights = [strided(w) for w in weights]
    elif kind == GRAD_OUTPUTS[3]:
        weights = [offset8(w) for w in weights]
    return torch.autograd.grad(outs, diffable, weights, allow_unused=True)


def _compare_grads(got: tuple, expected: tuple, case: _Case) -> Failure | None:
    for i, (gc, gr) in enumerate(zip(got, expected, strict=True)):
        if gr is None:
            continue
        cmp = _compare(gc, gr, case.rtol, case.atol) if gc is not None else _Comparison("wrong_grad", "no gradient")
        if cmp.reason:
            return case.fail("wrong_grad", f"gradient of input {i}: {cmp.detail}", cmp.mismatches)
    return None
