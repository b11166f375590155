"""The ``jitload`` command: doctor, build, check, bench, clean."""

from __future__ import annotations

import argparse
import os
import shutil
import sys

import torch

from . import doctor, kernels, toolchain
from .errors import BuildError
from .lock import build_lock


def _device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    print("jitload: no GPU visible, so checks and timings run the CPU twins (CUDA sources are compiled only)")
    return torch.device("cpu")


def _selected(args: argparse.Namespace) -> list[kernels.Kernel]:
    if args.all or not args.kernel:
        return list(kernels.discover().values())
    return [kernels.get(k) for k in args.kernel]


def _build(kernel: kernels.Kernel, verbose: bool = False):
    ext = kernel.build(verbose=verbose)
    print(f"{kernel.name}: {ext.info}")
    return ext


def cmd_doctor(args: argparse.Namespace) -> int:
    text, ok = doctor.report()
    print(text)
    return 0 if ok else 1


def cmd_build(args: argparse.Namespace) -> int:
    for kernel in _selected(args):
        _build(kernel, args.verbose)
    return 0


def _check_kernel(kernel: kernels.Kernel, device: torch.device):
    from .check import check

    ext = _build(kernel)
    fn = getattr(ext, kernel.spec.FUNCTION)
    report = check(fn, kernel.reference, kernel.spec.make_inputs, sizes=kernel.spec.CHECK_SIZES,
                   dtypes=kernel.spec.DTYPES, device=device)
    cases = len(report.table)
    print(f"{kernel.name}: check {'passed' if report.ok else 'FAILED'} on {device.type} "
          f"({cases - len(report.failures)}/{cases} cases)")
    for failure in report.failures[:5]:
        print(f"  {failure}")
    return fn, report


def cmd_check(args: argparse.Namespace) -> int:
    device = _device()
    failed = [k.name for k in _selected(args) if not _check_kernel(k, device)[1].ok]
    return 1 if failed else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import bench

    device = _device()
    status = 0
    for kernel in _selected(args):
        fn, report = _check_kernel(kernel, device)
        if not report.ok:
            print(f"{kernel.name}: not timed, since its check failed")
            status = 1
            continue
        sizes = args.sizes or kernel.spec.BENCH_SIZES[device.type]
        table = bench({kernel.name: fn, "eager": kernel.reference}, kernel.spec.make_inputs, sizes=sizes,
                      dtypes=kernel.spec.DTYPES, bytes_moved=kernel.spec.bytes_moved, device=device)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return status


def cmd_clean(args: argparse.Namespace) -> int:
    root = toolchain.cache_root()
    targets = [os.path.join(root, n) for n in args.name] if args.name else [root]
    for path in targets:
        if not os.path.isdir(path):
            print(f"nothing to clean at {path}")
            continue
        if args.name:
            with build_lock(path):  # never delete a build directory under a running build
                shutil.rmtree(path)
        else:
            shutil.rmtree(path)
        print(f"removed {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jitload", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="show the toolchain, GPUs and cache, and each problem with its fix")
    for name, helptext in (("build", "build kernels (by name under kernels/, or a folder path)"),
                           ("check", "build kernels and check them against their references"),
                           ("bench", "build, check, then time kernels against eager PyTorch")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("kernel", nargs="*", help="kernel names or folders (default: all)")
        p.add_argument("--all", action="store_true", help="every kernel under kernels/")
        p.add_argument("-v", "--verbose", action="store_true", help="show the compiler commands")
        if name == "bench":
            p.add_argument("--sizes", type=int, nargs="+", help="element counts to time")
    p = sub.add_parser("clean", help="delete cached builds")
    p.add_argument("name", nargs="*", help="extension names (default: the whole jitload cache for this torch)")
    args = parser.parse_args(argv)
    handler = {"doctor": cmd_doctor, "build": cmd_build, "check": cmd_check, "bench": cmd_bench,
               "clean": cmd_clean}[args.command]
    try:
        return handler(args)
    except BuildError as err:
        print(err, file=sys.stderr)
        return 2
    except (KeyError, FileNotFoundError) as err:
        print(f"jitload: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
