"""Which torch ``make`` installs: the one the Python already has, else the build whose CUDA major matches nvcc.

torch refuses to build CUDA extensions with an nvcc of another CUDA major (a CUDA 13 torch and the article's
container's nvcc 12.8, say), so the Makefile asks this module before it creates the virtual environment. The
Makefile runs it as a file, before jitload or torch is installed: the standard library only, and no import of
the package (``python jitload/builder/torch_select.py --venv-flags|--pip-args|--why``). ``jitload doctor`` reports
the same choice for the torch it runs with.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

# The torch to install for each CUDA major of nvcc. 13: the CUDA 13.0 build (a CPU machine takes it too: it
# runs there and builds C++ extensions). 12: the article's container's torch; PyPI's torch 2.8.0 is its CUDA 12.8
# build, so no other index is needed (a machine that reaches only PyPI installs it too).
BUILDS: dict[int | None, tuple[str, str | None]] = {
    13: ("torch==2.14.1", None),
    12: ("torch==2.8.0", None),
    None: ("torch==2.14.1", None),
}


@dataclass(frozen=True)
class Choice:
    """What to install: ``pip_args`` (empty: keep the torch the Python has), ``venv_flags``, and why."""

    pip_args: str
    venv_flags: str
    why: str


def nvcc_release(version_output: str | None) -> str | None:
    """The release in ``nvcc --version``'s output ("12.8"), or None."""
    match = re.search(r"release (\d+)\.(\d+)", version_output or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def choose(release: str | None, installed_torch: str | None) -> Choice:
    """The torch for a Python that has ``installed_torch`` (a version, or None) and an nvcc of ``release``
    ("12.8", as :func:`nvcc_release` reads it; None: no nvcc)."""
    if installed_torch:
        return Choice("", "--system-site-packages",
                      f"torch {installed_torch} is already installed for this Python: the virtual environment sees "
                      "it, and nothing is downloaded")
    major = int(release.split(".")[0]) if release else None
    if major not in BUILDS:
        spec, index = BUILDS[None]
        return Choice(spec, "", f"no torch build is known here for nvcc {release}: installing {spec} (CUDA 13), "
                                "which cannot build CUDA extensions with this nvcc; set TORCH_SPEC to one that can")
    spec, index = BUILDS[major]
    args = f"{spec} --extra-index-url {index}" if index else spec
    where = f"nvcc {release} is CUDA {major}" if release else "no nvcc was found (CPU only)"
    return Choice(args, "", f"{where}: {spec}{f' from {index}' if index else ''}")


def find_nvcc() -> str | None:
    """nvcc under $CUDA_HOME, on PATH, or under /usr/local/cuda."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for candidate in ([os.path.join(home, "bin", "nvcc")] if home else []) + [shutil.which("nvcc") or "",
                                                                               "/usr/local/cuda/bin/nvcc"]:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def nvcc_output() -> str | None:
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    try:
        return subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def installed_torch() -> str | None:
    """The torch version a virtual environment made from this Python with --system-site-packages would see,
    found without importing it (seconds saved per make). A torch inside this Python's own virtual environment
    does not count: a venv made from it sees the base installation's packages, not its."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    own_venv = os.path.realpath(sys.prefix) + os.sep
    if sys.prefix != sys.base_prefix and os.path.realpath(spec.origin).startswith(own_venv):
        return None
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) > 1 else "--why"
    choice = choose(nvcc_release(nvcc_output()), installed_torch())
    outputs = {"--pip-args": choice.pip_args, "--venv-flags": choice.venv_flags, "--why": choice.why}
    if what not in outputs:
        print(f"usage: {argv[0]} {'|'.join(outputs)}", file=sys.stderr)
        return 2
    print(outputs[what])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
