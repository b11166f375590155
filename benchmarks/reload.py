"""Rebuild times: jitload vs torch.utils.cpp_extension's load()/load_inline() on the same sources.

Part 1, the split layout: for each loader, one fresh Python process (as a notebook would be) does a cold
build, a no-op reload, a kernel-body edit and a header-only edit, each followed by a call that says whether
the new code is live. binding.cpp includes torch and api.h; kernel.cu includes api.h and kernel.cuh, no torch
header. The last step edits api.h, which the binding includes too.

Part 2 (on a GPU), the layouts people write first, from tests/swap_corpus: the seed article's one-file
add.cu, an AT_DISPATCH template (checked in half precision), load_inline with a torch wrapper in
cuda_sources, and a TORCH_LIBRARY op library. Each step is timed from the call of load to the first checked
result: cold, kernel-body edit, (jitload) the wait for the background full build that verifies the swap,
the next process after the edit (a restart: load and check only), a re-save of identical bytes, two host
edits (a TORCH_CHECK message changed, then changed back) and, for jitload, the wait for the full
build that replaces the host JIT's code. jitload runs with JITLOAD_HOST_JIT=warm (as `jitload watch` does):
torch's headers are parsed for the host JIT during the cold build; --host-jit lazy parses them at the first
host edit instead. Each (layout, loader) pair runs in its own process, --jobs of them at once.

Part 3 (any machine), a C++ extension written the seed article's way, torch's load() and then jitload (host
JIT on) each in a fresh process: the first load of a source never built, then two host edits (a constant);
for jitload, the wait for the full build that replaces the interpreter's code, then a next process with
JITLOAD_HOST_JIT=warm (a Jupyter kernel's default): its load from disk, its interpreter started in the
background, and its first host edit. jitload's first load takes the interpreter only where torch's headers are
precompiled for it (`jitload prepare`, which make runs; once per machine and torch version).

Part 4 (the interpreter's first result needs a GPU where sources hold kernels), a fresh machine: an empty
extension cache, `jitload prepare` timed (what make's install step runs), then the first load of the article's
two files (notebooks/article) and of an op library in a fresh process by each loader, jitload's status line
saying what ran, its full build's wait, and a next process's first host edit.

    python benchmarks/reload.py [--jobs 8] [--out reload.md]
    python benchmarks/reload.py --cpp-only        # part 3 alone
    python benchmarks/reload.py --fresh-only      # part 4 alone
    python benchmarks/reload.py --write-results   # the tables become this machine's reload section of
                                                  # benchmarks/results/ (results_page.py stamps it)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time

BINDING = """
#include <torch/extension.h>
#include "api.h"
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("value", &host_value);
    m.def("device_value", &device_value);
}
"""
# The interface both sides include: editing it must recompile the binding too.
API = """
#pragma once
#define API_CONST {api}
int host_value();
int device_value();
"""
# A header only the kernel includes (tile sizes, device helpers): editing it recompiles the kernel alone.
KERNEL_HEADER = """
#pragma once
#define HEADER_CONST {header}
"""
KERNEL = """
#include <cuda_runtime.h>
#include "api.h"
#include "kernel.cuh"
#define KERNEL_CONST {kernel}
__global__ void write_value(int* out) {{ *out = KERNEL_CONST + HEADER_CONST + API_CONST; }}
int host_value() {{ return KERNEL_CONST + HEADER_CONST + API_CONST; }}
int device_value() {{  // runs the kernel: proves the new device code, not just host code, is loaded
    int* d = nullptr; int h = -1;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) return -1;
    write_value<<<1, 1>>>(d);
    cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    return h;
}}
"""

# Runs in a fresh process per loader; prints one JSON line per step.
WORKER = r"""
import json, os, sys, time, statistics
import torch
src, build_dir, which = sys.argv[1], sys.argv[2], sys.argv[3]
if which == "jitload":
    import jitload
    load = jitload.load
else:
    from torch.utils.cpp_extension import load
sources = [os.path.join(src, "binding.cpp"), os.path.join(src, "kernel.cu")]
os.makedirs(build_dir, exist_ok=True)  # torch 2.11's load() does not create it
def call(m):
    return m.device_value() if torch.cuda.is_available() else m.value()
