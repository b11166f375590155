"""Host code in a C++ interpreter: a host edit callable in well under a second after torch's headers are parsed.

cling (through cppyy, from PyPI) parses ``torch/extension.h`` once per process (about 30 s on 2 cores, the GIL
free), or starts from torch's C++ headers (and, with a GPU visible, CUDA's) precompiled once per machine,
:func:`build_pch`, and parses pybind11's and torch's Python headers on top (about 12 s on 2 cores), and then
compiles an extension's host code, given as :mod:`jitload.builder.hostunit` writes it, in 0.05-0.5 s. While it
declares code, file descriptor 2 is its diagnostics' (anything else written there meanwhile is written after it).
Its kernels come from nvcc (the device code alone, as for a kernel swap, in the unit's namespace) and are
launched through their ``cudaKernel_t`` on the stream the code names.

The unit is compiled as the full build's compiler would compile it, as far as the interpreter can: at the
build's ``-O`` level, with that compiler's predefined macros and without contracting ``a * b + c``; a flag whose
meaning it cannot reproduce refuses the edit (both read by :mod:`jitload.builder.hostflags`). A Python module's
``PYBIND11_MODULE`` body runs as it is, pybind11's own code, on a module object of its own: its functions
convert, reject and return arguments, carry their docstring signatures and raise as the full build's do. An op
library's ``TORCH_LIBRARY_IMPL`` kernels are registered over the loaded library's, for the same schemas.

What runs here is a stand-in: the caller (:mod:`jitload.builder.extension`) starts the full build at once and loads
it in place of the interpreter's code when it is done. Code in the interpreter is never unloaded (each edit
is a new namespace), so a process that takes hundreds of host edits grows by their size.

``JITLOAD_HOST_JIT``: ``0`` turns this off; ``warm`` starts the interpreter after the first load of an
extension that could use it, in a thread (one core for those seconds; ``jitload watch`` and ``%load_ext
jitload`` set it, and a Jupyter kernel does as if it were set); else the interpreter starts at the first host
edit, which then waits for it. ``jitload prepare`` (run by ``make``) makes the PCH ahead of a first load.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import importlib.util
import inspect
import itertools
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

from .. import settings
from . import hostunit, swapplan

ENV = "JITLOAD_HOST_JIT"
OFF = frozenset({"0", "off", "no", "false"})

_PRELUDE = r"""
#include <torch/extension.h>
#include <cstdint>
#include <typeinfo>
#include <type_traits>
#include <utility>
#include <vector>
#include <Python.h>
namespace jitload_rt {
inline std::vector<const char*>& tags() { static std::vector<const char*> v; return v; }
inline int note(const char* name) { tags().push_back(name); return (int)tags().size() - 1; }
// One per kernel instance a launch names; its typeid name holds the kernel's mangled name.
template <auto F> struct Tag { static inline const int index = note(typeid(Tag<F>).name()); };

// A PYBIND11_MODULE block's body, run on a module object made in Python: '' when it ran, else its error.
template <void (*Init)(pybind11::module_&)> std::string fill(PyObject* module) {
  try {
    auto m = pybind11::reinterpret_borrow<pybind11::module_>(module);
    Init(m);
    return "";
  } catch (pybind11::error_already_set& e) {
    return e.what();
  } catch (std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// An op library's TORCH_LIBRARY_IMPL blocks: kept by the unit's static initialisers, registered only once the
// unit's kernels are bound. Each registration overrides the loaded library's kernel for its dispatch key.
struct Impl { const char* ns; c10::DispatchKey key; const char* file; uint32_t line; void (*init)(torch::Library&); };
inline std::vector<Impl>& pending() { static std::vector<Impl> v; return v; }
inline int defer(const char* ns, c10::DispatchKey key, const char* file, uint32_t line, void (*init)(torch::Library&)) {
  pending().push_back({ns, key, file, line, init});
  return 0;
}
inline void drop_pending() { pending().clear(); }
inline int register_pending() {
  std::vector<Impl> impls;
  impls.swap(pending());
  std::vector<torch::Library*> made;
  try {
    for (const Impl& i : impls) {
      made.push_back(new torch::Library(torch::Library::IMPL, i.ns, std::make_optional(i.key), i.file, i.line));
      i.init(*made.back());
    }
  } catch (...) {
    // All or nothing: deleting a Library takes its registrations back, so the kernels before it run again.
    for (auto it = made.rbegin(); it != made.rend(); ++it) delete *it;
    throw;
  }
  // Kept for good: deleting one would take its registrations back, and the dispatcher may be gone at exit.
  return (int)impls.size();
}

// An autograd Function, instantiated here: a unit that failed to compile while instantiating its templates
// first can leave them half made in the interpreter, for every unit after it.
struct WarmFunction : public torch::autograd::Function<WarmFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) { return x.clone(); }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*, torch::autograd::tensor_list g) {
    return g;
  }
};
inline at::Tensor warm_function(const at::Tensor& x) { return WarmFunction::apply(x); }

