"""Where the toolchain is and what identifies a build: CUDA_HOME, arch flags, versions, the cache root.

Everything here is read-only with respect to the process environment (no ``os.environ`` writes): the one
adjustment jitload makes is to torch's *module-level* ``CUDA_HOME`` guess, and only when that guess points at
a directory with no CUDA headers (see :func:`ensure_torch_cuda_home`).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys

import torch

from .. import settings

# The arch used when nothing says otherwise and no GPU is visible (a CPU-only laptop, or CI compiling for GPUs
# it does not have): sm_90 (Hopper), the architecture the kernels are tuned for and the SASS checks
# of the kernel tests read. torch's own arch detection indexes an empty list and fails in that case.
DEFAULT_ARCH = "9.0"


def _has_cuda_headers(path: str | None) -> bool:
    return bool(path) and os.path.isfile(os.path.join(path, "include", "cuda_runtime.h"))


@functools.lru_cache(maxsize=1)
def find_cuda_home() -> str | None:
    """Return the CUDA toolkit root, or None when there is no nvcc.

    Order: $CUDA_HOME / $CUDA_PATH if they hold CUDA headers; the real location of the ``nvcc`` on PATH
    (following symlinks, and ``exec`` wrappers such as /usr/local/bin/nvcc -> /usr/local/cuda-13.0/bin/nvcc);
    /usr/local/cuda; the newest /usr/local/cuda-*. torch stops at ``dirname(dirname(which nvcc))``, which is
    /usr/local for a wrapper in /usr/local/bin, and then fails with ``cuda_runtime.h: No such file``.
    """
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = settings.get(var)
        if _has_cuda_headers(home):
            return home
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        real = os.path.realpath(nvcc)
        candidates.append(os.path.dirname(os.path.dirname(real)))
        target = _exec_wrapper_target(real)
        if target:
            candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(target))))
    candidates.append("/usr/local/cuda")
    candidates.extend(sorted(glob.glob("/usr/local/cuda-*"), reverse=True))
    for candidate in candidates:
        if _has_cuda_headers(candidate) and os.path.isfile(os.path.join(candidate, "bin", "nvcc")):
            return candidate
    return None


def _exec_wrapper_target(path: str) -> str | None:
    """The program a small shell wrapper ``exec``s, if ``path`` is such a wrapper."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    for line in head.decode(errors="replace").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "exec" and words[1].endswith("nvcc"):
            return words[1]
    return None


class _DropCudaHomeGuess(logging.Filter):
    # torch logs "No CUDA runtime is found, using CUDA_HOME='/usr/local'" when it is imported on a machine
    # without a GPU; where jitload found a real toolkit that guess is not what builds will use.
    def filter(self, record: logging.LogRecord) -> bool:
        return not (find_cuda_home() and "No CUDA runtime is found" in record.getMessage())


