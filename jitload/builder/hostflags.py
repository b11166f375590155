"""The full build's compile line, read for the host JIT (:mod:`jitload.builder.hostjit`): the include folders
and macros it gives the host code, its optimisation level, its compiler's predefined macros, and the flags
whose meaning the interpreter cannot reproduce (refused by name: :data:`_NEUTRAL` lists the rest).

g++ is asked, not guessed: ``-dM -E`` for its predefined macros under the build's ``-std`` and ``-O`` (cached
per process, a few milliseconds each), ``-H`` for where a source's includes read assert.h (asked only for a
source that sets NDEBUG itself).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass, field

from . import hostunit


@dataclass(frozen=True)
class Flags:
    include_dirs: list[str]  # -I and -isystem folders, in the compile line's order
    defines: dict[str, str]  # the user's and torch's -D macros (the ABI's and CUDA's own are left out)
    foreign: list[str] = field(default_factory=list)  # flags that may change what the host code means
    opt: str = "0"  # the host code's -O level (g++ and nvcc default to 0): 0-3, s or g
    cxx: str = "c++"  # the full build's host compiler (its ninja file's)
    std: str = ""  # its -std= flag
    pic: str = ""  # its -fPIC (or -fpic, -fPIE, -fpie): g++'s __PIC__ and __PIE__ follow it


# Flags that leave the host code's meaning as the interpreter has it: warnings, debug levels, position-independent
# code, torch's own nvcc options (device code is nvcc's, with the build's own line); the -O levels are honoured
# (see Flags.opt). Each is spelled out: any other (-Ofast, -ffast-math, -frounding-math, -fno-signed-zeros, -U,
# -include, -funsigned-char, -fno-exceptions, -march=, -Wp,..., a second -std, ...) makes the host JIT refuse.
_OPT = re.compile(r"-O([0-3sg]?)")
_NEUTRAL = re.compile(r"-W(?!p,|a,|l,)[A-Za-z][\w+=-]*|-w|-g[0-3]?|-ggdb[0-3]?|-gdwarf(-[2-5])?|"
                      r"-f(PIC|pic|PIE|pie|diagnostics-color(=\w+)?|visibility=(default|hidden)|"
                      r"visibility-inlines-hidden|no-omit-frame-pointer|omit-frame-pointer)|-pipe|-pthread|-m64|"
                      r"-std=(gnu|c)\+\+(17|20)|-O[0-3sg]?|"
                      r"--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda|-lineinfo|--use_fast_math|"
                      r"-gencode=.*|-arch=.*|--generate-code=.*|-maxrregcount=\d+|--threads=?\d*|-Xptxas=.*|"
                      r"--ptxas-options=.*|-ccbin=.*|--resource-usage|-res-usage")
_NEUTRAL_WITH_VALUE = {"-gencode", "-arch", "--generate-code", "-maxrregcount", "--threads", "-Xptxas",
                       "--ptxas-options", "-ccbin", "-t"}


def build_flags(build_directory: str, cuda: bool) -> Flags:
    """The include folders, macros and optimisation level of the full build's own compile lines (its ninja file)."""
    import shlex

    from . import swap

    values = swap.ninja_variables(build_directory)
    names = ["cflags", "post_cflags", *(["cuda_cflags", "cuda_post_cflags"] if cuda else [])]
    words = [w for name in names for w in shlex.split(values.get(name, ""))]
    dirs: list[str] = []
    defines: dict[str, str] = {}
    reserved: list[str] = []
    for i, word in enumerate(words):
        flag, value = _flag(word, words[i + 1] if i + 1 < len(words) else "")
        if flag == "-D":
            name, eq, text = value.partition("=")
            if name.startswith("_") and name not in _TORCH_HEADER_MACROS:
                # A reserved name (_GLIBCXX_ASSERTIONS, _FORTIFY_SOURCE, ...) acts on the toolchain's headers,
                # which the interpreter parsed once for the process: it cannot be set for one unit.
                reserved.append(f"-D{value}")
            elif not name.startswith("_") and name != "TORCH_API_INCLUDE_EXTENSION_H":
                defines[name] = text if eq else "1"
        elif flag and value not in dirs:
            dirs.append(value)
    host = [part for i, w in enumerate(words) for part in
            (words[i + 1].split(",") if w in ("--compiler-options", "-Xcompiler") and i + 1 < len(words) else [w])]
    levels = [m.group(1) or "1" for w in host if (m := _OPT.fullmatch(w))]
    stds = [w for w in host if w.startswith("-std=")]
    pic = [w for w in host if w in ("-fPIC", "-fpic", "-fPIE", "-fpie")]
    return Flags(dirs, defines, [*reserved, *_foreign(words)], levels[-1] if levels else "0",
                 shlex.split(values.get("cxx", "") or "c++")[0], stds[-1] if stds else "", pic[-1] if pic else "")