// Compiled once here, so that the first unit does not pay for torch's op-registration templates (seconds).
inline at::Tensor warm(at::Tensor x, double a, int64_t b, bool c) {
  TORCH_CHECK(x.dim() >= 0 && x.size(0) >= 0 && x.is_contiguous(), "x has ", x.numel(), " elements");
  at::Tensor y = torch::empty_like(x);
  if (c) (void)y.data_ptr<float>();
  return c ? x * a + b : y;
}
}  // namespace jitload_rt
TORCH_LIBRARY(jitload_rt_warm, m) {
  m.def("warm", &::jitload_rt::warm);
  m.def("warm_function", &::jitload_rt::warm_function);
}
namespace jitload_rt {
// pybind11's function templates for tensor and number arguments, compiled once for the same reason.
inline void warm_module(pybind11::module_& m) {
  m.def("warm", &warm, pybind11::arg("x"), pybind11::arg("a") = 1.0, pybind11::arg("b") = 0, pybind11::arg("c") = true,
        "doc");
}
inline std::string warm_fill(PyObject* module) { return fill<&warm_module>(module); }
}  // namespace jitload_rt
"""

_CUDA_PRELUDE = r"""
#include <cuda.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <stdexcept>
#include <string>
namespace jitload_rt {
inline std::vector<cudaKernel_t>& kernels() { static std::vector<cudaKernel_t> v; return v; }
inline std::vector<cudaLibrary_t>& libraries() { static std::vector<cudaLibrary_t> v; return v; }
inline int load_library(const char* path) {
  cudaLibrary_t library;
  cudaError_t err = cudaLibraryLoadFromFile(&library, path, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err != cudaSuccess) return -(int)err;
  libraries().push_back(library);
  return (int)libraries().size() - 1;
}
inline int bind(int tag, int library, const char* name) {
  cudaKernel_t kernel;
  cudaError_t err = cudaLibraryGetKernel(&kernel, libraries()[library], name);
  if (err != cudaSuccess) return (int)err;
  if ((int)kernels().size() <= tag) kernels().resize(tag + 1, nullptr);
  kernels()[tag] = kernel;
  return 0;
}
template <class... P> struct Launcher {
  cudaKernel_t kernel; dim3 grid, block; size_t shmem; cudaStream_t stream;
  // As nvcc's stub: the arguments converted to the parameters' types, launch errors left to cudaGetLastError.
  void operator()(P... p) const {
    void* args[] = {(void*)&p..., nullptr};
    (void)cudaLaunchKernel((const void*)kernel, grid, block, args, shmem, stream);
  }
};
template <class... P>
Launcher<P...> launcher(void (*)(P...), cudaKernel_t k, dim3 g, dim3 b, size_t s, cudaStream_t st) {
  return {k, g, b, s, st};
}
template <auto F> auto launch(dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t stream = 0) {
  int tag = Tag<F>::index;
  if (tag >= (int)kernels().size() || !kernels()[tag])
    throw std::runtime_error(std::string("jitload: no device code was loaded for ") + tags()[tag]);
  return launcher(F, kernels()[tag], grid, block, shmem, stream);
}
// As the op above: the launch templates and torch's CUDA stream code, compiled once.
inline void warm_kernel(const float*, float*, int64_t) {}
inline void warm_launch(const at::Tensor& x, bool go) {
  if (go) launch<warm_kernel>(dim3(1), dim3(1), 0, at::cuda::getCurrentCUDAStream())(x.data_ptr<float>(), nullptr, 1);
}
}  // namespace jitload_rt
TORCH_LIBRARY(jitload_rt_warm_cuda, m) { m.def("warm", &::jitload_rt::warm_launch); }
"""


class JitError(Exception):
    """The interpreter refused the unit (its first error is the message), or its kernels could not be bound."""


def setting() -> str:
    return settings.switch(ENV)


def unavailable() -> str:
    """'' where the host JIT can run here, else why not."""
    if setting() in OFF:
        return f"the host JIT is off ({ENV}={settings.get(ENV)})"
    # Not imported here: the interpreter starts at cppyy's import, and must find its PCH set by then.
    if importlib.util.find_spec("cppyy") is None:
        return "the host JIT needs cppyy (pip install cppyy), which is not installed"
    return ""


@dataclass
class _Session:
    cuda: bool = False
    ready: bool = False
    paths: set[str] = field(default_factory=set)
    failed: int = 0  # units the interpreter refused (each may leave template instantiations half made)


_session = _Session()
_lock = threading.Lock()
_counter = itertools.count(1)


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """The interpreter writes its diagnostics to file descriptor 2; they are read back from a file."""
    out: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            yield out
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            out.append(f.read().decode(errors="replace"))


def _declare(code: str) -> None:
    import cppyy

    with _captured_stderr() as err:
        ok = cppyy.gbl.gInterpreter.Declare(code)
    _diagnosed(err[0] if err else "", ok)


def _run(function, *args):
    """Call a function of a declared unit: the interpreter compiles it, and links what it names, at its first
    call, and says what it cannot link on file descriptor 2."""
    with _captured_stderr() as err:
        result = function(*args)
    _diagnosed(err[0] if err else "", True)
    return result


_UNLINKED = re.compile(r"Failed to materialize|[Uu]nresolved|undefined symbol")


def _diagnosed(text: str, ok: bool) -> None:
    """Raise :class:`JitError` with the interpreter's first error (or :func:`refusal`'s sentence) where
    ``text`` holds one or ``ok`` is false; else pass its warnings on."""
    # A symbol the unit declares but nothing defines shows as a failed materialization, not as an error.
    errors = [ln for ln in text.splitlines() if re.search(r"\berror\b", ln) or _UNLINKED.search(ln)]
    if not ok or errors:
        first = errors[0] if errors else text.strip()[:300] or "the interpreter refused the code"
        if _UNLINKED.search(first):
            first = refusal(text)
        _session.failed += 1
        where = first.split(":", 1)[0]
        if _session.failed > 1 and os.path.isabs(where) and not swapplan.is_user_file(where):
            # cling does not always undo what a failed unit instantiated: an error in torch's or the
            # standard library's headers after an earlier failure is most likely that, not the new code.
            first += (" (in the interpreter's state after an earlier unit failed to compile: restart Python "
                      "to have host edits in seconds again)")
        raise JitError(first)
    if text:
        # Warnings, and whatever another thread wrote meanwhile (a build's progress): not lost, only late.
        os.write(2, text.encode())


def _short(name: str, limit: int = 80) -> str:
    """A demangled name cut to a readable length: template arguments, then parameters, as '...'."""
    while len(name.replace("\x00", "<...>")) > limit and re.search(r"<[^<>]*>", name):
        name = re.sub(r"<[^<>]*>", "\x00", name)  # the innermost first: each pass removes a level
    name = name.replace("\x00", "<...>")
    if len(name) > limit and "(" in name:
        name = name.split("(", 1)[0] + "(...)"
    return name if len(name) <= limit else name[:limit] + "..."


def refusal(text: str) -> str:
    """One sentence for the interpreter's report of symbols it could not link (it lists them mangled, once
    per attempt): how many functions, and the first as the user spells it."""
    from . import devicecode

    names = list(dict.fromkeys(re.findall(r"\b_Z\w+", text)))
    shown = [_short(re.sub(r"\bjl_\w+?_\d+_\d+::", "", devicecode.demangle(n) or n)) for n in names]
    if not shown:
        return "the interpreter could not link the code: " + " ".join(text.split())[:200]
    count = f"{len(shown)} function{'s' * (len(shown) > 1)}"
    if any("pybind11" in name for name in shown):
        return (f"pybind11's own code ({shown[0]}) cannot be linked in the interpreter: the full build takes "
                "this extension")
    return (f"the interpreter cannot link {count} the code uses, e.g. {shown[0]}: no library this process "
            "has loaded defines it (a function declared and never defined, or one of a library the interpreter "
            "has not loaded)")


def _torch_libraries(cuda: bool) -> list[str]:
    import torch

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    names = ["libc10.so", "libtorch_cpu.so", "libtorch.so", "libtorch_python.so"]
    if cuda:
        names[1:1] = ["libc10_cuda.so"]
        names.append("libtorch_cuda.so")
    return [os.path.join(lib, n) for n in names if os.path.exists(os.path.join(lib, n))]


def _loaded_cudart() -> str | None:
    """The CUDA runtime torch loaded: the interpreter's launches must go through the same one."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if line.count(" ") >= 5 else ""
            if re.search(r"/libcudart\.so[.\d]*$", path):
                return path
    return None