def step(name, expected, reps=1):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        m = load(name="reload_bench", sources=sources, build_directory=build_dir)
        times.append(time.perf_counter() - t)
    got = call(m)
    print(json.dumps({"step": name, "seconds": statistics.median(times), "expected": expected, "got": got}),
          flush=True)
def edit(path, old, new):
    text = open(path).read()
    assert old in text, (path, old)
    open(path, "w").write(text.replace(old, new))
step("cold build", 11)
step("no-op reload", 11, reps=20)
edit(os.path.join(src, "kernel.cu"), "#define KERNEL_CONST 10", "#define KERNEL_CONST 20")
step("kernel-body edit", 21)
edit(os.path.join(src, "kernel.cuh"), "#define HEADER_CONST 1", "#define HEADER_CONST 5")
step("header-only edit (kernel header)", 25)
edit(os.path.join(src, "api.h"), "#define API_CONST 0", "#define API_CONST 100")
step("header-only edit (binding's header)", 125)
"""


def _write_sources(folder: str) -> None:
    for name, text in (("binding.cpp", BINDING), ("api.h", API.format(api=0)),
                       ("kernel.cuh", KERNEL_HEADER.format(header=1)), ("kernel.cu", KERNEL.format(kernel=10))):
        with open(os.path.join(folder, name), "w") as f:
            f.write(textwrap.dedent(text).lstrip())


def _run(which: str, env: dict[str, str]) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix=f"reload-{which}-") as tmp:
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        _write_sources(src)
        proc = subprocess.run([sys.executable, "-c", WORKER, src, os.path.join(tmp, "build"), which],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{which} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


MANY_FILES = 10
NOOP_WORKER = r"""
import os, sys, time, statistics
src, build_dir, which, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if which == "jitload":
    from jitload import load
else:
    from torch.utils.cpp_extension import load
sources = [os.path.join(src, f"f{i}.cpp") for i in range(n)]
os.makedirs(build_dir, exist_ok=True)  # torch 2.11's load() does not create it
load(name="noop_bench", sources=sources, build_directory=build_dir)
times = []
for _ in range(200):
    t = time.perf_counter()
    load(name="noop_bench", sources=sources, build_directory=build_dir)
    times.append(time.perf_counter() - t)
print(statistics.median(times))
"""


def _noop_many_files(which: str, env: dict[str, str]) -> float:
    """Median no-op reload time of a MANY_FILES-file extension (pybind11-only binding: a quick cold build)."""
    with tempfile.TemporaryDirectory(prefix=f"noop-{which}-") as tmp:
        for i in range(MANY_FILES):
            body = ("#include <pybind11/pybind11.h>\nint f1();\n"
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"f1\", &f1); }\n") if i == 0 else \
                   f"int f{i}() {{ return {i}; }}\n"
            with open(os.path.join(tmp, f"f{i}.cpp"), "w") as f:
                f.write(body)
        proc = subprocess.run([sys.executable, "-c", NOOP_WORKER, tmp, os.path.join(tmp, "build"), which,
                               str(MANY_FILES)], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{which} no-op run failed:\n{proc.stderr[-4000:]}")
        return float(proc.stdout.split()[-1])


CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests", "swap_corpus")
# layout: (files, kernel edit, host edit); the worker knows how each layout is loaded and checked.
LAYOUTS = {
    "seed article: one add.cu": (["seed_add.cu"], ("C[idx] = A[idx] + B[idx];", "C[idx] = A[idx] + 2.0f * B[idx];"),
                                 ('"B must be a CUDA tensor"', '"B must live on the GPU"')),
    "AT_DISPATCH template (half)": (["dispatch_template.cu"], ("x[i]) * scale + shift", "x[i]) * scale - shift"),
                                    ('"x must be contiguous"', '"x: contiguous please"')),
    "load_inline, torch wrapper in cuda_sources": (["inline_scale.cu"], ("y[i] = x[i] * k;", "y[i] = x[i] * k + 1.0f;"),
                                                   ('"x: float32 CUDA"', '"x: a float32 CUDA tensor"')),
    "TORCH_LIBRARY op library": (["op_library.cu"], ("a[idx] * b[idx] + c", "a[idx] * b[idx] - c"),
                                 ("TORCH_CHECK(a.sizes() == b.sizes());",
                                  'TORCH_CHECK(a.sizes() == b.sizes(), "a and b differ in size");')),
}
LAYOUT_WORKER = r"""
import json, os, sys, time, torch
import subprocess
layout, which, src, build_dir, kernel_edit, host_edit = sys.argv[1:7]
next_process = sys.argv[7:] == ["next"]
kernel_edit, host_edit = json.loads(kernel_edit), json.loads(host_edit)
if which == "jitload":
    import jitload as ce
