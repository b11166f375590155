"""Checks, at image build time, that the base image is the stack jitload's torch 2.8 lane tests.

The base image's tag names torch and CUDA but not its Python, which pyproject.toml's ``requires-python`` must
accept (``make`` inside the container installs jitload into a virtual environment of that Python). Run as
``python docker/check_base.py``; exits 1 naming each difference. tests/test_docker.py runs it too.
"""

import re
import shutil
import subprocess
import sys

PYTHON = (3, 11)  # pyproject.toml's requires-python
TORCH = "2.8.0"  # the Makefile's test-torch2.8 lane
CUDA = "12.8"


def problems() -> list[str]:
    found = []
    if sys.version_info < PYTHON:
        found.append(f"Python {sys.version.split()[0]} is older than {'.'.join(map(str, PYTHON))}, which "
                     "jitload requires")
    try:
        import torch
    except ImportError as err:
        return [*found, f"torch cannot be imported: {err}"]
    if torch.__version__.split("+")[0] != TORCH:
        found.append(f"torch is {torch.__version__}, not {TORCH}")
    if torch.version.cuda != CUDA:
        found.append(f"torch was built with CUDA {torch.version.cuda}, not {CUDA}")
    nvcc = shutil.which("nvcc")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout if nvcc else ""
    release = re.search(r"release (\d+\.\d+)", version)
    if not release or release.group(1) != CUDA:
        found.append(f"nvcc is {release.group(1) if release else 'missing'}, not CUDA {CUDA}'s")
    return found


if __name__ == "__main__":
    found = problems()
    for problem in found:
        print(f"base image: {problem}", file=sys.stderr)
    if not found:
        print(f"base image: Python {sys.version.split()[0]}, torch {TORCH}, CUDA {CUDA}: as tested")
    sys.exit(1 if found else 0)
