"""``jitload doctor``: what this machine builds with, and each problem with its fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

import torch

from . import build, toolchain


@dataclass(frozen=True)
class Problem:
    severity: str  # "error": builds will fail; "warning": some things will not work
    what: str
    fix: str


def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def diagnose() -> tuple[list[tuple[str, str]], list[Problem]]:
    """Facts as (label, value) rows, and the problems found."""
    torch_guess = toolchain.cpp_extension().CUDA_HOME
    cuda_home = toolchain.find_cuda_home()
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else shutil.which("nvcc")
    nvcc_ver = toolchain.nvcc_version(cuda_home)
    cxx = os.environ.get("CXX", "c++")
    try:
        ninja = build.ninja_binary()
    except RuntimeError:
        ninja = None
    gpus = [f"cuda:{i} {torch.cuda.get_device_name(i)} (sm {'.'.join(map(str, torch.cuda.get_device_capability(i)))})"
            for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    facts = [
        ("torch", torch.__version__),
        ("torch CUDA", str(torch.version.cuda)),
        ("nvcc", f"{nvcc} (release {nvcc_ver})" if nvcc and nvcc_ver else "not found"),
        ("CUDA_HOME", f"{cuda_home}" + ("" if torch_guess == cuda_home else f" (torch alone guesses {torch_guess})")),
        ("C++ compiler", f"{cxx}: {_first_line([cxx, '--version']) or 'not found'}"),
        ("ninja", f"{ninja} {_first_line([ninja, '--version'])}" if ninja else "not found"),
        ("GPUs", "; ".join(gpus) or "none visible"),
        ("arch list", toolchain.effective_arch_list()),
        ("cache", toolchain.cache_root()),
    ]
    problems = []
    if not _first_line([cxx, "--version"]):
        problems.append(Problem("error", f"no C++ compiler ({cxx})", "install g++ (apt-get install g++) or set CXX"))
    if ninja is None:
        problems.append(Problem("error", "ninja not found", "pip install ninja"))
    if cuda_home is None:
        problems.append(Problem("warning", "no CUDA toolkit (nvcc) found: CUDA sources cannot be compiled",
                                "install the CUDA toolkit matching torch's CUDA, or set CUDA_HOME"))
    elif torch_guess != cuda_home:
        problems.append(Problem("warning", f"torch guesses CUDA_HOME={torch_guess}, which has no cuda_runtime.h",
                                f"jitload uses {cuda_home}; for plain torch builds export CUDA_HOME={cuda_home}"))
    if nvcc_ver and torch.version.cuda and nvcc_ver.split(".")[0] != torch.version.cuda.split(".")[0]:
        problems.append(Problem("error", f"nvcc {nvcc_ver} but torch was built with CUDA {torch.version.cuda}",
                                f"install CUDA {torch.version.cuda.split('.')[0]}.x or a torch built for {nvcc_ver}"))
    if torch.version.cuda is None and cuda_home:
        problems.append(Problem("warning", "this torch is a CPU-only build: CUDA extensions cannot be built",
                                "install a CUDA build of torch (pip install torch==2.14.1 here)"))
    if not gpus:
        problems.append(Problem("warning", "no GPU visible: kernels compile, checks and timings use the CPU twins",
                                "run on a machine with an NVIDIA GPU and driver for CUDA results"))
    return facts, problems


def report() -> tuple[str, bool]:
    """The doctor's text and whether builds can work at all (no 'error' problems)."""
    facts, problems = diagnose()
    width = max(len(label) for label, _ in facts)
    lines = [f"{label:<{width}}  {value}" for label, value in facts]
    lines.append("")
    lines.extend(f"{p.severity.upper()}: {p.what}\n  fix: {p.fix}" for p in problems)
    if not problems:
        lines.append("no problems found")
    return "\n".join(lines), not any(p.severity == "error" for p in problems)
