"""The ``jitload`` command: doctor, build, check, bench, watch, clean, prepare."""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import torch

from .. import kernels
from ..builder import toolchain
from ..builder.errors import BuildError
from ..builder.lock import build_lock
from ..harness.benchmark import dtype_name
from ..harness.check_process import ProgressFile, check_in_child
from . import doctor

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


def _device() -> torch.device:
    device = toolchain.default_device()
    if device.type == "cpu":
        print("jitload: no GPU visible, so checks and timings run the CPU twins (CUDA sources are compiled only; "
              "a CPU table has no % of the copy: the twins are references, not tuned kernels)")
    return device


def _selected(args: argparse.Namespace) -> list[kernels.Kernel]:
    if args.all or not args.kernel:
        return list(kernels.discover().values())
    return [kernels.get(k) for k in args.kernel]


def _dtypes(args: argparse.Namespace, kernel: kernels.Kernel) -> list[torch.dtype]:
    supported = list(kernel.spec.dtypes)
    if not getattr(args, "dtype", None):
        return supported
    asked = [DTYPES[d] for d in args.dtype]
    unsupported = [str(d) for d in asked if d not in supported]
    if unsupported:
        raise KeyError(f"kernel {kernel.name!r} does not support {', '.join(unsupported)}; it has "
                       f"{', '.join(str(d).removeprefix('torch.') for d in supported)}")
    return asked


def _build(kernel: kernels.Kernel, verbose: bool = False):
    ext = kernel.build(verbose=verbose)
    print(f"{kernel.name}: {ext.info}")
    return ext


def _prebuild(selected: list[kernels.Kernel], verbose: bool = False) -> None:
    """Build the selected kernels side by side, one ``jitload build`` process each, as many at once as there are
    cores, before the first is checked. A build is one compiler per source and its binding (torch's headers) is
    most of it, so kernels built in turn leave the other cores idle. The loop after this loads each from the
    cache in milliseconds; a kernel whose build failed here is built again there, where its errors are shown as
    for one kernel. Nothing is timed while these run."""
    jobs = min(len(selected), os.cpu_count() or 1)
    if jobs < 2:
        return
    print(f"jitload: building {len(selected)} kernels, {jobs} at a time", flush=True)

    def build(kernel: kernels.Kernel) -> tuple[kernels.Kernel, float, str]:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "jitload", "build", kernel.folder, *(["-v"] * verbose)],
                              capture_output=True, text=True)
        status = done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else \
            "failed (its errors follow when it is built again below)"
        return kernel, time.perf_counter() - start, status

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for n, future in enumerate(concurrent.futures.as_completed([pool.submit(build, k) for k in selected]), 1):
            kernel, seconds, status = future.result()
            print(f"jitload: [{n}/{len(selected)}] {kernel.name} built in {seconds:.1f} s: "
                  f"{status.removeprefix(kernel.name + ': ')}", flush=True)


def cmd_doctor(args: argparse.Namespace) -> int:
    text, ok = doctor.report()
    print(text)
    return 0 if ok else 1


def cmd_build(args: argparse.Namespace) -> int:
    selected = _selected(args)
    _prebuild(selected, args.verbose)
    for kernel in selected:
        _build(kernel, args.verbose)
    return 0


def _timed_sizes(kernel: kernels.Kernel, device: torch.device, args: argparse.Namespace) -> list[int]:
    """The sizes `jitload bench` times on this device."""
    return list(getattr(args, "sizes", None) or kernel.spec.bench_sizes[kernel.device_for(device).type])


def _check_kernel(kernel: kernels.Kernel, device: torch.device, args: argparse.Namespace, timed: list[int] = ()):
    """Build the kernel and check each of its functions (versions, then baselines such as Triton), also at the
    ``timed`` sizes."""
    ext = _build(kernel, args.verbose)
    device = kernel.device_for(device)
    ours = kernel.functions(ext)
    fns = {**ours, **kernel.baselines(device)}
    progress = ProgressFile(args.progress) if getattr(args, "progress", None) else None
    dtypes = _dtypes(args, kernel)
    if timed:
        print(f"{kernel.name}: checking the {len(timed)} timed size(s) too, before timing them: "
              f"{', '.join(map(str, timed))} in {', '.join(dtype_name(d) for d in dtypes)}")
    reports = {}
    for name, fn in fns.items():
        reports[name] = kernel.check(fn, device=device, dtypes=dtypes, grad=name in ours, timed_sizes=timed,
                                     on_case=None if progress is None else functools.partial(progress.write, name),
                                     guards=not getattr(args, "no_guards", False), timeout=args.timeout)
        print(f"{name}: check {reports[name]!r}")
    return fns, reports