else:
    from torch.utils import cpp_extension as ce
os.makedirs(build_dir, exist_ok=True)
a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
files = sorted(os.listdir(src))
path = os.path.join(src, files[0])
def load(edited):
    if layout.startswith("load_inline"):
        cuda = open(path).read()
        m = ce.load_inline("bench_inline", "torch::Tensor scale(torch::Tensor x, double k);", cuda_sources=cuda,
                           functions=["scale"], build_directory=build_dir)
        return m.scale(a, 3.0), a * 3 + (1 if edited else 0)
    if layout.startswith("TORCH_LIBRARY"):
        ce.load("bench_oplib", [path], build_directory=build_dir, is_python_module=False)
        return torch.ops.extension_cpp.mymuladd(a, b, 0.5), a * b + (-0.5 if edited else 0.5)
    if layout.startswith("AT_DISPATCH"):
        m = ce.load("bench_dispatch", [path], build_directory=build_dir)
        h = a.half()
        return m.scale_shift(h, 2.0, 1.0).float(), (h.float() * 2 + (-1 if edited else 1)).half().float()
    m = ce.load("bench_seed", [path], build_directory=build_dir)
    return m.add(a, b), a + (2 if edited else 1) * b
def step(name, edited):
    t = time.perf_counter()
    try:
        got, want = load(edited)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t
        live = bool(torch.allclose(got, want, rtol=1e-2, atol=1e-2))
        how = str(getattr(ce, "handles", lambda: {})() and list(ce.handles().values())[0].info or "")
    except Exception as err:
        seconds, live, how = time.perf_counter() - t, None, f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
    print(json.dumps({"step": name, "seconds": seconds, "live": live, "how": how}), flush=True)
def edit(old, new):
    text = open(path).read()
    open(path, "w").write(text.replace(old, new))
if next_process:  # a restart (a notebook kernel, a second notebook) after the edit: load and check only
    step("next process after the kernel edit", True)
    raise SystemExit(0)
step("cold", False)
edit(*kernel_edit)
step("kernel-body edit", True)
if which == "jitload":
    t = time.perf_counter()
    ce.wait()
    info = str(list(ce.handles().values())[0].info)
    print(json.dumps({"step": "kernel edit verified (background full build)", "seconds": time.perf_counter() - t,
                      "live": bool(torch.allclose(*load(True), rtol=1e-2, atol=1e-2)), "how": info}), flush=True)
done = subprocess.run([sys.executable, "-c", __CODE__, *sys.argv[1:7], "next"], capture_output=True, text=True)
print(done.stdout, end="", flush=True)
same = open(path).read()
open(path, "w").write(same)
step("re-save, same bytes", True)
if host_edit:
    edit(*host_edit)
    step("host edit (TORCH_CHECK message)", True)
    edit(host_edit[1], host_edit[0])
    step("host edit again (the message back)", True)
    if which == "jitload":  # the message back: the full build is of the text loaded cold
        t = time.perf_counter()
        ce.wait()
        info = str(list(ce.handles().values())[0].info)
        print(json.dumps({"step": "host edit replaced by the full build", "seconds": time.perf_counter() - t,
                          "live": bool(torch.allclose(*load(True), rtol=1e-2, atol=1e-2)), "how": info}), flush=True)
