"""The shim linked into every CUDA extension jitload builds, so that its kernels can be swapped later.

``swap_shim.cpp`` is compiled once per toolchain under the cache root and linked with ``-Wl,--wrap=`` on the
CUDA runtime entry points in :data:`WRAPPED` (its header says why each). The build only links it; what it does
in a loaded library is :mod:`jitload.builder.swap`'s. It lives apart from the swap so that the build, which is below
the swap, needs nothing of it but these link flags.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import threading

from . import toolchain, trust

SHIM_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "swap_shim.cpp")
WRAPPED = (
    "__cudaRegisterFunction", "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz",
    "cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz",
    "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_ptsz",
    "cudaFuncGetAttributes", "cudaFuncSetAttribute",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaOccupancyAvailableDynamicSMemPerBlock",
)
_shim_lock = threading.Lock()


def shim_object() -> str:
    """The compiled shim for this toolchain, built once under the cache root (about a second)."""
    cuda_home = toolchain.find_cuda_home()
    if not cuda_home:
        raise RuntimeError("cannot compile jitload's kernel-swap shim: no CUDA toolkit found")
    with open(SHIM_SOURCE, "rb") as f:
        source = f.read()
    cxx = toolchain.host_compiler()
    digest = hashlib.blake2b(source + f"\0{cxx}\0{cuda_home}".encode(), digest_size=8).hexdigest()
    directory = trust.private_dir(os.path.join(toolchain.cache_root(), "_swap_shim"))
    obj = os.path.join(directory, f"swap_shim_{digest}.o")
    with _shim_lock:
        if not os.path.exists(obj):
            tmp = f"{obj}.{os.getpid()}.tmp"
            cmd = [*shlex.split(cxx), "-O2", "-fPIC", "-fvisibility=hidden", "-std=c++17",
                   f"-I{os.path.join(cuda_home, 'include')}", "-c", SHIM_SOURCE, "-o", tmp]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"cannot compile jitload's kernel-swap shim:\n{' '.join(cmd)}\n{done.stderr}")
            os.replace(tmp, obj)  # processes building at once agree on one file
    return obj


def link_flags() -> list[str]:
    """What the link line of a CUDA extension gets so that its kernels can be swapped."""
    return [shim_object(), *(f"-Wl,--wrap={symbol}" for symbol in WRAPPED)]
