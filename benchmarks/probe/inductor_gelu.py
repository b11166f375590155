"""Time torch.compile's gelu(x + bias) in this process and save the Triton code Inductor generated for it.

torch.compile's float32 bias_gelu ran at 85% of the copy bandwidth in some H200 processes and 99-100% in others
(benchmarks/results/2026-12-03-h200-kernels/); running this a few times, each in a fresh process, pairs each
speed with the code that produced it. Written 2026-12-03 after the session's GPU time ran out: run on CPU only
(where Inductor writes C++, so nothing is saved), not yet on a GPU.

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
    result = jitload.bench({}, kernel.spec.make_inputs, sizes=[args.size], dtypes=[getattr(torch, args.dtype)],
                           bytes_moved=kernel.spec.bytes_moved, device=args.device, eager=kernel.reference,
                           compiled=True, progress=False)
    os.makedirs(args.out, exist_ok=True)
    tag = str(os.getpid())
    generated = [p for p in glob.glob(os.path.join(cache, "**", "*.py"), recursive=True) if "triton_" in open(p).read()]
    for i, path in enumerate(generated):
        shutil.copy(path, os.path.join(args.out, f"inductor-{tag}-{i}.py"))
    print(f"process {tag}: {len(generated)} generated file(s) saved as inductor-{tag}-*.py\n{result.to_markdown()}")


if __name__ == "__main__":
    main()