"""


def _layout_run(layout: str, which: str, env: dict[str, str]) -> list[dict]:
    files, kernel_edit, host_edit = LAYOUTS[layout]
    with tempfile.TemporaryDirectory(prefix=f"layout-{which}-") as tmp:
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        for name in files:
            with open(os.path.join(CORPUS, name)) as f, open(os.path.join(src, name), "w") as out:
                out.write(f.read())
        proc = subprocess.run([sys.executable, "-c", LAYOUT_WORKER.replace("__CODE__", repr(LAYOUT_WORKER)), layout,
                               which, src, os.path.join(tmp, "build"),
                               json.dumps(kernel_edit), json.dumps(host_edit)], capture_output=True, text=True,
                              env=env)
        steps = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0:
            # The steps after the last one printed did not run: say how the process ended, in their cells.
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            steps.append({"step": "(process ended)", "seconds": 0.0, "live": None, "how": last[:160]})
        return steps


def layouts_table(env: dict[str, str], jobs: int) -> list[str]:
    """Part 2: every layout with each loader, in parallel processes."""
    from concurrent.futures import ThreadPoolExecutor

    runs = [(layout, which) for layout in LAYOUTS for which in ("torch", "jitload")]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = dict(zip(runs, pool.map(lambda r: _layout_run(*r, env), runs), strict=True))

    def cell(entry: dict | None, ended: dict | None = None) -> str:
        if entry is None:
            return f"process ended: {ended['how']}" if ended else "—"
        live = {True: "", False: " **stale**", None: f" error: {entry['how']}"}[entry["live"]]
        return f"{entry['seconds']:.3f}{live}"

    lines = ["", f"## Layouts people write first ({jobs} processes at once)", "",
             "Seconds from the call of load to the first checked result; **stale** = the result was the old code's.",
             "", "| layout | step | torch | jitload | jitload did |", "| --- | --- | ---: | ---: | --- |"]
    for layout in LAYOUTS:
        torch_steps = {s["step"]: s for s in results[(layout, "torch")]}
        ended = torch_steps.get("(process ended)")
        for entry in results[(layout, "jitload")]:
            # The status line's last clause is what the background full build concluded, where there was one.
            before, _, after = entry["how"].partition(" -> ")
            how = after.partition("; ")[2] if "verified" in entry["step"] else before
            waits = entry["step"].endswith(("(background full build)", "replaced by the full build"))
            theirs = "—" if waits else cell(torch_steps.get(entry["step"]), ended)
            lines.append(f"| {layout} | {entry['step']} | {theirs} | {cell(entry)} | {how} |")
    return lines


# The end of part 3's and part 4's workers: jitload's wait for the full build that replaces the interpreter's code.
WAIT_FULL_BUILD = r"""
if which == "jitload":
    t = time.perf_counter()
    ce.wait()
    print(json.dumps({"step": "full build replacing the JIT's code", "seconds": time.perf_counter() - t,
                      "live": True, "how": str(list(ce.handles().values())[0].info)}), flush=True)
