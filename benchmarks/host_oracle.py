"""An oracle for the host JIT: what the interpreter runs after a host edit must behave as the full build does.

After a host edit, :meth:`jitload.Extension.reload` runs the edited host code in a C++ interpreter (cling) and
builds in full behind it; :meth:`~jitload.Extension.wait` loads the full build in its place. The full build is
the truth, so this script makes the same calls before and after: for each program of ``tests/host_corpus``
(see its ``programs.py``), the base text is built in full (``JITLOAD_HOST_JIT=0``), then each edit is saved
and reloaded with the interpreter on. Where the interpreter took the edit (status ``jit``), every call is
recorded, the full build is awaited, and every call recorded again in the same process; any difference is a
FAILURE. An op library's full build is loaded by the next process only, so its second record comes from a new
process that loads it. A refusal (status ``built`` at once, the reason in ``info.reason``) is not a failure:
it is counted with its reason.

A record holds what a caller could see: the value (a tensor's Python type, dtype, shape, strides, autograd
flags and exact bytes, so NaN positions and sign bits count; a Python value's type and repr), or the exception's
type and message; what C and C++ printed to file descriptors 1 and 2; and the Python warnings raised.

Each program runs in a process of its own (``--worker``): a failed ``assert`` aborts the process, which is then
recorded as "process died" for that call, and the edit's full record is taken by a new process.

    python benchmarks/host_oracle.py [--programs boundary,ndebug] [--out FILE.md] [--write-results]

The whole corpus takes about 20 minutes on 2 cores (one full build of torch's headers, 15-25 s, per base and
per edit; programs run one after the other, never two builds at once). Exit status 1 on any difference.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "host_corpus")
RESULTS = os.path.join(ROOT, "benchmarks", "results", "host-oracle-cpu.md")
MODULE_PREFIX = "host_oracle_"


def programs() -> dict:
    """The corpus's programs by name (tests/host_corpus/programs.py)."""
    spec = importlib.util.spec_from_file_location("host_corpus_programs", os.path.join(CORPUS, "programs.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return {p.name: p for p in module.PROGRAMS}


def cppyy_available() -> bool:
    return importlib.util.find_spec("cppyy") is not None


# ---- the recorder ----

# Legitimate differences only. Object addresses change from run to run and between any two builds. The
# extension's generated module name (its user name plus jitload's version suffix) and the interpreter's namespace
# are names jitload chose, not the user's code. c10's log prefix carries the wall-clock time and thread id of
# the moment it was written. C++ backtrace frames list addresses and symbols of two different binaries; the
# "Exception raised from <function> at <file>:<line>" line that names the user's code is kept.
_NORMALISE = [
    (re.compile(r"0x[0-9a-fA-F]{5,}"), "0xADDR"),
    (re.compile(r"\b" + MODULE_PREFIX + r"\w+?(_v\d+)?\b"), "<module>"),
    (re.compile(r"\bjl_\w+_\d+\b"), "<module>"),
    (re.compile(r"\[([WEI])\d{4} \d\d:\d\d:\d\d\.\d+ (\d+ )?"), r"[\1<time> "),
    (re.compile(r"\nframe #\d+:[^\n]*"), ""),
]


def normalise(text: str) -> str:
    for pattern, new in _NORMALISE:
        text = pattern.sub(new, text)
    return text


def record_value(value) -> object:
    """What a caller sees of ``value``, as JSON."""
    import torch

    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous() if value.device.type != "meta" else None
        raw = data.reshape(-1).view(torch.uint8).numpy().tobytes().hex() if data is not None else "meta"
        return {"type": f"{type(value).__module__}.{type(value).__qualname__}", "dtype": str(value.dtype),
                "shape": list(value.shape), "stride": list(value.stride()), "device": str(value.device),
                "requires_grad": value.requires_grad, "grad_fn": type(value.grad_fn).__name__ if value.grad_fn
                else None, "bytes": raw, "values": normalise(repr(data.tolist())) if data is not None else "meta"}
    if isinstance(value, list | tuple):
        return {"type": type(value).__name__, "items": [record_value(v) for v in value]}
    if isinstance(value, dict):
        return {"type": "dict", "items": {str(k): record_value(v) for k, v in value.items()}}
    if isinstance(value, type):
        return {"type": "type", "repr": normalise(f"{value.__module__}.{value.__qualname__}")}
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}", "repr": normalise(repr(value))}


@contextlib.contextmanager
def captured_fds(into: dict):
    """fd 1 and 2 (where C and C++ write) into temp files for the duration; C stdio flushed before and after."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush(), sys.stderr.flush(), libc.fflush(None)
    saved, files = {}, {}
    for fd in (1, 2):
        files[fd] = tempfile.TemporaryFile()
        saved[fd] = os.dup(fd)
        os.dup2(files[fd].fileno(), fd)
    try:
        yield
    finally:
        sys.stdout.flush(), sys.stderr.flush(), libc.fflush(None)
        for fd in (1, 2):
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            files[fd].seek(0)
            into["fd1" if fd == 1 else "fd2"] = normalise(files[fd].read().decode(errors="replace"))
            files[fd].close()


def _helpers() -> dict:
    import torch
    from torch.overrides import TorchFunctionMode

    class TaggedTensor(torch.Tensor):  # a subclass with a __torch_function__ of its own, as libraries write them
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    def tagged(t):
        return t.as_subclass(TaggedTensor)

    class Logging(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(normalise(getattr(func, "__name__", str(func))))
            return func(*args, **(kwargs or {}))

    def in_mode(fn):
        with Logging() as mode:
            out = fn()
        return {"result": out, "torch functions seen": mode.names}

    def in_thread(fn):
        out = []
        t = threading.Thread(target=lambda: out.append(fn()))
        t.start()
        t.join()
        return out[0]

    return {"torch": torch, "Tagged": tagged, "in_mode": in_mode, "in_thread": in_thread,
            "bits": lambda f: f.hex() if isinstance(f, float) else f}


def record_call(ext, code: str, helpers: dict) -> dict:
    """One call's record: value or exception, fd output and Python warnings."""
    import torch

    scope = {**helpers, "ext": ext, "x": torch.linspace(-2, 3, 6, dtype=torch.float64)}
    out: dict = {}
    with warnings.catch_warnings(record=True) as caught, captured_fds(out):
        warnings.simplefilter("always")
        try:
            if "\n" in code.strip():
                exec(code, scope)
                value = scope["result"]
            else:
                value = eval(code, scope)
            out["value"] = record_value(value)
        except Exception as err:  # the record is the point: any exception is what the caller sees
            out["raised"] = f"{type(err).__module__}.{type(err).__qualname__}: {normalise(str(err))}"
    out["warnings"] = [f"{w.category.__name__}: {normalise(str(w.message))}" for w in caught]
    return out


# ---- the worker: one program, in a process of its own ----

def _materialise(program, folder: str, values: dict[str, str]) -> list[str]:
    paths = []
    for name in (*program.sources, *program.headers):
        with open(os.path.join(CORPUS, name)) as f:
            text = f.read()
        for key, value in values.items():
            text = text.replace(f"@{key}@", value)
        path = os.path.join(folder, name)
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)
        if name in program.sources:
            paths.append(path)
    return paths


