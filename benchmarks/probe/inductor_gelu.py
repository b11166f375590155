"""Time torch.compile's gelu(x + bias) beside jitload's op in this process; save Inductor's Triton code for it.

torch.compile's float32 bias_gelu ran at 85% of the copy bandwidth in some H200 processes and 99-100% in others
(benchmarks/results/2026-12-03-h200-kernels/); running this a few times, each in a fresh process, pairs each
speed with the code that produced it. A guess to test, from reading Inductor's pointwise heuristic (torch 2.14's
torch/_inductor/heuristics/triton_codegen/pointwise.py): a 1-D pointwise kernel is autotuned between two configs,
XBLOCK=1024 with 4 warps (two 16-byte vectors a thread) and XBLOCK=512 with 8 warps (two elements a thread), so
a close benchmark can pick either in a given process; the saved .best_config says which one ran. Run 10 on the
H200 confirmed it: the 1024/4-warp candidate runs at 98-100% and the 512/8-warp one at 83-85%
(benchmarks/results/2026-12-03-h200-kernels/run10-inductor/). On CPU Inductor writes C++ and nothing is saved.

    python benchmarks/probe/inductor_gelu.py --out DIR [--dtype float32] [--size 67108864] [--device cuda]
"""

import argparse
import glob
import os
import shutil
import tempfile

import torch

import jitload
from jitload import kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--size", type=int, default=2**26)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # a fresh cache: this process compiles, and its code is findable
    kernel = kernels.get("bias_gelu")
    # the same inputs, bytes and torch.compile entry as `jitload bench bias_gelu --compiled`
    kernel.build()
    result = jitload.bench({"jitload": torch.ops.jitload.bias_gelu}, kernel.spec.make_inputs, sizes=[args.size],
                           dtypes=[getattr(torch, args.dtype)],
                           bytes_moved=kernel.spec.bytes_moved, device=args.device, eager=kernel.reference,
                           compiled=True, progress=False)
    os.makedirs(args.out, exist_ok=True)
    tag = str(os.getpid())
    files = glob.glob(os.path.join(cache, "**", "*"), recursive=True)
    generated = [p for p in files if p.endswith(".py") and "triton_" in open(p).read()]
    # .best_config: the launch configuration Triton's autotuner chose in this process, if it had several
    chosen = [p for p in files if p.endswith(".best_config")]
    for i, path in enumerate(generated + chosen):
        shutil.copy(path, os.path.join(args.out, f"inductor-{tag}-{i}{os.path.splitext(path)[1]}"))
    for path in chosen:
        print(f"{os.path.basename(path)}: {open(path).read()}")
    print(f"process {tag}: {len(generated)} generated file(s), {len(chosen)} autotune choice(s) saved as "
          f"inductor-{tag}-*\n{result.to_markdown()}")


if __name__ == "__main__":
    main()