def start(include_dirs: list[str], cuda: bool) -> None:
    """Parse torch's headers (once per process; with ``cuda``, CUDA's and torch's CUDA headers too)."""
    with _lock:
        if "cppyy" not in sys.modules:
            pch = usable_pch()
            if pch is not None:
                # torch's headers, parsed once for this machine: the interpreter starts with them (2 s, not 20).
                os.environ["CLING_STANDARD_PCH"] = pch
                os.environ["EXTRA_CLING_ARGS"] = CLING_ARGS
            else:
                os.environ.setdefault("EXTRA_CLING_ARGS", CLING_ARGS)
        import cppyy

        for d in [*include_dirs, sysconfig.get_paths()["include"]]:
            if d not in _session.paths and os.path.isdir(d):
                cppyy.add_include_path(d)
                _session.paths.add(d)
        if _session.ready and (_session.cuda or not cuda):
            return
        if not _session.ready:
            # The interpreter's work is C++ alone: other Python threads (a notebook, a build's progress) run on.
            type(cppyy.gbl.gInterpreter).Declare.__release_gil__ = True
            for path in _torch_libraries(cuda):
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _declare(_PRELUDE)
            cppyy.gbl.jitload_rt.warm_fill(types.ModuleType("jitload_rt_warm"))
            from . import torch_compat

            torch_compat.load_dynamo()  # (torch.compiler.disable imports it at first use: seconds)

            _session.ready = True
        if cuda and not _session.cuda:
            import torch

            torch.cuda.init()
            for path in _torch_libraries(True):
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            runtime = _loaded_cudart() or next(iter(sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*"))), None)
            if runtime:
                ctypes.CDLL(runtime, mode=ctypes.RTLD_GLOBAL)
            _declare(_CUDA_PRELUDE)
            _session.cuda = True


CLING_ARGS = "-O2 -std=c++20"
_PCH_FLAGS = "-std=c++20 -Wno-implicit-fallthrough -pipe -fsigned-char -pthread -O2"  # cppyy's, in C++20
PCH_DIR = "host-jit"  # not an identifier: never the folder of an extension (each is named by one)
# Built by rootcling (cppyy's own tool for its standard-library PCH) with torch's headers added; written to a
# temporary name and renamed when complete, so that a process never loads half a file.
_PCH_SCRIPT = r"""
import os, subprocess, sys, tempfile
backend, out, flags, headers, dirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(";"), sys.argv[5:]
work = tempfile.mkdtemp(prefix="pch-", dir=os.path.dirname(out))
own = ["include", "etc", os.path.join("etc", "dictpch"), os.path.join("etc", "cling")]
cmd = [os.path.join(backend, "bin", "rootcling"), "-rootbuild", "-generate-pch",
       "-f", os.path.join(work, "allDict.cxx"), "-noDictSelection", "-D__CLING__", "-DROOT_PCH",
       *(f"-I{os.path.join(backend, d)}" for d in own), *(f"-I{d}" for d in dirs), "-cxxflags", flags,
       os.path.join("etc", "dictpch", "allHeaders.h"), *headers, os.path.join("etc", "dictpch", "allLinkDefs.h")]
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(backend, "lib") + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
done = subprocess.run(cmd, cwd=backend, env=env, capture_output=True, text=True)
pch = os.path.join(work, "allDict_rdict.pch")
if done.returncode == 0 and os.path.exists(pch):
    os.chmod(pch, 0o600)
    with open(out + ".seal.tmp", "w") as f:
        f.write(seal(pch))
    os.replace(out + ".seal.tmp", out + ".seal")
    os.replace(pch, out)
else:
    with open(out + ".log", "w") as f:
        f.write(" ".join(cmd) + "\n" + done.stdout + done.stderr)
for name in os.listdir(work):
    os.unlink(os.path.join(work, name))
os.rmdir(work)
"""


def seal(path: str) -> str:
    """A PCH's size and the digests of its first and last MiB: one cut short or overwritten is not loaded (cling
    crashes the process on a malformed PCH), and checking costs milliseconds. Its builder process runs this
    function's source too."""
    import hashlib

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = hashlib.sha256(f.read(1 << 20)).hexdigest()
        f.seek(max(0, size - (1 << 20)))
        tail = hashlib.sha256(f.read()).hexdigest()
    return f"{size} {head} {tail}"


def usable_pch() -> str | None:
    """:func:`machine_pch` where it is there, this user's, and whole (as its builder sealed it); else None."""
    path = machine_pch()
    return path if _sealed(path) else None


def _sealed(path: str) -> bool:
    try:
        with open(path + ".seal") as f:
            sealed = f.read()
        return _trusted(path) and seal(path) == sealed
    except OSError:
        return False


def prepare(cuda: bool | None = None, timeout: float = 900.0) -> tuple[str, str]:
    """Make the interpreter's PCH now (``make`` and the Docker image do, so that a first load takes the
    interpreter): waits for it, or for another process building it. (path, what happened)."""
    from . import swap

    if setting() in OFF:
        return "", f"nothing to do: the host JIT is off ({ENV}={settings.get(ENV)})"
    if importlib.util.find_spec("cppyy_backend") is None:
        return "", "nothing to do: cppyy is not installed (pip install cppyy)"
    cuda = swap.gpu_available() if cuda is None else cuda
    out = pch_path(cuda)
    if _sealed(out):
        return out, "already made"
    started = time.monotonic()
    for _ in range(2):  # a second time where another process's build died and left its marker behind
        job = build_pch(cuda)
        if job is not None:
            try:
                job.wait(timeout)
            except subprocess.TimeoutExpired:
                raise JitError(f"the interpreter's PCH was not made in {timeout:.0f} s (its builder, pid "
                               f"{job.pid}, runs on)") from None
            break
        # another process's build: its marker goes when it ends, or is stale after 600 s
        while _building(out + ".building") and time.monotonic() - started < timeout:
            time.sleep(0.5)
        if _sealed(out):
            break
    if not _sealed(out):
        log = out + ".log"
        raise JitError(f"the interpreter's PCH could not be made (see {log})" if os.path.exists(log)
                       else "the interpreter's PCH could not be made")
    return out, f"made in {time.monotonic() - started:.1f} s"


def _pch_inputs(cuda: bool) -> tuple[list[str], list[str]]:
    # Not pybind11 (torch/extension.h = torch/all.h + torch/python.h, which includes it): the interpreter takes
    # what a PCH declares as defined by a loaded library, and pybind11's header-only code (its static
    # variables, thread-locals and type infos) is in none, hidden in torch's. Parsed at the start instead.
    headers = ["torch/all.h", "Python.h"]
    if cuda:
        headers += ["cuda.h", "cuda_runtime.h", "ATen/cuda/CUDAContext.h"]
    return headers, [*toolchain_include_dirs(cuda), sysconfig.get_paths()["include"]]


def pch_path(cuda: bool) -> str:
    """Where this machine's precompiled torch headers for the interpreter are (or will be)."""
    import hashlib

    from . import toolchain

    spec = importlib.util.find_spec("cppyy_backend")
    backend = next(iter(spec.submodule_search_locations or []), "") if spec else ""
    headers, dirs = _pch_inputs(cuda)
    try:
        cling = version("cppyy-cling")  # a PCH is cling's own format: an upgraded cling needs a new one
    except PackageNotFoundError:
        cling = "?"
    key = hashlib.sha256("\0".join([backend, cling, CLING_ARGS, *headers, *dirs]).encode()).hexdigest()[:16]
    return os.path.join(toolchain.cache_root(), PCH_DIR, f"torch{'-cuda' * cuda}-{key}.pch")


def _trusted(path: str) -> bool:
    from . import trust

    try:
        trust.check_library(path)
    except Exception:
        return False
    return True


def machine_pch() -> str:
    """The PCH this machine's interpreter starts from: with a GPU visible, CUDA's headers are in it too (the
    interpreter declares the launcher over them, whatever the extension)."""
    from . import swap

    return pch_path(swap.gpu_available())


def _building(marker: str) -> bool:
    try:
        return time.time() - os.stat(marker).st_mtime < 600
    except FileNotFoundError:
        return False


def build_pch(cuda: bool | None = None) -> subprocess.Popen | None:
    """Start building :func:`machine_pch` (``cuda``: the one with CUDA's headers, or without; default: this
    machine's) in a process of its own where it is missing (20-40 s of one core, once per machine and torch
    version); None where there is nothing to do or another process builds it."""
    from . import swap, trust

    if setting() in OFF or importlib.util.find_spec("cppyy_backend") is None:
        return None
    cuda = swap.gpu_available() if cuda is None else cuda
    out = pch_path(cuda)
    marker = out + ".building"
    if _sealed(out):
        return None  # one that is missing, cut short or not this user's is made again
    trust.private_dir(os.path.dirname(out))
    if _building(marker):
        return None  # another process builds it
    with open(marker, "w"):
        pass
    spec = importlib.util.find_spec("cppyy_backend")
    backend = next(iter(spec.submodule_search_locations or []))
    headers, dirs = _pch_inputs(cuda)
    script = "import os\n" + inspect.getsource(seal) + _PCH_SCRIPT + f"\nos.unlink({marker!r})\n"
    return subprocess.Popen([sys.executable, "-c", script, backend, out, _PCH_FLAGS, ";".join(headers), *dirs],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def describe() -> str:
    """One line for ``jitload doctor``: whether host edits take the interpreter here, and how it starts."""
    refused = unavailable()
    if refused:
        return refused
    try:
        cppyy_version = version("cppyy")
    except PackageNotFoundError:
        cppyy_version = "?"
    when = "in the background after the first load" if warm_wanted() else "at the first host edit"
    pch = usable_pch()
    if pch is not None:
        how = f"from the PCH {pch}"
    else:
        how = ("parsing torch's headers (20-30 s) until the PCH is made (`jitload prepare`, or the next build "
               "with the host JIT on)")
    return f"on (cppyy {cppyy_version}): the interpreter starts {when}, {how}"


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel: its host edits come after a first load, seconds apart."""
    shell = sys.modules.get("IPython")
    get = getattr(shell, "get_ipython", None) if shell is not None else None
    return "ipykernel" in sys.modules and get is not None and getattr(get(), "kernel", None) is not None


def warm_wanted() -> bool:
    """Whether the interpreter starts in the background once an extension is loaded: ``JITLOAD_HOST_JIT=warm``
    (``jitload watch`` and ``%load_ext jitload`` set it), or unset in a Jupyter kernel."""
    return setting() == "warm" or (setting() == "" and in_notebook())


def warm(cuda: bool, delay: float = 0.0) -> None:
    """:func:`start` in a daemon thread, once per process, after ``delay`` seconds (errors are seen again, and
    reported, by the edit that needs the interpreter)."""
    global _warming
    if (_session.ready and (_session.cuda or not cuda)) or (_warming is not None and _warming.is_alive()) \
            or importlib.util.find_spec("cppyy") is None:
        return

    def run() -> None:
        if _exiting.wait(delay):
            return
        with contextlib.suppress(Exception):  # cppyy's import, too, happens here: it takes half a second
            if not unavailable():
                start(toolchain_include_dirs(cuda), cuda)

    if not _exit_hook:
        atexit.register(_finish_warming)
        _exit_hook.append(True)
    _warming = threading.Thread(target=run, name="jitload-host-jit-warm", daemon=True)
    _warming.start()


def _finish_warming() -> None:
    """At exit: a start still waiting is dropped; one under way is waited for. Python tearing down while cling
    works in a daemon thread crashes the process, and file descriptor 2 is the interpreter's capture file
    until its declaration ends (the process's last words would go there)."""
    _exiting.set()
    if _warming is not None and _warming.is_alive():
        _warming.join()


_warming: threading.Thread | None = None
_exiting = threading.Event()
_exit_hook: list[bool] = []


def toolchain_include_dirs(cuda: bool) -> list[str]:
    """torch's include folders (CUDA's with ``cuda``), as its compile lines give them, before any build."""
    from . import torch_compat

    return torch_compat.include_paths(cuda)


def new_namespace(name: str) -> str:
    return f"jl_{name}_{os.getpid()}_{next(_counter)}"


@dataclass
class Compiled:
    """A unit the interpreter took: its ops' Python module and the kernel instances its launches name."""

    module: types.ModuleType
    instances: list[tuple[int, str]]  # (tag, demangled spelling) of each kernel instance the unit launches


def _spelled(tag_name: str) -> str:
    """The kernel instance a ``Tag<&k>`` names, as the demangler spells it: ``void ns::k<float>(float*, int)``
    for a template instance, ``ns::k`` for a plain kernel. (The kernel's own mangled name cannot be cut out of
    the tag's: its substitutions count from the tag's start.)"""
    from . import devicecode

    text = devicecode.demangle(tag_name) or ""
    match = re.fullmatch(r"jitload_rt::Tag<&\((.*)\)>|jitload_rt::Tag<&(.*)>", text)
    if not match:
        raise JitError(f"jitload cannot read the kernel in {tag_name}")
    return (match.group(1) or match.group(2)).strip()


def compile_unit(unit: hostunit.Unit, module_name: str, opt: int = 0) -> Compiled:
    """Declare ``unit`` to the interpreter (after :func:`start`) at optimisation level ``opt`` (the full build's
    ``-O``: code whose result depends on it, such as a division under ``fesetround``, then computes alike), and
    run its PYBIND11_MODULE block on a module of its own."""
    import cppyy

    tags = cppyy.gbl.jitload_rt.tags
    before = tags().size()
    cppyy.gbl.jitload_rt.drop_pending()  # an earlier unit's, whose kernels failed to bind
    cppyy.gbl.gInterpreter.ProcessLine(f".O {opt}")
    _declare(unit.code)
    names = [tags()[i] for i in range(before, tags().size())]
    instances = [(before + i, _spelled(n.decode() if isinstance(n, bytes) else str(n))) for i, n in enumerate(names)]
    module = types.ModuleType(module_name)  # no docstring, as a PYBIND11_MODULE without m.doc() has none
    module.__file__ = None
    if unit.module:
        error = str(_run(getattr(getattr(cppyy.gbl, unit.namespace), hostunit.MODULE_FILL), module))
        if error:
            raise JitError(f"the PYBIND11_MODULE block raised: {error}")
    return Compiled(module, instances)


def check_schemas(schemas: list[tuple[str, str]]) -> None:
    """An op library's schemas are registered once per process: each must be the registered one, as is."""
    import torch

    from . import torch_compat

    for namespace, text in schemas:
        try:
            schema = torch_compat.parse_schema(text if "::" in text.split("(")[0] else f"{namespace}::{text}")
        except RuntimeError as err:
            raise JitError(f"TORCH_LIBRARY({namespace}): m.def(\"{text}\"): {err}") from err
        name = schema.name.split("::", 1)[1]
        try:
            op = getattr(getattr(getattr(torch.ops, namespace), name), schema.overload_name or "default")
        except (AttributeError, RuntimeError):
            raise JitError(f"{schema.name} is a new op: an op library's ops are registered once per process "
                           "(restart Python to use it)") from None
        if str(op._schema) != str(schema):
            raise JitError(f"the schema of {schema.name} changed ({op._schema} -> {schema}): an op's schema is "
                           "registered once per process (restart Python to use it)")


def register_impls() -> int:
    """Register the declared unit's TORCH_LIBRARY_IMPL blocks (after its kernels are bound); how many."""
    import cppyy

    return int(cppyy.gbl.jitload_rt.register_pending())


def unit_instantiations(instances: list[tuple[int, str]]) -> list[str]:
    """Explicit instantiations (at global scope) of the templated kernel instances a unit launches."""
    return [f"template __global__ {spelled};" for _, spelled in instances if "(" in spelled]


def _kernel_for(spelled: str, kernels: dict[str, str]) -> str | None:
    """The mangled name, among ``kernels`` (mangled -> demangled), of the instance ``spelled`` names."""
    found = [m for m, text in kernels.items()
             if text == spelled or ("(" not in spelled and text.partition("(")[0] == spelled)]
    if len(found) > 1:
        raise JitError(f"{spelled} names {len(found)} kernels (overloads): which one a launch takes is unknown")
    return found[0] if found else None


def bind(images: dict[str, bytes], instances: list[tuple[int, str]], directory: str) -> None:
    """Load the compiled device images and point each launched kernel instance at its code."""
    import cppyy

    from . import devicecode, imagecmp

    rt = cppyy.gbl.jitload_rt
    libraries: dict[str, int] = {}
    demangled: dict[str, str] = {}
    for source, image in images.items():
        path = os.path.join(directory, f"{os.path.basename(source)}.{os.getpid()}.jit.fatbin")
        with open(path, "wb") as f:
            f.write(image)
        library = rt.load_library(path)
        if library < 0:
            raise JitError(f"cudaLibraryLoadFromFile failed for the device code of {os.path.basename(source)} "
                           f"(error {-library})")
        kernels, _ = imagecmp.image_symbols(image)
        for name in kernels:
            if name not in libraries:
                libraries[name] = library
                demangled[name] = devicecode.demangle(name) or name
    for tag, spelled in instances:
        mangled = _kernel_for(spelled, demangled)
        if mangled is None:
            raise JitError(f"the device code lacks {spelled}")
        err = rt.bind(tag, libraries[mangled], mangled)
        if err:
            raise JitError(f"cudaLibraryGetKernel({mangled}) failed (error {err})")