def cpp_extension():
    """``torch.utils.cpp_extension``, imported without its misleading CUDA_HOME warning."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    if not any(isinstance(f, _DropCudaHomeGuess) for f in logger.filters):
        logger.addFilter(_DropCudaHomeGuess())
    from torch.utils import cpp_extension as module

    return module


def ensure_torch_cuda_home() -> str | None:
    """Point torch's cpp_extension at the CUDA toolkit jitload found, if torch's own guess is unusable.

    torch reads its module-level ``CUDA_HOME`` when it writes include paths, ldflags and the nvcc path into
    the ninja file; patching that attribute (not the environment) fixes every later build in this process.
    """
    ce = cpp_extension()
    found = find_cuda_home()
    if found and not _has_cuda_headers(ce.CUDA_HOME):
        ce.CUDA_HOME = found
    return ce.CUDA_HOME if _has_cuda_headers(ce.CUDA_HOME) else None


@functools.lru_cache(maxsize=4)
def nvcc_version(cuda_home: str | None) -> str | None:
    """``nvcc --version``'s release number (e.g. '13.0'), or None."""
    if not cuda_home:
        return None
    try:
        out = subprocess.run(
            [os.path.join(cuda_home, "bin", "nvcc"), "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


def cuda_major_problem() -> str | None:
    """Why this torch cannot build CUDA sources with the toolkit found (its nvcc is another CUDA major than the
    one torch was built with), or None: they match, or there is no toolkit or no CUDA torch to compare.

    torch 2.8 only warns about the mismatch, then links a CUDA 12 extension against CUDA 13 headers' code (or the
    other way round); jitload refuses it up front, as `jitload doctor` reports it.
    """
    home = find_cuda_home()
    if not home or not torch.version.cuda:
        return None
    try:
        stamp = os.stat(os.path.join(home, "bin", "nvcc")).st_mtime_ns
    except OSError:
        return None
    release = _nvcc_release(home, stamp)
    if release is None or release.split(".")[0] == torch.version.cuda.split(".")[0]:
        return None
    return (f"nvcc {release} ({home}) is CUDA {release.split('.')[0]}, but torch {torch.__version__} was built "
            f"with CUDA {torch.version.cuda}: CUDA sources need a toolkit of CUDA {torch.version.cuda.split('.')[0]} "
            "(set CUDA_HOME to one before Python starts) or a torch of nvcc's CUDA major (`jitload doctor` says which)")


@functools.lru_cache(maxsize=8)
def _nvcc_release(home: str, stamp: int) -> str | None:
    return nvcc_version.__wrapped__(home)  # one `nvcc --version` per toolkit and nvcc file (its mtime)


def library_include_dirs(cuda_home: str | None) -> list[str]:
    """Include dirs of the CUDA library wheels torch depends on, when the toolkit lacks those headers.

    A minimal toolkit (nvcc and the runtime only) has no cusparse.h or cublas_v2.h, which
    ``ATen/cuda/CUDAContext.h`` includes; torch's pip wheels ship them under site-packages/nvidia/*/include.
    """
    if not cuda_home or os.path.isfile(os.path.join(cuda_home, "include", "cusparse.h")):
        return []
    site = os.path.dirname(os.path.dirname(torch.__file__))
    return sorted(d for d in glob.glob(os.path.join(site, "nvidia", "*", "include"))
                  if os.path.isfile(os.path.join(d, "cusparse.h")))


def arch_named() -> bool:
    """Whether TORCH_CUDA_ARCH_LIST or a visible GPU names the architectures torch's own arch flags are for."""
    return bool(settings.get("TORCH_CUDA_ARCH_LIST")) or (torch.cuda.is_available() and torch.cuda.device_count() > 0)


def fallback_arch() -> str | None:
    """:data:`DEFAULT_ARCH` where neither TORCH_CUDA_ARCH_LIST nor a visible GPU names an arch, else None: what
    torch 2.8, which reads arch flags from nothing else (not the user's flags), is given for its call."""
    return None if arch_named() else DEFAULT_ARCH


def default_arch_flags(extra_cuda_cflags: list[str]) -> list[str]:
    """nvcc arch flags to add when neither the user, TORCH_CUDA_ARCH_LIST nor a visible GPU names one."""
    if arch_named() or any("arch" in f for f in extra_cuda_cflags):
        return []
    num = DEFAULT_ARCH.replace(".", "")
    return [f"-gencode=arch=compute_{num},code=sm_{num}"]


def effective_arch_list() -> str:
    """The arch list a CUDA build will use, in words (for doctor and the build log)."""
    env = settings.get("TORCH_CUDA_ARCH_LIST")
    if env:
        return f"{env} (TORCH_CUDA_ARCH_LIST)"
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        caps = sorted({".".join(map(str, torch.cuda.get_device_capability(i)))
                       for i in range(torch.cuda.device_count())})
        return f"{';'.join(caps)} (visible GPUs)"
    return f"{DEFAULT_ARCH} (jitload default: no GPU visible, TORCH_CUDA_ARCH_LIST unset)"


def host_compiler() -> str:
    """The C++ compiler torch's builds use: $CXX, else c++."""
    return settings.get("CXX") or "c++"


def default_device() -> torch.device:
    """Where checks and timings run when the caller names no device: the GPU if there is one."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def version_tag() -> str:
    """Python, torch and CUDA versions as a folder name: builds for different ones never share objects."""
    py = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
    cuda = f"cu{torch.version.cuda.replace('.', '')}" if torch.version.cuda else "cpu"
    return f"{py}_torch{torch.__version__.split('+')[0]}_{cuda}"


def cache_base() -> str:
    """$TORCH_EXTENSIONS_DIR (as torch) or ~/.cache/torch_extensions: what jitload's cache lives under."""
    return settings.get("TORCH_EXTENSIONS_DIR") or os.path.join(
        settings.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "torch_extensions"
    )


def cache_root() -> str:
    """The jitload build cache: :func:`cache_base`, then jitload/ and the versions (see
    :mod:`jitload.builder.trust`)."""
    return os.path.join(cache_base(), "jitload", version_tag())


def environment_fingerprint() -> str:
    """What outside the sources and flags changes a binary: compilers, CUDA_HOME, arch list, versions."""
    parts = [
        torch.__version__,
        str(torch.version.cuda),
        sys.version,
        settings.get("CXX") or "",
        settings.get("CC") or "",
        settings.get("TORCH_CUDA_ARCH_LIST") or "",
        str(find_cuda_home()),
        settings.get("CUDA_HOME") or "",
    ]
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()


@functools.lru_cache(maxsize=1)
def cuobjdump() -> str:
    """The cuobjdump to use: the toolkit's, else one on PATH, else the copy Triton's wheel ships.

    A pip-installed torch brings Triton, and Triton carries cuobjdump and nvdisasm for its own use, so even a
    machine whose toolkit is only nvcc (this project's CI) can read the objects.
    """
    cuda_home = find_cuda_home()
    candidates = [os.path.join(cuda_home, "bin", "cuobjdump")] if cuda_home else []
    candidates.append(shutil.which("cuobjdump") or "")
    try:
        import triton

        candidates.append(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"))
    except ImportError:
        pass
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError("cuobjdump not found: install the CUDA toolkit's cuobjdump (or Triton, which carries one)")
