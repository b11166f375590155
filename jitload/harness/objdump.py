"""What the compiler made of a build: registers, shared memory and local memory per kernel, and its SASS.

A thin layer over the toolkit's ``cuobjdump`` run on the ``*.cuda.o`` objects in an extension's build
directory. It needs no GPU: the objects hold machine code for every arch they were built for (sm_90 on a
CPU-only box), so a laptop can see that a kernel spills before it ever runs.

``STACK`` is the number to watch: each thread's stack frame in local memory (DRAM behind the L1), where
registers spill to and where arrays the compiler cannot keep in registers live (a runtime index into a local
array is enough). Seen with nvcc 13.0 for sm_90: such an array shows as STACK, not LOCAL (a static local segment,
usually 0). ``nvcc -Xptxas -v`` says which part of the frame is spills ("spill stores").
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Iterable

import pandas as pd

from ..builder import toolchain
from ..builder.extension import Extension

_ARCH = re.compile(r"^arch = (\S+)")
_FUNCTION = re.compile(r"^\s*Function (\S+?):?$")
_INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/")
_FIELD = re.compile(r"([A-Z]+)(?:\[\d+\])?:(\d+)")
COLUMNS = ["object", "arch", "kernel", "registers", "shared", "stack", "local", "constant", "mangled"]


cuobjdump = toolchain.cuobjdump  # the locator lives with the toolchain; kept here for callers


def objects(target: Extension | str | Iterable[str]) -> list[str]:
    """The CUDA objects of ``target``: an Extension handle (its build directory), a directory, or paths."""
    if isinstance(target, Extension):
        target = target.build_directory
    if isinstance(target, str):
        if os.path.isdir(target):
            found = sorted(glob.glob(os.path.join(target, "*.cuda.o")))
            if not found:
                raise FileNotFoundError(f"no *.cuda.o in {target}: was it built with CUDA sources and a toolkit?")
            return found
        target = [target]
    paths = list(target)
    for p in paths:
        if not os.path.isfile(p):
            raise FileNotFoundError(p)
    return paths


def _run(*args: str) -> str:
    proc = subprocess.run([cuobjdump(), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump {' '.join(args)} failed:\n{proc.stderr.strip()}")
    return proc.stdout


def demangle(names: list[str]) -> list[str]:
    """C++ names as written in the source; the mangled names when binutils' c++filt is missing."""
    filt = shutil.which("c++filt")
    if not filt or not names:
        return list(names)
    out = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return out if len(out) == len(names) else list(names)


def resources(target: Extension | str | Iterable[str]) -> pd.DataFrame:
    """One row per kernel and arch: registers per thread, static shared memory, local memory (spills), stack
    and constant bytes, parsed from ``cuobjdump --dump-resource-usage``. Sorted by stack frame and local memory,
    then registers, so the kernels that touch local memory come first."""
    rows = []
    for path in objects(target):
        arch, function = None, None
        for line in _run("--dump-resource-usage", path).splitlines():
            if m := _ARCH.match(line):
                arch = m.group(1)
            elif m := _FUNCTION.match(line):
                function = m.group(1)
            elif function and "REG:" in line:
                f = {k: int(v) for k, v in _FIELD.findall(line)}
                rows.append({"object": os.path.basename(path), "arch": arch, "mangled": function,
                             "registers": f.get("REG", 0), "shared": f.get("SHARED", 0), "stack": f.get("STACK", 0),
                             "local": f.get("LOCAL", 0), "constant": f.get("CONSTANT", 0)})
                function = None
    table = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "kernel"])
    table.insert(2, "kernel", demangle(table["mangled"].tolist()))
    return table.sort_values(["stack", "local", "registers"], ascending=False, ignore_index=True)[COLUMNS]


def sass(target: Extension | str | Iterable[str], kernel: str | None = None) -> str:
    """The SASS (the GPU's own instructions) of every kernel in ``target``, or of those whose demangled name
    contains ``kernel``. The encodings cuobjdump prints beside each instruction are dropped."""
    paths = objects(target)
    wanted = None
    if kernel is not None:
        table = resources(paths)
        wanted = sorted(set(table.loc[table["kernel"].str.contains(kernel, regex=False), "mangled"]))
        if not wanted:
            raise KeyError(f"no kernel matching {kernel!r}; there are: {', '.join(sorted(set(table['kernel'])))}")
    parts = []
    for path in paths:
        for name in wanted or [None]:
            parts += [_clean(line) for line in _run("-sass", *(["-fun", name] if name else []), path).splitlines()
                      if _INSTRUCTION.match(line) or "Function :" in line]
    return "\n".join(parts)


def _clean(line: str) -> str:
    """``/*0040*/  S2UR UR4, SR_CTAID.X ;  /* 0x...c3 */`` -> ``/*0040*/ S2UR UR4, SR_CTAID.X ;``"""
    return re.sub(r"\s*/\* 0x[0-9a-f]+ \*/\s*$", "", line.strip()).replace("Function : ", "// ")
