"""``jitload.load`` / ``jitload.load_inline``: torch's signatures, a handle that always holds the newest build.

A handle (:class:`Extension`) is one per build directory and process: calling ``load`` again with the same
name returns the same object, brought up to date, so every reference a notebook holds sees the new code.
What "changed" means is recorded in ``jitload.json`` beside the build (:mod:`jitload.builder.manifest`): the build key
(sources, flags, compilers, CUDA_HOME, arch list, versions) and a content fingerprint of every source and
user header the compilers reported (:mod:`jitload.builder.fingerprint`). When both match, ``load`` returns without
starting any process, however often the files were re-saved.

A change reaches the process by one of three paths, and ``ext.info`` says which ran:

- **kernel swap** (:mod:`jitload.builder.swap`): :mod:`jitload.builder.swapplan` finds that the host program a
  full build would make is the one loaded (the sources read as the compiler sees them,
  :mod:`jitload.builder.ppview`), and a GPU is visible. The device code alone is recompiled and the loaded
  kernels are replaced in place.
- **kernel code alone** (no GPU visible): the same edit is compiled as a swap would compile it, so that its
  errors show in about a second, and the loaded library stays as it is: nothing here runs its kernels.
- **host JIT** (:mod:`jitload.builder.hostjit`): a host edit of a Python module (a TORCH_CHECK, the grid math, a new
  argument), where cppyy is installed: the sources' host code is compiled by a C++ interpreter that has
  parsed torch's headers once per process, and their kernels by nvcc alone, in about a second. Until the full
  build replaces it, what runs is the interpreter's code.
- **full rebuild** (:mod:`jitload.builder.fullbuild`): anything else. ninja recompiles the changed objects, and the
  library is linked and imported under a new name.

All three first ones start the full build at once in a process of its own (:mod:`jitload.builder.background`),
which writes the build on disk and its manifest, so the next process loads it without compiling. When it is
done the handle compares it with what it runs (:mod:`jitload.builder.imagecmp`): the same host code and kernels, and
``ext.info`` says ``verified``; anything else, and the full build is loaded in place of the swap, and
``ext.info`` says so. ``ext.wait()`` (``jitload.wait()`` for every handle) blocks until then.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import os
import stat
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import (
    background,
    build,
    compiler_probe,
    devicecode,
    fingerprint,
    fullbuild,
    hostflags,
    hostjit,
    hostunit,
    imagecmp,
    manifest,
    ppview,
    swap,
    swapplan,
    toolchain,
    torch_compat,
    trust,
)
from .errors import BuildError
from .fullbuild import BuildSpec
from .lock import build_lock

PREVIOUS_KEPT = "previous build kept"  # what every interface says when a rebuild fails over a loaded one
_CUDA_SUFFIXES = (".cu", ".cuh")

_handles: dict[str, Extension] = {}
_handles_lock = threading.Lock()

__all__ = ["BuildInfo", "BuildSpec", "Extension", "handles", "load", "load_inline", "prepare", "wait"]


@dataclass
class BuildInfo:
    """What the last ``load``/``reload`` did.

    status: 'built' (compiled or linked something), 'swapped' (new kernels in the loaded library), 'jit' (the host
    code compiled by the interpreter, the kernels by nvcc alone), 'compiled'
    (no GPU: a kernel edit's device code compiled alone, the library kept), 'loaded' (imported a build
    already on disk), 'unchanged' (nothing to do) or 'failed' (the previous module, if any, is still in use).
    ``reason`` says why a build ran in full when a kernel swap was not possible. ``verification`` is the state
    of the full build behind a swap: 'pending', 'verified', or '' where there is none; behind the host JIT's
    code, 'replacing' until that full build is loaded in its place.
    """

    status: str
    seconds: float
    commands: int = 0
    module_name: str | None = None
    error: BuildError | None = None
    kernels: int = 0
    reason: str = ""
    verification: str = ""

    def __str__(self) -> str:
        if self.status == "failed":
            return f"failed after {self.seconds:.2f} s ({PREVIOUS_KEPT})" if self.module_name else "failed"
        why = f" ({self.reason})" if self.reason else ""
        what = {"built": f"full rebuild {self.seconds:.2f} s, {self.commands} commands{why}",
                "swapped": f"kernel swap ({self.kernels} kernel{'s' * (self.kernels != 1)}) {self.seconds:.2f} s",
                "jit": f"host code JIT-compiled {self.seconds:.2f} s (C++ interpreter; {self.kernels} kernel"
                       f"{'s' * (self.kernels != 1)} from nvcc){why}",
                "compiled": f"kernel code compiled alone {self.seconds:.2f} s (no GPU here to run it: the library "
                            "and its host code stay)",
                "loaded": f"loaded from cache in {self.seconds * 1e3:.0f} ms",
                "unchanged": f"unchanged ({self.seconds * 1e3:.1f} ms{'; ' * bool(self.reason)}{self.reason})"
                }[self.status]
        after = {"pending": "; the full build that verifies it is running",
                 "replacing": "; the full build that replaces it is running",
                 "": ""}.get(self.verification, f"; {self.verification}")
        return f"{what} -> {self.module_name}{after}"


def _label(path: str) -> str:
    """A path as a user would name it: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


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