"""


# Part 3 (any machine): a C++ extension's host code, the host JIT against torch's load(), in fresh processes.
CPP_SOURCE = """
#include <torch/extension.h>
torch::Tensor scale(torch::Tensor x, double alpha) {
    TORCH_CHECK(x.dim() == 1, "scale: x must be 1-D");
    return x * alpha + OFFSET;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
"""
CPP_WORKER = r"""
import json, os, sys, time
t = time.perf_counter()
import torch
which, src, build_dir, offsets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if which == "jitload":
    import jitload as ce
else:
    from torch.utils import cpp_extension as ce
os.makedirs(build_dir, exist_ok=True)
x = torch.arange(4.0)
def step(name, offset, start):
    m = ce.load("bench_cpp", [src], build_directory=build_dir)
    live = bool(torch.equal(m.scale(x, 2.0), x * 2 + float(offset)))
    how = str(m.info) if which == "jitload" else ""
    print(json.dumps({"step": name, "seconds": time.perf_counter() - start, "live": live, "how": how}), flush=True)
step("first load in a new process (import torch included)", offsets[0], t)
for n, offset in enumerate(offsets[1:], 1):
    text = open(src).read()
    open(src, "w").write(text.replace(f"+ {offsets[n - 1]};", f"+ {offset};"))
    step(f"host edit {n}", offset, time.perf_counter())
""" + WAIT_FULL_BUILD


# A next process's wait for its interpreter, started in the background by its load from disk.
WAIT_INTERPRETER = r"""
loaded = time.perf_counter()
while not hostjit._session.ready and time.perf_counter() - loaded < 600:
    time.sleep(0.05)
print(json.dumps({"step": "its interpreter up, in the background (from the load)",
                  "seconds": time.perf_counter() - loaded, "live": hostjit._session.ready, "how": ""}), flush=True)
"""


# A later process (a notebook's kernel restarted; JITLOAD_HOST_JIT=warm, as a Jupyter kernel, %load_ext jitload and
# `jitload watch` have it): the build loads from disk, the interpreter starts in the background while the user
# reads the result, and the process's first host edit is timed from its save.
CPP_WARM_WORKER = r"""
import json, sys, time
t = time.perf_counter()
import torch
import jitload
from jitload.builder import hostjit
src, build_dir, offset, new = sys.argv[1:5]
x = torch.arange(4.0)
m = jitload.load("bench_cpp", [src], build_directory=build_dir)
live = bool(torch.equal(m.scale(x, 2.0), x * 2 + float(offset)))
print(json.dumps({"step": "next process: load from disk (import torch included)", "seconds": time.perf_counter() - t,
                  "live": live, "how": str(m.info)}), flush=True)
__WAIT_INTERPRETER__
text = open(src).read()
open(src, "w").write(text.replace(f"+ {offset};", f"+ {new};"))
t = time.perf_counter()
m.reload()
live = bool(torch.equal(m.scale(x, 2.0), x * 2 + float(new)))
print(json.dumps({"step": "its first host edit", "seconds": time.perf_counter() - t, "live": live,
                  "how": str(m.info)}), flush=True)
m.stop_verification()
""".replace("__WAIT_INTERPRETER__", WAIT_INTERPRETER)


def cpp_table(env: dict[str, str]) -> list[str]:
    """Part 3: one fresh process per loader (jitload with the host JIT on), one after the other."""
    rows: dict[str, dict[str, dict]] = {}
    for which in ("torch", "jitload"):
        with tempfile.TemporaryDirectory(prefix=f"cpp-{which}-") as tmp:
            src = os.path.join(tmp, "ops.cpp")
            with open(src, "w") as f:
                f.write(CPP_SOURCE.replace("OFFSET", "1"))
            run_env = dict(env, JITLOAD_HOST_JIT=env.get("JITLOAD_HOST_JIT") or "1")
            proc = subprocess.run([sys.executable, "-c", CPP_WORKER, which, src, os.path.join(tmp, "build"),
                                   "1", "2", "3"], capture_output=True, text=True, env=run_env)
            steps = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0:
                raise SystemExit(f"{which}: {proc.stderr[-3000:]}")
            if which == "jitload":
                proc = subprocess.run([sys.executable, "-c", CPP_WARM_WORKER, src, os.path.join(tmp, "build"), "3",
                                       "4"], capture_output=True, text=True, env=dict(env, JITLOAD_HOST_JIT="warm"))
                if proc.returncode != 0:
                    raise SystemExit(f"{which} (next process): {proc.stderr[-3000:]}")
                steps += [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
            for entry in steps:
                rows.setdefault(entry["step"], {})[which] = entry

    def cell(entry: dict | None) -> str:
        return "—" if entry is None else f"{entry['seconds']:.2f}{'' if entry['live'] else ' **stale**'}"

    lines = ["", "## A C++ extension's host code (the host JIT), fresh processes one at a time", "",
             "| step | torch | jitload | jitload did |", "| --- | ---: | ---: | --- |"]
    for step, by in rows.items():
        how = by.get("jitload", {}).get("how", "").partition(" -> ")[0]
        lines.append(f"| {step} | {cell(by.get('torch'))} | {cell(by.get('jitload'))} | {how} |")
    return lines


# Part 4 (a GPU for the interpreter's first result), a fresh machine: an empty extension cache (no PCH, no
# objects, no ccache), then what make's install step does (`jitload prepare`), then the article's two files
# (notebooks/article) and an op library, each loaded for the first time in a fresh process by each loader.
ARTICLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "notebooks", "article")
FRESH_WORKER = r"""
import json, os, sys, time
t = time.perf_counter()
import torch
which, kind, src, build_dir = sys.argv[1:5]
if which == "jitload":
    import jitload as ce
else:
    from torch.utils import cpp_extension as ce
imported = time.perf_counter() - t
gpu = torch.cuda.is_available()
a, b = (torch.randn(1 << 20, device="cuda" if gpu else "cpu") for _ in range(2))
os.makedirs(build_dir, exist_ok=True)
t = time.perf_counter()
if kind == "article":
    m = ce.load(name="custom_add", sources=[os.path.join(src, "bindings.cpp"), os.path.join(src, "custom_kernel.cu")],
                extra_cflags=["-O2"], extra_cuda_cflags=["-O2", "--use_fast_math"], build_directory=build_dir)
    if gpu:
        live = bool(torch.equal(m.add(a, b), a + b))
    else:  # no GPU: the wrapper's own check, in the code just loaded
        try:
            m.add(a, b)
            live = False
        except RuntimeError as err:
            live = "A must be a CUDA tensor" in str(err)
else:
    ce.load(name="fresh_oplib", sources=[src], build_directory=build_dir, is_python_module=False)
    live = bool(torch.allclose(torch.ops.extension_cpp.mymuladd(a, b, 0.5), a * b + 0.5)) if gpu else True
if gpu:
    torch.cuda.synchronize()
seconds = time.perf_counter() - t
how = str(list(ce.handles().values())[0].info) if which == "jitload" else ""
print(json.dumps({"step": "first load", "seconds": seconds, "import": imported, "live": live, "how": how}), flush=True)
""" + WAIT_FULL_BUILD
# The next process (a notebook's kernel restarted; JITLOAD_HOST_JIT=warm, as a Jupyter kernel has it): the article's
# build loads from disk, the interpreter starts in the background, and the process's first host edit (the
# TORCH_CHECK message of custom_kernel.cu) is timed from its save to the new message raised and a checked result.
FRESH_EDIT_WORKER = r"""
import json, os, sys, time
import torch
import jitload
from jitload.builder import hostjit
src, build_dir = sys.argv[1:3]
gpu = torch.cuda.is_available()
a, b = (torch.randn(1 << 20, device="cuda" if gpu else "cpu") for _ in range(2))
t = time.perf_counter()
m = jitload.load(name="custom_add", sources=[os.path.join(src, "bindings.cpp"), os.path.join(src, "custom_kernel.cu")],
                 extra_cflags=["-O2"], extra_cuda_cflags=["-O2", "--use_fast_math"], build_directory=build_dir)
print(json.dumps({"step": "next process: load from disk", "seconds": time.perf_counter() - t, "live": True,
                  "how": str(m.info)}), flush=True)
__WAIT_INTERPRETER__
path = os.path.join(src, "custom_kernel.cu")
text = open(path).read()
open(path, "w").write(text.replace('"A must be a CUDA tensor"', '"A must live on the GPU"'))
t = time.perf_counter()
m.reload()
try:
    m.add(a.cpu(), b)
    live = False
except RuntimeError as err:
    live = "A must live on the GPU" in str(err)
if gpu:
    live = live and bool(torch.equal(m.add(a, b), a + b))
    torch.cuda.synchronize()
print(json.dumps({"step": "its first host edit (a TORCH_CHECK message)", "seconds": time.perf_counter() - t,
                  "live": live, "how": str(m.info)}), flush=True)
m.stop_verification()
""".replace("__WAIT_INTERPRETER__", WAIT_INTERPRETER)


def _fresh_run(which: str, kind: str, env: dict[str, str], tmp: str) -> list[dict]:
    """One loader's first load of ``kind`` in a fresh process (and jitload's next process, for the article)."""
    src = os.path.join(tmp, f"src-{which}")
    if kind == "article":
        os.makedirs(src)
        for name in ("bindings.cpp", "custom_kernel.cu"):
            with open(os.path.join(ARTICLE, name)) as f, open(os.path.join(src, name), "w") as out:
                out.write(f.read())
    else:
        src += ".cu"
        with open(os.path.join(CORPUS, "op_library.cu")) as f, open(src, "w") as out:
            out.write(f.read())
    build = os.path.join(tmp, f"build-{which}-{kind}")
    proc = subprocess.run([sys.executable, "-c", FRESH_WORKER, which, kind, src, build], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{which}, {kind}: {proc.stderr[-3000:]}")
    steps = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if which == "jitload" and kind == "article":
        proc = subprocess.run([sys.executable, "-c", FRESH_EDIT_WORKER, src, build], capture_output=True, text=True,
                              env=dict(env, JITLOAD_HOST_JIT="warm"))
        if proc.returncode != 0:
            raise SystemExit(f"jitload, next process: {proc.stderr[-3000:]}")
        steps += [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return steps


def fresh_table(env: dict[str, str], gpu: bool) -> list[str]:
    """Part 4: from an empty extension cache, `jitload prepare` (make's install step), then each loader's first
    loads; torch's runs beside jitload's (one process each), jitload's one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    with tempfile.TemporaryDirectory(prefix="fresh-") as tmp:
        env = dict(env, TORCH_EXTENSIONS_DIR=os.path.join(tmp, "cache"), JITLOAD_CCACHE="0")
        env.pop("JITLOAD_HOST_JIT", None)  # each loader's default, as a first `python -c` has it
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "jitload", "prepare"], capture_output=True, text=True, env=env)
        prepare = time.perf_counter() - t
        if done.returncode != 0:
            raise SystemExit(f"jitload prepare: {(done.stdout + done.stderr)[-2000:]}")
        kinds = ("article", "op library") if gpu else ("article",)
        with ThreadPoolExecutor(max_workers=2) as pool:
            theirs = pool.submit(lambda: {k: _fresh_run("torch", k, env, tmp) for k in kinds})
            ours = {k: _fresh_run("jitload", k, env, tmp) for k in kinds}
            theirs = theirs.result()
    lines = ["", "## A fresh machine: nothing built, then what make's install step does", "",
             f"`jitload prepare` (make's install step; the interpreter's PCH of torch's and CUDA's headers, once per "
             f"machine and torch version): {prepare:.1f} s. Then each first load in a fresh process (`import torch` "
             "and the loader's import not counted, given apart), torch's `load()` in a process beside jitload's; "
             "seconds from the call of `load` to the first checked result.", "",
             "| sources | step | torch | jitload | jitload did |", "| --- | --- | ---: | ---: | --- |"]
    for kind in kinds:
        for entry in ours[kind]:
            torch_entry = next((e for e in theirs[kind] if e["step"] == entry["step"]), None)
            mine = f"**{entry['seconds']:.2f}**{'' if entry['live'] else ' wrong result'}"
            other = "—" if torch_entry is None else \
                f"{torch_entry['seconds']:.2f}{'' if torch_entry['live'] else ' wrong result'}"
            what = "the article's two files" if kind == "article" else "an op library (`op_library.cu`)"
            lines.append(f"| {what} | {entry['step']} | {other} | {mine} | {entry['how'][:160]} |")
    return lines


