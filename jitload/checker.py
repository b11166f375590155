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
import html
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from .guards import GuardedAllocations
from .isolate import ChildDied, run_forked
from .toolchain import default_device

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
LARGE_SIZE = {"cuda": 2**24 + 1, "cpu": 2**22 + 1}
DEFAULT_SIZES = (0, 1, 7, 1023, 2**20 + 3)  # plus LARGE_SIZE for the device
GRAD_SIZES = (1, 7, 33)
MAX_SHOWN = 5

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
}


@dataclass
class Failure:
    """One failed case: why, where, and the first mismatching elements as (index, got, expected)."""

    reason: str
    detail: str
    size: int | None = None
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
        return not self.failures

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

    def _repr_html_(self) -> str:
        color = "#070" if self.ok else "#b00"
        items = "".join(f"<li><code>{html.escape(f.reason)}</code> {html.escape(str(f))}</li>"
                        for f in self.failures[:MAX_SHOWN])
        return (f"<b style='color:{color}'>CheckReport {html.escape(self.summary())}</b><ul>{items}</ul>"
                f"<details><summary>all cases</summary>{self.table.to_html(index=False)}</details>")


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


def _strided_copy(t: Any) -> Any:
    """The same values in a non-contiguous layout (every other element of a wider buffer)."""
    if not isinstance(t, torch.Tensor) or t.dim() == 0:
        return t
    wide = torch.empty((*t.shape, 2), dtype=t.dtype, device=t.device)
    view = wide[..., 0]
    view.copy_(t)
    return view


def _padded_copy(t: Any) -> Any:
    """Rows sliced from wider rows (``x[:, :w]`` of a wider tensor); a 1-D tensor starts one element into its
    buffer, so it is contiguous but not aligned as a fresh allocation is."""
    if not isinstance(t, torch.Tensor) or t.dim() == 0:
        return t
    if t.dim() == 1:
        view = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:]
    else:
        view = torch.empty((*t.shape[:-1], t.shape[-1] + 3), dtype=t.dtype, device=t.device)[..., :t.shape[-1]]
    view.copy_(t)
    return view


def _transposed_copy(t: Any) -> Any:
    """The same values stored column-major (the last two dimensions swapped in memory)."""
    if not isinstance(t, torch.Tensor) or t.dim() < 2:
        return t
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _expanded(t: Any) -> Any:
    """A broadcast view with stride 0: every row the first row (a 1-D tensor: every element the first)."""
    if not isinstance(t, torch.Tensor) or t.dim() == 0:
        return t
    first = t[:1] if t.dim() == 1 else t[..., :1, :]
    return first.expand(t.shape)


