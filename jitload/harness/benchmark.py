"""``jitload.bench``: time functions on the same inputs, against the copy bandwidth measured in the same run.

Timing discipline. GPU: every repetition is bracketed by a pair of CUDA events recorded on the current
stream, with a 256 MB buffer zeroed before each (outside the events) so no repetition finds its inputs in
the 60 MB L2; after the loop one ``torch.cuda.synchronize()`` and the events are read. A warm-up (also the
first call, where a ``torch.compile`` entry compiles) is run and timed separately, and the repetition count
is chosen from it so that each measurement lasts about ``target_ms``. CPU: the same loop with
``time.perf_counter`` around each call (a CPU call returns when it is done) and a 64 MB buffer zeroed
between calls. A 64 MB zero costs milliseconds on a CPU, so the repetitions are bounded by wall time too
(``wall_ms``, flush included): counted by kernel time alone, 1024 elements at ``target_ms=20`` ran 1000
repetitions and 8.1 s for 66 ms measured. The peak is a ``copy_`` of ``bytes_moved / 2`` bytes (read + write =
``bytes_moved``), timed the same way on the same device.

Order. Several contenders are timed in rounds, one repetition of each per round, in an order rotated every round,
so that a drift of the machine (clocks, temperature, a neighbour's load) falls on all of them alike: timed one
after the other, the same two kernels came out 0.5-0.6% apart in some processes and level in others, and a copy
alone moved by up to 1.3% between processes; a gap that small needs the contenders timed in turn.
``interleave=False`` times each contender's repetitions one after the other.

torch.compile is compiled for each shape and dtype it is timed at, as a user who times one shape gets it: one
compilation for several sizes becomes a graph with a dynamic size from the second size on, which timed add_relu's
reference in bfloat16 at 2^28 at 89.8% of the copy where, compiled for its shape, it reaches 101.3%.

The copy peak is a GPU's ceiling; on a CPU the twins are references, not tuned to its memory system, and a
2-core machine's timings swing with its load, so a CPU table has times and GB/s and no % column.

This is written by hand rather than with ``triton.testing.do_bench`` because the copy peak must share its
exact loop, and because it must also run on a CPU.
"""

from __future__ import annotations

import contextlib
import html
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..builder import torch_compat
from ..builder.toolchain import default_device

FLUSH_BYTES = {"cuda": 256 * 2**20, "cpu": 64 * 2**20}
PEAK = "copy (peak)"
METRIC_LABELS = {"% of peak": "% of the copy (bytes moved / median time)", "GB/s": "GB/s (bytes moved / median time)",
                 "median_ms": "median ms"}


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    first_ms: float