def cmd_check(args: argparse.Namespace) -> int:
    selected = _selected(args)
    if not args.no_isolate:
        # each kernel in a fresh process (jitload.harness.check_process): a crash fails that kernel, not the command
        extra = [*(["--dtype", *args.dtype] if args.dtype else []), *(["-v"] if args.verbose else []),
                 *(["--no-guards"] if args.no_guards else []),
                 *(["--timeout", str(args.timeout)] if args.timeout is not None else [])]
        _prebuild(selected, args.verbose)
        codes = [check_in_child(k.name, k.folder, extra, sanitize=args.sanitize) for k in selected]
        return max(codes, default=0)
    if args.sanitize:
        print("jitload: --sanitize runs the check in a child process under compute-sanitizer; drop --no-isolate",
              file=sys.stderr)
        return 2
    device = _device()
    _prebuild(selected, args.verbose)
    failed = [k.name for k in selected if not all(r.ok for r in _check_kernel(k, device, args)[1].values())]
    status = 1 if failed else 0
    if args.progress:
        ProgressFile(args.progress).finish(status)  # the parent trusts no exit code without this line
    return status


def cmd_bench(args: argparse.Namespace) -> int:
    from ..harness.benchmark import bench, device_name

    device = _device()
    selected = _selected(args)
    _prebuild(selected, args.verbose)
    report: list[str] = []
    status = 0
    for kernel in selected:
        fns, checked = _check_kernel(kernel, device, args, timed=_timed_sizes(kernel, device, args))
        failed = [name for name, r in checked.items() if not r.ok]
        if failed:
            status = 1
        if next(iter(fns)) in failed:
            print(f"{kernel.name}: not timed, since its check failed")
            report += [f"## {kernel.name}", "", "Not timed: its check failed.", "", "```",
                       *(repr(r) for r in checked.values()), "```", ""]
            continue
        for name in failed:
            print(f"{name}: not timed, since its check failed")
        timed = {name: fn for name, fn in fns.items() if name not in failed}
        runs_on = kernel.device_for(device)
        result = bench(timed, kernel.spec.make_inputs, sizes=_timed_sizes(kernel, device, args),
                       dtypes=_dtypes(args, kernel), bytes_moved=kernel.spec.bytes_moved, device=runs_on,
                       eager=kernel.reference, compiled=args.compiled or False)
        print(result)
        if not (args.plot or args.report):
            continue
        figure = result.plot(title=f"{kernel.name} on {result.device_name}")
        if args.plot:
            path = args.plot if len(selected) == 1 else f"{os.path.splitext(args.plot)[0]}-{kernel.name}.png"
            figure.savefig(path, dpi=120)
            print(f"{kernel.name}: plot written to {path}")
        if args.report:
            os.makedirs(args.report, exist_ok=True)
            figure.savefig(os.path.join(args.report, f"{kernel.name}.png"), dpi=120)
            report += [f"## {kernel.name}", "", *(f"- check of {n}: {r.summary()}" for n, r in checked.items()), "",
                       result.to_markdown(), "",
                       *(f"{n}: compilation took {s:.1f} s (not in the medians)." for n, s in
                         result.compile_seconds.items()), "", f"![{kernel.name}]({kernel.name}.png)", ""]
    if args.report:
        head = [f"# jitload bench report, {datetime.date.today().isoformat()}", "",
                f"- device: {device_name(device)}", f"- torch {torch.__version__}, CUDA {torch.version.cuda}",
                f"- command: `jitload {' '.join(args.argv)}`", ""]
        path = os.path.join(args.report, "report.md")
        with open(path, "w") as f:
            f.write("\n".join(head + report) + "\n")
        print(f"report written to {path}")
    return status


def cmd_prepare(args: argparse.Namespace) -> int:
    from ..builder import hostjit, swap

    cuda = args.cuda or swap.gpu_available()
    which = "torch's and CUDA's headers" if cuda else "torch's headers"
    print(f"jitload prepare: precompiling {which} for the host JIT (once per machine and torch version; "
          "20-40 s of one core)", flush=True)
    try:
        path, what = hostjit.prepare(cuda=cuda)
    except hostjit.JitError as err:
        print(f"jitload prepare: {err}; a first load builds in full, and host edits start the interpreter "
              "from torch's headers", file=sys.stderr)
        return 1
    print(f"jitload prepare: {what}{': ' + path if path else ''}")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from .watcher import watch_target

    # Every save is an edit to take quickly: the host JIT's interpreter starts in the background after the first
    # load.
    os.environ.setdefault("JITLOAD_HOST_JIT", "warm")
    watcher = watch_target(args.target, name=args.name, check=args.check, bench=args.bench)
    try:
        watcher.run()
    except KeyboardInterrupt:
        pass
    watcher.console.print("jitload watch: stopped", style="dim")
    return 0


def _removable(path: str) -> str | None:
    """Why ``path`` must not be removed (a symbolic link on the way to it from the cache base, not a folder),
    or None."""
    base = toolchain.cache_base()
    current = base
    for part in os.path.relpath(path, base).split(os.sep):
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return "nothing to clean"
        if stat.S_ISLNK(st.st_mode):
            where = "it is" if current == path else f"{current} is"
            return (f"{where} a symbolic link (to {os.readlink(current)}), which clean never follows: nothing was "
                    "deleted; remove the link yourself")
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    return None


