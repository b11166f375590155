"""How :func:`jitload.check` re-lays and re-fills a case's inputs, so a kernel that only works on the inputs it
was written for (dense, aligned, O(1) values, finite) is run on the others a caller can hand it.

Each layout takes the inputs ``make_inputs`` returned and gives tensors with the same values (or, for
``nonfinite`` and ``large``, planted values) in another memory layout; the reference sees the same tensors. A
layout returns None where it would test nothing new (a mixed layout of a one-input kernel, or one that leaves
every input it re-lays contiguous), and that case is not run. Gaps in a padded or strided buffer are filled by
the caller's allocation poison (NaN), so a kernel that reads them shows NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# The large-magnitude trial multiplies every floating input by the first of these at which the reference stays
# finite: x > 88 overflows a float32 exp(x), so a softmax that skips the max subtraction fails at 100.
LARGE_SCALES = (100.0, 10.0)


def _tensor(t: Any, min_dim: int = 1) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() >= min_dim


def strided(t: Any) -> Any:
    """The same values in a non-contiguous layout (every other element of a wider buffer)."""
    if not _tensor(t):
        return t
    view = torch.empty((*t.shape, 2), dtype=t.dtype, device=t.device)[..., 0]
    view.copy_(t)
    return view


def padded(t: Any) -> Any:
    """Rows sliced from wider rows (``x[:, :w]`` of a wider tensor); a 1-D tensor starts one element into its
    buffer, so it is contiguous but not aligned as a fresh allocation is."""
    if not _tensor(t):
        return t
    if t.dim() == 1:
        return offset(t)
    view = torch.empty((*t.shape[:-1], t.shape[-1] + 3), dtype=t.dtype, device=t.device)[..., :t.shape[-1]]
    view.copy_(t)
    return view


def offset(t: Any, elements: int = 1) -> Any:
    """Contiguous, but starting ``elements`` into its buffer: a misaligned start for a vectorised load."""
    if not _tensor(t, 0):
        return t
    view = torch.empty(t.numel() + elements, dtype=t.dtype, device=t.device)[elements:].view(t.shape)
    view.copy_(t)
    return view


def offset8(t: Any) -> Any:
    """Contiguous, starting 8 bytes into its buffer: aligned for 8-byte loads, not for 16-byte ones (what
    ``x[2:]`` of float32 gives a kernel that checks only for 8-byte alignment)."""
    if not _tensor(t, 0):
        return t
    return offset(t, max(1, 8 // t.element_size()))


def transposed(t: Any) -> Any:
    """The same values stored column-major (the last two dimensions swapped in memory)."""
    if not _tensor(t, 2):
        return t
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def expanded(t: Any) -> Any:
    """A broadcast view with stride 0: every row the first row (a 1-D tensor: every element the first)."""
    if not _tensor(t):
        return t
    first = t[:1] if t.dim() == 1 else t[..., :1, :]
    return first.expand(t.shape)


def _tensors(inputs: tuple) -> list[int]:
    return [i for i, t in enumerate(inputs) if _tensor(t)]


# The non-contiguous layouts a mixed case re-lays inputs in, one case each (LAYOUTS' mixed_<name>); expanded
# changes the values too (every row the first), which any op that only reads its inputs accepts, and the
# reference sees the same values.
_NON_CONTIGUOUS: dict[str, Callable[[Any], Any]] = {
    "padded": padded, "transposed": transposed, "expanded": expanded, "strided": strided}
MIXED = tuple(f"mixed_{name}" for name in _NON_CONTIGUOUS)


def _relaid(t: torch.Tensor, relayout: Callable[[Any], Any]) -> torch.Tensor | None:
    """``t`` in ``relayout``, or None where that leaves it contiguous: a 1-D tensor padded is only offset, a
    1-D or (n, 1) one transposed unchanged, one of a single element the same under any. Such a tensor reads right
    through a pointer walked as dense, so a case of it tests nothing the offset layouts do not."""
    out = relayout(t)
    return None if out.is_contiguous() else out


def _mixed(relayout: Callable[[Any], Any]) -> Callable[[tuple], tuple | None]:
    def layout(inputs: tuple) -> tuple | None:
        """The first tensor as made, every other one re-laid where that makes it non-contiguous."""
        out, changed = list(inputs), False
        for i in _tensors(inputs)[1:]:
            relaid = _relaid(inputs[i], relayout)
            if relaid is not None:
                out[i], changed = relaid, True
        return tuple(out) if changed else None

    return layout


def mixed_first(inputs: tuple) -> tuple | None:
    """The first tensor non-contiguous (the first of the mixed layouts that makes it so), the others as made."""
    idx = _tensors(inputs)
    if len(idx) < 2:
        return None
    for relayout in _NON_CONTIGUOUS.values():
        relaid = _relaid(inputs[idx[0]], relayout)
        if relaid is not None:
            return tuple(relaid if i == idx[0] else t for i, t in enumerate(inputs))
    return None


def nonfinite(inputs: tuple) -> tuple:
    """NaN, +inf and -inf planted in every floating input, each input at its own places (input k: NaN at k,
    +inf at the middle + k, -inf at the last - k; later plants win where a tensor is too short)."""
    out = list(inputs)
    k = 0
    for i, t in enumerate(out):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0:
            flat = t.clone(memory_format=torch.contiguous_format).view(-1)
            n = flat.numel()
            flat[min(k, n - 1)] = float("nan")
            flat[min(n // 2 + k, n - 1)] = float("inf")
            flat[max(n - 1 - k, 0)] = -float("inf")
            out[i] = flat.view(t.shape)
            k += 1
    return tuple(out)


def scaled(inputs: tuple, factor: float) -> tuple:
    """Every floating input multiplied by ``factor`` (in its own dtype)."""
    return tuple(t * factor if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)


def _each(fn: Callable[[Any], Any]) -> Callable[[tuple], tuple]:
    return lambda inputs: tuple(fn(t) for t in inputs)


# Every layout check() knows, by name. "large" is filled in by the checker (it needs the reference to pick
# its scale); here it leaves the inputs as they are.
LAYOUTS: dict[str, Callable[[tuple], tuple | None]] = {
    "contiguous": lambda inputs: inputs,
    "strided": _each(strided),
    "padded": _each(padded),
    "offset": _each(offset),
    "offset8": _each(offset8),
    "transposed": _each(transposed),
    "expanded": _each(expanded),
    # A kernel that picks its path from the first input's layout alone reads the others wrongly in these: the
    # first as made, every other one in each non-contiguous layout in turn.
    **{name: _mixed(relayout) for name, relayout in zip(MIXED, _NON_CONTIGUOUS.values(), strict=True)},
    "mixed_first": mixed_first,
    "nonfinite": nonfinite,
    "large": lambda inputs: inputs,
}
# Run on every trial; the others on the first trial only (they test layout handling, not random values).
EVERY_TRIAL = ("contiguous", "strided")