def interpreter_level(opt: str) -> int:
    """The interpreter's optimisation level for a g++ ``-O`` level (``s`` is -O2's, ``g`` -O1's)."""
    return {"s": 2, "g": 1}[opt] if opt in ("s", "g") else int(opt or 0)


# The interpreter's (clang's) own predefined macros that g++ does not define (its CPU's features are asked of
# g++ with -march=native, see _cpu_features): the user's code must not see them where g++ would not.
_CLANG_ONLY = ("__clang__", "__clang_major__", "__clang_minor__", "__clang_patchlevel__", "__clang_version__",
               "__clang_literal_encoding__", "__clang_wide_literal_encoding__", "__llvm__", "__CLING__",
               "__CLING__CXX11", "__CLING__CXX14", "__CLING__CXX17", "__CLING__CXX20", "__BITINT_MAXWIDTH__",
               "__BOOL_WIDTH__", "__CONSTANT_CFSTRINGS__", "__FLOAT128__", "__GNUC_GNU_INLINE__",
               "__INTMAX_C_SUFFIX__", "__UINTMAX_C_SUFFIX__", "__LITTLE_ENDIAN__", "__LLONG_WIDTH__",
               "__NO_MATH_INLINES", "__OBJC_BOOL_IS_BOOL", "__POINTER_WIDTH__", "__WINT_UNSIGNED__",
               "__OPENCL_MEMORY_SCOPE_ALL_SVM_DEVICES", "__OPENCL_MEMORY_SCOPE_DEVICE",
               "__OPENCL_MEMORY_SCOPE_SUB_GROUP", "__OPENCL_MEMORY_SCOPE_WORK_GROUP",
               "__OPENCL_MEMORY_SCOPE_WORK_ITEM", "__OPTIMIZE__", "__OPTIMIZE_SIZE__", "__NO_INLINE__",
               "__PIC__", "__pic__", "__PIE__", "__pie__", "linux", "unix")
# The reserved -D macros torch itself passes: the interpreter's headers were parsed with them as the build has them.
_TORCH_HEADER_MACROS = frozenset({"_GLIBCXX_USE_CXX11_ABI", "__CUDA_NO_HALF_OPERATORS__",
                                  "__CUDA_NO_HALF_CONVERSIONS__", "__CUDA_NO_BFLOAT16_CONVERSIONS__",
                                  "__CUDA_NO_HALF2_OPERATORS__"})
# Predefined by g++ and fixed by the language or the target for both compilers: never redefined (clang warns).
_KEEP = frozenset({"__cplusplus", "__STDC__", "__STDC_HOSTED__", "__STDC_UTF_16__", "__STDC_UTF_32__",
                   "__FLT_EVAL_METHOD__"})