def _with_nonfinite(inputs: tuple) -> tuple:
    """A poisoned-value case: +inf in the middle, -inf last and NaN first of the first floating input (later
    plants win where a tensor is too short for three places)."""
    out = list(inputs)
    for i, t in enumerate(out):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0:
            flat = t.clone(memory_format=torch.contiguous_format).view(-1)
            flat[flat.numel() // 2] = float("inf")
            flat[-1] = -float("inf")
            flat[0] = float("nan")
            out[i] = flat.view(t.shape)
            break
    return tuple(out)


# Each layout re-lays (or, for "nonfinite", re-fills) every input; the reference sees the same tensors.
LAYOUTS: dict[str, Callable[[tuple], tuple]] = {
    "contiguous": lambda inputs: inputs,
    "strided": lambda inputs: tuple(_strided_copy(t) for t in inputs),
    "padded": lambda inputs: tuple(_padded_copy(t) for t in inputs),
    "transposed": lambda inputs: tuple(_transposed_copy(t) for t in inputs),
    "expanded": lambda inputs: tuple(_expanded(t) for t in inputs),
    "nonfinite": _with_nonfinite,
}
# Run on every trial; the others on the first trial only (they test layout handling, not random values).
EVERY_TRIAL = ("contiguous", "strided")


def _fill_cache(nbytes: int, device: torch.device) -> None:
    # Leave freed blocks holding a sentinel, so a rerun's uninitialised output holds it instead of NaN.
    if nbytes > 0:
        torch.full((max(nbytes // 4, 1),), 1234.5, dtype=torch.float32, device=device)


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
    g, e = got.double(), exp.double()
    diff = (g - e).abs()
    finite_ref = torch.isfinite(e)
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


def _same(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor):
        return True
    return a.shape == b.shape and bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))) and \
        bool((a.isnan() == b.isnan()).all())


def _floating(inputs: tuple) -> list[torch.Tensor]:
    return [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _is_registered_op(fn: Any) -> bool:
    return isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass
class _Case:
    """One case of the check: its inputs come from make_inputs(size, dtype) under seed, re-laid by layout."""

    size: int
    dtype: torch.dtype
    trial: int
    layout: str
    seed: int
    rtol: float
    atol: float

    def row(self) -> dict:
        return {"size": self.size, "dtype": _dtype_name(self.dtype), "trial": self.trial, "layout": self.layout,
                "seed": self.seed}

    def fail(self, reason: str, detail: str, mismatches: list | None = None) -> Failure:
        return Failure(reason, detail, self.size, _dtype_name(self.dtype), self.layout, self.seed, mismatches or [])


def _cases(sizes: list[int], dtypes: Sequence[torch.dtype], trials: int, layouts: Sequence[str], seed: int,
           tols: dict[torch.dtype, tuple[float, float]]) -> Iterator[_Case]:
    # The layouts beyond EVERY_TRIAL test how a kernel walks memory, not its arithmetic: once (the first trial),
    # and not at the largest of several sizes (a multi-block size below it walks the same paths, at a fraction
    # of the time).
    largest = max(sizes) if len(sizes) > 1 else None
    for d, dtype in enumerate(dtypes):
        rtol, atol = tols.get(dtype, (1e-5, 1e-5))
        for s, size in enumerate(sizes):
            for trial in range(trials):
                case_seed = seed + 7919 * trial + 104729 * s + 31 * d
                for layout in layouts:
                    if layout in EVERY_TRIAL or (trial == 0 and size != largest):
                        yield _Case(size, dtype, trial, layout, case_seed, rtol, atol)


def check(
    candidate: Callable[..., Any],
    reference: Callable[..., torch.Tensor],
    make_inputs: Callable[[int, torch.dtype, torch.device], tuple],
    *,
    sizes: Sequence[int] | None = None,
    dtypes: Sequence[torch.dtype] = (torch.float32,),
    device: str | torch.device | None = None,
    trials: int = 3,
    grad: bool = False,
    seed: int = 0,
    tolerances: dict[torch.dtype, tuple[float, float]] | None = None,
    layouts: Sequence[str] = tuple(LAYOUTS),
    guards: bool = True,
    isolate: bool = False,
    on_case: Callable[[dict], None] | None = None,
    _events: Callable[[str, dict, Failure | None], None] | None = None,
) -> CheckReport:
    """Check ``candidate(*make_inputs(size, dtype, device))`` against ``reference`` on the same inputs.

    Default sizes: 0, 1, 7, 1023, 2^20+3 and a large one (2^24+1 on CUDA, 2^22+1 on CPU). Every trial runs the
    inputs as made and in a non-contiguous layout; the first trial also runs them, at every size but the
    largest, with rows padded (and a 1-D tensor one element into its buffer), transposed in memory, expanded
    (stride 0), and with NaN, +inf and -inf planted (``layouts`` picks among :data:`LAYOUTS`).

    ``guards`` places every tensor the candidate allocates between guard bytes and fails a case that writes
    past them (:mod:`jitload.guards`). ``isolate`` runs the cases in a forked process, so a candidate that
    crashes the process becomes a failure naming the case it died in (CPU, or CUDA in a process that has not
    initialised CUDA yet; ``jitload check`` isolates by default). ``grad=True`` adds float64 gradcheck on small
    sizes and a comparison of gradients with the reference's. A registered torch op (``torch.ops.ns.name``)
    also gets ``torch.library.opcheck``. Tolerances default to :data:`TOLERANCES` (rtol, atol) per dtype.
    ``on_case`` is called with each case's row before it runs.
    """
    device = torch.device(device) if device is not None else default_device()
    unknown = [layout for layout in layouts if layout not in LAYOUTS]
    if unknown:
        raise ValueError(f"unknown layout(s) {unknown}: choose from {list(LAYOUTS)}")
    if isolate:
        return _check_isolated(candidate, reference, make_inputs, on_case, uses_cuda=device.type == "cuda",
                               options=dict(sizes=sizes, dtypes=dtypes, device=device, trials=trials, grad=grad,
                                            seed=seed, tolerances=tolerances, layouts=layouts, guards=guards))
    sizes = list(sizes) if sizes is not None else [*DEFAULT_SIZES, LARGE_SIZE.get(device.type, 2**22 + 1)]
    tols = {**TOLERANCES, **(tolerances or {})}
    rows: list[dict] = []
    failures: list[Failure] = []
    for case in _cases(sizes, dtypes, trials, layouts, seed, tols):
        row = case.row()
        if on_case is not None:
            on_case(dict(row))
        if _events is not None:  # isolate=True's child: the parent learns where a crash happened
            _events("start", dict(row), None)
        try:
            failure = _run_case(candidate, reference, make_inputs, device, case, row, guards)
        except Exception as exc:  # outside the candidate's call: a CUDA error there means the context is gone
            if device.type != "cuda" or "CUDA" not in str(exc):
                raise
            failure = case.fail("raised", f"the CUDA context was lost ({_first_line(exc)}); the cases after it did "
                                          "not run")
            rows.append({**row, "ok": False, "reason": failure.reason})
            failures.append(failure)
            return CheckReport(pd.DataFrame(rows), failures)
        row["ok"] = failure is None
        row["reason"] = failure.reason if failure else ""
        rows.append(row)
        if failure:
            failures.append(failure)
        if _events is not None:
            _events("end", dict(row), failure)
    if grad:
        failures.extend(_check_grad(candidate, reference, make_inputs, dtypes, device, seed, tols))
    if _is_registered_op(candidate):
        failures.extend(_opcheck(candidate, make_inputs, dtypes, device, seed))
    return CheckReport(pd.DataFrame(rows), failures)


def _check_isolated(candidate, reference, make_inputs, on_case, *, uses_cuda: bool, options: dict) -> CheckReport:
    """check() in a forked child (:mod:`jitload.isolate`); a crash becomes a "crashed" failure at its case."""
    rows: list[dict] = []
    failures: list[Failure] = []
    current: list[dict] = []

    def on_event(event: tuple[str, dict, Failure | None]) -> None:
        kind, row, failure = event
        if kind == "start":
            current[:] = [row]
            if on_case is not None:
                on_case(dict(row))
            return
        current.clear()
        rows.append(row)
        if failure is not None:
            failures.append(failure)

    def work(emit: Callable[[Any], None]) -> CheckReport:
        return check(candidate, reference, make_inputs, **options, _events=lambda *event: emit(event))

    try:
        return run_forked(work, on_event, uses_cuda=uses_cuda)
    except ChildDied as died:
        if not current:
            failures.append(Failure("crashed", f"the checking process died ({died.how}) outside any case"))
        else:
            (row,) = current
            failures.append(Failure("crashed", f"the process died ({died.how}) while running this case; the cases "
                                               "after it did not run", row["size"], row["dtype"], row["layout"],
                                    row["seed"]))
            rows.append({**row, "ok": False, "reason": "crashed"})
        return CheckReport(pd.DataFrame(rows), failures)


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _run_case(candidate, reference, make_inputs, device: torch.device, case: _Case, row: dict,
              guards: bool) -> Failure | None:
    torch.manual_seed(case.seed)
    made = tuple(make_inputs(case.size, case.dtype, device))
    with poisoned_allocations():  # the gaps of a padded or strided buffer hold NaN, not whatever memory held
        inputs = LAYOUTS[case.layout](made)
    floats = _floating(made)
    if case.size > 0 and floats and all(not bool(t.any()) for t in floats):
        return case.fail("degenerate_inputs", "every floating input is all zeros")
    expected = reference(*inputs)
    before = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)
    _sync(device)
    guard = GuardedAllocations() if guards else contextlib.nullcontext()
    try:
        with poisoned_allocations():
            with guard:
                got = candidate(*inputs)
            # No synchronize here: a result must already be right on the current stream.
            cmp = _compare(got, expected, case.rtol, case.atol)
    except Exception as exc:  # a candidate that raises is a failed case, not a crashed check
        return case.fail("raised", _first_line(exc))
    row.update(max_abs_err=cmp.max_abs, max_rel_err=cmp.max_rel, worst_index=cmp.worst)
    if guards:
        _sync(device)  # a write left running on a side stream lands before the guards are read
    if guards and (outside := guard.violations()):
        return case.fail("out_of_bounds_write", "; ".join(outside))
    modified = [i for i, (a, b) in enumerate(zip(inputs, before, strict=True)) if not _same(a, b)]
    if modified:
        return case.fail("modified_input", f"input(s) {modified} changed during the call")
    if cmp.reason is None:
        return None
    if device.type == "cuda" and cmp.reason in ("wrong_values", "nan_or_inf"):
        _sync(device)
        if _compare(got, expected, case.rtol, case.atol).reason is None:
            return case.fail("unsynchronized", "the output was wrong when read on the current stream and right "
                                               "after torch.cuda.synchronize()")
    if cmp.reason == "nan_or_inf" and cmp.nan_mask is not None and _unwritten(candidate, inputs, cmp.output,
                                                                              cmp.nan_mask, device):
        where = "" if cmp.output is None else f"output {cmp.output}: "
        return case.fail("unwritten_output", f"{where}{int(cmp.nan_mask.sum())} of {cmp.nan_mask.numel()} elements "
                                             "were never written: they hold the NaN poison, and other values when "
                                             "memory differs", cmp.mismatches)
    return case.fail(cmp.reason, cmp.detail, cmp.mismatches)


def _unwritten(candidate, inputs, output, nan_mask, device) -> bool:
    """Rerun without the NaN fill, over freed memory holding a sentinel: unwritten elements change value."""
    _fill_cache(nan_mask.numel() * 8, device)
    try:
        again = candidate(*inputs)
        _sync(device)
    except Exception:
        return False
    if output is not None:
        again = again[output] if isinstance(again, (tuple, list)) and len(again) > output else None
    return isinstance(again, torch.Tensor) and again.shape == nan_mask.shape and bool(
        torch.isfinite(again[nan_mask]).any())


def _check_grad(candidate, reference, make_inputs, dtypes, device, seed, tols) -> list[Failure]:
    failures = [f for size in GRAD_SIZES if (f := _gradcheck(candidate, make_inputs, size, device, seed))]
    for dtype in dtypes:
        rtol, atol = tols.get(dtype, (1e-5, 1e-5))
        for size in GRAD_SIZES:
            failures.extend(_compare_grads(candidate, reference, make_inputs, size, dtype, device, seed, rtol, atol))
    return failures


def _gradcheck(candidate, make_inputs, size: int, device, seed: int) -> Failure | None:
    torch.manual_seed(seed + size)
    inputs = tuple(t.detach().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                   for t in make_inputs(size, torch.float64, device))
    try:
        if torch.autograd.gradcheck(candidate, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=False):
            return None
        detail = "numerical and analytical Jacobians differ"
    except Exception as exc:
        detail = _first_line(exc)
    return Failure("gradcheck_failed", detail, size, "float64", "contiguous", seed + size)


def _grads(fn, base: tuple, seed: int) -> tuple:
    """fn's gradients for every floating input, under a random output weight drawn from seed."""
    args = tuple(t.detach().clone().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                 for t in base)
    torch.manual_seed(seed)
    out = fn(*args)
    diffable = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return torch.autograd.grad(out, diffable, torch.randn_like(out), allow_unused=True)


def _compare_grads(candidate, reference, make_inputs, size, dtype, device, seed, rtol, atol) -> list[Failure]:
    torch.manual_seed(seed + size)
    base = tuple(make_inputs(size, dtype, device))
    grads = []
    for fn in (candidate, reference):
        try:
            grads.append(_grads(fn, base, seed))
        except Exception as exc:
            return [Failure("wrong_grad", f"{getattr(fn, '__name__', fn)} backward raised {_first_line(exc)}", size,
                            _dtype_name(dtype), "contiguous", seed + size)]
    failures = []
    for i, (gc, gr) in enumerate(zip(*grads, strict=True)):
        if gr is None:
            continue
        cmp = _compare(gc, gr, rtol, atol) if gc is not None else _Comparison("wrong_grad", "no gradient")
        if cmp.reason:
            failures.append(Failure("wrong_grad", f"gradient of input {i}: {cmp.detail}", size, _dtype_name(dtype),
                                    "contiguous", seed + size, cmp.mismatches))
    return failures


def _opcheck(op, make_inputs, dtypes, device, seed) -> list[Failure]:
    failures = []
    for dtype in dtypes:
        torch.manual_seed(seed)
        args = tuple(make_inputs(7, dtype, device))
        try:
            torch.library.opcheck(op, args)
        except Exception as exc:
            failures.append(Failure("opcheck_failed", _first_line(exc), 7, _dtype_name(dtype), "contiguous", seed))
    return failures