class _Timer:
    def __init__(self, device: torch.device, target_ms: float, min_reps: int, max_reps: int, wall_ms: float) -> None:
        self.device = device
        self.target_ms, self.min_reps, self.max_reps, self.wall_ms = target_ms, min_reps, max_reps, wall_ms
        self.flush = torch.empty(FLUSH_BYTES.get(device.type, FLUSH_BYTES["cpu"]) // 4, dtype=torch.int32,
                                 device=device)

    def _once(self, fn: Callable[[], Any]) -> float:
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(self.device)
            return start.elapsed_time(end)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    def _warm_up(self, fn: Callable[[], Any]) -> tuple[float, float, float]:
        """(first call ms, kernel ms, wall ms of one repetition with its flush) from three calls."""
        first = self._once(fn)  # compiles a torch.compile entry, loads code, warms caches
        t0 = time.perf_counter()
        self.flush.zero_()
        estimate = self._once(fn)
        wall = (time.perf_counter() - t0) * 1e3
        return first, min(estimate, self._once(fn)), wall

    def _reps(self, warm: Mapping[str, tuple[float, float, float]]) -> int:
        """One repetition count for all contenders: enough for ``target_ms`` of kernel time each, but no more
        than fit ``wall_ms`` a contender of wall time, flushes included."""
        by_kernel = max(self.target_ms / max(kernel, 1e-3) for _first, kernel, _wall in warm.values())
        by_wall = self.wall_ms * len(warm) / max(sum(wall for *_, wall in warm.values()), 1e-3)
        return int(np.clip(min(by_kernel, by_wall), self.min_reps, self.max_reps))

    def time(self, fn: Callable[[], Any]) -> Timing:
        """One contender's repetitions, one after another."""
        return self.time_rounds({"fn": fn})["fn"]

    def time_rounds(self, fns: Mapping[str, Callable[[], Any]]) -> dict[str, Timing]:
        """Every contender's repetitions in rounds: one of each per round, the order rotated each round."""
        warm = {name: self._warm_up(fn) for name, fn in fns.items()}
        reps = self._reps(warm)
        names = list(fns)
        order = [names[(r + i) % len(names)] for r in range(reps) for i in range(len(names))]
        times: dict[str, list[float]] = {name: [] for name in names}
        if self.device.type == "cuda":
            events = [(name, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for name in order]
            for name, start, end in events:
                self.flush.zero_()
                start.record()
                fns[name]()
                end.record()
            torch.cuda.synchronize(self.device)
            for name, start, end in events:
                times[name].append(start.elapsed_time(end))
        else:
            for name in order:
                self.flush.zero_()
                t0 = time.perf_counter()
                fns[name]()
                times[name].append((time.perf_counter() - t0) * 1e3)
        out = {}
        for name, ts in times.items():
            p20, p50, p80 = np.quantile(ts, [0.2, 0.5, 0.8])
            out[name] = Timing(float(p50), float(p20), float(p80), reps, warm[name][0])
        return out


@dataclass
class BenchResult:
    """Timings as a DataFrame (``.table``), with ``.plot()`` and ``.to_markdown()``.

    ``baseline`` names the entry the speedup column (``vs <baseline>``) divides by: 'eager' when bench was given
    ``eager=``, else the first entry. ``jitload.ui.widgets.BenchPanel(result)`` re-times it from a notebook.
    """

    table: pd.DataFrame
    device: str
    device_name: str
    compile_seconds: dict[str, float] = field(default_factory=dict)
    baseline: str = ""
    # (names, size, dtype name) -> BenchResult: the same measurement again, for jitload.ui.widgets.BenchPanel
    rerun: Callable[[list[str], int, str], BenchResult] | None = field(default=None, repr=False)

    @property
    def speedup_column(self) -> str:
        """The column of ``baseline``'s median over each entry's (above 1: faster than the baseline)."""
        return f"vs {self.baseline}"

    @property
    def metric(self) -> str:
        """The column a plot shows: % of the copy where one was timed, else GB/s (bytes known), else the
        median time (:data:`METRIC_LABELS` names each)."""
        return "% of peak" if "% of peak" in self.table else "GB/s" if "GB/s" in self.table else "median_ms"

    def _compile_notes(self) -> list[str]:
        return [f"{name}: first calls (compilation) took {s:.1f} s in all, not in the medians"
                for name, s in self.compile_seconds.items()]

    def __repr__(self) -> str:
        extra = "".join(f"\n{note}" for note in self._compile_notes())
        return f"BenchResult on {self.device_name}\n{self.table.to_string(index=False, float_format=fmt)}{extra}"

    def _repr_html_(self) -> str:
        notes = "".join(f"<br>{html.escape(note)}" for note in self._compile_notes())
        return (f"<b>BenchResult on {html.escape(self.device_name)}</b>"
                + self.table.to_html(index=False, float_format=fmt) + notes)

    def to_markdown(self) -> str:
        shown = self.table.copy()
        for col in shown.columns:
            if shown[col].dtype.kind == "f":
                shown[col] = shown[col].map(fmt)
        header = "| " + " | ".join(shown.columns) + " |"
        rule = "| " + " | ".join("---" for _ in shown.columns) + " |"
        body = ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
        return "\n".join([header, rule, *body])

    def plot(self, ax: Any = None, *, title: str | None = None) -> Any:
        """One panel per dtype: % of the copy measured in the same run against size (log x), GB/s where no
        copy was timed (a CPU), or median ms (log-log) without ``bytes_moved``. Every entry keeps one colour,
        line style and marker in all panels; the copy is a thick black line. ``ax``: an Axes per dtype (or one
        Axes for all dtypes, labelled by dtype). Returns the Figure; a figure made here is closed in pyplot, so
        that a notebook shows it once, as the cell's value (``fig.savefig`` still works)."""
        import matplotlib.pyplot as plt

        dtypes = list(dict.fromkeys(self.table["dtype"]))
        metric = self.metric
        made = ax is None
        if made:
            fig, axes = plt.subplots(1, len(dtypes), figsize=(4.2 * len(dtypes) + 1.5, 4.2), squeeze=False,
                                     sharey=True)
            axes = list(axes[0])
        else:
            axes = list(ax) if isinstance(ax, (list, tuple, np.ndarray)) else [ax] * len(dtypes)
            if len(axes) != len(dtypes):
                raise ValueError(f"plot(ax=...) needs one Axes per dtype ({len(dtypes)}), got {len(axes)}")
            fig = axes[0].figure
        names = [n for n in dict.fromkeys(self.table["name"]) if n != PEAK]
        styles = {name: _style(i) for i, name in enumerate(names)}
        styles[PEAK] = {"color": "black", "linestyle": "-", "linewidth": 2.5, "marker": "", "alpha": 0.6}
        shared = len(set(map(id, axes))) < len(axes)
        for a, dtype in zip(axes, dtypes, strict=True):
            group = self.table[self.table["dtype"] == dtype]
            for name in ([PEAK] if PEAK in set(group["name"]) else []) + names:
                rows = group[group["name"] == name]
                if rows.empty or rows[metric].isna().all():
                    continue
                label = f"{name} ({dtype})" if shared else name
                a.plot(rows["size"], rows[metric], label=label, **styles[name])
            a.set_xscale("log", base=2)
            if metric == "median_ms":
                a.set_yscale("log")
            a.set_xlabel("elements")
            a.set_title(", ".join(dtypes) if shared else dtype)
            a.grid(True, alpha=0.3)
        axes[0].set_ylabel(METRIC_LABELS[metric])
        axes[-1].legend(fontsize=8)
        if made:
            fig.suptitle(title or self.device_name)
            fig.tight_layout()
            plt.close(fig)
        elif title:
            fig.suptitle(title)
        return fig


_COLORS = ["C0", "C1", "C2", "C3", "C4", "C5", "C6", "C8", "C9"]
_LINES = ["-", "--", "-.", ":"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


def _style(i: int) -> dict[str, Any]:
    """The i-th entry's line: colour, line style and marker all change from one entry to the next."""
    return {"color": _COLORS[i % len(_COLORS)], "linestyle": _LINES[i % len(_LINES)],
            "marker": _MARKERS[i % len(_MARKERS)], "markersize": 5}


def fmt(value: Any) -> str:
    """Numbers in tables: four significant digits for floats, as they are otherwise."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's architecture and torch's thread count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def dtype_name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32: how every table names a dtype."""
    return str(dtype).removeprefix("torch.")


def bench(
    fns: Mapping[str, Callable[..., Any]],
    make_inputs: Callable[[int, torch.dtype, torch.device], tuple],
    *,
    sizes: Sequence[int],
    dtypes: Sequence[torch.dtype] = (torch.float32,),
    bytes_moved: Callable[[int, torch.dtype], int] | None = None,
    flops: Callable[[int, torch.dtype], int] | None = None,
    device: str | torch.device | None = None,
    eager: Callable[..., Any] | None = None,
    compiled: bool | str = False,
    peak: bool | None = None,
    interleave: bool | None = None,
    target_ms: float = 100.0,
    wall_ms: float | None = None,
    min_reps: int = 10,
    max_reps: int = 1000,
    progress: bool = True,
) -> BenchResult:
    """Time every function on ``make_inputs(size, dtype, device)`` for each size and dtype.

    ``eager=reference`` adds it as an entry named 'eager'; ``compiled=True`` adds 'torch.compile' (of
    ``eager``), compiled anew for each size and dtype (``dynamic=False``: what a user who times one shape
    gets), ``compiled="dynamic"`` compiled once for all of them (``dynamic=True``); its first calls, where it
    compiles, are reported in ``compile_seconds`` and not in the medians. The table has median/p20/p80 ms, GB/s
    and, on a GPU (``peak``), % of a copy of the same bytes timed in the same run (with ``bytes_moved``;
    on a CPU a copy is no ceiling for the CPU twins, so ``peak`` defaults to off there), GFLOP/s (with
    ``flops``) and ``vs <baseline>``: the baseline's median over each entry's (above 1: faster than it), where
    the baseline is 'eager' when given, else the first entry. Contenders are timed in rounds, one repetition of
    each per round, when there are several (``interleave``, default: True then), so that a drift of the
    machine falls on all alike; ``interleave=False`` times them one after another. Repetitions stop at
    ``target_ms`` of measured time or ``wall_ms`` of wall time per contender (default ``5 * target_ms``),
    whichever comes first, and never below ``min_reps``.
    """
    from tqdm.auto import tqdm

    device = torch.device(device) if device is not None else default_device()
    entries = _entries(fns, eager, compiled)
    peak = device.type == "cuda" if peak is None else peak
    if interleave is None:
        interleave = len(entries) + bool(peak and bytes_moved) > 1
    if any(s < 0 for s in sizes):
        raise ValueError(f"sizes must be non-negative, got {list(sizes)}")
    timer = _Timer(device, target_ms, min_reps, max_reps, 5 * target_ms if wall_ms is None else wall_ms)
    rows, compile_s = [], dict.fromkeys(["torch.compile"] if compiled else [], 0.0)
    with_peak = bool(peak and bytes_moved)
    steps = len(sizes) * len(dtypes) * (1 if interleave else len(entries) + with_peak)
    # delay: the bar appears only for sweeps that last more than a couple of seconds.
    with tqdm(total=steps, desc="bench", delay=2.0, disable=not progress, leave=False) as bar, \
            _graphs_for(len(sizes) * len(dtypes) if compiled and compiled != "dynamic" else 0):
        for dtype in dtypes:
            dname = dtype_name(dtype)
            for size in sizes:
                inputs = tuple(make_inputs(size, dtype, device))
                nbytes = bytes_moved(size, dtype) if bytes_moved else None
                nflops = flops(size, dtype) if flops else None
                if compiled and compiled != "dynamic":  # a fresh compilation for this shape and dtype
                    entries["torch.compile"] = torch.compile(eager, dynamic=False)
                contenders = {name: (lambda fn=fn, inputs=inputs: fn(*inputs)) for name, fn in entries.items()}
                copy_bytes = 0
                if with_peak and nbytes:
                    copy, copy_bytes = _copy(nbytes, device)
                    contenders = {PEAK: copy, **contenders}
                timings = _time_shape(timer, contenders, interleave, bar, f"{dname} {size}")
                peak_gbs = None
                if PEAK in timings:
                    peak_gbs = copy_bytes / (timings[PEAK].median_ms * 1e-3) / 1e9
                    rows.append(_row(PEAK, device, size, dname, timings[PEAK], nbytes, None, peak_gbs))
                for name in entries:
                    if name in compile_s:
                        compile_s[name] += timings[name].first_ms / 1e3
                    rows.append(_row(name, device, size, dname, timings[name], nbytes, nflops, peak_gbs))
                del contenders  # the copy's buffers go before the next size's are made
    table = pd.DataFrame(rows)
    baseline = "eager" if eager is not None else next(iter(entries))
    _add_speedup_column(table, baseline)

    def rerun(names: list[str], size: int, dname: str) -> BenchResult:
        return bench({n: entries[n] for n in names}, make_inputs, sizes=[size], dtypes=[getattr(torch, dname)],
                     bytes_moved=bytes_moved, flops=flops, device=device, peak=peak, interleave=interleave,
                     target_ms=target_ms, wall_ms=wall_ms, min_reps=min_reps, max_reps=max_reps, progress=False)

    return BenchResult(table, device.type, device_name(device), compile_s, baseline, rerun)


def _entries(fns: Mapping[str, Callable[..., Any]], eager: Callable[..., Any] | None,
             compiled: bool | str) -> dict[str, Callable[..., Any]]:
    """The functions :func:`bench` times, by name: ``fns``, then 'eager' and 'torch.compile' where asked."""
    entries = dict(fns)
    if eager is not None:
        entries.setdefault("eager", eager)
    if compiled not in (False, True, "static", "dynamic"):
        raise ValueError(f"compiled={compiled!r}: True (or 'static': compiled for each shape) or 'dynamic'")
    if compiled:
        if eager is None:
            raise ValueError("compiled=True compiles the eager reference: pass eager=")
        entries["torch.compile"] = torch.compile(eager, dynamic=True) if compiled == "dynamic" else eager
    if not entries:
        raise ValueError("bench() needs at least one function")
    return entries


def _time_shape(timer: _Timer, contenders: Mapping[str, Callable[[], Any]], interleave: bool, bar: Any,
                shape: str) -> dict[str, Timing]:
    """Each contender's timing on one shape: in rounds (``interleave``) or one after another."""
    if interleave:
        bar.set_postfix_str(f"{shape} in rounds")
        timings = timer.time_rounds(contenders)
        bar.update()
        return timings
    timings = {}
    for name, fn in contenders.items():
        bar.set_postfix_str(f"{name} {shape}")
        timings[name] = timer.time(fn)
        bar.update()
    return timings


def _add_speedup_column(table: pd.DataFrame, baseline: str) -> None:
    """``vs <baseline>``: the baseline's median over each row's, for the same size and dtype (the copy peak has
    none)."""
    base = table[table["name"] == baseline].set_index(["size", "dtype"])["median_ms"]
    column = f"vs {baseline}"
    table[column] = [base.get((s, d), np.nan) / m if m > 0 else np.nan
                     for s, d, m in zip(table["size"], table["dtype"], table["median_ms"], strict=True)]
    table.loc[table["name"] == PEAK, column] = np.nan


def _graphs_for(shapes: int) -> Any:
    """Room for a compiled graph per timed shape: dynamo keeps at most ``recompile_limit`` (8) graphs of a
    function, and past that runs it uncompiled, which a table would show under the torch.compile name."""
    if not shapes:
        return contextlib.nullcontext()
    return torch_compat.room_for_compiled_graphs(shapes + 8)


def _copy(nbytes: int, device: torch.device) -> tuple[Callable[[], Any], int]:
    """The copy peak's contender for a kernel that moves ``nbytes``, and the bytes the copy moves."""
    half = max(nbytes // 2, 1)
    # float32 elements when the byte count allows: the widest copy torch's kernels use
    src = (torch.randn(half // 4, device=device) if half % 4 == 0 else
           torch.randint(0, 255, (half,), dtype=torch.uint8, device=device))
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), 2 * src.numel() * src.element_size()


def _row(name, device, size, dname, t: Timing, nbytes, nflops, peak_gbs) -> dict:
    row: dict[str, Any] = {"name": name, "device": device.type, "size": size, "dtype": dname,
                           "median_ms": t.median_ms, "p20_ms": t.p20_ms, "p80_ms": t.p80_ms, "reps": t.reps}
    if nbytes is not None:
        row["GB/s"] = nbytes / (t.median_ms * 1e-3) / 1e9 if t.median_ms > 0 else np.nan
        if peak_gbs is not None:  # a copy was timed beside it
            row["% of peak"] = 100 * row["GB/s"] / peak_gbs if peak_gbs else np.nan
    if nflops is not None:
        row["GFLOP/s"] = nflops / (t.median_ms * 1e-3) / 1e9 if t.median_ms > 0 else np.nan
    return row
