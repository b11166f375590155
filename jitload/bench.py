"""jitload.bench: time functions on the same inputs and report milliseconds and GB/s.

GPU timing uses CUDA events around each call after a warm-up, on the current stream, with a
``torch.cuda.synchronize()`` before reading them; CPU timing uses ``time.perf_counter``. This is the first,
simple timer; the harness issue adds L2 flushing, quantiles, the copy-bandwidth peak and plots.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import torch


def _time_ms(fn: Callable[[], object], device: torch.device, reps: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench(
    fns: Mapping[str, Callable[..., object]],
    make_inputs: Callable[[int, torch.dtype, torch.device], tuple],
    *,
    sizes: Sequence[int],
    dtypes: Sequence[torch.dtype] = (torch.float32,),
    bytes_moved: Callable[[int, torch.dtype], int] | None = None,
    device: str | torch.device | None = None,
    reps: int = 20,
    warmup: int = 3,
) -> pd.DataFrame:
    """One row per function, size and dtype: median ms, GB/s (if ``bytes_moved``), speedup vs the first."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = []
    for dtype in dtypes:
        for size in sizes:
            inputs = make_inputs(size, dtype, device)
            first = None
            for name, fn in fns.items():
                ms = _time_ms(lambda fn=fn, inputs=inputs: fn(*inputs), device, reps, warmup)
                first = first if first is not None else ms
                row = {"name": name, "device": device.type, "size": size, "dtype": str(dtype).replace("torch.", ""),
                       "median_ms": ms, "speedup": first / ms}
                if bytes_moved is not None:
                    row["GB/s"] = bytes_moved(size, dtype) / (ms * 1e-3) / 1e9
                rows.append(row)
    return pd.DataFrame(rows)