def _remove_build(path: str) -> None:
    # Under the build's lock: a build running in it finishes first (its wait is announced at once). Moved
    # aside, then deleted: a build waiting for the lock finds the name gone at once and makes the folder
    # again (jitload.builder.lock), instead of making its lock file again in a folder half deleted.
    with build_lock(path, announce_after_s=0.0):
        aside = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.removed-", dir=os.path.dirname(path))
        os.rename(path, aside)  # onto the empty folder just made: a name nobody else has
        shutil.rmtree(aside)  # rmtree removes links inside the folder, never what they point to


def _remove_cache(root: str) -> None:
    """Every build under ``root``, each under its lock, then ``root`` itself; links are removed, not followed."""
    for entry in list(os.scandir(root)):  # listed first: not the folders moved aside as each is removed
        if entry.is_dir(follow_symlinks=False):
            _remove_build(entry.path)
        else:
            os.unlink(entry.path)
    os.rmdir(root)


def cmd_clean(args: argparse.Namespace) -> int:
    """Remove cached builds: by extension name only, inside the cache root, never through a symbolic link, each
    under its build lock."""
    root = toolchain.cache_root()
    status = 0
    bad = [n for n in args.name if not n.isidentifier()]
    for name in bad:
        print(f"jitload clean: {name!r} is not an extension name (a Python identifier, as load() takes); "
              f"builds live under {root}", file=sys.stderr)
        status = 2
    names = [n for n in args.name if n.isidentifier()]
    targets = [os.path.join(root, n) for n in names] if args.name else [root]
    for path in targets:
        why = _removable(path)
        if why:
            print(f"{path}: {why}")
            status = status or (0 if why == "nothing to clean" else 1)
            continue
        try:
            if names:
                _remove_build(path)
            else:
                _remove_cache(root)
        except (OSError, RuntimeError) as err:  # a foreign lock file, a build started meanwhile
            print(f"{path}: not removed: {err}", file=sys.stderr)
            status = 1
            continue
        print(f"removed {path}")
    return status


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jitload", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="show the toolchain, GPUs and cache, and each problem with its fix")
    for name, helptext in (("build", "build kernels (by name under kernels/, or a folder path)"),
                           ("check", "build kernels and check them against their references"),
                           ("bench", "build, check, then time kernels against eager PyTorch and the copy peak")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("kernel", nargs="*", help="kernel names or folders (default: all)")
        p.add_argument("--all", action="store_true", help="every kernel under kernels/")
        p.add_argument("-v", "--verbose", action="store_true", help="show the compiler commands")
        if name in ("check", "bench"):
            p.add_argument("--dtype", nargs="+", choices=sorted(DTYPES), help="dtypes (default: the kernel's)")
            p.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                           help="time limit of one case of the check (default: 100x the reference's time on the "
                                "case, at least 30 s)")
        if name == "check":
            p.add_argument("--no-isolate", action="store_true",
                           help="check in this process (default: each kernel in a fresh one, so a crash is a failure)")
            p.add_argument("--sanitize", action="store_true",
                           help="run each kernel's check under compute-sanitizer memcheck (CUDA)")
            p.add_argument("--no-guards", action="store_true",
                           help="no guard bytes around the tensors a candidate allocates (--sanitize sets it: "
                                "a write into a guard is inside an allocation, where compute-sanitizer cannot see it)")
            p.add_argument("--progress", help=argparse.SUPPRESS)  # the isolated child writes its current case here
        if name == "bench":
            p.add_argument("--sizes", type=int, nargs="+", help="element counts to time")
            p.add_argument("--compiled", nargs="?", const="static", choices=("static", "dynamic"),
                           help="also time torch.compile(reference), compiled for each size and dtype "
                                "(--compiled dynamic: once for all, dynamic=True)")
            p.add_argument("--plot", help="write the GB/s plot to this PNG")
            p.add_argument("--report", help="write report.md and one PNG per kernel into this folder")
    p = sub.add_parser("watch", help="rebuild on every save; with a kernel, re-check (--check) and re-time (--bench)")
    p.add_argument("target", nargs="+", help="a kernel name or folder, or source files")
    p.add_argument("--name", help="extension name for source files (default: the first file's stem)")
    p.add_argument("--check", action="store_true", help="check against the kernel's reference after each build")
    p.add_argument("--bench", action="store_true", help="a short timing after each build")
    p = sub.add_parser("prepare", help="precompile torch's headers for the host JIT (make does), so that a first "
                                       "load and the first host edit take the interpreter in seconds")
    p.add_argument("--cuda", action="store_true",
                   help="with CUDA's headers, as a machine with a GPU uses (default: whether a GPU is visible)")
    p = sub.add_parser("clean", help="delete cached builds")
    p.add_argument("name", nargs="*", help="extension names (default: the whole jitload cache for this torch)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.argv = argv
    handler = {"doctor": cmd_doctor, "build": cmd_build, "check": cmd_check, "bench": cmd_bench,
               "watch": cmd_watch, "clean": cmd_clean, "prepare": cmd_prepare}[args.command]
    try:
        return handler(args)
    except BuildError as err:
        print(err, file=sys.stderr)
        return 2
    except (KeyError, FileNotFoundError, ValueError) as err:
        print(f"jitload: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
