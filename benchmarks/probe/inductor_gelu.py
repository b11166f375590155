"""Time torch.compile's gelu(x + bias) in this process and save the Triton code Inductor generated for it.

torch.compile's float32 bias_gelu ran at 85% of the copy bandwidth in some H200 processes and 99-100% in others
(benchmarks/results/2026-12-03-h200-kernels/); running this a few times, each in a fresh process, pairs each
speed with the code that produced it. Written 2026-12-03 after the session's GPU time ran out: not yet run.

    python benchmarks/probe/inductor_gelu.py --out DIR [--dtype float32] [--size 67108864]
"""

import argparse
import glob
import os
import shutil
import tempfile

import torch
import torch.nn.functional as F

from jitload.kernels import row_shape


def median_ms(fn, *args, reps: int = 200) -> float:
    for _ in range(10):
        fn(*args)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--size", type=int, default=2**26)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # a fresh cache: this process compiles, and its code is findable
    dtype = getattr(torch, args.dtype)
    rows, width = row_shape(args.size, 4096)
    x = torch.randn(rows, width, dtype=dtype, device="cuda")
    b = torch.randn(width, dtype=dtype, device="cuda")
    y = torch.empty_like(x)
    compiled = torch.compile(lambda x, b: F.gelu(x + b))
    copy_ms = median_ms(y.copy_, x)
    ms = median_ms(compiled, x, b)
    os.makedirs(args.out, exist_ok=True)
    tag = f"{os.getpid()}"
    kernels = [p for p in glob.glob(os.path.join(cache, "**", "*.py"), recursive=True) if "triton_" in open(p).read()]
    for i, path in enumerate(kernels):
        shutil.copy(path, os.path.join(args.out, f"inductor-{tag}-{i}.py"))
    print(f"process {tag}: torch.compile {ms:.4f} ms, copy {copy_ms:.4f} ms, {100 * copy_ms / ms:.1f}% of the copy; "
          f"{len(kernels)} generated file(s) saved as inductor-{tag}-*.py")


if __name__ == "__main__":
    main()