def _machine_pch(env: dict[str, str]) -> list[str]:
    """The interpreter's PCH of torch's headers, made first by `jitload prepare` (as make's install step does,
    once per machine and torch version), so that every first load below finds it."""
    done = subprocess.run([sys.executable, "-m", "jitload", "prepare"], capture_output=True, text=True,
                          env=dict(env, JITLOAD_HOST_JIT="1"))
    if done.returncode != 0:
        return ["", f"The interpreter's PCH could not be made: {(done.stdout + done.stderr)[-300:]}"]
    what = done.stdout.strip().splitlines()[-1].removeprefix("jitload prepare: ").split(":")[0]
    return ["", f"The interpreter's PCH of torch's headers (`jitload prepare`, run by make): {what} (once per "
                "machine and torch version)."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    parser.add_argument("--jobs", type=int, default=1, help="layout runs at once (part 2)")
    parser.add_argument("--skip-split", action="store_true", help="run part 2 only")
    parser.add_argument("--cpp-only", action="store_true", help="run part 3 alone (a C++ extension's host edits)")
    parser.add_argument("--skip-cpp", action="store_true", help="leave part 3 (a C++ extension's host edits) out")
    parser.add_argument("--fresh-only", action="store_true",
                        help="run part 4 alone (a fresh machine: empty caches, `jitload prepare`, first loads)")
    parser.add_argument("--write-results", action="store_true",
                        help="make the tables this machine's reload section of benchmarks/results/ (results_page.py)")
    parser.add_argument("--host-jit", choices=("warm", "lazy", "off"), default="warm",
                        help="jitload's JITLOAD_HOST_JIT in part 2 (default: warm, as `jitload watch` runs)")
    args = parser.parse_args()

    import torch

    from jitload.builder import toolchain

    cuda_home = toolchain.find_cuda_home()
    if cuda_home is None:
        raise SystemExit("this benchmark compiles a .cu file: no CUDA toolkit found")
    # Plain torch misdetects CUDA_HOME on some machines and cannot pick an arch without a GPU; give both
    # loaders the same toolkit and arch so that only rebuild behaviour differs.
    env = dict(os.environ, CUDA_HOME=cuda_home)
    env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    if args.cpp_only or args.fresh_only:
        args.skip_split = True
    results = {} if args.skip_split else {which: _run(which, env) for which in ("torch", "jitload")}

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU (host code checked)"
    lines = [
        f"# reload benchmark, {datetime.date.today().isoformat()}",
        "",
        f"- machine: {platform.node()}, {os.cpu_count()} cores, GPU: {gpu}",
        f"- torch {torch.__version__}, CUDA {torch.version.cuda}, nvcc {toolchain.nvcc_version(cuda_home)}, "
        f"Python {platform.python_version()}, TORCH_CUDA_ARCH_LIST={env['TORCH_CUDA_ARCH_LIST']}",
        f"- command: `python benchmarks/reload.py --jobs {args.jobs} --host-jit {args.host_jit}"
        f"{' --cpp-only' * args.cpp_only}{' --fresh-only' * args.fresh_only}{' --skip-split' * args.skip_split}"
        f"{' --skip-cpp' * args.skip_cpp}`",
    ]
    if results:
        lines += ["- live? = the call after the step returned the edited constant (no = a stale module)", "",
                  "| step | torch load() s | live? | jitload s | live? | torch / jitload |",
                  "| --- | ---: | :---: | ---: | :---: | ---: |"]
    for t, j in zip(results.get("torch", []), results.get("jitload", []), strict=True):
        live_t, live_j = t["got"] == t["expected"], j["got"] == j["expected"]
        ratio = f"{t['seconds'] / j['seconds']:.1f}x" if live_t and live_j else "n/a (a stale module is no rebuild)"
        lines.append(f"| {t['step']} | {t['seconds']:.4f} | {'yes' if live_t else 'NO'} | "
                     f"{j['seconds']:.4f} | {'yes' if live_j else 'NO'} | {ratio} |")
    if not args.skip_split:
        noop = {which: _noop_many_files(which, env) for which in ("torch", "jitload")}
        lines += ["", f"No-op reload of a {MANY_FILES}-file extension, in-process, median of 200 calls: "
                  f"torch {noop['torch'] * 1e3:.3f} ms, jitload {noop['jitload'] * 1e3:.3f} ms."]
    if args.fresh_only:
        lines += fresh_table(env, torch.cuda.is_available())
    env["JITLOAD_HOST_JIT"] = {"warm": "warm", "lazy": "", "off": "0"}[args.host_jit]
    if args.host_jit != "off" and not args.fresh_only:
        lines += _machine_pch(env)
    if not (args.skip_cpp or args.fresh_only):
        lines += cpp_table(env)
    if torch.cuda.is_available() and not (args.cpp_only or args.fresh_only):
        lines += layouts_table(env, args.jobs)
        lines += ["", f"jitload ran with JITLOAD_HOST_JIT={env['JITLOAD_HOST_JIT'] or '(unset)'}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_results:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import results_page

        body = "\n".join(line for line in lines[1:] if not line.startswith("- ")).strip()  # the stamp says those
        section = "reload-fresh" if args.fresh_only else "reload-cpp" if args.cpp_only else "reload"
        title = ("A fresh machine's first loads (`benchmarks/reload.py --fresh-only`)" if args.fresh_only
                 else "Rebuilds, kernel swaps and host edits (`benchmarks/reload.py`)")
        print(results_page.write_section(section, title, body))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