@dataclass
class _Bet:
    """What a swap (or a kernel edit compiled alone) assumed, for the full build that settles it."""

    job: background.Job
    images: dict[str, bytes]  # source -> the device image loaded (or compiled alone) for it
    loaded_objects: dict[str, str]  # the host digests of the library that runs
    lines_moved: bool  # the host code's line numbers (__LINE__) differ from the loaded library's
    files: fingerprint.Record  # the fingerprints of the files the swap read
    started: float
    jit: bool = False  # the interpreter's host code runs: the full build replaces it, whatever it compares to


class Extension:
    """A built extension whose attributes are the newest build's functions.

    ``ext.add(a, b)`` calls into the module loaded last; ``ext.reload()`` brings it up to date with its
    sources (a kernel swap or a full rebuild). A failed rebuild raises :class:`BuildError` and leaves the
    previous module in place. ``ext.wait()`` blocks until the full build behind a swap has verified it.
    """

    def __init__(self, spec: BuildSpec, verbose: bool = False) -> None:
        self._spec = spec
        self._verbose = verbose
        self._module: types.ModuleType | None = None
        self._state = manifest.State()
        self._loaded_objects: dict[str, str] = {}  # host digests of the objects of the library loaded
        self._texts: dict[str, str] = {}  # what the loaded code was built from, for "what changed" messages
        self._swapped: set[str] = set()  # sources whose kernels were swapped into the loaded module
        self._images: dict[str, bytes] = {}  # source -> the device image swapped in (or compiled alone) last
        self._bet: _Bet | None = None
        self._verify_error: BuildError | None = None
        self._unverified = False  # kernels swapped (or compiled alone) that no full build has verified yet
        self._jit: str | None = None  # the interpreter's namespace whose host code runs, until a full build
        self._registered: set[str] | None = None  # an op library's registrations in this process
        self._lock = threading.RLock()
        self.info: BuildInfo | None = None
        self.modules_loaded = 0
        self.on_verified: list[Callable[[Extension], None]] = []  # called when a background build settles

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
                    if not changed and self._state.tag and self._verify_error is not None and not full:
                        raise self._verify_error  # the full build behind the last swap failed: still true
                    if not changed and self._state.tag and not (full and self._unverified):
                        self.info = replace(self.info or BuildInfo("unchanged", 0.0), status="unchanged",
                                            seconds=time.perf_counter() - start, commands=0,
                                            module_name=self._module.__name__, error=None, reason="",
                                            verification=("replacing" if self._jit else "pending")
                                            if self._bet is not None else "")
                        return self
                    if not full:
                        reason = (self._try_swap(changed, start) if self._jit is None
                                  else "the running host code is the interpreter's")
                        if not reason:
                            return self
                        refused = self._try_host_jit(changed, start, reason)
                        if refused is None:
                            return self
                        reason = f"{reason}; {refused}" if refused else reason
                if self._module is None and not (force or full):
                    refused = self._try_cold_jit(key, start)
                    if refused is None:
                        return self
                    reason = refused
                self._cancel_bet()
                self._rebuild(key, start, force or full, reason)
            except BuildError as err:
                self.info = BuildInfo("failed", time.perf_counter() - start, 0,
                                      self._module.__name__ if self._module else None, err)
                raise
            return self

    def wait(self, timeout: float | None = None) -> Extension:
        """Block until the full build behind the last swap has settled it (verified, or loaded in its place).
        Raises :class:`BuildError` when that full build failed: the swapped code is not what the sources
        build to. ``timeout`` (seconds): raise TimeoutError if it has not settled by then."""
        bet = self._bet
        if bet is not None and not bet.job.wait(timeout):
            raise TimeoutError(f"the full build of '{self.name}' is still running (pid {bet.job.pid})")
        with self._lock:
            if self._verify_error is not None:
                raise self._verify_error
        return self

    def stop_verification(self) -> None:
        """Stop the background full build behind the last swap (to free the cores): the swapped code stays
        unverified, and the build on disk stays the older one, so the next process builds in full."""
        with self._lock:
            self._cancel_bet()
            if self.info is not None and self.info.verification in ("pending", "replacing"):
                self.info = replace(self.info, verification="NOT verified: its full build was stopped")

    def _cancel_bet(self) -> None:
        bet, self._bet = self._bet, None
        if bet is not None:
            bet.job.cancel()

    def _try_swap(self, changed: list[str], start: float) -> str:
        """Swap the kernels of the units ``changed`` touches (with no GPU, compile them alone), and start the
        full build that verifies it; '' when done, else why a full build is needed now.

        :mod:`jitload.builder.swapplan` decides and compiles; the handle acts on what it returns."""
        library = swapplan.open_library(self.module.__file__)
        if isinstance(library, swapplan.Refusal):
            return library.reason
        shim, registered = library
        plan = swapplan.decide(self._state, changed, registered, build_directory=self._spec.build_directory,
                               texts=self._texts)
        if isinstance(plan, swapplan.Refusal):
            return plan.reason
        if plan.nothing:
            self._take_unchanged(plan, start)
            return ""
        self._cancel_bet()  # a newer edit: the full build of the older one is stopped, and one of this started
        compiled = swapplan.compile_plan(plan, registered, build_directory=self._spec.build_directory,
                                         built_kernels=self._built_kernels)
        if isinstance(compiled, swapplan.Refusal):
            return compiled.reason
        gpu = swap.gpu_available()
        if gpu:
            try:
                for src, image in compiled.images.items():
                    shim.load(image, compiled.names[src])
                    self._swapped.add(src)
            except (swap.SwapError, OSError, RuntimeError) as err:
                return f"kernel swap not possible: {err}"
        self._take_swap(plan, compiled, gpu, start)
        return ""

    def _take_unchanged(self, plan: swapplan.Plan, start: float) -> None:
        """Comments and spacing alone: the objects on disk are what these texts compile to, so the build on
        disk is brought up to date without compiling (the next process loads it as it is).

        A background build still running verifies the swap before it as it would have; with no swap since the
        module's full build, the manifest on disk is brought up to date."""
        self._state.files.update(plan.files)
        self._texts.update(plan.texts)
        if self._bet is None and not self._unverified:
            with build_lock(self._spec.build_directory):
                if manifest.read(self._spec.build_directory).tag == self._state.tag:
                    manifest.write(self._spec.build_directory, self._state)
        self.info = BuildInfo("unchanged", time.perf_counter() - start, 0, self._module.__name__,
                              reason="comments and spacing only: nothing to compile")

    def _take_swap(self, plan: swapplan.Plan, compiled: swapplan.Compiled, gpu: bool, start: float) -> None:
        """Record a swapped (or, with no GPU, compiled) plan in the handle and start its full build."""
        state = self._state
        state.files.update(plan.files)
        state.hosts.update(plan.hosts)
        for src, headers in plan.added.items():
            state.units[src] = list(dict.fromkeys([*state.units[src], *headers]))
        self._texts.update(plan.texts)
        self._images.update(compiled.images)
        self.info = BuildInfo("swapped" if gpu else "compiled", time.perf_counter() - start, len(compiled.images),
                              self._module.__name__, kernels=compiled.kernels, verification="pending")
        self._unverified = True
        self._start_bet(plan.lines_moved, plan.files)

    def _try_host_jit(self, changed: list[str], start: float, why: str) -> str | None:
        """Compile the sources' host code in the interpreter and their kernels with nvcc alone, make that the
        running code and start the full build that replaces it; None when done, '' where the host JIT is
        turned off, else why it could not."""
        spec = self._spec
        cuda = any(src.endswith(_CUDA_SUFFIXES) for src in spec.sources)
        if hostjit.setting() in hostjit.OFF:
            return ""
        refused = hostjit.unavailable()
        if not refused and cuda and not swap.gpu_available():
            refused = "no GPU is visible to run the kernels"
        if refused:
            return f"host JIT: {refused}"
        if not cuda and why.startswith("kernel swap not possible"):
            why = f"host code changed in {', '.join(_label(p) for p in changed)}"  # no kernels to swap anyway
        before = fingerprint.take(changed)
        texts: dict[str, str] = {}
        namespace = hostjit.new_namespace(spec.name)
        try:
            unit, flags = self._host_unit(namespace, _reader(texts), cuda)
            self._check_unit(unit, flags)
            hostjit.start(flags.include_dirs, cuda)
            hostjit.check_schemas(unit.schemas)
            compiled = hostjit.compile_unit(unit, namespace, hostflags.interpreter_level(flags.opt))
            images = self._jit_kernels(unit, texts, compiled.instances) if compiled.instances else {}
            hostjit.register_impls()  # an op library's kernels, overriding the loaded library's
        except (hostunit.Unsupported, hostjit.JitError, swap.SwapError, devicecode.Unsure, OSError) as err:
            return f"host JIT: {err}"
        except Exception as err:  # cppyy raises its own kinds (a static initialiser's C++ exception among them)
            return f"host JIT: the interpreter failed: {type(err).__name__}: {str(err).strip()[:300]}"
        self._cancel_bet()  # the full build of an older edit: this one's replaces it
        if self._registered is not None:
            self._registered |= unit.registered
        state = self._state
        state.files.update(before)
        state.files.update(fingerprint.take([f for f in unit.files if f not in state.files]))
        self._texts.update(texts)
        # An op library's ops stay where they are (torch.ops): the interpreter's kernels were registered for them.
        self._module = compiled.module if spec.python_module else self._module
        self._jit = namespace
        self.info = BuildInfo("jit", time.perf_counter() - start, len(images), namespace,
                              kernels=len(compiled.instances), reason=why, verification="replacing")
        self._unverified = True
        self._start_bet(False, before, jit=True)
        return None

    def _host_unit(self, namespace: str, read: Callable[[str], str], cuda: bool, *, to_compile: bool = True
                   ) -> tuple[hostunit.Unit, hostflags.Flags]:
        """The sources as the interpreter's unit, with the full build's flags (its ninja file). ``to_compile``
        False: only what the unit registers is wanted, and its compiler's macros are not asked for."""
        flags = hostflags.build_flags(self._spec.build_directory, cuda)
        user_dirs = [d for d in flags.include_dirs if swapplan.is_user_file(d)]
        unit = hostunit.build(list(self._spec.sources), namespace, read=read, include_dirs=user_dirs,
                              defines=flags.defines, predefined=hostflags.predefined(flags) if to_compile else None,
                              pulls_assert=functools.partial(hostflags.pulls_assert, flags))
        return unit, flags

    def _check_unit(self, unit: hostunit.Unit, flags: hostflags.Flags) -> None:
        """Refuse (Unsupported) a unit whose code would mean something else in the interpreter than in the
        full build, or whose registrations cannot be made again in this process."""
        if flags.foreign:
            raise hostunit.Unsupported(f"the build's flag {flags.foreign[0]} may change what the host code means, "
                                       "and the interpreter does not take it")
        if self._spec.python_module != unit.module:
            raise hostunit.Unsupported("a Python module's bindings are PYBIND11_MODULE's, an op library's "
                                       "TORCH_LIBRARY's (is_python_module says which)")
        if not self._spec.python_module:
            self._check_registrations(unit)

    def _check_registrations(self, unit: hostunit.Unit) -> None:
        """An op library's edit may add registrations, not drop any: what this process registered (the library,
        earlier edits) stays registered until it ends, where the full build would have none."""
        if self._registered is None:
            raise hostunit.Unsupported("what the loaded op library registers could not be read from its sources")
        dropped = sorted(self._registered - unit.registered)
        if dropped:
            shown = ", ".join(d.replace(" ", " for ") for d in dropped[:3])
            raise hostunit.Unsupported(f"the edit drops {shown}, which stays registered in this process (restart "
                                       "Python to be without it)")

    def _library_registrations(self) -> set[str] | None:
        """What the op library just loaded registers, read from its sources (None where they cannot be)."""
        cuda = any(src.endswith(_CUDA_SUFFIXES) for src in self._spec.sources)
        try:
            return self._host_unit("jl_registrations", _reader({}), cuda, to_compile=False)[0].registered
        except (hostunit.Unsupported, devicecode.Unsure, OSError):
            return None

    def _try_cold_jit(self, key: str, start: float) -> str | None:
        """A first load whose build is not on disk: the host JIT's result in seconds, the full build behind it.
        Only where torch's headers are precompiled for the interpreter (else its start is as slow as a build).
        None when done, else why the full build runs now ('' where the host JIT has nothing to say)."""
        spec = self._spec
        cuda = any(src.endswith(_CUDA_SUFFIXES) for src in spec.sources)
        if (hostjit.setting() in hostjit.OFF or hostjit.unavailable() or not spec.python_module
                or (cuda and not swap.gpu_available())):
            return ""
        if manifest.read(spec.build_directory).up_to_date(key):
            return ""  # loading the build on disk takes milliseconds (asked first: the PCH's path is not free)
        if "cppyy" not in sys.modules and hostjit.usable_pch() is None:
            return ""
        trust.private_dir(spec.build_directory)
        try:
            with build_lock(spec.build_directory):
                build.write_ninja_file(**spec.torch_args())  # the compile lines the JIT takes its flags from
        except Exception:  # the full build meets the same problem, and says it in its own words
            return ""
        texts = {src: t for src in spec.sources if src.endswith(".cu") and (t := fullbuild.read_text(src))}
        # The device-mode macro state after torch's includes, for the device units (as a swap has it).
        capture = threading.Thread(target=fullbuild.capture_snapshots, args=(spec.build_directory, texts))
        capture.start()
        if cuda:
            hostjit.warm(True)
        capture.join()
        self._state = manifest.State(key=key, tag="jit")  # what runs is of this key; no build of it on disk yet
        refused = self._try_host_jit(list(spec.sources), start, "first build")
        if refused is not None:
            self._state = manifest.State()
        return refused

    def _jit_kernels(self, unit: hostunit.Unit, texts: dict[str, str], instances: list[tuple[int, str]]
                     ) -> dict[str, bytes]:
        """nvcc's device code for the unit's kernels (each CUDA source's, in the unit's namespace), loaded and
        bound to the launches the interpreter compiled."""
        directory = self._spec.build_directory
        cuda_sources = [s for s in self._spec.sources if s.endswith(_CUDA_SUFFIXES)]
        lines = hostjit.unit_instantiations(instances)
        units = {}
        for n, src in enumerate(cuda_sources):
            if any(devicecode.includes_torch(texts[f]) for f in unit.files if f != src and f in texts
                   and f.endswith(swapplan.DEVICE_CAPABLE) and f not in self._spec.sources):
                raise swap.SwapError("a user header includes torch headers")
            units[src], _ = devicecode.device_unit(texts[src], src, [], {},
                                                   prelude=ppview.device_prelude(directory, src),
                                                   namespace=unit.namespace, extra=lines if n == 0 else ())
        images = swap.compile_units(directory, units)
        hostjit.bind(images, instances, os.path.join(directory, swap.SWAP_DIR))
        return images

    def _built_kernels(self, source: str) -> set[str]:
        """The kernels the loaded build's object of ``source`` defines (read from its device image by the
        full build); raises SwapError where that build did not record them."""
        if source not in self._state.kernels:
            raise swap.SwapError(f"the last full build did not record the kernels of {_label(source)}")
        return set(self._state.kernels[source])

    def _start_bet(self, lines_moved: bool, files: fingerprint.Record, jit: bool = False) -> None:
        self._verify_error = None
        job = background.Job(self._spec.to_json(), self._spec.build_directory,
                             lambda outcome: self._settle(bet, outcome))
        bet = _Bet(job, dict(self._images), dict(self._loaded_objects), lines_moved, dict(files),
                   time.perf_counter(), jit)
        self._bet = bet
        job.start()

    def _settle(self, bet: _Bet, outcome: background.Outcome) -> None:
        """The background build is done: compare it with what runs, and load it where they differ."""
        if outcome.cancelled:
            return
        with self._lock:
            if bet is not self._bet:
                return  # a newer edit replaced it
            self._bet = None
            seconds = time.perf_counter() - bet.started
            info = self.info or BuildInfo("unchanged", 0.0)
            if outcome.error:
                directory = self._spec.build_directory
                self._verify_error = BuildError(self._spec.name, outcome.log or outcome.error, directory,
                                                os.path.join(directory, build.LOG_FILE))
                running = ("the interpreter's host code still runs" if bet.jit else
                           "the swapped kernels still run" if self._swapped else "the loaded library stays")
                self.info = replace(info, verification=f"NOT verified: the full build failed ({running}; "
                                                       "ext.wait() and reload() raise its errors)")
                self._notify()
                return
            state = manifest.read(self._spec.build_directory)
            # A file saved after the swap was read by the full build: it built newer code than was swapped.
            moved = [p for p, entry in bet.files.items() if (state.files.get(p) or [None] * 3)[2] != entry[2]]
            differences = ["host code"] if bet.jit else [] if moved else self._differences(bet, state)
            if not moved and not differences:
                self._state, self._texts, self._unverified = state, fullbuild.texts_as_built(state.files), False
                self.info = replace(info, verification=f"verified by the full build ({seconds:.1f} s)")
                self._notify()
                return
            if bet.jit and not self._spec.python_module:
                # An op library's registrations are made once per process: its full build is for the next one.
                if not moved:  # else the newer text's edit is still to be run: its reload sees the change
                    self._state = state
                self.info = replace(info, verification=f"built for the next process ({seconds:.1f} s); the "
                                    "interpreter's host code runs in this one (an op library registers once per "
                                    "process)")
                self._notify()
                return
            if bet.jit:
                note = "the full build replaces the interpreter's host code"
            elif moved:
                note = (f"{', '.join(_label(p) for p in moved)} changed after the swap: the full build of the "
                        "newer text")
            elif bet.lines_moved and differences == ["host code"]:
                note = "verified; only the host code's line numbers moved (__LINE__, as in TORCH_CHECK messages)"
            else:
                note = f"the kernel swap was NOT equivalent to the full build: {'; '.join(differences)}"
            library = os.path.join(self._spec.build_directory, f"{self._spec.name}_{state.tag}.so")
            try:
                self._adopt(state, library, BuildInfo("built", 0.0, outcome.commands, reason=note,
                                                      verification="the full build now runs"), bet.started)
                self._texts = fullbuild.texts_as_built(state.files)
            except BuildError as err:
                self._verify_error = err
                self.info = replace(info, verification=f"{note}; the full build could not be loaded: {err}")
            self._notify()

    def _differences(self, bet: _Bet, state: manifest.State) -> list[str]:
        """What differs between the code that runs and the full build's: 'host code', or kernels by name."""
        differences = []
        if not bet.loaded_objects or state.objects != bet.loaded_objects:
            differences.append("host code")
        directory = self._spec.build_directory
        objects = dict(zip(self._spec.sources, build.source_objects(directory), strict=False))
        for src, image in bet.images.items():
            obj = objects.get(src)
            try:
                built = imagecmp.device_image(os.path.join(directory, obj)) if obj else b""
                differing = imagecmp.differing_functions(image, built)
            except (OSError, RuntimeError) as err:
                differences.append(f"the kernels of {_label(src)} could not be compared: {err}")
                continue
            if differing:
                shown = ", ".join(n.split(" ", 1)[1] for n in differing[:3])
                differences.append(f"kernel code of {_label(src)}: {shown}")
        return differences

    def _notify(self) -> None:
        for callback in list(self.on_verified):
            try:
                callback(self)
            except Exception as err:  # a display callback must not break the build's bookkeeping
                warnings.warn(f"jitload: an on_verified callback failed: {err!r}", RuntimeWarning, stacklevel=2)

    def _rebuild(self, key: str, start: float, force: bool, reason: str = "") -> None:
        spec = self._spec
        trust.private_dir(spec.build_directory)
        crash = compiler_probe.known_crash()
        if crash is not None:
            warnings.warn(f"CXX={crash.compiler}: {crash.detail} (found by `jitload doctor`, which names a "
                          "compiler that works); building with it anyway", RuntimeWarning, stacklevel=4)
        # The interpreter's parse of torch's headers (for the next host edit) runs beside a first build's
        # compilers; where a build is likely on disk already, after it, so that loading it is not slowed.
        first = not os.path.exists(os.path.join(spec.build_directory, "build.ninja"))
        if not manifest.read(spec.build_directory).up_to_date(key):
            # Once per machine and torch version, beside the compilers. Not on a load from disk: finding
            # the PCH's path imports torch's cpp_extension (a third of a second).
            hostjit.build_pch()
        if first:
            self._warm_host_jit()
        result = fullbuild.run(spec, force=force, verbose=self._verbose)
        if not first:
            # A build just loaded is usually called at once, and the interpreter's start holds the GIL for
            # moments (0.65 s at most, 2.2 s in all on 2 cores): it starts a little after, unless an edit needs
            # it sooner.
            self._warm_host_jit(delay=_WARM_AFTER_LOAD_S)
        if result.commands:
            status = "built"
        else:
            status = "loaded" if self._module is None or self._module.__file__ != result.library else "unchanged"
        self._texts = result.texts
        info = BuildInfo(status, 0.0, result.commands, reason=reason if status == "built" else "")
        self._adopt(result.state, result.library, info, start)

    def _warm_host_jit(self, delay: float = 0.0) -> None:
        if hostjit.warm_wanted():
            cuda = any(s.endswith(_CUDA_SUFFIXES) for s in self._spec.sources)
            hostjit.warm(cuda and swap.gpu_available(), delay=delay)

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
        self._verify_error, self._unverified = None, False  # a full build loaded: what runs is on disk
        self._jit = None
        if module is not self._module:
            self.modules_loaded += 1
            self._swapped, self._images = set(), {}
            self._loaded_objects = dict(state.objects)
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
            self._loaded_objects = dict(state.objects)
            # What a host edit may not drop, read from the sources (milliseconds) whether or not the host JIT is
            # on now: it may be by the next edit.
            self._registered = self._library_registrations()
        self._state = state
        self._verify_error, self._unverified = None, False
        info.module_name, info.seconds = module_name, time.perf_counter() - start
        self.info = info

    def _relink(self, state: manifest.State, info: BuildInfo) -> tuple[manifest.State, str]:
        spec, directory = self._spec, self._spec.build_directory
        # Under the build lock, as every writer of the folder: another process's build must not change the
        # objects mid-link, nor take the same fresh name. Its callers hold no lock (a full build has returned,
        # or a background one has exited), so this does not wait on itself.
        with build_lock(directory):
            if manifest.read(directory).tag != state.tag:
                raise BuildError(spec.name, f"the objects of {spec.name}_{state.tag}.so were rebuilt by another "
                                            "process before they could be linked again; reload to load its build",
                                 directory)
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


