"""Guard bytes around every tensor a candidate allocates, so a write past its end is seen, not silently absorbed.

An allocator hands out whole blocks (the CPU allocator 64-byte aligned, CUDA's caching allocator in 512-byte
steps), so a kernel that writes one element too many usually lands in slack nobody reads, and passes. Inside
:class:`GuardedAllocations` every ``aten`` allocation (``empty``, ``empty_like``, ``empty_strided``,
``new_empty``, ...; from Python, Triton wrappers and C++ extensions alike, since ``at::empty_like`` in a binding
goes through the dispatcher) returns a tensor placed inside a larger buffer whose edges hold a byte pattern; a
``resize_`` of such a tensor (the ``at::empty({0})`` then ``resize_`` pattern) moves it to a guarded buffer of
its new size, as does an op that resizes an ``out=`` argument.
:meth:`GuardedAllocations.violations` names every guard that changed. A zero-size output gets a real guarded
buffer too, so a write into it is reported instead of crashing the process on a null pointer.

This is torch's own dispatch-mode machinery (``TorchDispatchMode``); nothing in torch offers guard regions for
the CPU allocator, and compute-sanitizer (``jitload check --sanitize``) covers only CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..builder.torch_compat import TorchDispatchMode, dispatch_keys_below_python

GUARD_BYTES = 512  # a multiple of every alignment a kernel may assume (16-byte vectors, 128-byte lines)
PATTERN = 0xA5
_ALLOCATIONS = {
    torch.ops.aten.empty.memory_format,
    torch.ops.aten.empty_like.default,
    torch.ops.aten.empty_strided.default,
    torch.ops.aten.new_empty.default,
    torch.ops.aten.new_empty_strided.default,
}
# Factories that fill what they allocate (zeros_like is the usual output of a Triton kernel that accumulates
# with atomics), and copies (x.clone() or x.contiguous() as the output of a kernel that works in place):
# guarded the same way, their values copied in.
_FILLED = {
    torch.ops.aten.clone.default,
    torch.ops.aten._to_copy.default,
    torch.ops.aten.zeros.default,
    torch.ops.aten.zeros_like.default,
    torch.ops.aten.ones.default,
    torch.ops.aten.ones_like.default,
    torch.ops.aten.full.default,
    torch.ops.aten.full_like.default,
    torch.ops.aten.new_zeros.default,
    torch.ops.aten.new_ones.default,
    torch.ops.aten.new_full.default,
}


_RESIZES = {torch.ops.aten.resize_.default, torch.ops.aten.resize_as_.default}


@dataclass
class _Guarded:
    buffer: torch.Tensor  # uint8: GUARD_BYTES, the tensor's bytes, GUARD_BYTES
    span: int  # bytes the tensor's elements cover
    shape: tuple[int, ...]
    dtype: torch.dtype
    itemsize: int
    address: int  # the storage's data pointer, by which an op writing into the tensor finds this record
    resized: bool = False  # an out= argument got another shape inside an op: its guards may now be inside it


def _span_bytes(shape: tuple[int, ...], stride: tuple[int, ...], itemsize: int) -> int:
    if any(s == 0 for s in shape):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(shape, stride, strict=True))) * itemsize


def _poison(view: torch.Tensor, fill: float = float("nan")) -> None:
    # By default the same fill as torch's fill_uninitialized_memory, so unwritten output still reads as NaN.
    if view.is_floating_point() or view.is_complex():
        view.fill_(fill)
    elif view.dtype == torch.bool:
        view.fill_(True)
    else:
        view.fill_(torch.iinfo(view.dtype).max)


class GuardedAllocations(TorchDispatchMode):
    """Within the block, allocations are placed between guard regions; see the module's docstring. ``fill``:
    the value new floating tensors hold (NaN, as torch's uninitialised-memory fill; another value tells an
    element nobody wrote from a NaN a kernel computed)."""

    def __init__(self, fill: float = float("nan")) -> None:
        super().__init__()
        self._fill = fill
        self._guarded: list[_Guarded] = []
        self._by_address: dict[int, _Guarded] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _ALLOCATIONS:
            return self._allocate(func(*args, **kwargs))
        if func in _FILLED:
            return self._allocate(func(*args, **kwargs), keep_values=True)
        if func.namespace not in ("aten", "prim", "prims"):
            # A registered op (torch.ops.ns.op): run its kernel below this mode with the mode on again, so the
            # allocations its C++ code makes are guarded too.
            below = dispatch_keys_below_python((*args, *kwargs.values()))
            if below is not None:
                with self:
                    return func.redispatch(below, *args, **kwargs)
        if func in _RESIZES and self._record_of(args[0]) is not None:
            target = args[1].shape if func is torch.ops.aten.resize_as_.default else args[1]
            fmt = kwargs.get("memory_format", args[2] if len(args) > 2 else None)
            return self._resize(args[0], tuple(target), fmt)
        resizable = self._resizable(func, args, kwargs)
        result = func(*args, **kwargs)
        for t, address in resizable:
            record = self._by_address[address]
            if t.untyped_storage().data_ptr() != address or tuple(t.shape) != record.shape:
                # The op resized it inside its own kernel (an out= argument): its old guards may now be inside
                # it, or freed. It moves, values and all, into a guarded buffer of its new size, so the writes a
                # kernel makes into it later are still watched.
                record.resized = True
                fresh = self._allocate(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device))
                fresh.copy_(t)
                t.set_(fresh.untyped_storage(), fresh.storage_offset(), fresh.shape, fresh.stride())
        return result

    def _record_of(self, t: object) -> _Guarded | None:
        return self._by_address.get(t.untyped_storage().data_ptr()) if isinstance(t, torch.Tensor) else None

    def _resize(self, t: torch.Tensor, shape: tuple[int, ...], memory_format) -> torch.Tensor:
        """``t.resize_(shape)`` of a guarded tensor: a new guarded buffer of the new size, holding what
        resize_ keeps (the old bytes, in storage order), with fresh poison after them."""
        old = self._record_of(t)
        assert old is not None
        if shape == tuple(t.shape) and memory_format in (None, torch.contiguous_format) and t.is_contiguous():
            return t
        fresh = self._allocate(torch.empty(shape, dtype=t.dtype, device=t.device,
                                           memory_format=memory_format or torch.contiguous_format))
        new = self._by_address[fresh.untyped_storage().data_ptr()]
        kept = min(old.span, new.span)
        new.buffer[GUARD_BYTES:GUARD_BYTES + kept].copy_(old.buffer[GUARD_BYTES:GUARD_BYTES + kept])
        t.set_(fresh.untyped_storage(), fresh.storage_offset(), fresh.shape, fresh.stride())
        return t

    def _resizable(self, func, args: tuple, kwargs: dict) -> list[tuple[torch.Tensor, int]]:
        # An out= argument may come back with another shape or storage (an in-place op on a view does not
        # count: a view past the end is just what the guards are for).
        written = [kwargs.get(a.name) if a.kwarg_only or i >= len(args) else args[i]
                   for i, a in enumerate(func._schema.arguments) if a.is_out]
        return [(t, t.untyped_storage().data_ptr()) for t in written
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in self._by_address]

    def _allocate(self, plain: torch.Tensor, keep_values: bool = False) -> torch.Tensor:
        itemsize = plain.element_size()
        span = _span_bytes(tuple(plain.shape), plain.stride(), itemsize)
        buffer = torch.full((2 * GUARD_BYTES + span,), PATTERN, dtype=torch.uint8, device=plain.device)
        # set_ rather than a view: the result is a fresh tensor to autograd (no _base), as an allocation must be.
        guarded = torch.empty(0, dtype=plain.dtype, device=plain.device).set_(
            buffer.untyped_storage(), GUARD_BYTES // itemsize, plain.shape, plain.stride())
        if keep_values:
            guarded.copy_(plain)
        elif span:
            _poison(buffer[GUARD_BYTES:GUARD_BYTES + span].view(plain.dtype), self._fill)
        record = _Guarded(buffer, span, tuple(plain.shape), plain.dtype, itemsize, buffer.untyped_storage().data_ptr())
        self._guarded.append(record)
        self._by_address[record.address] = record
        return guarded

    def violations(self) -> list[str]:
        """One line per allocation whose guard bytes changed: which side, and how far from the tensor's edge."""
        found = []
        for g in self._guarded:
            if g.resized:
                continue  # resized inside an op: it moved to a guarded buffer of its own, checked there
            before = (g.buffer[:GUARD_BYTES] != PATTERN).nonzero().flatten()
            after = (g.buffer[GUARD_BYTES + g.span:] != PATTERN).nonzero().flatten()
            what = f"{str(g.dtype).removeprefix('torch.')} tensor of shape {list(g.shape)}"
            if after.numel():
                first, last = int(after[0]), int(after[-1])
                found.append(f"wrote past the end of a {what}: bytes +{first}..+{last} after its last element "
                             f"(elements +{first // g.itemsize + 1}..+{last // g.itemsize + 1})")
            if before.numel():
                first = GUARD_BYTES - int(before[0])
                found.append(f"wrote before the start of a {what}: up to {first} bytes before its first element")
        return found
