"""jitload.check: run a candidate against its reference on fresh random inputs and say where they differ.

This is the first, simple checker (allclose per size and dtype, seeded inputs, the seed printed on failure);
the harness issue grows it into one that adversarial kernels cannot fool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch

# float32: a few ulps of accumulated rounding (2^-23 ~ 1.2e-7) over short expressions; half and bfloat16
# have 10 and 7 mantissa bits, so one rounding is ~1e-3 and ~8e-3 relative.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
    torch.float64: (1e-12, 1e-12),
}


@dataclass
class CheckReport:
    """The outcome of :func:`check`: ``.ok``, ``.failures`` (readable reasons) and ``.table`` (one row per case)."""

    table: pd.DataFrame
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def raise_if_failed(self) -> None:
        if self.failures:
            raise AssertionError("check failed:\n" + "\n".join(self.failures))

    def __repr__(self) -> str:
        verdict = "PASS" if self.ok else f"FAIL ({len(self.failures)} cases)"
        return f"CheckReport: {verdict}\n{self.table.to_string(index=False)}"

    def _repr_html_(self) -> str:
        verdict = "PASS" if self.ok else f"FAIL ({len(self.failures)} cases)"
        return f"<b>CheckReport: {verdict}</b>" + self.table.to_html(index=False)


def _compare(got: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> tuple[float, str | None]:
    if not isinstance(got, torch.Tensor):
        return float("nan"), f"returned {type(got).__name__}, not a tensor"
    for what in ("shape", "dtype", "device"):
        if getattr(got, what) != getattr(expected, what):
            return float("nan"), f"wrong {what}: {getattr(got, what)} (expected {getattr(expected, what)})"
    if got.numel() == 0:
        return 0.0, None
    err = (got.double() - expected.double()).abs()
    max_err = float(err.max())
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    bad = ~torch.isclose(got.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        idx = int(bad.flatten().nonzero()[0])
        return max_err, (f"{int(bad.sum())} of {got.numel()} elements differ; first at flat index {idx}: "
                         f"got {got.flatten()[idx].item()!r}, expected {expected.flatten()[idx].item()!r}")
    return max_err, None


def check(
    candidate: Callable[..., torch.Tensor],
    reference: Callable[..., torch.Tensor],
    make_inputs: Callable[[int, torch.dtype, torch.device], tuple],
    *,
    sizes: Sequence[int] = (0, 1, 7, 1023, 2**20 + 3),
    dtypes: Sequence[torch.dtype] = (torch.float32,),
    device: str | torch.device | None = None,
    trials: int = 3,
    seed: int = 0,
) -> CheckReport:
    """Compare ``candidate(*inputs)`` with ``reference(*inputs)`` for every size, dtype and trial."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows, failures = [], []
    for dtype in dtypes:
        for size in sizes:
            for trial in range(trials):
                trial_seed = seed + 1000 * trial + size
                torch.manual_seed(trial_seed)
                inputs = make_inputs(size, dtype, device)
                expected = reference(*inputs)
                try:
                    max_err, problem = _compare(candidate(*inputs), expected, dtype)
                except Exception as exc:  # a candidate that raises is a failed case, not a crashed check
                    max_err, problem = float("nan"), f"raised {type(exc).__name__}: {exc}"
                rows.append({"size": size, "dtype": str(dtype).replace("torch.", ""), "trial": trial,
                             "max_abs_err": max_err, "ok": problem is None})
                if problem:
                    failures.append(f"size={size} dtype={dtype} seed={trial_seed}: {problem}")
    return CheckReport(pd.DataFrame(rows), failures)