_WARM_AFTER_LOAD_S = 2.0  # see _rebuild: past the first calls of what was loaded, well before an edit

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
    if len(name) > build.MAX_NAME_LENGTH:
        raise ValueError(f"extension name {name[:20]}... is {len(name)} characters long; the limit is "
                         f"{build.MAX_NAME_LENGTH}, so that Python finds the init function of its module, NAME_<tag> "
                         "(it reads 200 characters of a module's name)")


_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _check_sources(sources: list[str]) -> None:
    """Each source a regular file whose path a ninja file can hold, checked before anything is built."""
    for src in sources:
        if "\n" in src or "\r" in src:
            raise ValueError(f"source path {src!r} holds a line break, which no ninja build file can: rename it")
    missing = [s for s in sources if not os.path.exists(s)]
    if missing:
        raise FileNotFoundError(f"source file(s) not found: {', '.join(missing)}")
    for src in sources:
        mode = os.stat(src).st_mode
        kind = next((what for test, what in _FILE_KINDS if test(mode)), "a special file")
        if not stat.S_ISREG(mode):
            raise ValueError(f"source {src} is {kind}, not a regular file: jitload reads, hashes and compiles "
                             "each source, so each must be a file")


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
    _check_sources(source_list)
    if with_cuda is None:
        with_cuda = any(s.endswith(_CUDA_SUFFIXES) for s in source_list)
    if with_cuda and (problem := toolchain.cuda_major_problem()):
        raise RuntimeError(f"cannot build {name}: {problem}")
    directory = os.path.abspath(build_directory) if build_directory else os.path.join(toolchain.cache_root(), name)
    return BuildSpec(name, tuple(source_list), tuple(_as_list(extra_cflags)), tuple(_as_list(extra_cuda_cflags)),
                     tuple(_as_list(extra_ldflags)),
                     tuple(os.path.abspath(p) for p in _as_list(extra_include_paths)), bool(with_cuda), directory,
                     python_module)


