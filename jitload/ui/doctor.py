"""``jitload doctor``: what this machine builds with, and each problem with its fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch

from ..builder import build, compiler_probe, hostjit, toolchain, torch_compat, torch_select
from ..builder.compiler_probe import Outcome
from ..builder.errors import BuildError
from ..builder.extension import load


@dataclass(frozen=True)
class Problem:
    severity: str  # "error": builds will fail; "fail": a probe itself failed; "warning": some things will not work
    what: str
    fix: str


def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None

PROBE_SOURCE = r"""
#include <pybind11/pybind11.h>
#include <sstream>
#include <stdexcept>
void fail(long n) {
    std::ostringstream message;
    message << "size " << n << " is wrong";  // what TORCH_CHECK(x.size(0) == n, ...) does
    throw std::runtime_error(message.str());
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("fail", &fail); }
"""
CALLER = r"""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location(sys.argv[2], sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
try:
    module.fail(12345)
except RuntimeError as err:
    print("raised:", err)
"""
CANDIDATES = ("/usr/bin/g++", "/usr/bin/c++", "/usr/bin/clang++")


def _probe_once(cxx: str, directory: str) -> Outcome:
    source = os.path.join(directory, "probe.cpp")
    with open(source, "w") as f:
        f.write(PROBE_SOURCE)
    # torch's ninja file takes the compiler from the environment: set for the probe's build alone
    try:
        # The probe is of the compiler's own extensions: a full build, never the C++ interpreter's first result.
        with mock.patch.dict(os.environ, {"CXX": cxx, hostjit.ENV: "0"}):
            # A name of its own per compiler: this process may have imported another compiler's probe already.
            name = f"jitload_compiler_probe_{compiler_probe.identity(cxx) or 'unknown'}"
            ext = load(name, [source], build_directory=os.path.join(directory, "build"))
            library = getattr(getattr(ext, "module", ext), "__file__", None)
    except BuildError as err:
        return Outcome(cxx, False, f"could not build the probe: {str(err).splitlines()[0]}")
    if not library:
        return Outcome(cxx, False, "the probe was loaded without a library file to run in a new process")
    name = os.path.basename(library).split(".")[0]
    done = subprocess.run([sys.executable, "-c", CALLER, library, name], capture_output=True, text=True,
                          timeout=300)
    if done.returncode == 0 and "size 12345 is wrong" in done.stdout:
        return Outcome(cxx, True, "its extensions raise errors cleanly")
    if done.returncode < 0:
        return Outcome(cxx, False, f"an extension it built crashed the process (signal {-done.returncode}) "
                                   "formatting an error message")
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return Outcome(cxx, False, f"the probe extension it built failed (exit {done.returncode}: {last})")


def probe_compiler(cxx: str | None = None) -> Outcome:
    """Build and run the probe with ``cxx`` (default: $CXX or c++), once per compiler identity."""
    cxx = cxx or toolchain.host_compiler()
    known = compiler_probe.recorded(cxx)
    if known is not None:
        return known
    with tempfile.TemporaryDirectory(prefix="jitload-probe-") as directory:
        outcome = _probe_once(cxx, directory)
    compiler_probe.record(outcome)
    return outcome


def _working_alternative(broken: str) -> str | None:
    """A system compiler that passes the probe, to name in the fix."""
    broken_path = os.path.realpath(shutil.which(broken.split()[0]) or broken)
    for candidate in CANDIDATES:
        if os.path.exists(candidate) and os.path.realpath(candidate) != broken_path and probe_compiler(candidate).ok:
            return candidate
    return None


def _failed(what: str, err: BaseException) -> Problem:
    """A probe that raised: a FAIL line naming what it tried and the error, never a traceback."""
    message = str(err).strip().splitlines()[0] if str(err).strip() else "(no message)"
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return Problem("fail", f"{what} raised {type(err).__name__}{where}: {message}",
                   "the other checks above still ran; report this line with `jitload doctor`'s whole output")


def _guard(problems: list[Problem], what: str, read: Callable[[], Any], default: Any) -> Any:
    """``read()``, or ``default`` and a FAIL problem naming ``what`` where it raised."""
    try:
        return read()
    except Exception as err:  # a doctor reports every failure of a probe, whatever it is
        problems.append(_failed(what, err))
        return default


def diagnose() -> tuple[list[tuple[str, str]], list[Problem]]:
    """Facts as (label, value) rows, and the problems found. Every probe runs even where another fails."""
    problems: list[Problem] = []
    failed = "(its probe failed: see below)"
    torch_guess = _guard(problems, "reading torch's CUDA_HOME guess", lambda: toolchain.cpp_extension().CUDA_HOME,
                         None)
    cuda_home = _guard(problems, "finding the CUDA toolkit", toolchain.find_cuda_home, None)
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else shutil.which("nvcc")
    nvcc_ver = _guard(problems, f"reading nvcc's version ({nvcc})", lambda: toolchain.nvcc_version(cuda_home), None)
    cxx = toolchain.host_compiler()
    ninja = _guard(problems, "finding ninja", _ninja, None)
    gpus = _guard(problems, "listing the GPUs", _gpus, None)
    facts = [
        ("torch", f"{torch.__version__} ({_torch_origin(nvcc_ver)})"),
        ("torch CUDA", str(torch.version.cuda)),
        ("nvcc", f"{nvcc} (release {nvcc_ver})" if nvcc and nvcc_ver else "not found"),
        ("CUDA_HOME", f"{cuda_home}" + ("" if torch_guess == cuda_home else f" (torch alone guesses {torch_guess})")),
        ("C++ compiler", f"{cxx}: {_first_line([cxx, '--version']) or 'not found'}"),
        ("ninja", f"{ninja} {_first_line([ninja, '--version'])}" if ninja else "not found"),
        ("GPUs", failed if gpus is None else "; ".join(gpus) or "none visible"),
        ("arch list", _guard(problems, "choosing the CUDA arch list", toolchain.effective_arch_list, failed)),
        ("cache", _guard(problems, "finding the cache", toolchain.cache_root, failed)),
        ("host JIT", _guard(problems, "describing the host JIT", hostjit.describe, failed)),
        ("torch's build API", _guard(problems, "reading torch's private build API", _private_api, failed)),
    ]
    if not _first_line([cxx, "--version"]):
        problems.append(Problem("error", f"no C++ compiler ({cxx})", "install g++ (apt-get install g++) or set CXX"))
    elif ninja is not None:
        _guard(problems, f"the compiler probe (a pybind11 extension built with {cxx})",
               lambda: _check_compiler(cxx, facts, problems), None)
    if ninja is None:
        problems.append(Problem("error", "ninja not found", "pip install ninja"))
    problems.extend(_guard(problems, "checking the toolchain against torch",
                           lambda: _toolchain_problems(cuda_home, torch_guess, nvcc_ver, bool(gpus)), []))
    return facts, problems


def _ninja() -> str | None:
    try:
        return build.ninja_binary()
    except RuntimeError:  # not found: an ERROR line below, not a failed probe
        return None


def _gpus() -> list[str]:
    if not torch.cuda.is_available():
        return []
    return [f"cuda:{i} {torch.cuda.get_device_name(i)} (sm {'.'.join(map(str, torch.cuda.get_device_capability(i)))})"
            for i in range(torch.cuda.device_count())]


def _private_api() -> str:
    if torch_compat.ninja_writer_problem():
        return "a form jitload does not know (see below)"
    return f"a known form (jitload is tested with torch {', '.join(torch_compat.TESTED)})"


def _check_compiler(cxx: str, facts: list[tuple[str, str]], problems: list[Problem]) -> None:
    outcome = probe_compiler(cxx)
    facts.insert(5, ("compiler probe", outcome.detail))
    if not outcome.ok:
        other = _working_alternative(cxx)
        fix = (f"build with {other}: export CXX={other} CC={_c_compiler(other)}" if other else
               "set CXX (and CC) to a compiler whose extensions pass `jitload doctor`")
        problems.append(Problem("error", f"CXX={cxx}: {outcome.detail}", fix))


def _toolchain_problems(cuda_home: str | None, torch_guess: str | None, nvcc_ver: str | None,
                        gpus: bool) -> list[Problem]:
    problems = []
    if torch_compat.ninja_writer_problem():
        problems.append(Problem("warning", "torch's private ninja writer is a form jitload does not know: builds go "
                                "through torch's own load(), with no kernel swap or host JIT",
                                f"use a torch jitload is tested with ({', '.join(torch_compat.TESTED)})"))
    if cuda_home is None:
        problems.append(Problem("warning", "no CUDA toolkit (nvcc) found: CUDA sources cannot be compiled",
                                "install the CUDA toolkit matching torch's CUDA, or set CUDA_HOME"))
    elif torch_guess != cuda_home:
        problems.append(Problem("warning", f"torch guesses CUDA_HOME={torch_guess}, which has no cuda_runtime.h",
                                f"jitload uses {cuda_home}; for plain torch builds export CUDA_HOME={cuda_home}"))
    if nvcc_ver and torch.version.cuda and nvcc_ver.split(".")[0] != torch.version.cuda.split(".")[0]:
        fits = torch_select.choose(nvcc_ver, None)
        problems.append(Problem("error", f"nvcc {nvcc_ver} but torch was built with CUDA {torch.version.cuda}",
                                f"install a torch built for CUDA {nvcc_ver.split('.')[0]} (`make` picks "
                                f"`pip install {fits.pip_args}` for this nvcc: rm -rf .venv && make) or CUDA "
                                f"{torch.version.cuda.split('.')[0]}.x"))
    if torch.version.cuda is None and cuda_home:
        problems.append(Problem("warning", "this torch is a CPU-only build: CUDA extensions cannot be built",
                                "install a CUDA build of torch (pip install torch==2.14.1 here)"))
    if not gpus:
        problems.append(Problem("warning", "no GPU visible: kernels compile, checks and timings use the CPU twins",
                                "run on a machine with an NVIDIA GPU and driver for CUDA results"))
    return problems


def _torch_origin(nvcc_ver: str | None) -> str:
    """Why this torch: whether its CUDA major is nvcc's, as the Makefile's choice (jitload.builder.torch_select)
    requires."""
    if torch.version.cuda is None:
        return "a CPU-only build"
    if nvcc_ver is None:
        return f"CUDA {torch.version.cuda}; no nvcc to match"
    same = nvcc_ver.split(".")[0] == torch.version.cuda.split(".")[0]
    return f"CUDA {torch.version.cuda}, {'the same major as' if same else 'NOT the major of'} nvcc {nvcc_ver}"


def report() -> tuple[str, bool]:
    """The doctor's text and whether builds can work at all (no 'error' problems)."""
    facts, problems = diagnose()
    width = max(len(label) for label, _ in facts)
    lines = [f"{label:<{width}}  {value}" for label, value in facts]
    lines.append("")
    lines.extend(f"{p.severity.upper()}: {p.what}\n  fix: {p.fix}" for p in problems)
    if not problems:
        lines.append("no problems found")
    return "\n".join(lines), not any(p.severity in ("error", "fail") for p in problems)


def _c_compiler(cxx: str) -> str:
    """The C compiler beside a C++ one (/usr/bin/g++ -> /usr/bin/gcc)."""
    directory, name = os.path.split(cxx)
    c = {"g++": "gcc", "c++": "cc", "clang++": "clang"}.get(name, name)
    return os.path.join(directory, c)
