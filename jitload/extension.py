"""``jitload.load`` / ``jitload.load_inline``: torch's signatures, a handle that always holds the newest build.

A handle (:class:`Extension`) is one per build directory and process: calling ``load`` again with the same
name returns the same object, brought up to date, so every reference a notebook holds sees the new code.
What "changed" means is recorded in ``jitload.json`` beside the build (:mod:`jitload.manifest`): the build key
(sources, flags, compilers, CUDA_HOME, arch list, versions) and a content fingerprint of every source and
user header the compilers reported (:mod:`jitload.fingerprint`). When both match, ``load`` returns without
starting any process, however often the files were re-saved.

A change reaches the process by one of three paths, and ``ext.info`` says which ran:

- **kernel swap** (:mod:`jitload.swap`): the edit is inside ``__global__``/``__device__`` function bodies
  (of a ``.cu`` source or a header only its device code uses), the extension is loaded here and a GPU is
  visible. The device code alone is recompiled and the loaded kernels are replaced in place.
- **kernel code alone** (no GPU visible): the same edit is compiled as a swap would compile it, so that its
  errors show in about a second, and the loaded library stays as it is: nothing here runs its kernels, and
  its host code did not change. The build on disk is left behind, so the next process builds it in full.
- **full rebuild** (:mod:`jitload.build`): anything else. ninja recompiles the changed objects, and the
  library is linked and imported under a new name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import os
import sys
import threading
import time
import types
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import build, compiler_probe, devicecode, fingerprint, manifest, swap, toolchain, trust
from .errors import BuildError
from .lock import build_lock

PREVIOUS_KEPT = "previous build kept"  # what every interface says when a rebuild fails over a loaded one
_CUDA_SUFFIXES = (".cu", ".cuh")
_DEVICE_CAPABLE = (".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".inc")

_handles: dict[str, Extension] = {}
_handles_lock = threading.Lock()


@dataclass(frozen=True)
class BuildSpec:
    """Everything the caller said about a build (torch's ``load`` arguments, made absolute)."""

    name: str
    sources: tuple[str, ...]
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    with_cuda: bool = False
    build_directory: str = ""
    python_module: bool = True  # False: an op library (TORCH_LIBRARY), loaded with torch.ops.load_library

    def torch_args(self) -> dict[str, Any]:
        """The eight build arguments of torch's ``load()`` (and of :func:`jitload.build.write_ninja_file`)."""
        return {"name": self.name, "sources": list(self.sources), "extra_cflags": list(self.extra_cflags),
                "extra_cuda_cflags": list(self.extra_cuda_cflags), "extra_ldflags": list(self.extra_ldflags),
                "extra_include_paths": list(self.extra_include_paths), "build_directory": self.build_directory,
                "with_cuda": self.with_cuda}

    def key(self) -> str:
        fields = [self.name, self.sources, self.extra_cflags, self.extra_cuda_cflags, self.extra_ldflags,
                  self.extra_include_paths, self.with_cuda, self.python_module, toolchain.environment_fingerprint()]
        return hashlib.blake2b(json.dumps(fields).encode(), digest_size=10).hexdigest()


@dataclass
class BuildInfo:
    """What the last ``load``/``reload`` did.

    status: 'built' (compiled or linked something), 'swapped' (new kernels in the loaded library), 'compiled'
    (no GPU: a kernel edit's device code compiled alone, the library kept), 'loaded' (imported a build
    already on disk), 'unchanged' (nothing to do) or 'failed' (the previous module, if any, is still in use).
    ``reason`` says why a build ran in full when a kernel swap was not possible.
    """

    status: str
    seconds: float
    commands: int = 0
    module_name: str | None = None
    error: BuildError | None = None
    kernels: int = 0
    reason: str = ""

    def __str__(self) -> str:
        if self.status == "failed":
            return f"failed after {self.seconds:.2f} s ({PREVIOUS_KEPT})" if self.module_name else "failed"
        why = f" ({self.reason})" if self.reason else ""
        what = {"built": f"full rebuild {self.seconds:.2f} s, {self.commands} commands{why}",
                "swapped": f"kernel swap ({self.kernels} kernel{'s' * (self.kernels != 1)}) {self.seconds:.2f} s",
                "compiled": f"kernel code compiled alone {self.seconds:.2f} s (no GPU here to run it: the library "
                            "and its host code stay; the next process builds in full)",
                "loaded": f"loaded from cache in {self.seconds * 1e3:.0f} ms",
                "unchanged": f"unchanged ({self.seconds * 1e3:.1f} ms)"}[self.status]
        return f"{what} -> {self.module_name}"


def _label(path: str) -> str:
    """A path as a user would name it: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


def _read_text(path: str) -> str | None:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _host_view(path: str, text: str | None) -> str | None:
    if text is None or not path.endswith(_DEVICE_CAPABLE):
        return None
    try:
        return devicecode.host_view(text)
    except devicecode.Unsure:
        return None


def _import(module_name: str, path: str) -> types.ModuleType:
    existing = sys.modules.get(module_name)
    if existing is not None and getattr(existing, "__file__", None) == path:
        return existing
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[module_name] = module
    return module


def _load_op_library(module_name: str, path: str) -> types.ModuleType:
    import torch

    torch.ops.load_library(path)
    module = types.ModuleType(module_name, f"op library {path}: its ops are under torch.ops")
    module.__file__ = path
    return module


class Extension:
    """A built extension whose attributes are the newest build's functions.

    ``ext.add(a, b)`` calls into the module loaded last; ``ext.reload()`` brings it up to date with its
    sources (a kernel swap or a full rebuild). A failed rebuild raises :class:`BuildError` and leaves the
    previous module in place.
    """

    def __init__(self, spec: BuildSpec, verbose: bool = False) -> None:
        self._spec = spec
        self._verbose = verbose
        self._module: types.ModuleType | None = None
        self._state = manifest.State()
        self._texts: dict[str, str] = {}  # what the loaded code was built from, for "what changed" messages
        self._swapped: set[str] = set()  # sources whose kernels were swapped into the loaded module
        self._compiled_alone: set[str] = set()  # sources whose device code alone compiled since that module
        self._lock = threading.RLock()
        self.info: BuildInfo | None = None
        self.modules_loaded = 0

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def build_directory(self) -> str:
        return self._spec.build_directory

    @property
    def spec(self) -> BuildSpec:
        return self._spec

    @property
    def module(self) -> types.ModuleType:
        if self._module is None:
            raise RuntimeError(f"extension '{self.name}' has no successful build yet")
        return self._module

    def files(self) -> list[str]:
        """The sources and user headers the last build depended on (what a watcher should watch)."""
        return list(self._state.files) or list(self._spec.sources)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        if not self._spec.python_module:
            raise AttributeError(f"'{self.name}' is an op library: call its ops through torch.ops.<namespace>")
        return getattr(self.module, attr)

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        if self._module is not None:
            names.update(n for n in dir(self._module) if not n.startswith("_"))
        return sorted(names)

    def __repr__(self) -> str:
        return f"<jitload.Extension '{self.name}': {self.info or 'not built'}>"

    def reload(self, *, force: bool = False, full: bool = False) -> Extension:
        """Bring the loaded code up to date: a kernel swap where the edit allows one, else a full rebuild.

        ``full`` rebuilds in full even when a swap would do; ``force`` also reruns ninja when nothing seems
        to have changed.
        """
        with self._lock:
            start = time.perf_counter()
            key = self._spec.key()
            reason = ""
            try:
                if not force and self._module is not None and self._state.key == key:
                    changed = fingerprint.changed(self._state.files)
                    if not changed and self._state.tag:
                        self.info = BuildInfo("unchanged", time.perf_counter() - start, 0, self._module.__name__)
                        return self
                    if not full:
                        reason = self._try_swap(changed, start)
                        if not reason:
                            return self
                self._rebuild(key, start, force or full, reason)
            except BuildError as err:
                self.info = BuildInfo("failed", time.perf_counter() - start, 0,
                                      self._module.__name__ if self._module else None, err)
                raise
            return self

    def _try_swap(self, changed: list[str], start: float) -> str:
        """Swap the kernels of the units ``changed`` touches (with no GPU, compile them alone); '' when done,
        else why a full build is needed."""
        state = self._state
        before = fingerprint.take(changed)  # taken first: a save from here on must look changed next time
        texts: dict[str, str] = {}
        units: dict[str, list[str]] = {}
        added: dict[str, list[str]] = {}  # source -> device-only headers it now includes
        new_headers: dict[str, tuple[list, str]] = {}  # each one's fingerprint and text, as checked
        for path in changed:
            label = _label(path)
            text = _read_text(path)
            if text is None:
                return f"{label} is gone"
            if not path.endswith(_DEVICE_CAPABLE):
                return f"host code changed: {label}"
            old = state.hosts.get(path)
            if old is None:
                return f"{label} is outside what a kernel swap reads with certainty"
            if _host_view(path, text) != old:
                headers = self._added_device_headers(path, text) if path in state.units else None
                if headers is None:
                    where = devicecode.first_host_difference(self._texts[path], text) if path in self._texts else None
                    return f"host code changed: {where} in {label}" if where else f"host code changed in {label}"
                added[path] = list(headers)
                new_headers.update(headers)
            touched = [src for src, headers in state.units.items() if path == src or path in headers]
            if not touched:
                return f"host code changed: {label}"
            texts[path] = text
            for src in touched:
                units[src] = [*state.units[src], *added.get(src, ())]
        before.update({h: entry for h, (entry, _) in new_headers.items()})
        # Without a GPU nothing here can run the new kernels: their code is compiled alone, so that an error
        # shows in about a second, and the library stays as it is (its host code, all that runs here, is the
        # same). The build on disk is not updated: the next process to load it builds it in full.
        gpu = swap.gpu_available()
        plans: dict[str, tuple[str, list[str]]] = {}
        try:
            shim = swap.Shim(self.module.__file__)
            registered = shim.kernels()
            judged = {**texts, **{h: text for h, (_, text) in new_headers.items()}}
            plans = {src: swap.plan_unit(src, headers, registered, judged) for src, headers in units.items()}
            images = swap.compile_units(self._spec.build_directory, {s: p[0] for s, p in plans.items()})
            for src in plans:
                if gpu:
                    shim.load(images[src], plans[src][1])
                    self._swapped.add(src)
                self._compiled_alone.add(src)
        except swap.CompileError as err:
            if set(plans) <= self._compiled_alone and err.messages and all(
                    any(f"{p}(" in m or f"{p}:" in m for p in (*plans, *changed)) for m in err.messages):
                # This file's device code compiled alone before, and every error is in the user's own lines:
                # the edit is wrong, and the full build would only say so a minute later.
                raise BuildError(self._spec.name, "\n".join(err.messages) + (
                    "\n(the kernel code alone was compiled; reload(full=True) compiles the whole file)"),
                    self._spec.build_directory, os.path.join(self._spec.build_directory, build.LOG_FILE)) from err
            return f"kernel swap not possible: {err}"
        except (swap.SwapError, OSError) as err:
            return f"kernel swap not possible: {err}"
        for path, entry in before.items():
            state.files[path] = entry
        for src, headers in added.items():
            # From now on the headers are the source's own: an edit of theirs is swapped (or, where it adds
            # host code, rebuilt), and the source's host view is the one that includes them.
            state.units[src] = list(dict.fromkeys([*state.units[src], *headers]))
            state.hosts[src] = _host_view(src, texts[src])
            for header in headers:
                header_text = new_headers[header][1]
                state.hosts[header] = _host_view(header, header_text)
                self._texts[header] = header_text
        self._texts.update(texts)
        kernels = sum(len(p[1]) for p in plans.values())
        self.info = BuildInfo("swapped" if gpu else "compiled", time.perf_counter() - start, len(plans),
                              self._module.__name__, kernels=kernels)
        return ""

    def _added_device_headers(self, path: str, text: str) -> dict[str, tuple[list, str]] | None:
        """The headers ``text`` newly includes when that is its only host-side change, and each holds device
        functions alone (devicecode.added_device_headers), with the fingerprint and text each was judged by;
        None otherwise."""
        flags = (*self._spec.extra_cflags, *self._spec.extra_cuda_cflags)
        if path not in self._texts or any("-iquote" in f for f in flags):  # folders searched before ours
            return None
        if _host_view(path, self._texts[path]) != self._state.hosts.get(path):
            return None  # the text kept is not the one the loaded host code was compiled from
        folders = [os.path.dirname(path), *self._spec.extra_include_paths]
        read: dict[str, tuple[list, str]] = {}

        def read_header(target: str) -> tuple[str, str] | None:
            # nvcc's order for #include "...": the including file's folder, then the -I folders; each path
            # resolved as the system resolves it when the compiler opens it (realpath: through symlinks).
            for folder in folders:
                try:
                    candidate = os.path.realpath(os.path.join(folder, target))
                except ValueError:  # a NUL in the target: no compiler finds such a file either
                    return None
                if os.path.isfile(candidate):
                    entry = fingerprint.take([candidate]).get(candidate)  # before the read: a later save shows
                    header_text = _read_text(candidate)
                    if entry is None or header_text is None:
                        return None
                    read[candidate] = (entry, header_text)
                    return candidate, header_text
            return None

        others = [t for h in self._state.units.get(path, []) if (t := _read_text(h)) is not None]
        found = devicecode.added_device_headers(self._texts[path], text, read_header, others)
        return None if found is None else {h: read[h] for h in found}

    def _rebuild(self, key: str, start: float, force: bool, reason: str = "") -> None:
        spec, directory = self._spec, self._spec.build_directory
        trust.private_dir(directory)
        with build_lock(directory):
            state = manifest.read(directory)
            library = os.path.join(directory, f"{spec.name}_{state.tag}.so")
            if not force and state.up_to_date(key) and os.path.exists(library):
                self._texts = {p: t for p in state.hosts if (t := _read_text(p)) is not None}
                self._adopt(state, library, BuildInfo("loaded", 0.0), start)
                return
            crash = compiler_probe.known_crash()
            if crash is not None:
                warnings.warn(f"CXX={crash.compiler}: {crash.detail} (found by `jitload doctor`, which names a "
                              "compiler that works); building with it anyway", RuntimeWarning, stacklevel=4)
            # Fingerprint before compiling: a file saved during the build must look changed next time.
            # A file whose time is after this was written while the build ran. (File times come from a coarser
            # clock, a few ms behind: a save in the build's first ms may look older, but no compiler has read
            # anything yet then.)
            started_ns = time.time_ns()
            before = fingerprint.take((*spec.sources, *state.files))
            objects = build.write_ninja_file(**spec.torch_args())
            compiled = build.run_ninja(directory, objects, verbose=self._verbose, name=spec.name)
            if compiled.returncode != 0:
                raise BuildError(spec.name, compiled.output, directory, os.path.join(directory, build.LOG_FILE))
            tag = build.library_tag(directory, objects)
            library = os.path.join(directory, f"{spec.name}_{tag}.so")
            commands = compiled.commands
            if not os.path.exists(library):
                linked = build.link_library(directory, spec.name, tag, verbose=self._verbose,
                                            python_module=spec.python_module)
                if linked.returncode != 0:
                    raise BuildError(spec.name, linked.output, directory, os.path.join(directory, build.LOG_FILE))
                commands += linked.commands
            new_state = self._describe(key, tag, objects, before, started_ns)
            manifest.write(directory, new_state)
            build.prune_libraries(directory, spec.name, keep=os.path.basename(library))
            status = "built" if commands else ("loaded" if self._module is None or
                                               self._module.__file__ != library else "unchanged")
            info = BuildInfo(status, 0.0, commands, reason=reason if status == "built" else "")
            self._adopt(new_state, library, info, start)

    def _describe(self, key: str, tag: str, objects: list[str], before: fingerprint.Record,
                  started_ns: int) -> manifest.State:
        """The manifest of a finished build: fingerprints as taken before it, host views, each unit's headers."""
        spec, directory = self._spec, self._spec.build_directory
        paths = list(dict.fromkeys([*spec.sources, *build.user_dependencies(directory, objects)]))
        # A file saved while the build ran (even back to the bytes fingerprinted before it): what was compiled is
        # unknown, so it must look changed next time (at worst a ninja run that finds nothing to do).
        files = {p: fingerprint.unknown() if entry[0] >= started_ns else before.get(p) or entry
                 for p, entry in fingerprint.take(paths).items()}
        texts = {p: _read_text(p) for p in files if p.endswith(_DEVICE_CAPABLE)}
        read = fingerprint.take(texts)
        # A host view only for the text that was fingerprinted (for a file known before the build, the text that
        # was compiled): one saved during the build or this read gets none, so its next edit rebuilds in full
        # instead of being compared with host code that was never compiled.
        hosts = {p: _host_view(p, t) if p in read and read[p][2] == files[p][2] else None for p, t in texts.items()}
        units = {}
        if spec.with_cuda:
            for src, obj in zip(spec.sources, build.source_objects(directory), strict=False):
                if src.endswith(".cu") and obj:
                    units[src] = [h for h in build.user_dependencies(directory, [obj]) if h != src]
        self._texts = {p: t for p, t in texts.items() if t is not None}
        return manifest.State(key, tag, files, hosts, units)

    def _adopt(self, state: manifest.State, library: str, info: BuildInfo, start: float) -> None:
        name = self._spec.name
        module_name = f"{name}_{state.tag}"
        if not self._spec.python_module:
            self._adopt_library(state, library, info, start)
            return
        if module_name in sys.modules and (_LAST_LOADED.get(name, module_name) != module_name or (
                self._swapped and self._module is not None and self._module.__name__ == module_name)):
            # (The second case: the loaded module runs swapped-in kernels, and its own code is wanted back.)
            # Going back to a build this process loaded before (an edit undone): dlopen would hand back the old
            # mapping without running its static initialisers again, so torch.ops would keep the kernels that
            # the newer build registered. The same objects, linked under a fresh name, load as new.
            state, library = self._relink(state, info)
            module_name = f"{name}_{state.tag}"
        trust.check_library(library)
        try:
            module = _import(module_name, library)
        except ImportError as err:
            # Typically "undefined symbol": a shared library links with a declared but never defined function.
            directory = self._spec.build_directory
            raise BuildError(self._spec.name, f"the library was built but cannot be loaded: {err}", directory,
                             os.path.join(directory, build.LOG_FILE)) from err
        if module is not self._module:
            self.modules_loaded += 1
            self._swapped, self._compiled_alone = set(), set()
        _LAST_LOADED[name] = module_name
        self._module, self._state = module, state
        info.module_name, info.seconds = module_name, time.perf_counter() - start
        self.info = info

    def _adopt_library(self, state: manifest.State, library: str, info: BuildInfo, start: float) -> None:
        """Load an op library. Its TORCH_LIBRARY block can register its namespace once per process, so a
        library whose host code changed is built for the next process but not loaded into this one."""
        module_name = f"{self._spec.name}_{state.tag}"
        if self._module is not None and self._module.__file__ != library:
            raise BuildError(self._spec.name, (
                f"{os.path.basename(library)} is built, but an op library's TORCH_LIBRARY registrations cannot "
                "be loaded twice into one process: restart Python to use it "
                f"({info.reason or 'host code changed'}). Edits inside kernel bodies are swapped in place."),
                self._spec.build_directory)
        if self._module is None:
            trust.check_library(library)
            self._module = _load_op_library(module_name, library)
            self.modules_loaded += 1
        self._state = state
        info.module_name, info.seconds = module_name, time.perf_counter() - start
        self.info = info

    def _relink(self, state: manifest.State, info: BuildInfo) -> tuple[manifest.State, str]:
        spec, directory = self._spec, self._spec.build_directory
        for n in itertools.count(1):
            tag = hashlib.sha256(f"{state.tag}/{n}".encode()).hexdigest()[:len(state.tag)]
            library = os.path.join(directory, f"{spec.name}_{tag}.so")
            if f"{spec.name}_{tag}" not in sys.modules and not os.path.exists(library):
                break
        linked = build.link_library(directory, spec.name, tag, verbose=self._verbose)
        if linked.returncode != 0:
            raise BuildError(spec.name, linked.output, directory, os.path.join(directory, build.LOG_FILE))
        info.status, info.commands = "built", info.commands + linked.commands
        return replace(state, tag=tag), library


# The module each extension name loaded last in this process: what its static initialisers registered.
_LAST_LOADED: dict[str, str] = {}


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _check_name(name: str) -> None:
    # ASCII too: a non-ASCII identifier passes Python but fails at link time with only "collect2: error".
    if not (name.isidentifier() and name.isascii()):
        raise ValueError(f"extension name {name!r} must be an ASCII Python identifier (it names the module and "
                         "its init symbol)")


def _handle(spec: BuildSpec, verbose: bool) -> Extension:
    with _handles_lock:
        handle = _handles.get(spec.build_directory)
        if handle is None:
            handle = _handles[spec.build_directory] = Extension(spec, verbose)
        else:
            handle._spec, handle._verbose = spec, verbose
    return handle


def _unsupported(kwargs: dict[str, Any]) -> None:
    if kwargs.get("use_pch"):
        warnings.warn("jitload ignores use_pch: the binding object is compiled once and reused instead",
                      stacklevel=3)
    if kwargs.get("extra_sycl_cflags") or kwargs.get("with_sycl") or kwargs.get("sycl_sources"):
        raise NotImplementedError("jitload builds C++ and CUDA extensions; SYCL is not supported")


def _spec(name: str, sources: str | Sequence[str], *, extra_cflags: Sequence[str] | None = None,
          extra_cuda_cflags: Sequence[str] | None = None, extra_ldflags: Sequence[str] | None = None,
          extra_include_paths: Sequence[str] | None = None, build_directory: str | None = None,
          with_cuda: bool | None = None, python_module: bool = True) -> BuildSpec:
    """torch's build arguments, checked and made absolute: the one place that reads them."""
    _check_name(name)
    source_list = [os.path.abspath(s) for s in _as_list(sources)]
    if not source_list:
        raise ValueError("load() needs at least one source file")
    missing = [s for s in source_list if not os.path.isfile(s)]
    if missing:
        raise FileNotFoundError(f"source file(s) not found: {', '.join(missing)}")
    if with_cuda is None:
        with_cuda = any(s.endswith(_CUDA_SUFFIXES) for s in source_list)
    directory = os.path.abspath(build_directory) if build_directory else os.path.join(toolchain.cache_root(), name)
    return BuildSpec(name, tuple(source_list), tuple(_as_list(extra_cflags)), tuple(_as_list(extra_cuda_cflags)),
                     tuple(_as_list(extra_ldflags)),
                     tuple(os.path.abspath(p) for p in _as_list(extra_include_paths)), bool(with_cuda), directory,
                     python_module)


def prepare(
    name: str,
    sources: str | Sequence[str],
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
) -> Extension:
    """The handle :func:`load` would return, not built yet: ``.reload()`` builds it (a watcher wants the
    first build's errors shown like any later one's)."""
    spec = _spec(name, sources, extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags,
                 extra_ldflags=extra_ldflags, extra_include_paths=extra_include_paths,
                 build_directory=build_directory, with_cuda=with_cuda)
    return _handle(spec, verbose)


def load(
    name: str,
    sources: str | Sequence[str],
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    is_python_module: bool = True,
    is_standalone: bool = False,
    **kwargs: Any,
) -> Extension | types.ModuleType | str | None:
    """Drop-in for ``torch.utils.cpp_extension.load`` that rebuilds only what changed.

    Returns an :class:`Extension` (attributes = the module's functions, always the newest build). With
    ``is_python_module=False`` the sources are an op library (``TORCH_LIBRARY``): it is loaded with
    ``torch.ops.load_library``, its kernel edits are swapped in place, and a host-code edit is built for the
    next process (a namespace registers once per process). ``is_standalone=True`` is handed to torch unchanged
    (with the CUDA_HOME and arch fixes).
    """
    _unsupported(kwargs)
    spec = _spec(name, sources, extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags,
                 extra_ldflags=extra_ldflags, extra_include_paths=extra_include_paths,
                 build_directory=build_directory, with_cuda=with_cuda, python_module=is_python_module)
    if is_standalone:
        return _torch_load(spec, verbose, is_standalone)
    return _handle(spec, verbose).reload()


def _torch_load(spec: BuildSpec, verbose: bool, is_standalone: bool) -> types.ModuleType | str | None:
    cpp_extension = toolchain.cpp_extension()
    cuda_flags = list(spec.extra_cuda_cflags)
    if spec.with_cuda:
        toolchain.ensure_torch_cuda_home()
        cuda_flags += toolchain.default_arch_flags(cuda_flags)
    trust.private_dir(spec.build_directory)
    with build_lock(spec.build_directory):
        return cpp_extension.load(**{**spec.torch_args(), "extra_cuda_cflags": cuda_flags}, verbose=verbose,
                                  is_python_module=spec.python_module, is_standalone=is_standalone)


def _write_if_changed(path: str, text: str) -> None:
    # An unchanged source keeps its mtime, so ninja does not recompile it.
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)