def _reader(texts: dict[str, str]) -> Callable[[str], str]:
    """A source reader for :mod:`hostunit` that keeps what it read in ``texts`` and refuses an unreadable file."""
    def read(path: str) -> str:
        text = fullbuild.read_text(path)
        if text is None:
            raise hostunit.Unsupported(f"{_label(path)} cannot be read")
        texts[path] = text
        return text
    return read


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
    problem = None if is_standalone else torch_compat.ninja_writer_problem()
    if problem:
        # A torch whose private ninja writer changed form still builds, as torch itself builds: no swap, no
        # host JIT, every edit a full build, rather than no build at all.
        warnings.warn(f"{problem}: building {name} with torch's own load() (every edit rebuilds in full)",
                      stacklevel=2)
    if is_standalone or problem:
        return _torch_load(spec, verbose, is_standalone)
    return _handle(spec, verbose).reload()


def _torch_load(spec: BuildSpec, verbose: bool, is_standalone: bool) -> types.ModuleType | str | None:
    cpp_extension = toolchain.cpp_extension()
    cuda_flags = list(spec.extra_cuda_cflags)
    if spec.with_cuda:
        toolchain.ensure_torch_cuda_home()
        cuda_flags += toolchain.default_arch_flags(cuda_flags)
    trust.private_dir(spec.build_directory)
    default_arch = toolchain.fallback_arch() if spec.with_cuda else None
    with build_lock(spec.build_directory), torch_compat.default_arch_list(default_arch):
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
) -> Extension | types.ModuleType:
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
    assert isinstance(result, Extension | types.ModuleType)  # a module: torch's own load() built it (see load)
    return result


def handles() -> dict[str, Extension]:
    """The extensions loaded in this process, by build directory."""
    with _handles_lock:
        return dict(_handles)



def wait(timeout: float | None = None) -> None:
    """Block until every handle's background full build has settled its last swap (see
    :meth:`Extension.wait`); raises the first :class:`BuildError` of a full build that failed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for ext in handles().values():
        ext.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
