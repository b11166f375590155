"""Does a TORCH_CHECK failure in kernels/add raise RuntimeError, or crash the process?

    python benchmarks/probe/add_exc.py torch|jitload BUILD_DIR

Written for the H200 image, whose default CXX builds extensions that segfault while formatting such an error
(see benchmarks/results/2026-12-02-h200/README.md); run it with each loader and each compiler to compare.
"""

import os
import sys

import torch

which, build_dir = sys.argv[1], sys.argv[2]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "add")
sources = [os.path.abspath(os.path.join(root, f)) for f in ("add.cpp", "add_cpu.cpp", "add_kernel.cu")]
flags = ["-O3", "-DJITLOAD_WITH_CUDA"]
if which == "jitload":
    from jitload import load
else:
    from torch.utils.cpp_extension import load
os.makedirs(build_dir, exist_ok=True)
module = load(name=f"add_probe_{which}", sources=sources, extra_cflags=flags, extra_cuda_cflags=flags,
              build_directory=build_dir)
print(which, "built", flush=True)
try:
    module.add(torch.ones(3), torch.ones(4))
except RuntimeError as err:
    print(which, "RuntimeError:", str(err).splitlines()[0], flush=True)