def worker(name: str, edits: list[str], folder: str, log: str, full_only: str | None) -> None:
    """Build the base in full, then for each edit: reload, record, wait, record (events appended to ``log``).
    ``full_only``: load that edit's text with the interpreter off and record it (the full build's record)."""
    import jitload
    from jitload.builder import hostjit

    program = programs()[name]
    helpers = _helpers()
    events = open(log, "a")  # held for the whole process, flushed per event

    def emit(**event):
        events.write(json.dumps(event) + "\n")
        events.flush()

    def record_all(ext, edit: str, phase: str) -> None:
        for label, code in program.calls:
            emit(event="begin", edit=edit, phase=phase, call=label)
            emit(event="call", edit=edit, phase=phase, call=label, record=record_call(ext, code, helpers))

    values = dict(program.base)
    kwargs = dict(build_directory=os.path.join(folder, "build"), extra_cflags=list(program.extra_cflags),
                  is_python_module=program.python_module)
    if full_only:
        for edit in edits[:edits.index(full_only) + 1]:
            values.update(program.edits[edit])
    os.environ["JITLOAD_HOST_JIT"] = "0"
    start = time.perf_counter()
    ext = jitload.load(MODULE_PREFIX + name, _materialise(program, folder, values), **kwargs)
    emit(event="base", status=ext.info.status, seconds=time.perf_counter() - start)
    if full_only:
        record_all(ext, full_only, "full")
        emit(event="done")
        return
    os.environ["JITLOAD_HOST_JIT"] = "1"
    pch = hostjit.build_pch()
    if pch is not None:
        pch.wait()  # one compile at a time on the machine
    for edit in edits:
        values.update(program.edits[edit])
        _materialise(program, folder, values)
        start = time.perf_counter()
        try:
            ext.reload()
        except Exception as err:  # a failed full build: recorded, the sweep goes on
            emit(event="reload", edit=edit, status="failed", reason=normalise(str(err))[:2000], seconds=0.0)
            continue
        info = ext.info
        emit(event="reload", edit=edit, status=info.status, reason=normalise(info.reason),
             verification=info.verification, seconds=time.perf_counter() - start)
        if info.status != "jit":
            continue
        record_all(ext, edit, "jit")
        start = time.perf_counter()
        ext.wait(timeout=600)
        emit(event="settled", edit=edit, status=ext.info.status, verification=ext.info.verification,
             seconds=time.perf_counter() - start)
        if program.python_module:
            record_all(ext, edit, "full")
    emit(event="done")


