"""The seed's "build method 2": every kernel built ahead of time into the package ``jitload_kernels``.

    pip install --no-build-isolation ./kernels      (torch must be importable while building)

``import jitload_kernels`` then registers ``torch.ops.jitload.*`` with no JIT compiler involved. CUDA
kernels are built when a CUDA toolkit is found (CUDA_HOME, or torch's guess if it holds cuda_runtime.h);
TORCH_CUDA_ARCH_LIST picks the GPU architectures, as for any torch extension.
"""

import ast
import os

from setuptools import setup
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
# Every folder with a spec.py is a kernel (as jitload.kernels.names() finds them; that module is not imported here).
KERNELS = sorted(e.name for e in os.scandir(HERE) if e.is_dir() and os.path.isfile(os.path.join(e.path, "spec.py")))
# A kernel with a Python side (an autograd.py whose register() jitload_kernels calls) ships it as a subpackage.
PYTHON_SIDES = [k for k in KERNELS if os.path.isfile(os.path.join(HERE, k, "autograd.py"))]


def spec_lists(kernel: str) -> dict[str, list[str]]:
    # SOURCES and CUDA_SOURCES read from spec.py without importing it (it imports jitload, a dev tool).
    tree = ast.parse(open(os.path.join(HERE, kernel, "spec.py")).read())
    return {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name) and t.id in ("SOURCES", "CUDA_SOURCES")}


def cuda_home() -> str | None:
    home = os.environ.get("CUDA_HOME") or cpp_extension.CUDA_HOME
    return home if home and os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")) else None


def extensions() -> list:
    with_cuda = cuda_home() is not None
    if with_cuda:
        os.environ["CUDA_HOME"] = cuda_home()
        cpp_extension.CUDA_HOME = cuda_home()  # torch read a misdetected one at import time
    else:
        print("jitload_kernels: no CUDA toolkit found (set CUDA_HOME): building the CPU kernels only")
    flags = ["-O3", "-DJITLOAD_WITH_CUDA"] if with_cuda else ["-O3"]
    # setuptools compiles with Python's own CFLAGS, which carry -g: a binding's debug info of torch's templates
    # costs 47 s instead of 27 s of g++ on 2 cores, and a 24 MB object instead of 0.8 MB (kernels/add/add.cpp).
    # -g0, after them on the command line, turns it off; jitload's own builds never had it.
    cxx_flags = [*flags, "-g0"]
    built = []
    for kernel in KERNELS:
        lists = spec_lists(kernel)
        sources = [f"{kernel}/{s}" for s in lists["SOURCES"] + (lists.get("CUDA_SOURCES", []) if with_cuda else [])]
        make = cpp_extension.CUDAExtension if with_cuda else cpp_extension.CppExtension
        built.append(make(f"jitload_kernels._{kernel}", sources, include_dirs=[os.path.join(HERE, "common"),
                                                                                 os.path.join(HERE, kernel)],
                          extra_compile_args={"cxx": cxx_flags, "nvcc": flags}))
    return built


setup(
    name="jitload-kernels",
    version="0.1.0",
    description="jitload's fused kernels as ahead-of-time built torch ops (torch.ops.jitload.*)",
    packages=["jitload_kernels", *(f"jitload_kernels.{k}" for k in PYTHON_SIDES)],
    package_dir={"jitload_kernels": "jitload_kernels", **{f"jitload_kernels.{k}": k for k in PYTHON_SIDES}},
    ext_modules=extensions(),
    cmdclass={"build_ext": cpp_extension.BuildExtension},
)
