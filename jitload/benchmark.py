"""``jitload.bench``: time functions on the same inputs, against the copy bandwidth measured in the same run.

Timing discipline. GPU: every repetition is bracketed by a pair of CUDA events recorded on the current
stream, with a 256 MB buffer zeroed before each (outside the events) so no repetition finds its inputs in
the 60 MB L2; after the loop one ``torch.cuda.synchronize()`` and the events are read. A warm-up (also the
first call, where a ``torch.compile`` entry compiles) is run and timed separately, and the repetition count
is chosen from it so that each measurement lasts about ``target_ms``. CPU: the same loop with
``time.perf_counter`` around each call (a CPU call returns when it is done) and a 64 MB buffer zeroed
between calls. The peak is a ``copy_`` of ``bytes_moved / 2`` bytes (read + write = ``bytes_moved``), timed
the same way on the same device. This is written by hand rather than with ``triton.testing.do_bench``
because the copy peak must share its exact loop, and because it must also run on a CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from .toolchain import default_device

FLUSH_BYTES = {"cuda": 256 * 2**20, "cpu": 64 * 2**20}
PEAK = "copy (peak)"


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    first_ms: float


class _Timer:
    def __init__(self, device: torch.device, target_ms: float, min_reps: int, max_reps: int) -> None:
        self.device = device
        self.target_ms, self.min_reps, self.max_reps = target_ms, min_reps, max_reps
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

    def time(self, fn: Callable[[], Any]) -> Timing:
        first = self._once(fn)  # compiles a torch.compile entry, loads code, warms caches
        estimate = min(self._once(fn) for _ in range(2))
        reps = int(np.clip(self.target_ms / max(estimate, 1e-3), self.min_reps, self.max_reps))
        times = []
        if self.device.type == "cuda":
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(reps)]
            for start, end in events:
                self.flush.zero_()
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize(self.device)
            times = [s.elapsed_time(e) for s, e in events]
        else:
            for _ in range(reps):
                self.flush.zero_()
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        p20, p50, p80 = np.quantile(times, [0.2, 0.5, 0.8])
        return Timing(float(p50), float(p20), float(p80), reps, first)


@dataclass
class BenchResult:
    """Timings as a DataFrame (``.table``), with ``.plot()`` and ``.to_markdown()``."""

    table: pd.DataFrame
    device: str
    device_name: str
    compile_seconds: dict[str, float] = field(default_factory=dict)
    # (names, size, dtype name) -> BenchResult: the same measurement again, for widget()
    rerun: Callable[[list[str], int, str], BenchResult] | None = field(default=None, repr=False)

    def widget(self) -> Any:
        """A notebook panel: pick a size, a dtype and versions; it re-times them and redraws."""
        from .widgets import BenchPanel

        return BenchPanel(self)

    def __repr__(self) -> str:
        extra = "".join(f"\n{name}: first calls (compilation) took {s:.1f} s in all, not in the medians"
                        for name, s in self.compile_seconds.items())
        return f"BenchResult on {self.device_name}\n{self.table.to_string(index=False, float_format=fmt)}{extra}"

    def _repr_html_(self) -> str:
        return f"<b>BenchResult on {self.device_name}</b>" + self.table.to_html(index=False, float_format=fmt)

    def to_markdown(self) -> str:
        shown = self.table.copy()
        for col in shown.columns:
            if shown[col].dtype.kind == "f":
                shown[col] = shown[col].map(fmt)
        header = "| " + " | ".join(shown.columns) + " |"
        rule = "| " + " | ".join("---" for _ in shown.columns) + " |"
        body = ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
        return "\n".join([header, rule, *body])

    def plot(self, ax: Any = None) -> Any:
        """GB/s against size (log x) per entry and dtype, the measured copy peak as a dashed line; or median
        ms (log-log) when no ``bytes_moved`` was given. Returns the matplotlib Figure."""
        import matplotlib.pyplot as plt

        fig = ax.figure if ax is not None else plt.figure(figsize=(7, 4.2))
        ax = ax or fig.add_subplot()
        metric = "GB/s" if "GB/s" in self.table else "median_ms"
        styles = ["-", "--", ":", "-."]
        for (name, dtype), group in self.table.groupby(["name", "dtype"], sort=False):
            is_peak = name == PEAK
            dstyle = styles[sorted(self.table["dtype"].unique()).index(dtype) % len(styles)]
            ax.plot(group["size"], group[metric], marker="" if is_peak else "o",
                    linestyle="--" if is_peak else dstyle, color="black" if is_peak else None,
                    label=f"{name} ({dtype})")
        ax.set_xscale("log", base=2)
        if metric == "median_ms":
            ax.set_yscale("log")
        ax.set_xlabel("elements")
        ax.set_ylabel("GB/s (bytes read + written / median time)" if metric == "GB/s" else "median ms")
        ax.set_title(f"{self.device_name}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig


def fmt(value: Any) -> str:
    """Numbers in tables: four significant digits for floats, as they are otherwise."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's architecture and torch's thread count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


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
    compiled: bool = False,
    peak: bool = True,
    target_ms: float = 100.0,
    min_reps: int = 10,
    max_reps: int = 1000,
    progress: bool = True,
) -> BenchResult:
    """Time every function on ``make_inputs(size, dtype, device)`` for each size and dtype.

    ``eager=reference`` adds it as an entry named 'eager'; ``compiled=True`` adds 'torch.compile' (of
    ``eager``), whose first calls, where it compiles, are reported in ``compile_seconds`` and not in the
    medians. The table has median/p20/p80 ms, GB/s and % of the copy peak (with ``bytes_moved``), GFLOP/s
    (with ``flops``) and the speedup of each entry's median over the first entry's.
    """
    from tqdm.auto import tqdm

    device = torch.device(device) if device is not None else default_device()
    entries = dict(fns)
    if eager is not None:
        entries.setdefault("eager", eager)
    if compiled:
        if eager is None:
            raise ValueError("compiled=True compiles the eager reference: pass eager=")
        entries["torch.compile"] = torch.compile(eager)
    if not entries:
        raise ValueError("bench() needs at least one function")
    if any(s < 0 for s in sizes):
        raise ValueError(f"sizes must be non-negative, got {list(sizes)}")
    timer = _Timer(device, target_ms, min_reps, max_reps)
    rows, compile_s = [], dict.fromkeys(["torch.compile"] if compiled else [], 0.0)
    steps = len(sizes) * len(dtypes) * (len(entries) + (1 if peak and bytes_moved else 0))
    # delay: the bar appears only for sweeps that last more than a couple of seconds.
    with tqdm(total=steps, desc="bench", delay=2.0, disable=not progress, leave=False) as bar:
        for dtype in dtypes:
            dname = str(dtype).removeprefix("torch.")
            for size in sizes:
                inputs = tuple(make_inputs(size, dtype, device))
                nbytes = bytes_moved(size, dtype) if bytes_moved else None
                peak_gbs = None
                if peak and nbytes:
                    half = max(nbytes // 2, 1)
                    # float32 elements when the byte count allows: the widest copy torch's kernels use
                    src = (torch.randn(half // 4, device=device) if half % 4 == 0 else
                           torch.randint(0, 255, (half,), dtype=torch.uint8, device=device))
                    dst = torch.empty_like(src)
                    t = timer.time(lambda src=src, dst=dst: dst.copy_(src))
                    peak_gbs = 2 * src.numel() * src.element_size() / (t.median_ms * 1e-3) / 1e9
                    rows.append(_row(PEAK, device, size, dname, t, nbytes, None, peak_gbs))
                    del src, dst
                    bar.update()
                for name, fn in entries.items():
                    bar.set_postfix_str(f"{name} {dname} {size}")
                    t = timer.time(lambda fn=fn, inputs=inputs: fn(*inputs))
                    if name in compile_s:
                        compile_s[name] += t.first_ms / 1e3
                    rows.append(_row(name, device, size, dname, t, nbytes, flops(size, dtype) if flops else None,
                                     peak_gbs))
                    bar.update()
    table = pd.DataFrame(rows)
    first = next(iter(entries))
    base = table[table["name"] == first].set_index(["size", "dtype"])["median_ms"]
    table["speedup"] = [base.get((s, d), np.nan) / m for s, d, m in zip(table["size"], table["dtype"],
                                                                          table["median_ms"], strict=True)]
    table.loc[table["name"] == PEAK, "speedup"] = np.nan
    def rerun(names: list[str], size: int, dtype_name: str) -> BenchResult:
        return bench({n: entries[n] for n in names}, make_inputs, sizes=[size], dtypes=[getattr(torch, dtype_name)],
                     bytes_moved=bytes_moved, flops=flops, device=device, peak=peak, target_ms=target_ms,
                     min_reps=min_reps, max_reps=max_reps, progress=False)

    return BenchResult(table, device.type, device_name(device), compile_s, rerun)


def _row(name, device, size, dname, t: Timing, nbytes, nflops, peak_gbs) -> dict:
    row: dict[str, Any] = {"name": name, "device": device.type, "size": size, "dtype": dname,
                           "median_ms": t.median_ms, "p20_ms": t.p20_ms, "p80_ms": t.p80_ms, "reps": t.reps}
    if nbytes is not None:
        row["GB/s"] = nbytes / (t.median_ms * 1e-3) / 1e9 if t.median_ms > 0 else np.nan
        row["% of peak"] = 100 * row["GB/s"] / peak_gbs if peak_gbs else np.nan
    if nflops is not None:
        row["GFLOP/s"] = nflops / (t.median_ms * 1e-3) / 1e9 if t.median_ms > 0 else np.nan
    return row