# ---- the parent: workers, outcomes, the report ----

def _events(log: str) -> list[dict]:
    with contextlib.suppress(FileNotFoundError), open(log) as f:
        return [json.loads(line) for line in f if line.strip()]
    return []


def _spawn(name: str, edits: list[str], folder: str, log: str, full_only: str | None = None) -> str:
    """Run a worker; '' when it ended well, else how it ended."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--edits", ",".join(edits),
           "--folder", folder, "--log", log] + (["--full-only", full_only] if full_only else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3000)
    except subprocess.TimeoutExpired:
        return "timed out"
    if done.returncode == 0 and _events(log) and _events(log)[-1]["event"] == "done":
        return ""
    how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
    return f"process died ({how}): {done.stderr.strip()[-300:]}"


def run_program(name: str, edits: list[str], work: str, progress=print) -> list[dict]:
    """Every edit's outcome: {program, edit, status, reason, seconds, differences: [(call, jit, full)]}."""
    program = programs()[name]
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    outcomes, todo = [], list(edits)
    while todo:
        log = os.path.join(folder, f"events-{len(outcomes)}.jsonl")
        death = _spawn(name, todo, folder, log)
        by_edit: dict[str, list[dict]] = {}
        for event in _events(log):
            if event["event"] == "base":
                progress(f"  {name}: base {event['status']} in {event['seconds']:.1f} s")
            by_edit.setdefault(event.get("edit", ""), []).append(event)
        reached = [e for e in todo if e in by_edit]
        if not reached:  # the base itself did not load
            outcomes += [{"program": name, "edit": e, "status": "failed", "reason": death or "no base",
                          "seconds": 0.0, "differences": []} for e in todo]
            break
        for edit in reached:
            last = edit == reached[-1] and bool(death)
            outcome = _outcome(name, edit, by_edit[edit], death if last else "")
            if last and outcome["status"] == "jit":
                outcome["differences"] += _died_differences(name, todo, folder, edit, by_edit[edit], death)
            elif outcome["status"] == "jit" and not program.python_module:
                outcome["differences"] += _next_process_differences(name, todo, folder, edit, by_edit[edit])
            outcomes.append(outcome)
            progress(f"  {name} / {edit}: {outcome['status']} in {outcome['seconds']:.2f} s, "
                     f"{len(outcome['differences'])} differences" + (f" ({outcome['reason'][:120]})"
                                                                     if outcome["status"] != "jit" else ""))
        todo = todo[todo.index(reached[-1]) + 1:] if death else []
    return outcomes


def _records(events: list[dict], phase: str) -> dict[str, dict]:
    return {e["call"]: e["record"] for e in events if e["event"] == "call" and e["phase"] == phase}


def _compare(jit: dict[str, dict], full: dict[str, dict]) -> list[list]:
    return [[call, jit.get(call, "not reached"), full.get(call, "not reached")]
            for call in dict.fromkeys([*jit, *full]) if jit.get(call) != full.get(call)]


def _outcome(name: str, edit: str, events: list[dict], death: str) -> dict:
    reload = next((e for e in events if e["event"] == "reload"), {"status": "died", "reason": death, "seconds": 0})
    differences = []
    if reload["status"] == "jit" and not death:
        settled = next((e for e in events if e["event"] == "settled"), {})
        library = not programs()[name].python_module
        # An op library's full build is for the next process (its schemas register once per process): the
        # interpreter's kernels stay, and the full record comes from a new process.
        for_next = library and "built for the next process" in str(settled.get("verification"))
        if settled and settled.get("status") != "built" and not for_next:
            differences.append(["<full build>", "jit", f"{settled.get('status')}: {settled.get('verification')}"])
        if programs()[name].python_module:
            differences += _compare(_records(events, "jit"), _records(events, "full"))
    return {"program": name, "edit": edit, "status": reload["status"], "reason": reload.get("reason", ""),
            "seconds": reload["seconds"], "differences": differences}


