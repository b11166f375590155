"""Sweep a kernel's launch knobs: build the kernel once per combination of ``-D`` values, check every build
against the reference on the GPU, then time them beside the default build in one table.

A knob is a preprocessor macro that the kernel's CUDA source reads with a default (``#ifndef NAME``), listed in
its header comment; bias_gelu has BIAS_GELU_COLS, BIAS_GELU_ROWS and BIAS_GELU_BLOCK (the rows kernel's column
vectors and rows a thread, threads a block). Each combination is its own build of the kernel, in its own build
directory (``<kernel>_<knobs>``, so going back to one costs nothing once built), and is called through its own
module's function (``spec.function``), never through ``torch.ops``: every build registers the op again, and the
dispatcher keeps the last one loaded (torch warns that a kernel was overridden; that is expected here).

A variant keeps the kernel's own name (jitload imports each build under a new module name anyway), so the
compile lines of its C++ files are the default build's, and ccache hands back their objects: a variant costs
the nvcc run of its CUDA file and a link, not a compile of the torch-heavy binding (31 s of the 40 s that
bias_gelu's BLOCK=256 variant took on 2 cores when each variant was named after its knobs).

    python benchmarks/variants.py bias_gelu -D BIAS_GELU_BLOCK=128,256,512 -D BIAS_GELU_ROWS=1,2
    python benchmarks/variants.py bias_gelu -D BIAS_GELU_BLOCK=256 --dry-run      # the builds it would make
    python benchmarks/variants.py bias_gelu -D BIAS_GELU_BLOCK=256 --build-only   # compile only (nvcc, no GPU)

Timing needs a CUDA GPU; ``--build-only`` needs nvcc, ``--dry-run`` nothing. The table is % of a device copy of
the same bytes timed in the same run (``jitload.bench``); ``--out FILE.md`` appends it with the command, the
commit and the GPU; ``--write-results`` makes it the kernel's knobs section of this machine's page in
benchmarks/results/. A build that fails its check is reported and not timed, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import torch

import jitload
from jitload import kernels
from jitload.builder import toolchain

KNOB = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VALUE = re.compile(r"-?[A-Za-z0-9_]+")
CHECK_SIZES = [1023, 2**20, 2**20 + 3]  # odd and whole rows, both launch paths of a row kernel


def parse_knob(text: str) -> tuple[str, list[str]]:
    """``NAME=V1,V2`` -> (NAME, [V1, V2])."""
    name, sep, values = text.partition("=")
    parts = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not KNOB.fullmatch(name) or not parts or not all(VALUE.fullmatch(v) for v in parts):
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,... (a macro name; integers or identifiers): {text!r}")
    return name, parts


def knob_names(kernel: kernels.Kernel) -> set[str]:
    """The macros the kernel's CUDA sources read with a default (``#ifndef NAME``): the knobs it offers."""
    names: set[str] = set()
    for entry in sorted(os.listdir(kernel.folder)):
        if entry.endswith((".cu", ".cuh", ".h")):
            with open(os.path.join(kernel.folder, entry)) as f:
                names.update(re.findall(r"^#ifndef\s+(\w+)", f.read(), re.M))
    return names


def plan(kernel: kernels.Kernel, knobs: list[tuple[str, list[str]]]) -> list[tuple[str, str, list[str]]]:
    """(label, build folder, -D flags) for every combination of the knobs' values, in the order given."""
    offered = knob_names(kernel)
    unknown = [name for name, _ in knobs if name not in offered]
    if unknown:
        listed = ", ".join(sorted(offered)) or "none"
        raise SystemExit(f"{kernel.name} has no knob {', '.join(unknown)}; its knobs: {listed}")
    names = [name for name, _ in knobs]
    if len(set(names)) != len(names):
        raise SystemExit(f"a knob is given twice: {' '.join(names)}")
    builds = []
    for values in itertools.product(*(vals for _, vals in knobs)):
        pairs = list(zip(names, values, strict=True))
        label = " ".join(f"{n}={v}" for n, v in pairs)
        short = [n.lower().removeprefix(f"{kernel.spec.name}_") for n in names]  # BIAS_GELU_BLOCK -> block
        suffix = "_".join(f"{s}{v.replace('-', 'm')}" for s, (_, v) in zip(short, pairs, strict=True))
        builds.append((label, f"{kernel.spec.name}_{suffix}", [f"-D{n}={v}" for n, v in pairs]))
    return builds