@functools.lru_cache(maxsize=32)
def _gcc_macros(cxx: str, flags: tuple[str, ...]) -> dict[str, str]:
    """``cxx``'s predefined macros under ``flags``: name -> its ``#define`` line ({} where it cannot say)."""
    try:
        done = subprocess.run([cxx, *flags, "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        match = re.match(r"#define ([A-Za-z_]\w*)", line)
        if match and match.group(1) not in _KEEP:
            out[match.group(1)] = line
    return out


@functools.lru_cache(maxsize=8)
def _cpu_features(cxx: str) -> frozenset[str]:
    """The macros of this CPU's instruction sets (``__AVX2__``, ...): the interpreter compiles for it, g++ for
    x86-64's baseline unless told otherwise."""
    native = _gcc_macros(cxx, ("-march=native",))
    return frozenset(native) - frozenset(_gcc_macros(cxx, ()))


def predefined(flags: Flags) -> hostunit.Predefined:
    """The full build's compiler's predefined macros for ``flags``, and the interpreter's it lacks. Raises
    :class:`hostunit.Unsupported` where that compiler cannot be asked (its macros would be guessed)."""
    words = tuple(w for w in (flags.std, f"-O{flags.opt}", flags.pic) if w)
    define = _gcc_macros(flags.cxx, words)
    if not define:
        raise hostunit.Unsupported(f"the full build's compiler {flags.cxx} did not list its predefined macros "
                                   "(-dM -E), which the interpreter's unit must match")
    undefine = sorted({*_CLANG_ONLY, *_cpu_features(flags.cxx)} - set(define))
    return hostunit.Predefined(define, undefine)


def pulls_assert(flags: Flags, targets: list[str]) -> int | None:
    """Which of ``targets`` (toolchain includes, in order) is the first whose inclusion reads assert.h in the
    full build's compiler (None where none does): g++ -H names every header it opens, nested by depth."""
    return _pulls_assert(flags.cxx, flags.std, tuple(flags.include_dirs), tuple(targets))


@functools.lru_cache(maxsize=64)
def _pulls_assert(cxx: str, std: str, dirs: tuple[str, ...], targets: tuple[str, ...]) -> int | None:
    text = "".join(f"#include <{t}>\n" for t in targets)
    cmd = [cxx, *([std] if std else []), *(f"-I{d}" for d in dirs), "-H", "-E", "-x", "c++", "-", "-o", os.devnull]
    try:
        done = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise hostunit.Unsupported(f"{cxx} could not say which include reads assert.h: {err}") from err
    if done.returncode != 0:
        raise hostunit.Unsupported(f"{cxx} could not say which include reads assert.h: "
                                   f"{done.stderr.strip().splitlines()[-1:]}")
    top = -1
    for line in done.stderr.splitlines():
        match = re.match(r"(\.+) (\S+)$", line)
        if not match:
            continue
        top += len(match.group(1)) == 1
        if os.path.basename(match.group(2)) == "assert.h":
            return top
    return None


def _foreign(words: list[str]) -> list[str]:
    """The compile lines' flags that are not include folders, macros or :data:`_NEUTRAL` (a flag the host
    compiler gets through nvcc's ``--compiler-options``/``-Xcompiler`` is read as the host compiler's)."""
    out: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word in ("--compiler-options", "-Xcompiler") and i + 1 < len(words):
            out += [w for w in words[i + 1].split(",") if not _NEUTRAL.fullmatch(w)]
            skip = True
        elif word in ("-I", "-isystem", "-D") or word in _NEUTRAL_WITH_VALUE:
            skip = True
        elif not (word.startswith(("-I", "-D")) or _NEUTRAL.fullmatch(word)):
            out.append(word)
    if len({w for w in words if w.startswith("-std=")}) > 1:
        out.append("-std= given twice, differently")
    return out


def _flag(word: str, following: str) -> tuple[str, str]:
    """('-I'|'-isystem'|'-D', its value) for a compile-line word, else ('', '')."""
    if word in ("-I", "-isystem", "-D"):
        return word, following
    if word.startswith(("-I", "-D")) and len(word) > 2:
        return word[:2], word[2:]
    return "", ""
