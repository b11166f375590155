"""An oracle for the kernel-swap decision: whenever jitload decides to swap, the compiler must agree.

A swap (:func:`jitload.builder.swapplan.decide`) bets that a full build of the edited source would give the host code
that is already loaded, and that the torch-free device unit it compiles gives the full file's kernels. This
script settles those bets with the compiler itself, over the sources of ``tests/swap_corpus`` that build as a
one-file extension and two torch-free ones written here (cheap to compile), and over seeded, deterministic
edits of each: kernel-body edits, string literals in device code, comments (holding ``#define``, ``*/``, line
splices), CRLF and lone-CR line ends, directives moved into and out of kernels, ``#if`` and ``#pragma`` in
kernel bodies, execution spaces spelled through macros, attributes, ``__CUDA_ARCH__`` guards and earlier
declarations, new helpers and headers, device variables, renamed parameters, inline specifiers, launch
bounds, digraphs, and host edits as controls.

Each base is built once with jitload (its manifest and macro snapshot are what the decision reads). Then, for
each edit, the edited text is written to the file and the decision is taken. A plan either swaps kernels or
keeps the loaded code as it is (``keep``: comments and spacing only). For either:

- a swap's device unit is compiled with jitload's own command (:func:`jitload.builder.swap.device_command`), and
  jitload's own check of the image (:func:`jitload.builder.swap.image_kernels`) applied (a failure of either makes
  jitload build in full: counted, never a failure here);
- the edited file is compiled with the build's own nvcc line (``ninja -t compdb``, without ccache), keeping
  nvcc's intermediate PTX (``--keep``: the PTX of that same compile, equal to an ``nvcc -ptx`` run's, at half
  the cost of a second pass through torch's headers);
- **host**: :func:`jitload.builder.imagecmp.host_digest` of the edited object must equal the base build's. Where the
  plan says ``lines_moved`` (``__LINE__`` values differ), the objects must still define and use the same
  symbols: a moved line changes numbers in the code, never which functions there are;
- **PTX**: every kernel (``.entry``) of the edited file, with the ``.func`` functions and globals it reaches,
  must have the same text in the unit's PTX (whitespace, comments, ``.file``/``.loc`` lines and the function
  number in branch labels left out). A kernel that the unit lacks (every kernel, for ``keep``) keeps its
  loaded code, so it must equal the base build's.

A refusal costs time, never correctness: it is counted with its reason. For the torch-free bases the refused
edit is compiled too, to tell a needed refusal (the host code changed) from a cautious one.

    python benchmarks/swap_oracle.py [--quick] [--out FILE.md] [--write-results] [--bases tf_basic,seed_add] [--seeds N]
    python benchmarks/swap_oracle.py --decide-only      # the decisions alone, no compile after the base builds

``--quick``: the torch-free bases, one edit of each kind (about two minutes on 2 cores). The full sweep
compiles every planned edit in full, which for a torch source costs 70-80 s on 2 cores: two to three hours.
The exit status is 1 on any oracle failure. Needs nvcc (CUDA_HOME); no GPU. To hold jitload still while a long
sweep runs, copy the package and put the copy first on PYTHONPATH: the report names the sources it imported.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import datetime
import difflib
import glob
import hashlib
import json
import os
import platform
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:  # an installed jitload, or one on PYTHONPATH (a copy of the tree, held still for a sweep of hours)
    import jitload
except ImportError:
    sys.path.insert(0, ROOT)
    import jitload

from jitload.builder import (  # noqa: E402
    build,
    devicecode,
    fullbuild,
    imagecmp,
    manifest,
    ppview,
    swap,
    swapplan,
    toolchain,
)

CORPUS = os.path.join(ROOT, "tests", "swap_corpus")
# load_inline compiles its cuda_sources behind these lines; the corpus file holds only what the user wrote.
LOAD_INLINE_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"

TF_BASIC = r"""// A torch-free extension: device helpers, two kernels, a host launcher and a Python C-API binding.
#include <Python.h>
#include <cstdio>
#include <cuda_runtime.h>

#define BLOCK 128
#define CHECK(cond) do { if (!(cond)) std::fprintf(stderr, "failed: %s at line %d\n", #cond, __LINE__); } while (0)

__device__ float twice(float v) { return 2.0f * v; }

__device__ __forceinline__ float clamp01(float v) {
    return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

__global__ void scale_kernel(const float* x, float* y, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = twice(x[i]) * k;
    }
}

__global__ void sum_rows(const float* x, float* out, int rows, int cols) {
#define ROW_STEP 1
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < cols; j += ROW_STEP) {
        acc += clamp01(x[r * cols + j]);
    }
    out[r] = acc;
    if (acc < -1.0f) printf("row %d: %f\n", r, acc);
}

extern "C" int launch(const float* x, float* y, float* out, float k, int n, int cols) {
    CHECK(n >= 0 && cols > 0);
    scale_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, k, n);
    CHECK(ROW_STEP == 1);
    sum_rows<<<(n / cols + BLOCK - 1) / BLOCK, BLOCK>>>(x, out, n / cols, cols);
    return (int)cudaGetLastError();
}

static PyObject* block_size(PyObject*, PyObject*) { return PyLong_FromLong(BLOCK); }

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
PyMODINIT_FUNC CAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
    static PyMethodDef methods[] = {{"block_size", block_size, METH_NOARGS, "threads a block"},
                                    {nullptr, nullptr, 0, nullptr}};
    static PyModuleDef def = {PyModuleDef_HEAD_INIT, "tf_basic", nullptr, -1, methods};
    return PyModule_Create(&def);
}
"""

TF_OPS_HEADER = r"""// Device helpers only, included by tf_templ.cu.
#pragma once

__device__ __forceinline__ float bias_of(long long i) { return (i & 1) ? 0.5f : -0.5f; }

template <int N>
__device__ float power(float v) {
    float r = 1.0f;
    for (int k = 0; k < N; ++k) r *= v;
    return r;
}
"""

# No __LINE__ in its host code: an edit that moves lines must leave its host object equal, byte for byte.
TF_TEMPL = r"""// A torch-free op library: a kernel template in a namespace, a functor, a device-only header.
#include <cstdint>
#include <cuda_runtime.h>
#include "tf_ops.cuh"

namespace ops {

struct Affine {
    float a, b;
    __host__ __device__ float operator()(float v) const { return a * v + b; }
};

template <typename T, int UNROLL>
__global__ void map_kernel(const T* __restrict__ x, T* __restrict__ y, Affine f, int64_t n) {
    int64_t first = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        int64_t i = first + u;
        if (i < n) y[i] = static_cast<T>(power<2>(f(static_cast<float>(x[i]))) + bias_of(i));
    }
}

__global__ void fill_kernel(float* y, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = v;
}

}  // namespace ops

constexpr int kThreads = 256;

extern "C" int map_float(const float* x, float* y, float a, float b, long n) {
    if (n < 0) return -1;
    ops::map_kernel<float, 4><<<(unsigned)((n + 4 * kThreads - 1) / (4 * kThreads)), kThreads>>>(
        x, y, ops::Affine{a, b}, n);
    return (int)cudaGetLastError();
}