def prepare(kernel: kernels.Kernel, build_name: str, defines: list[str]) -> jitload.Extension:
    """The kernel's extension with ``defines`` on its nvcc line, built in the folder ``build_name`` of the
    cache (not built yet). Its module name stays the kernel's: see the module's docstring."""
    flags = ["-O3", kernels.CUDA_DEFINE]
    includes = [kernel.common_dir] if os.path.isdir(kernel.common_dir) else []
    return jitload.prepare(kernel.spec.name, kernel.sources(with_cuda=True), extra_cflags=flags,
                           extra_cuda_cflags=flags + defines, extra_include_paths=includes, with_cuda=True,
                           build_directory=os.path.join(toolchain.cache_root(), build_name))


def header(argv: list[str]) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"`python benchmarks/variants.py {shlex.join(argv)}` at {commit.stdout.strip() or 'an unknown commit'}, "
            f"{gpu}, torch {torch.__version__}\n")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", help="a kernel folder's name under kernels/, or its path")
    parser.add_argument("-D", "--define", dest="knobs", type=parse_knob, action="append", default=[],
                        metavar="NAME=V1,V2", help="a knob and the values to sweep (repeat for more knobs)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2**26, 2**28])
    parser.add_argument("--dry-run", action="store_true", help="print the builds and stop")
    parser.add_argument("--build-only", action="store_true", help="compile the variants (nvcc, no GPU) and stop")
    parser.add_argument("--out", help="append the tables to this markdown file")
    parser.add_argument("--write-results", action="store_true",
                        help="write the tables into this machine's page under benchmarks/results/")
    args = parser.parse_args(argv)
    kernel = kernels.get(args.kernel)
    if not args.knobs:
        parser.error(f"give at least one -D NAME=V1,V2; {kernel.name}'s knobs: "
                     f"{', '.join(sorted(knob_names(kernel))) or 'none'}")
    builds = plan(kernel, args.knobs)
    if args.dry_run:
        for label, build_name, defines in builds:
            print(f"{label}: build folder {build_name}, nvcc {' '.join(defines)}")
        return 0
    if toolchain.find_cuda_home() is None:
        raise SystemExit("no CUDA toolkit found: the knobs live in the CUDA sources (set CUDA_HOME)")
    if args.build_only:
        for label, build_name, defines in builds:
            ext = prepare(kernel, build_name, defines).reload()
            print(f"{label}: built in {ext.build_directory}", flush=True)
        return 0
    if not torch.cuda.is_available():
        raise SystemExit("timing needs a CUDA GPU (--build-only compiles the variants without one)")
    dtypes = [getattr(torch, d) for d in args.dtypes]
    fns = {"default": getattr(kernel.build(with_cuda=True), kernel.spec.function)}
    for label, build_name, defines in builds:
        fns[label] = getattr(prepare(kernel, build_name, defines).reload(), kernel.spec.function)
    tables, failed = check_and_time(kernel, fns, dtypes, args.sizes)
    if args.out:
        with open(args.out, "a") as f:
            f.write("".join([header(argv), *tables]))
    if args.write_results:
        write_results(kernel, tables, failed)
    return 1 if failed else 0


def write_results(kernel: kernels.Kernel, tables: list[str], failed: int) -> None:
    """The tables as the ``variants-<kernel>`` section of this machine's results page."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import results_page

    body = "".join(t.replace("\n## ", "\n### ", 1) for t in tables)
    checks = f"{failed} builds failed their check and were not timed." if failed else "Every build passed its check."
    title = f"{kernel.name}'s launch knobs (`benchmarks/variants.py`)"
    print(results_page.write_section(f"variants-{kernel.name}", title,
                                     f"% of a device copy of the same bytes timed in the same run. {checks}\n{body}"))


def check_and_time(kernel: kernels.Kernel, fns: dict[str, Callable[..., Any]], dtypes: list[torch.dtype],
                   sizes: list[int]) -> tuple[list[str], int]:
    """One markdown table per dtype of the variants that pass their check, and how many checks failed."""
    failed = 0
    tables = []
    for dtype in dtypes:
        checked = {}
        for label, fn in fns.items():
            report = jitload.check(fn, kernel.reference, kernel.spec.make_inputs, sizes=CHECK_SIZES, dtypes=[dtype],
                                   device="cuda", trials=1)
            if report.ok:
                checked[label] = fn
            else:
                failed += 1
                print(f"{label} {dtype}: failed its check, not timed: {report.summary()}", flush=True)
        if not checked:
            continue
        result = jitload.bench(checked, kernel.spec.make_inputs, sizes=sizes, dtypes=[dtype],
                               bytes_moved=kernel.spec.bytes_moved, device="cuda", progress=False)
        tables.append(f"\n## {kernel.name} {str(dtype).removeprefix('torch.')}\n\n{result.to_markdown()}\n")
        print(tables[-1], flush=True)
    return tables, failed

if __name__ == "__main__":
    sys.exit(main())