def _fresh_full(name: str, todo: list[str], folder: str, edit: str) -> dict[str, dict]:
    log = os.path.join(folder, f"full-{edit}.jsonl")
    death = _spawn(name, todo, folder, log, full_only=edit)
    records = _records(_events(log), "full")
    begun = [e["call"] for e in _events(log) if e["event"] == "begin"]
    if death and begun and begun[-1] not in records:
        records[begun[-1]] = {"died": death.split(":")[0]}
    return records


def _died_differences(name, todo, folder, edit, events, death) -> list[list]:
    """The process died during the interpreter's calls: the call that was running died; a new process that loads
    the edit's full build gives the full record of every call."""
    jit = _records(events, "jit")
    begun = [e["call"] for e in events if e["event"] == "begin" and e["phase"] == "jit"]
    if begun and begun[-1] not in jit:
        jit[begun[-1]] = {"died": death.split(":")[0]}
    full = _fresh_full(name, todo, folder, edit)
    return _compare(jit, {call: full.get(call, "not reached") for call in jit})


def _next_process_differences(name, todo, folder, edit, events) -> list[list]:
    """An op library's full build is for the next process: a new one loads it and records."""
    return _compare(_records(events, "jit"), _fresh_full(name, todo, folder, edit))


def _cell(value, width: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= width else text[:width - 1] + "…"


def report(outcomes: list[dict], command: str, seconds: float) -> str:
    import torch

    taken = [o for o in outcomes if o["status"] == "jit"]
    refused = [o for o in outcomes if o["status"] != "jit"]
    failures = [(o, d) for o in outcomes for d in o["differences"]]
    lines = [f"# Host-JIT oracle, {datetime.date.today().isoformat()}", "",
             f"- command: `{command}`", f"- commit: {_commit()}; {os.cpu_count()} cores; wall time "
             f"{seconds / 60:.1f} min; torch {torch.__version__}, Python {platform.python_version()}", "",
             f"**edits: {len(outcomes)}, taken by the interpreter: {len(taken)}, refused: {len(refused)}, "
             f"differences: {len(failures)} (in {len({(o['program'], o['edit']) for o, _ in failures})} edits)**",
             "", "## Every edit", "", "| program | edit | status | s | differences | reason |",
             "| --- | --- | --- | ---: | ---: | --- |"]
    lines += [f"| {o['program']} | {o['edit']} | {o['status']} | {o['seconds']:.2f} | {len(o['differences'])} "
              f"| {_cell(o['reason'], 200)} |" for o in outcomes]
    lines += ["", "## Refusals and their reasons", ""] + ([] if refused else ["None."])
    lines += [f"- {o['program']} / {o['edit']} ({o['status']}): {' '.join(o['reason'].split())}" for o in refused]
    lines += ["", "## Differences (FAILURES)", ""] + ([] if failures else ["None."])
    if failures:
        lines += ["| program | edit | call | interpreter | full build |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {o['program']} | {o['edit']} | {d[0]} | {_cell(d[1])} | {_cell(d[2])} |" for o, d in failures]
    return "\n".join(lines) + "\n"


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "jitload"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() or "unknown") + (" (jitload/ with uncommitted changes)" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", help="comma-separated program names (default: all)")
    parser.add_argument("--out", help=f"write the report here (default with --write-results: {RESULTS})")
    parser.add_argument("--write-results", action="store_true", help=f"write the report to {RESULTS}")
    parser.add_argument("--work", help="folder for the builds and event logs (default: a temporary one, removed)")
    for hidden in ("--worker", "--edits", "--folder", "--log", "--full-only"):  # a worker's, from _spawn
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.edits.split(","), args.folder, args.log, args.full_only)
        return 0
    if not cppyy_available():
        print("host_oracle: cppyy is not installed (the host JIT needs it)", file=sys.stderr)
        return 2
    every = programs()
    names = args.programs.split(",") if args.programs else list(every)
    if any(n not in every for n in names):
        parser.error(f"unknown program; programs: {', '.join(every)}")
    work = args.work or tempfile.mkdtemp(prefix="host_oracle_")
    start = time.perf_counter()
    outcomes = []
    try:
        for i, name in enumerate(names, 1):
            print(f"[{i}/{len(names)}] {name} ({time.perf_counter() - start:.0f} s)", flush=True)
            outcomes += run_program(name, list(every[name].edits), work, progress=lambda s: print(s, flush=True))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - start
    command = ("python benchmarks/host_oracle.py " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    text = report(outcomes, command, seconds)
    out = args.out or (RESULTS if args.write_results else None)
    if out:
        with open(out, "w") as f:
            f.write(text)
        print(f"report written to {out}")
    else:
        print(text + f"\n(not written: pass --write-results for {os.path.relpath(RESULTS, ROOT)}, or --out FILE)")
    return 1 if any(o["differences"] for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