extern "C" int map_double(const double* x, double* y, float a, float b, long n) {
    if (n < 0) return -1;
    ops::map_kernel<double, 2><<<(unsigned)((n + 2 * kThreads - 1) / (2 * kThreads)), kThreads>>>(
        x, y, ops::Affine{a, b}, n);
    ops::fill_kernel<<<1, 32>>>(nullptr, 0.0f, 0);
    return (int)cudaGetLastError();
}
"""


@dataclasses.dataclass(frozen=True)
class Base:
    """A one-file extension to edit: its files (name -> text), the source among them, how it links."""

    name: str
    files: dict[str, str]
    source: str
    python_module: bool = True
    torch: bool = True  # includes torch's headers: a full compile costs a minute or more


def _corpus(name: str, prelude: str = "") -> str:
    with open(os.path.join(CORPUS, name)) as f:
        return prelude + f.read()


TF_FOLDER = TF_TEMPL.replace('#include <cstdint>\n#include <cuda_runtime.h>\n#include "tf_ops.cuh"\n',
                             '#include "tf_ops.cuh"\n#include <cstdint>\n#include <cuda_runtime.h>\n'
                             '#include <cuda_fp16.h>\n')

def bases() -> dict[str, Base]:
    """Every base, light ones first."""
    found = [
        Base("tf_basic", {"tf_basic.cu": TF_BASIC}, "tf_basic.cu", torch=False),
        Base("tf_templ", {"tf_templ.cu": TF_TEMPL, "tf_ops.cuh": TF_OPS_HEADER}, "tf_templ.cu",
             python_module=False, torch=False),
        # kernels/'s layout: the file's own header first, the toolchain's after it (read whole, not parsed).
        Base("tf_folder", {"tf_folder.cu": TF_FOLDER, "tf_ops.cuh": TF_OPS_HEADER}, "tf_folder.cu",
             python_module=False, torch=False),
        Base("seed_add", {"seed_add.cu": _corpus("seed_add.cu")}, "seed_add.cu"),
        Base("inline_scale", {"inline_scale.cu": _corpus("inline_scale.cu", LOAD_INLINE_PRELUDE)},
             "inline_scale.cu", python_module=False),
        Base("op_library", {"op_library.cu": _corpus("op_library.cu")}, "op_library.cu", python_module=False),
        Base("shared_reduce", {"shared_reduce.cu": _corpus("shared_reduce.cu"),
                               "block_reduce.cuh": _corpus("block_reduce.cuh")}, "shared_reduce.cu"),
        Base("accessor", {"accessor.cu": _corpus("accessor.cu")}, "accessor.cu"),
        Base("dispatch_template", {"dispatch_template.cu": _corpus("dispatch_template.cu")},
             "dispatch_template.cu"),
    ]
    return {b.name: b for b in found}


# ---- edits: each takes the text of one file and a seeded RNG, and gives the edited text (None: not here) ----

@dataclasses.dataclass(frozen=True)
class Edit:
    kind: str
    file: str  # the edited file's name in the base
    text: str  # its new text
    new_files: tuple[tuple[str, str], ...] = ()  # files the edit adds (name, text)


def _parse(text: str) -> list[devicecode.Item]:
    try:
        return devicecode.parse(text)
    except devicecode.Unsure:
        return []


def _functions(text: str, *kinds: str) -> list[devicecode.Item]:
    return [i for i in _parse(text) if i.kind in kinds and i.body >= 0]


def _body(text: str, item: devicecode.Item) -> tuple[int, int]:
    """Offsets of a function body's '{' and its matching '}'."""
    close = devicecode._match(devicecode._mask(text), item.body, "{", "}") - 1
    return item.body, close


def _statement_starts(text: str, item: devicecode.Item) -> list[int]:
    """Starts of the body's lines before which a statement line may be inserted, and which hold a whole
    statement: the line before ends a statement or opens or closes a block (so no multi-line statement or
    ``if (...)`` without braces is cut), and the line itself closes no block."""
    masked = devicecode._mask(text)
    open_, close = _body(text, item)
    starts = []
    pos = text.find("\n", open_) + 1
    while 0 < pos <= close:
        end = text.find("\n", pos)
        line = masked[pos:end].strip()
        before = masked[open_:pos].rstrip()
        if line and before.endswith((";", "{", "}")) and not line.startswith(("else", "#", "}")):
            starts.append(pos)
        pos = end + 1
    return starts


def _single_statements(text: str, item: devicecode.Item) -> list[int]:
    """The statement starts whose line is one whole statement (ends with ';')."""
    masked = devicecode._mask(text)
    return [at for at in _statement_starts(text, item) if masked[at:masked.find("\n", at)].rstrip().endswith(";")]


def _insert_line(text: str, item: devicecode.Item, rng: random.Random, line: str, whole: bool = False) -> str:
    """``line`` inserted at a statement boundary of the body (after its '{' where there is none); ``whole``:
    before a line that holds one whole statement (which a line splice then swallows)."""
    starts = _single_statements(text, item) if whole else _statement_starts(text, item)
    if starts:
        at = rng.choice(starts)
        return text[:at] + line + "\n" + text[at:]
    open_ = item.body + 1
    return text[:open_] + "\n" + line + "\n" + text[open_:]


def _pick(rng: random.Random, items: list):
    return rng.choice(items) if items else None