def load_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    cuda_sources: str | Sequence[str] | None = None,
    functions: str | Sequence[str] | dict[str, str] | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    is_python_module: bool = True,
    with_pytorch_error_handling: bool = True,
    no_implicit_headers: bool = False,
    **kwargs: Any,
) -> Extension:
    """Drop-in for ``torch.utils.cpp_extension.load_inline``, with the same hot rebuild as :func:`load`.

    The C++ and CUDA strings become ``main.cpp`` and ``cuda.cu`` in the build directory, written only when
    their text changes. As in torch, ``cuda.cu`` gets ``#include <torch/types.h>`` unless
    ``no_implicit_headers=True``: a torch-free CUDA string with that flag recompiles in about a second.
    """
    _check_name(name)
    _unsupported(kwargs)
    if not is_python_module:
        raise NotImplementedError("jitload.load_inline builds Python modules; use torch's for op libraries")
    directory = os.path.abspath(build_directory) if build_directory else os.path.join(toolchain.cache_root(), name)
    trust.private_dir(directory)
    cpp = _as_list(cpp_sources)
    cuda = _as_list(cuda_sources)
    if not no_implicit_headers:
        cpp.insert(0, "#include <torch/extension.h>")
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        docs = functions if isinstance(functions, dict) else {f: f for f in functions}
        wrap = "torch::wrap_pybind_function({f})" if with_pytorch_error_handling else "{f}"
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        cpp.extend(f'  m.def("{f}", {wrap.format(f=f)}, "{doc}");' for f, doc in docs.items())
        cpp.append("}")
    sources = [os.path.join(directory, "main.cpp")]
    _write_if_changed(sources[0], "\n".join(cpp))
    if cuda:
        if not no_implicit_headers:
            cuda = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *cuda]
        sources.append(os.path.join(directory, "cuda.cu"))
        _write_if_changed(sources[1], "\n".join(cuda))
    result = load(name, sources, extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags,
                  extra_ldflags=extra_ldflags, extra_include_paths=extra_include_paths, build_directory=directory,
                  verbose=verbose, with_cuda=with_cuda if with_cuda is not None else bool(cuda))
    assert isinstance(result, Extension)
    return result


def handles() -> dict[str, Extension]:
    """The extensions loaded in this process, by build directory."""
    with _handles_lock:
        return dict(_handles)