def _replace_span(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _in_body(text: str, item: devicecode.Item, pattern: str) -> list[re.Match]:
    masked = devicecode._mask(text)
    open_, close = _body(text, item)
    return [m for m in re.finditer(pattern, masked[:close]) if m.start() > open_]


def edit_operator(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel", "device"))
    if item is None:
        return None
    found = _in_body(text, item, r"(?<=[\w)\]]) ([+\-*]|<) (?=[\w(])")
    if not found:
        return None
    m = rng.choice(found)
    new = {"+": "-", "-": "+", "*": "+", "<": "<="}[m.group(1)]
    return _replace_span(text, m.start(1), m.end(1), new)


def edit_constant(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel", "device"))
    if item is None:
        return None
    found = _in_body(text, item, r"(?<![\w.])(\d+)(\.\d*)?([fFuU]?)(?![\w.x])")
    if not found:
        return None
    m = rng.choice(found)
    return _replace_span(text, m.start(1), m.end(1), str(int(m.group(1)) + 1))


def edit_blank_line(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel", "device"))
    return None if item is None else _insert_line(text, item, rng, "")


def edit_statement(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel"))
    if item is None:
        return None
    line = rng.choice(["    if (blockIdx.x > 4000000u) return;", "    __syncthreads();",
                       "    if (threadIdx.x == 1000u) { __threadfence(); }"])
    return _insert_line(text, item, rng, line)


def edit_string_literal(text: str, rng: random.Random) -> str | None:
    """A string literal in device code changed (a printf format): a change outside comments, on no new line."""
    item = _pick(rng, [i for i in _functions(text, "kernel", "device") if '"' in text[i.body:i.end]])
    if item is None:
        return None
    found = [m for m in re.finditer(r'"(?:\\.|[^"\\\n])*"', text[item.body:item.end])]
    m = rng.choice(found)
    at = item.body + m.start() + 1
    return text[:at] + rng.choice(["!", " ", "%%"]) + text[at:]


def edit_new_helper(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel"))
    if item is None:
        return None
    spec = rng.choice(["", "__forceinline__ ", "__noinline__ ", "static ", "inline "])
    helper = f"__device__ {spec}bool oracle_skip(unsigned t) {{ return t > 4096u; }}\n\n"
    open_ = item.body + 1
    text = text[:open_] + "\n    if (oracle_skip(threadIdx.x)) return;" + text[open_:]
    return text[:item.start] + helper + text[item.start:]


def edit_inline_spec(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "device"))
    if item is None:
        return None
    head = text[item.start:item.body]
    if "__forceinline__" in head:
        new_head = head.replace("__forceinline__", rng.choice(["__noinline__", "", "inline"]), 1)
    elif "__noinline__" in head:
        new_head = head.replace("__noinline__", "__forceinline__", 1)
    else:
        new_head = head.replace("__device__", f"__device__ {rng.choice(['__forceinline__', '__noinline__'])}", 1)
    return _replace_span(text, item.start, item.body, new_head)


COMMENTS = ["// was: #define BLOCK 64", "/* #define N 1 */", "// closes */ here", "/* a // b */",
            "/* two lines\n   #undef BLOCK */", "// #include <nothing.h>", "/* { unbalanced */", "// } too"]


def edit_comment_body(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel", "device"))
    return None if item is None else _insert_line(text, item, rng, "    " + rng.choice(COMMENTS))


def edit_comment_host(text: str, rng: random.Random) -> str | None:
    items = [i for i in _parse(text) if i.kind in ("host", "kernel", "device", "registration", "type")]
    item = _pick(rng, items)
    if item is None:
        return None
    comment = rng.choice(COMMENTS)
    if item.kind == "host" and item.body >= 0 and rng.random() < 0.5:
        return _insert_line(text, item, rng, "    " + comment)
    return text[:item.start] + comment + "\n" + text[item.start:]


def edit_splice_body(text: str, rng: random.Random) -> str | None:
    """A line comment ending in a backslash, which swallows the line after it."""
    item = _pick(rng, _functions(text, "kernel"))
    if item is None:
        return None
    if rng.random() < 0.5:
        return _insert_line(text, item, rng, "    // continued \\\n    __syncthreads();")
    return _insert_line(text, item, rng, "    // swallows the next line \\", whole=True)


def edit_splice_host(text: str, rng: random.Random) -> str | None:
    items = _functions(text, "host", "registration")
    item = _pick(rng, items)
    if item is None or not _single_statements(text, item):
        return None
    return _insert_line(text, item, rng, "    // swallows the next line \\", whole=True)


def edit_line_ends(text: str, rng: random.Random) -> str | None:
    variant = rng.choice(["crlf", "crlf_some", "crlf_splice", "lone_cr"])
    if variant == "crlf":
        return text.replace("\n", "\r\n")
    if variant == "crlf_some":
        lines = text.split("\n")
        return "\n".join(ln + "\r" if rng.random() < 0.5 and i < len(lines) - 1 else ln
                         for i, ln in enumerate(lines))
    item = _pick(rng, _functions(text, "kernel"))
    if item is None:
        return None
    if variant == "crlf_splice":
        return _insert_line(text, item, rng, "    // continued \\\r\n    __syncthreads();")
    # A lone CR: a line end to Python's universal newlines; to the compiler?
    return _insert_line(text, item, rng, "    // note\r    __syncthreads();")


def _defines(text: str) -> list[re.Match]:
    """Object-like or function-like ``#define`` lines (one line each)."""
    return list(re.finditer(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)[^\n\\]*\n", devicecode._mask(text)))


def edit_define_move(text: str, rng: random.Random) -> str | None:
    """A ``#define`` moved from the top level into the next kernel's body, or out of a kernel's body."""
    kernels = _functions(text, "kernel")
    moves = []
    for d in _defines(text):
        inside = [k for k in kernels if k.body < d.start() < k.end]
        if inside:
            moves.append((d, inside[0].start))  # out: just before that kernel
            continue
        after = [k for k in kernels if k.start > d.end()]
        if after and d.group(1) not in ("CAT", "CAT_"):
            moves.append((d, after[0].body + 1))  # in: just after the next kernel's '{'
    if not moves:
        return None
    d, to = rng.choice(moves)
    line = text[d.start():d.end()]
    if to > d.start():
        return text[:d.start()] + text[d.end():to] + "\n" + line + text[to:]
    return text[:to] + line.lstrip() + text[to:d.start()] + text[d.end():]


def edit_redefine_in_body(text: str, rng: random.Random) -> str | None:
    """A directive in a kernel body: one that changes a macro host code uses after it, or one that does not."""
    item = _pick(rng, _functions(text, "kernel"))
    if item is None:
        return None
    names = [d.group(1) for d in _defines(text) if d.start() < item.start]
    if "TORCH_CHECK(" in text[item.end:]:
        names.append("TORCH_CHECK")
    variant = rng.choice(["host", "local", "local"] if names else ["local"])
    if variant == "local":
        return _insert_line(text, item, rng, "#define ORACLE_LOCAL 2\n    (void)ORACLE_LOCAL;\n#undef ORACLE_LOCAL")
    name = rng.choice(names)
    value = "(...) ((void)0)" if name in ("TORCH_CHECK", "CHECK") else " 64"
    return _insert_line(text, item, rng, f"#undef {name}\n#define {name}{value}")


def edit_if_directive(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel", "device"))
    if item is None:
        return None
    starts = _single_statements(text, item)
    if not starts:
        return None
    at = rng.choice(starts)
    end = text.find("\n", at) + 1
    line = text[at:end]
    variant = rng.choice(["if0", "if1", "arch"])
    if variant == "if0":
        return text[:at] + "#if 0\n    this is not code;\n#endif\n" + text[at:]
    if variant == "if1":
        return text[:at] + "#if 1\n" + line + "#else\n    this is not code;\n#endif\n" + text[end:]
    return text[:at] + "#ifdef __CUDA_ARCH__\n" + line + "#endif\n" + text[end:]


def edit_pragma(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel", "device"))
    if item is None:
        return None
    loops = _in_body(text, item, r"\bfor\s*\(")
    if not loops or rng.random() < 0.25:
        return _insert_line(text, item, rng, "#pragma nv_diag_suppress 177")  # a pragma that is no loop's
    at = text.rfind("\n", 0, rng.choice(loops).start()) + 1
    pragma = rng.choice(["#pragma unroll 1", "#pragma unroll 4", "#pragma unroll", "#pragma nounroll",
                         '_Pragma("unroll 2")'])
    return text[:at] + pragma + "\n" + text[at:]


def _device_helper(text: str, rng: random.Random) -> devicecode.Item | None:
    return _pick(rng, [i for i in _functions(text, "device") if "__device__" in text[i.start:i.body]])


def edit_space_macro(text: str, rng: random.Random) -> str | None:
    """A helper's ``__device__`` spelled through a macro: ``__host__ __device__`` (host code now) or
    ``__device__`` alone (still device code only)."""
    item = _device_helper(text, rng)
    if item is None:
        return None
    name, value = rng.choice([("HD", "__host__ __device__"), ("DEV", "__device__"),
                              ("HOSTDEV", "__device__ __host__")])
    head = text[item.start:item.body].replace("__device__", name, 1)
    return text[:item.start] + f"#define {name} {value}\n" + head + text[item.body:]


def edit_space_attribute(text: str, rng: random.Random) -> str | None:
    item = _device_helper(text, rng)
    if item is None:
        return None
    new = rng.choice(["__device__ __attribute__((host))", "__attribute__((device))",
                      "__attribute__((device)) __attribute__((host))"])
    head = text[item.start:item.body].replace("__device__", new, 1)
    return _replace_span(text, item.start, item.body, head)


def edit_space_arch_guard(text: str, rng: random.Random) -> str | None:
    item = _device_helper(text, rng)
    if item is None:
        return None
    definition = text[item.start:item.end]
    if rng.random() < 0.5:
        return text[:item.start] + "#ifdef __CUDA_ARCH__\n" + definition + "\n#endif\n" + text[item.end:]
    head = text[item.start:item.body].rstrip()
    declaration = head.replace("__device__", "__host__ __device__", 1) + ";"
    return (text[:item.start] + "#if defined(__CUDA_ARCH__)\n" + definition + "\n#else\n" + declaration
            + "\n#endif\n" + text[item.end:])


def edit_space_declaration(text: str, rng: random.Random) -> str | None:
    """An earlier declaration of a ``__device__`` helper with another execution space."""
    item = _device_helper(text, rng)
    if item is None:
        return None
    head = text[item.start:item.body].rstrip()
    head = re.sub(r"\b__forceinline__\b|\b__noinline__\b", "", head)
    space = rng.choice(["__host__ __device__", "__host__", "__device__"])
    return text[:item.start] + head.replace("__device__", space, 1) + ";\n\n" + text[item.start:]


def edit_device_variable(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel", "device"))
    if item is None:
        return None
    decl, use = rng.choice([("__device__ float oracle_var = 1.0f;", "oracle_var > 2.0f"),
                            ("__constant__ float oracle_c[2] = {1.0f, 2.0f};", "oracle_c[1] > 3.0f"),
                            ("static __device__ int oracle_n;", "oracle_n > 2")])
    leave = "return;" if item.kind == "kernel" else 'asm volatile("trap;");'  # a helper may return a value
    statement = f"    if ({use}) {{ {leave} }}"
    text = _insert_line(text, item, rng, statement)
    return text[:item.start] + decl + "\n\n" + text[item.start:]


def edit_rename_parameter(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, _functions(text, "kernel"))
    if item is None:
        return None
    head = devicecode._mask(text)[item.start:item.body]
    params = head[head.rfind("(", 0, head.rfind(")")) + 1:head.rfind(")")]
    names = [m.group(1) for p in params.split(",") if (m := re.search(r"(\w+)\s*$", p.strip()))]
    if not names:
        return None
    name = rng.choice(names)
    span = text[item.start:item.end]
    renamed = re.sub(rf"(?<![\w.>]){re.escape(name)}\b", f"{name}_r", span)
    return text[:item.start] + renamed + text[item.end:]


def edit_host_statement(text: str, rng: random.Random) -> str | None:
    """A control: a host function's code changes (the decision must refuse)."""
    items = _functions(text, "host")
    item = _pick(rng, items)
    if item is None:
        return None
    found = _in_body(text, item, r"(?<![\w.])(\d+)(?![\w.x])")
    if found and rng.random() < 0.7:
        m = rng.choice(found)
        return _replace_span(text, m.start(1), m.end(1), str(int(m.group(1)) + 1))
    strings = [m for m in re.finditer(r'"([^"\\\n]{3,})"', text[item.body:item.end])]
    if not strings:
        return None
    m = rng.choice(strings)
    at = item.body + m.start(1)
    return text[:at] + "!" + text[at:]


def edit_macro_kernel(text: str, rng: random.Random) -> str | None:
    """A kernel spelled through a macro for ``__global__``, its body edited too."""
    item = _pick(rng, [k for k in _functions(text, "kernel") if "__global__" in text[k.start:k.body]])
    if item is None:
        return None
    head = text[item.start:item.body].replace("__global__", "ORACLE_GLOBAL", 1)
    edited = text[:item.start] + "#define ORACLE_GLOBAL __global__\n" + head + text[item.body:]
    shift = len(edited) - len(text)
    moved = dataclasses.replace(item, body=item.body + shift, end=item.end + shift)
    return _insert_line(edited, moved, rng, "    if (blockIdx.x > 4000000u) return;")


def edit_launch_bounds(text: str, rng: random.Random) -> str | None:
    item = _pick(rng, [k for k in _functions(text, "kernel") if "__launch_bounds__" not in text[k.start:k.body]])
    if item is None:
        return None
    head = text[item.start:item.body]
    m = re.search(r"__global__\s+void\s+", head)
    if m is None:
        return None
    at = item.start + m.end()
    return text[:at] + f"__launch_bounds__({rng.choice([256, 512, 1024])}) " + text[at:]


def edit_new_kernel(text: str, rng: random.Random) -> str | None:
    items = [i for i in _parse(text) if i.kind in ("kernel", "device")]
    item = _pick(rng, items)
    if item is None:
        return None
    kernel = rng.choice(["__global__ void oracle_extra(float* p) { p[threadIdx.x] = 1.0f; }",
                         "namespace { __global__ void oracle_hidden(float* p) { p[threadIdx.x] = 2.0f; } }"])
    return text[:item.start] + kernel + "\n\n" + text[item.start:]


def edit_linkage(text: str, rng: random.Random) -> str | None:
    """A helper made ``static`` or put in an anonymous namespace: still device code only."""
    item = _device_helper(text, rng)
    if item is None:
        return None
    definition = text[item.start:item.end]
    if rng.random() < 0.5 and "template" not in definition[:20]:
        return text[:item.start] + "static " + definition + text[item.end:]
    return text[:item.start] + "namespace {\n" + definition + "\n}  // namespace\n" + text[item.end:]


def edit_digraph(text: str, rng: random.Random) -> str | None:
    """Braces of a block inside a kernel spelled as digraphs (``<%`` ``%>``)."""
    item = _pick(rng, _functions(text, "kernel"))
    if item is None:
        return None
    masked = devicecode._mask(text)
    open_, close = _body(text, item)
    inner = [m.start() for m in re.finditer(r"\{", masked[:close]) if m.start() > open_]
    if inner:
        at = rng.choice(inner)
        end = devicecode._match(masked, at, "{", "}") - 1
        return text[:at] + "<%" + text[at + 1:end] + "%>" + text[end + 1:]
    return _insert_line(text, item, rng, "    <% __syncthreads(); %>")


def edit_new_header(text: str, rng: random.Random) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """An ``#include`` of a new header of device functions, called from a kernel (or not called)."""
    item = _pick(rng, _functions(text, "kernel"))
    includes = list(re.finditer(r'(?m)^[ \t]*#[ \t]*include[^\n]*\n', devicecode._mask(text)))
    if item is None or not includes:
        return None
    header = ("#pragma once\n__device__ __forceinline__ float oracle_half(float v) { return 0.5f * v; }\n"
              if rng.random() < 0.7 else
              "#pragma once\n#define ORACLE_FACTOR 3\n__device__ float oracle_half(float v) { return 0.5f * v; }\n")
    if rng.random() < 0.6:
        text = _insert_line(text, item, rng, "    if (oracle_half(1.0f) > 2.0f) return;")
    last = includes[-1]
    return text[:last.end()] + '#include "oracle_extra.cuh"\n' + text[last.end():], (("oracle_extra.cuh", header),)


EDITS: dict[str, Callable[[str, random.Random], object]] = {
    "operator": edit_operator,
    "constant": edit_constant,
    "blank_line": edit_blank_line,
    "statement": edit_statement,
    "string_literal": edit_string_literal,
    "new_helper": edit_new_helper,
    "inline_spec": edit_inline_spec,
    "comment_body": edit_comment_body,
    "comment_host": edit_comment_host,
    "splice_body": edit_splice_body,
    "splice_host": edit_splice_host,
    "line_ends": edit_line_ends,
    "define_move": edit_define_move,
    "redefine_in_body": edit_redefine_in_body,
    "if_directive": edit_if_directive,
    "pragma": edit_pragma,
    "space_macro": edit_space_macro,
    "space_attribute": edit_space_attribute,
    "space_arch_guard": edit_space_arch_guard,
    "space_declaration": edit_space_declaration,
    "device_variable": edit_device_variable,
    "rename_parameter": edit_rename_parameter,
    "host_statement": edit_host_statement,
    "macro_kernel": edit_macro_kernel,
    "launch_bounds": edit_launch_bounds,
    "new_kernel": edit_new_kernel,
    "linkage": edit_linkage,
    "digraph": edit_digraph,
    "new_header": edit_new_header,
}


def generate(base: Base, seeds: int, kinds: list[str] | None = None) -> list[Edit]:
    """The edits of ``base``: each kind on each of its files, ``seeds`` times (duplicates dropped)."""
    edits, seen = [], set()
    for file in sorted(base.files):
        for kind in kinds or list(EDITS):
            for seed in range(seeds):
                rng = random.Random(f"{base.name}/{file}/{kind}/{seed}")
                try:
                    out = EDITS[kind](base.files[file], rng)
                except devicecode.Unsure:
                    out = None
                if out is None:
                    continue
                text, new_files = out if isinstance(out, tuple) else (out, ())
                key = (file, text, new_files)
                if text == base.files[file] or key in seen:
                    continue
                seen.add(key)
                edits.append(Edit(kind, file, text, tuple(new_files)))
    return edits


# ---- compiling: one compiler process at a time ----

class _InCallerThread(concurrent.futures.Executor):
    """An executor that runs each call at once, in the caller's thread."""

    def __init__(self, *args, **kwargs):
        pass

    def submit(self, fn, /, *args, **kwargs):
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:
            future.set_exception(err)
        return future


@contextlib.contextmanager
def one_compiler_at_a_time() -> Iterator[None]:
    """jitload runs its macro snapshot's preprocessors beside the compile, and two at once per decision; the
    sweep runs for hours beside other work on small machines, so here they run one after another. What they
    compute does not depend on the order."""
    saved = ppview.ThreadPoolExecutor, fullbuild.ThreadPoolExecutor, os.environ.get("MAX_JOBS")
    ppview.ThreadPoolExecutor = fullbuild.ThreadPoolExecutor = _InCallerThread
    os.environ["MAX_JOBS"] = "1"
    try:
        yield
    finally:
        ppview.ThreadPoolExecutor, fullbuild.ThreadPoolExecutor = saved[0], saved[1]
        if saved[2] is None:
            os.environ.pop("MAX_JOBS", None)
        else:
            os.environ["MAX_JOBS"] = saved[2]


def compile_line(build_directory: str, source: str) -> list[str]:
    """The build's nvcc command for ``source`` (``ninja -t compdb``), without a compiler launcher or the
    dependency file; its ``-o`` is left to the caller."""
    done = subprocess.run(["ninja", "-t", "compdb"], cwd=build_directory, capture_output=True, text=True,
                          check=True)
    for entry in json.loads(done.stdout):
        if os.path.normpath(os.path.join(entry["directory"], entry["file"])) == os.path.normpath(source):
            cmd = shlex.split(entry["command"])
            while cmd and os.path.basename(cmd[0]) in ("ccache", "sccache"):
                cmd = cmd[1:]
            cmd = [a for a in cmd if a not in ("-MD", "-MMD")]
            if "-MF" in cmd:
                i = cmd.index("-MF")
                del cmd[i:i + 2]
            return cmd
    raise RuntimeError(f"no compile line for {source} in {build_directory}")


def _run(cmd: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace")


def _first_error(done: subprocess.CompletedProcess) -> str:
    out = done.stdout + done.stderr
    errors = [ln.strip() for ln in out.splitlines() if "error" in ln or "fatal" in ln]
    return (errors[0] if errors else out.strip()[-300:])[:300]


def _ptx_files(folder: str) -> dict[str, str]:
    """The PTX nvcc kept in ``folder``, by what follows the file's stem ('.ptx', '.compute_90.ptx')."""
    found = {}
    for path in glob.glob(os.path.join(folder, "*.ptx")):
        name = os.path.basename(path)
        with open(path) as f:
            found[name[name.find("."):]] = f.read()
    return found


@dataclasses.dataclass
class Full:
    """A full compile of one source: its object and the PTX of each arch, or the error."""

    object: str = ""
    ptx: dict[str, str] = dataclasses.field(default_factory=dict)
    error: str = ""


def compile_full(build_directory: str, source: str, folder: str) -> Full:
    """The source as it is on disk now, with the build's own line, into ``folder`` (object and kept PTX)."""
    cmd = compile_line(build_directory, source)
    out = os.path.join(folder, "full.o")
    keep = os.path.join(folder, "keep-full")
    os.makedirs(keep, exist_ok=True)
    cmd[cmd.index("-o") + 1] = out
    done = _run([*cmd, "--keep", "--keep-dir", keep], build_directory)
    if done.returncode != 0:
        return Full(error=_first_error(done))
    return Full(out, _ptx_files(keep))


def compile_unit(build_directory: str, source: str, unit_text: str, folder: str) -> tuple[bytes, dict[str, str], str]:
    """The plan's device unit with jitload's own command: (fatbin, PTX by arch, error)."""
    unit = os.path.join(folder, "unit.cu")
    image = os.path.join(folder, "unit.fatbin")
    keep = os.path.join(folder, "keep-unit")
    os.makedirs(keep, exist_ok=True)
    with open(unit, "w") as f:
        f.write(unit_text)
    done = _run([*swap.device_command(build_directory, unit, image, source), "--keep", "--keep-dir", keep],
                folder)
    if done.returncode != 0:
        return b"", {}, _first_error(done)
    with open(image, "rb") as f:
        return f.read(), _ptx_files(keep), ""


# ---- PTX: each function's text, and what a kernel reaches ----

_FUNCTION_HEAD = re.compile(r"^(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$.]+)")
_GLOBAL = re.compile(r"^(?:\.(?:visible|weak|extern)\s+)*\.(?:global|const|shared|local)\b.*?([\w$.]+)\s*(?:\[|=|;)")


@dataclasses.dataclass
class Ptx:
    entries: dict[str, str]
    functions: dict[str, str]
    globals: dict[str, str]


def parse_ptx(text: str) -> Ptx:
    """Kernels, functions with a body and module-scope variables of a PTX file, each as normalised text:
    comments, ``.file``/``.loc`` lines and whitespace differences left out."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    # A branch label carries its function's place in the file ($L__BB2_4: the third function's fourth block);
    # the unit orders its functions otherwise.
    text = re.sub(r"\$L__BB\d+_", "$L__BB_", text)
    lines = []
    for raw in text.splitlines():
        line = " ".join(raw.split("//", 1)[0].split())
        if line and not line.startswith((".file", ".loc")):
            lines.append(line)
    entries: dict[str, str] = {}
    functions: dict[str, str] = {}
    variables: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        head = _FUNCTION_HEAD.match(line)
        if head:
            depth, seen_body, chunk = 0, False, []
            while i < len(lines):
                chunk.append(lines[i])
                depth += lines[i].count("{") - lines[i].count("}")
                seen_body |= "{" in lines[i]
                i += 1
                if (seen_body and depth == 0) or (not seen_body and chunk[-1].endswith(";") and depth == 0):
                    break
            if seen_body:
                (entries if head.group(1) == "entry" else functions)[head.group(2)] = "\n".join(chunk)
            continue
        var = _GLOBAL.match(line)
        if var:
            variables[var.group(1)] = line
        i += 1
    return Ptx(entries, functions, variables)


def _reached(ptx: Ptx, kernel: str) -> set[str]:
    """The functions and variables a kernel names, directly or through the functions it calls."""
    todo, seen = [ptx.entries[kernel]], set()
    while todo:
        words = set(re.findall(r"[\w$.]+", todo.pop()))
        for name in words - seen:
            if name in ptx.functions:
                seen.add(name)
                todo.append(ptx.functions[name])
            elif name in ptx.globals:
                seen.add(name)
    return seen


def _without_linkage(text: str) -> str:
    return re.sub(r"^(?:\.(?:visible|weak)\s+)+", "", text)


def _same_kernel(f: Ptx, ref: Ptx, kernel: str) -> tuple[list[str], list[str]]:
    """(differences, notes) of one kernel of ``f`` against ``ref``: its text, and what it reaches."""
    mine, theirs = f.entries[kernel], ref.entries[kernel]
    differences, notes = [], []
    if mine != theirs:
        if _without_linkage(mine) != _without_linkage(theirs):
            return [f"{kernel}: PTX differs\n" + _short_diff(theirs, mine, "expected", "full")], []
        notes.append(f"{kernel}: same code, other linkage ({mine.splitlines()[0][:60]})")
    for name in sorted(_reached(f, kernel)):
        table_f, table_r = (f.functions, ref.functions) if name in f.functions else (f.globals, ref.globals)
        if table_r.get(name) != table_f[name]:
            differences.append(f"{kernel} reaches {name}, which differs\n"
                               + _short_diff(table_r.get(name, ""), table_f[name], "expected", "full"))
    return differences, notes


def compare_ptx(full: str, unit: str, base: str | None) -> tuple[list[str], list[str]]:
    """(differences, notes) between the full file's PTX and the unit's, kernel by kernel. A kernel the unit
    lacks keeps its loaded code, which is right only where it equals the base build's (``base``: that build's
    full PTX; None where it was not compiled)."""
    f, u = parse_ptx(full), parse_ptx(unit)
    b = parse_ptx(base) if base is not None else None
    differences, notes = [], []
    for kernel in sorted(f.entries):
        if kernel in u.entries:
            d, n = _same_kernel(f, u, kernel)
        elif b is None or kernel not in b.entries:
            differences.append(f"{kernel}: not in the unit, "
                               + ("and the base could not be compiled to compare" if b is None else "nor in the base"))
            continue
        else:
            d, n = _same_kernel(f, b, kernel)
            if d:
                d = [f"{kernel}: not in the unit, and its code changed since the base: the loaded kernel stays "
                     f"stale", *d]
            else:
                n = [*n, f"{kernel}: not in the unit, unchanged since the base (the loaded code is right)"]
        differences += d
        notes += n
    return differences, notes


def _short_diff(a: str, b: str, name_a: str, name_b: str, limit: int = 30) -> str:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), name_a, name_b, lineterm="", n=1))
    return "\n".join(lines[:limit] + (["..."] if len(lines) > limit else []))


# ---- the sweep ----

@dataclasses.dataclass
class Prepared:
    base: Base
    folder: str
    build_directory: str
    paths: dict[str, str]  # file name -> absolute path
    registered: list[str]
    object: str  # the base build's object
    digest: str  # its host digest
    build_seconds: float
    base_ptx: dict[str, str] | None = None  # compiled when first needed


@dataclasses.dataclass
class Outcome:
    base: str
    kind: str
    file: str
    decision: str  # swap, keep (a plan that swaps nothing: the loaded code stays), refused
    reason: str = ""  # a refusal's, or what stopped a planned swap
    lines_moved: bool | None = None
    host: str = "-"  # equal, differs, lines moved: symbols equal / differ, does not build, -
    ptx: str = "-"  # equal, differs, -
    note: str = ""
    failure: str = ""
    diff: str = ""
    seconds: float = 0.0


def prepare(base: Base, work: str) -> Prepared:
    """Write the base's files under ``work`` and build it with jitload (reused when built already)."""
    folder = os.path.realpath(os.path.join(work, base.name))
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for name, text in base.files.items():
        paths[name] = os.path.join(folder, name)
        _write(paths[name], text)
    directory = os.path.join(folder, "build")
    os.makedirs(directory, exist_ok=True)
    start = time.perf_counter()
    spec = fullbuild.BuildSpec(base.name, (paths[base.source],), with_cuda=True, build_directory=directory,
                               python_module=base.python_module)
    fullbuild.run(spec, force=True)  # host views as this jitload takes them, whatever built the folder before
    seconds = time.perf_counter() - start
    obj = os.path.join(directory, build.source_objects(directory)[0])
    registered = sorted(imagecmp.image_symbols(imagecmp.device_image(obj))[0])
    return Prepared(base, folder, directory, paths, registered, obj, imagecmp.host_digest(obj), seconds)


def _write(path: str, text: str) -> None:
    with open(path, "w", newline="") as f:  # as given: CRs are part of some edits
        f.write(text)


def _base_ptx(prepared: Prepared, edit: Edit, scratch: str) -> dict[str, str] | None:
    """The PTX of the base's own text (compiled once, when first needed), the edit put back after."""
    if prepared.base_ptx is None:
        path = prepared.paths[edit.file]
        _write(path, prepared.base.files[edit.file])
        try:
            full = compile_full(prepared.build_directory, prepared.paths[prepared.base.source], scratch)
        finally:
            _write(path, edit.text)
        prepared.base_ptx = full.ptx if not full.error else {}
    return prepared.base_ptx or None


def diff_of(base: Base, edit: Edit) -> str:
    old = base.files[edit.file].replace("\r", "\\r").splitlines()
    new = edit.text.replace("\r", "\\r").splitlines()
    text = "\n".join(difflib.unified_diff(old, new, edit.file, edit.file, lineterm="", n=2))
    for name, content in edit.new_files:
        text += f"\n+++ new file {name}\n" + content
    return text


def check(prepared: Prepared, edit: Edit, *, decide_only: bool = False, classify_refusals: bool = False
          ) -> Outcome:
    """Take the decision on ``edit`` and, where it is a swap, check it against the compiler."""
    base = prepared.base
    source = prepared.paths[base.source]
    path = prepared.paths[edit.file]
    outcome = Outcome(base.name, edit.kind, edit.file, "", diff=diff_of(base, edit))
    start = time.perf_counter()
    scratch = tempfile.mkdtemp(prefix="edit-", dir=prepared.folder)
    added = [os.path.join(prepared.folder, name) for name, _ in edit.new_files]
    try:
        for name, content in edit.new_files:
            _write(os.path.join(prepared.folder, name), content)
        _write(path, edit.text)
        decision = swapplan.decide(manifest.read(prepared.build_directory), [path], prepared.registered,
                                   build_directory=prepared.build_directory, texts={path: base.files[edit.file]})
        if isinstance(decision, swapplan.Refusal):
            outcome.decision, outcome.reason = "refused", decision.reason
            if classify_refusals and not decide_only:
                full = compile_full(prepared.build_directory, source, scratch)
                outcome.host = ("does not build" if full.error else
                                "equal" if imagecmp.host_digest(full.object) == prepared.digest else "differs")
            return outcome
        outcome.lines_moved = decision.lines_moved
        outcome.decision = "keep" if getattr(decision, "nothing", False) else "swap"
        if decide_only:
            return outcome
        _settle(prepared, edit, decision, outcome, scratch)
        return outcome
    finally:
        _write(path, base.files[edit.file])
        for extra in added:
            os.unlink(extra)
        shutil.rmtree(scratch, ignore_errors=True)
        outcome.seconds = time.perf_counter() - start


def _settle(prepared: Prepared, edit: Edit, plan: swapplan.Plan, outcome: Outcome, scratch: str) -> None:
    source = prepared.paths[prepared.base.source]
    image, unit_ptx = b"", {}
    if not outcome.decision == "keep":
        compiled = _compile_checked_unit(prepared, source, plan, outcome, scratch)
        if compiled is None:
            return
        image, unit_ptx = compiled
    full = compile_full(prepared.build_directory, source, scratch)
    if full.error:
        outcome.reason = f"the edit does not build: {full.error}"  # the verifying build reports it
        return
    failures = _host_failures(prepared, plan, full, outcome)
    failures += _ptx_failures(prepared, edit, full, unit_ptx, outcome, scratch)
    if image:
        try:
            sass = imagecmp.differing_functions(image, imagecmp.device_image(full.object))
        except RuntimeError as err:
            sass = [f"cuobjdump: {err}"]
        if sass:
            outcome.note = "; ".join(filter(None, [outcome.note, f"SASS differs: {', '.join(sass[:4])}"]))
    if failures:
        replaced = ", ".join(plan.kernels.get(source, ())) or "no kernel"
        outcome.failure = "\n".join([*failures, f"(the plan replaces: {replaced})"])


def _compile_checked_unit(prepared: Prepared, source: str, plan: swapplan.Plan, outcome: Outcome,
                          scratch: str) -> tuple[bytes, dict[str, str]] | None:
    """The swap unit's device image and PTX per arch, as jitload would load them; None (the reason in
    ``outcome``) where jitload would refuse them."""
    image, unit_ptx, error = compile_unit(prepared.build_directory, source, plan.units[source], scratch)
    if error:  # jitload builds in full instead; whether the edit builds at all tells a bad edit apart
        full = compile_full(prepared.build_directory, source, scratch)
        builds = "the edit does not build either" if full.error else "the edit builds"
        outcome.reason = f"unit does not compile ({builds}): {error}"
        return None
    try:
        # As jitload does: the unit's image must define every kernel the base object defined.
        swap.image_kernels(image, plan.kernels[source], prepared.registered, set(prepared.registered))
    except swap.SwapError as err:
        outcome.reason = f"refused after compiling the unit: {err}"
        return None
    return image, unit_ptx


def _host_failures(prepared: Prepared, plan: swapplan.Plan, full: Full, outcome: Outcome) -> list[str]:
    """The full build's host code against the loaded build's: ``outcome.host``, and the failure if any."""
    if imagecmp.host_digest(full.object) == prepared.digest:
        outcome.host = "equal"
        return []
    symbols = _symbol_difference(prepared.object, full.object)
    if plan.lines_moved and not symbols:
        outcome.host = "lines moved: symbols equal"
        return []
    outcome.host = "lines moved: symbols differ" if plan.lines_moved else "differs"
    return ["host code differs from the loaded build's"
            + ("" if plan.lines_moved else ", and the plan says no line moved") + ": "
            + (symbols or f"sections {', '.join(_section_difference(prepared.object, full.object))}")]


def _ptx_failures(prepared: Prepared, edit: Edit, full: Full, unit_ptx: dict[str, str], outcome: Outcome,
                  scratch: str) -> list[str]:
    """The unit's PTX against the full build's, arch by arch: ``outcome.ptx`` and its note, and the failures."""
    if unit_ptx and set(full.ptx) != set(unit_ptx):
        return [f"PTX archs differ: full {sorted(full.ptx)}, unit {sorted(unit_ptx)}"]
    differences, notes = [], []
    for arch in sorted(full.ptx):
        d, n = compare_ptx(full.ptx[arch], unit_ptx.get(arch, ""), None)
        if d:  # a kernel the unit lacks is right where it is the base's: compile the base to know
            base_ptx = _base_ptx(prepared, edit, tempfile.mkdtemp(prefix="base-", dir=scratch))
            d, n = compare_ptx(full.ptx[arch], unit_ptx.get(arch, ""), (base_ptx or {}).get(arch))
        differences += d
        notes += n
    outcome.ptx = "differs" if differences else "equal"
    outcome.note = "; ".join(notes)
    return differences


def _symbols(path: str) -> set[tuple[str, str, str, str]]:
    """(name, type, binding, section) of each symbol of an object's host side."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    found = set()
    with open(path, "rb") as f:
        elf = ELFFile(f)
        names = [section.name for section in elf.iter_sections()]
        for table in elf.iter_sections():
            if not isinstance(table, SymbolTableSection):
                continue
            for symbol in table.iter_symbols():
                index = symbol["st_shndx"]
                where = names[index] if isinstance(index, int) and index < len(names) else str(index)
                kind = symbol["st_info"]["type"]
                if where == imagecmp.DEVICE_SECTION or kind in ("STT_FILE", "STT_SECTION"):
                    continue
                found.add((imagecmp._TEMP_NAME.sub("", symbol.name), kind, symbol["st_info"]["bind"], where))
    return found


def _symbol_difference(before: str, after: str) -> str:
    """The symbols one object has and the other lacks, in words ('' when the same): a moved line changes
    numbers in the code, never which functions and data there are."""
    old, new = _symbols(before), _symbols(after)
    words = [f"+{s[0]} ({s[1][4:]}, {s[3]})" for s in sorted(new - old)]
    words += [f"-{s[0]} ({s[1][4:]}, {s[3]})" for s in sorted(old - new)]
    return "symbols " + " ".join(words[:8]) + (" ..." if len(words) > 8 else "") if words else ""


def _section_difference(before: str, after: str) -> list[str]:
    from elftools.elf.elffile import ELFFile

    def sections(path):
        with open(path, "rb") as f:
            return {s.name: (s["sh_size"], b"" if s["sh_type"] == "SHT_NOBITS" else s.data())
                    for s in ELFFile(f).iter_sections() if s.name != imagecmp.DEVICE_SECTION}

    old, new = sections(before), sections(after)
    return sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))


def _edit_key(sources: str, base: Base, edit: Edit) -> str:
    digest = hashlib.blake2b(repr((base.files, edit)).encode(), digest_size=10).hexdigest()
    return f"{sources}:{base.name}:{edit.file}:{edit.kind}:{digest}"


def _recorded(path: str) -> dict[str, Outcome]:
    """The outcomes an earlier run of the same work folder recorded, by edit key."""
    found = {}
    with contextlib.suppress(OSError):
        with open(path) as f:
            for line in f:
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    entry = json.loads(line)
                    found[entry["key"]] = Outcome(**entry["outcome"])
    return found


def sweep(names: list[str], seeds: int, work: str, *, torch_seeds: int = 1, decide_only: bool = False,
          progress: bool = True, kinds: list[str] | None = None, sources: str = ""
          ) -> tuple[list[Outcome], dict[str, Prepared]]:
    """Every edit of the named bases, checked. With ``sources`` (:func:`_sources_digest`), each outcome is
    recorded in the work folder as it comes, and a later run over the same folder and jitload sources takes
    the recorded ones instead of compiling again: a sweep of hours survives an interruption."""
    from tqdm.auto import tqdm

    chosen = [bases()[n] for n in names]
    outcomes: list[Outcome] = []
    prepared: dict[str, Prepared] = {}
    record = os.path.join(work, "outcomes.jsonl")
    recorded = _recorded(record) if sources and not decide_only else {}
    with one_compiler_at_a_time():
        plan = [(b, generate(b, torch_seeds if b.torch else seeds, kinds)) for b in chosen]
        with tqdm(total=sum(len(e) + 1 for _, e in plan), desc="swap oracle", disable=not progress) as bar:
            for base, edits in plan:
                keys = [_edit_key(sources, base, e) for e in edits]
                p = None
                if any(k not in recorded for k in keys):
                    bar.set_postfix_str(f"{base.name}: building")
                    prepared[base.name] = p = prepare(base, work)
                bar.update(1)
                for edit, key in zip(edits, keys, strict=True):
                    bar.set_postfix_str(f"{base.name}: {edit.kind}")
                    outcome = recorded.get(key)
                    if outcome is None:
                        assert p is not None
                        outcome = check(p, edit, decide_only=decide_only, classify_refusals=not base.torch)
                        if sources and not decide_only:
                            with open(record, "a") as f:
                                f.write(json.dumps({"key": key, "outcome": dataclasses.asdict(outcome)}) + "\n")
                        if outcome.failure:
                            bar.write(f"ORACLE FAILURE {base.name} {edit.kind}:\n{outcome.failure}\n{outcome.diff}\n")
                    outcomes.append(outcome)
                    bar.update(1)
    return outcomes, prepared


# ---- reporting ----

def summary(outcomes: list[Outcome]) -> dict[str, int]:
    planned = [o for o in outcomes if o.decision in ("swap", "keep")]
    checked = [o for o in planned if o.host != "-"]
    return {
        "edits": len(outcomes),
        "swapped": sum(o.decision == "swap" for o in outcomes),
        "kept (nothing to swap)": sum(o.decision == "keep" for o in outcomes),
        "refused": sum(o.decision == "refused" for o in outcomes),
        "checked": len(checked),
        "host equal": sum(o.host == "equal" for o in checked),
        "lines moved, symbols equal": sum(o.host == "lines moved: symbols equal" for o in checked),
        "unit did not compile": sum(o.reason.startswith("unit does not compile") for o in planned),
        "refused after the unit compiled": sum(o.reason.startswith("refused after") for o in planned),
        "edit does not build": sum(o.reason.startswith("the edit does not build") for o in planned),
        "failures": sum(bool(o.failure) for o in outcomes),
    }


def _cell(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def table(outcomes: list[Outcome]) -> list[str]:
    rows = ["| base | file | edit | decision | host | PTX | s | reason / note |",
            "| --- | --- | --- | --- | --- | --- | ---: | --- |"]
    for o in outcomes:
        decision = o.decision + (" (lines moved)" if o.lines_moved else "")
        why = "FAILURE: " + o.failure.splitlines()[0] if o.failure else (o.reason or o.note)
        rows.append(f"| {o.base} | {o.file} | {o.kind} | {decision} | {o.host} | {o.ptx} | {o.seconds:.1f} "
                    f"| {_cell(why, 110).replace('|', '/')} |")
    return rows


def report(outcomes: list[Outcome], prepared: dict[str, Prepared], command: str, seconds: float,
           sources: str) -> str:
    counts = summary(outcomes)
    cuda_home = toolchain.find_cuda_home()
    lines = [
        f"# Kernel-swap oracle, {datetime.date.today().isoformat()}",
        "",
        f"- command: `{command}`",
        f"- commit: {_commit()}; jitload from {os.path.dirname(jitload.__file__)} (sources {sources});"
        f" {os.cpu_count()} cores; wall time {seconds / 60:.1f} min",
        f"- torch {_torch_version()}, nvcc {toolchain.nvcc_version(cuda_home)}, Python {platform.python_version()}, "
        f"arch {toolchain.effective_arch_list()}",
        "- bases (base build): " + ", ".join(
            f"{n} ({prepared[n].build_seconds:.0f} s)" if n in prepared else f"{n} (outcomes of an earlier run)"
            for n in dict.fromkeys(o.base for o in outcomes)),
        "",
        "**" + ", ".join(f"{k}: {v}" for k, v in counts.items()) + "**",
        "",
        "## By edit kind",
        "",
        "| edit | tried | swapped | kept | refused | host equal | lines moved | unit failed | failures |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind in EDITS:
        mine = [o for o in outcomes if o.kind == kind]
        if mine:
            c = summary(mine)
            lines.append(f"| {kind} | {c['edits']} | {c['swapped']} | {c['kept (nothing to swap)']} | "
                         f"{c['refused']} | {c['host equal']} | {c['lines moved, symbols equal']} | "
                         f"{c['unit did not compile']} | {c['failures']} |")
    reasons = Counter(re.sub(r"\d+", "N", re.sub(r"/\S+/", "", o.reason))[:90] for o in outcomes
                      if o.decision == "refused")
    lines += ["", "## Refusal reasons", "", "| reason | edits |", "| --- | ---: |"]
    lines += [f"| {_cell(r, 100).replace('|', '/')} | {n} |" for r, n in reasons.most_common()]
    cautious = [o for o in outcomes if o.decision == "refused" and o.host == "equal"]
    if cautious:
        lines += ["", f"Refused although the host code compiled the same (torch-free bases): {len(cautious)} "
                  f"({', '.join(sorted({o.kind for o in cautious}))})."]
    failures = [o for o in outcomes if o.failure]
    lines += ["", "## Failures", ""] + (["None."] if not failures else [])
    for o in failures:
        lines += [f"### {o.base} / {o.file} / {o.kind}", "", "```diff", o.diff, "```", "", "```", o.failure, "```", ""]
    lines += ["", "## Every edit", "", *table(outcomes)]
    return "\n".join(lines) + "\n"


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return (done.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty else "")


def _sources_digest() -> str:
    """A digest of the jitload sources this run imported: the tree may have moved on while a sweep ran."""
    digest = hashlib.blake2b(digest_size=6)
    folder = os.path.dirname(jitload.__file__)
    for name in sorted(os.listdir(folder)):
        if name.endswith((".py", ".cpp")):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()


def _torch_version() -> str:
    import torch

    return torch.__version__


def nvcc_available() -> bool:
    home = toolchain.find_cuda_home()
    return bool(home) and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="torch-free bases only, one edit of each kind")
    parser.add_argument("--out", help="write the markdown report to this file")
    parser.add_argument("--write-results", action="store_true",
                        help="write the summary, by kind, as this machine's oracle section in benchmarks/results/")
    parser.add_argument("--bases", help="comma-separated base names (default: all; --quick: the torch-free ones)")
    parser.add_argument("--kinds", help="comma-separated edit kinds (default: all)")
    parser.add_argument("--seeds", type=int, default=3, help="edits of each kind a torch-free base gets (default 3)")
    parser.add_argument("--torch-seeds", type=int, default=1, help="the same for bases that include torch (default 1)")
    parser.add_argument("--decide-only", action="store_true",
                        help="take the decisions, compile nothing after the base builds")
    parser.add_argument("--work", help="folder for the bases, their builds and the outcomes so far (kept, and "
                        "taken up again by a run over it; default: a temporary one)")
    args = parser.parse_args(argv)
    if not nvcc_available():
        print("swap_oracle: no nvcc found (set CUDA_HOME)", file=sys.stderr)
        return 2
    every = bases()
    names = args.bases.split(",") if args.bases else [n for n, b in every.items() if not (args.quick and b.torch)]
    unknown = [n for n in names if n not in every]
    kinds = args.kinds.split(",") if args.kinds else None
    if unknown or any(k not in EDITS for k in kinds or ()):
        parser.error(f"unknown base or kind; bases: {', '.join(every)}; kinds: {', '.join(EDITS)}")
    seeds = 1 if args.quick else args.seeds
    work = args.work or tempfile.mkdtemp(prefix="swap_oracle_")
    sources = _sources_digest()
    start = time.perf_counter()
    try:
        outcomes, prepared = sweep(names, seeds, work, torch_seeds=args.torch_seeds, decide_only=args.decide_only,
                                   kinds=kinds, sources=sources)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - start
    print("\n".join(table(outcomes)))
    counts = summary(outcomes)
    print("\n" + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    for o in outcomes:
        if o.failure:
            print(f"\nORACLE FAILURE: {o.base} / {o.file} / {o.kind} ({o.decision})\n{o.diff}\n{o.failure}")
    command = ("python benchmarks/swap_oracle.py " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    if args.out:
        with open(args.out, "w") as f:
            f.write(report(outcomes, prepared, command, seconds, sources))
    if args.write_results:
        write_results(report(outcomes, prepared, command, seconds, sources), command)
    return 1 if counts["failures"] else 0


def write_results(text: str, command: str) -> None:
    """The report, less its list of every edit, as the oracle's section of this machine's results page."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import results_page

    lines = text.split("\n## Every edit")[0].splitlines()[1:]  # the title and every edit's row left out
    body = "\n".join(line.replace("## ", "### ", 1) if line.startswith("## ") else line for line in lines
                     if not line.startswith(("- command:", "- commit:")))  # the section's stamp says them
    print(results_page.write_section("swap-oracle", "The kernel-swap oracle (`benchmarks/swap_oracle.py`)", body,
                                     command=command))


if __name__ == "__main__":
    sys.exit(main())
