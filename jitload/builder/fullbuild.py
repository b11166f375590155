"""A full build of one extension, start to finish, the same in a live process and in a background one.

Under the build-directory lock (:mod:`jitload.builder.lock`): a build whose manifest matches its sources is reused
as it is; otherwise torch writes the ninja file, ninja compiles what changed (:mod:`jitload.builder.build`), the
objects are linked under a fresh module name, and the manifest (:mod:`jitload.builder.manifest`) is written last, so
that a process that sees it finds the library it names. The handle (:mod:`jitload.builder.extension`) runs this in
the foreground for a host edit; :mod:`jitload.builder.background` runs it in a process of its own to verify a kernel
swap, which is why it needs nothing of the handle's.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from . import build, devicecode, fingerprint, imagecmp, manifest, ppview, toolchain
from .errors import BuildError
from .lock import build_lock

DEVICE_CAPABLE = (".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".inc")


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
        """The eight build arguments of torch's ``load()`` (and of :func:`jitload.builder.build.write_ninja_file`)."""
        return {"name": self.name, "sources": list(self.sources), "extra_cflags": list(self.extra_cflags),
                "extra_cuda_cflags": list(self.extra_cuda_cflags), "extra_ldflags": list(self.extra_ldflags),
                "extra_include_paths": list(self.extra_include_paths), "build_directory": self.build_directory,
                "with_cuda": self.with_cuda}

    def key(self) -> str:
        fields = [self.name, self.sources, self.extra_cflags, self.extra_cuda_cflags, self.extra_ldflags,
                  self.extra_include_paths, self.with_cuda, self.python_module, toolchain.environment_fingerprint()]
        return hashlib.blake2b(json.dumps(fields).encode(), digest_size=10).hexdigest()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> BuildSpec:
        data = json.loads(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


@dataclass(frozen=True)
class Result:
    """A finished full build: its manifest, its library, and how many commands it ran (0: reused)."""

    state: manifest.State
    library: str
    commands: int
    texts: dict[str, str]  # what the device-capable files held when the build read them


def read_text(path: str) -> str | None:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def texts_as_built(files: fingerprint.Record) -> dict[str, str]:
    """The texts of the device-capable files of ``files`` whose bytes are still the fingerprinted ones."""
    texts = {}
    for path, entry in files.items():
        if not path.endswith(DEVICE_CAPABLE):
            continue
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if len(entry) >= 3 and fingerprint.digest_of(data) == entry[2]:
            texts[path] = data.decode(errors="replace")
    return texts


def host_view(path: str, text: str | None) -> str | None:
    if text is None or not path.endswith(DEVICE_CAPABLE):
        return None
    try:
        return devicecode.host_view(text)
    except devicecode.Unsure:
        return None


def run(spec: BuildSpec, *, force: bool = False, verbose: bool = False,
        on_start: Callable[[Any], None] | None = None) -> Result:
    """Build ``spec`` in full (or reuse the build on disk when its manifest matches); raises BuildError.

    ``on_start`` receives each ninja process as it starts, so that another thread can stop the build.
    """
    directory = spec.build_directory
    key = spec.key()
    with build_lock(directory):
        state = manifest.read(directory)
        library = os.path.join(directory, f"{spec.name}_{state.tag}.so")
        if not force and state.up_to_date(key) and build.library_complete(library):
            return Result(state, library, 0, texts_as_built(state.files))
        # Fingerprint before compiling: a file saved during the build must look changed next time. A file
        # whose time is after this was written while the build ran. (File times come from a coarser clock, a
        # few ms behind: a save in the build's first ms may look older, but no compiler has read anything yet.)
        started_ns = time.time_ns()
        before = fingerprint.take((*spec.sources, *state.files))
        objects = build.write_ninja_file(**spec.torch_args())
        # ninja goes by mtimes: a file whose bytes changed under an mtime that did not move past its objects'
        # (a copy that keeps it) would not be recompiled. Its objects are deleted, so they are.
        build.delete_objects_built_from(directory, fingerprint.changed(state.files))
        # The macro snapshots a kernel swap reads edits by (jitload.builder.ppview): taken beside the compile, from
        # the texts as they are now (a save during the build makes the next edit a full build anyway).
        cuda_texts = {src: t for src in spec.sources if src.endswith(".cu") and (t := read_text(src)) is not None}
        with ThreadPoolExecutor(max_workers=1) as pool:
            snapshots = pool.submit(capture_snapshots, directory, cuda_texts) if spec.with_cuda else None
            compiled = build.run_ninja(directory, objects, verbose=verbose, name=spec.name, on_start=on_start)
            captured = snapshots.result() if snapshots is not None else {}
        if compiled.returncode != 0:
            raise BuildError(spec.name, compiled.output, directory, os.path.join(directory, build.LOG_FILE))
        tag = build.library_tag(directory, objects)
        library = os.path.join(directory, f"{spec.name}_{tag}.so")
        commands = compiled.commands
        if not build.library_complete(library):  # missing, or cut short by a crash: linked again
            linked = build.link_library(directory, spec.name, tag, verbose=verbose,
                                        python_module=spec.python_module, on_start=on_start)
            if linked.returncode != 0:
                raise BuildError(spec.name, linked.output, directory, os.path.join(directory, build.LOG_FILE))
            commands += linked.commands
        new_state, texts = describe(spec, key, tag, objects, before, started_ns, captured)
        manifest.write(directory, new_state)
        build.prune_libraries(directory, spec.name, keep=os.path.basename(library))
        return Result(new_state, library, commands, texts)


def capture_snapshots(directory: str, texts: dict[str, str]) -> dict[str, str]:
    """Each .cu source's text whose macro snapshot was taken (jitload.builder.ppview.capture), by source."""
    done = {}
    for src, text in texts.items():
        try:
            if ppview.capture(directory, src, text) is None:
                done[src] = text
        except (OSError, ValueError):
            pass  # no snapshot: this source's edits take the full build
    return done


def describe(spec: BuildSpec, key: str, tag: str, objects: list[str], before: fingerprint.Record,
             started_ns: int, captured: dict[str, str] | None = None) -> tuple[manifest.State, dict[str, str]]:
    """The manifest of a finished build: fingerprints as taken before it, host views (each .cu source's as
    the compiler sees it, from its macro snapshot in ``captured``), each unit's headers, each object's host
    digest; and the texts the host views were taken of."""
    directory = spec.build_directory
    paths = list(dict.fromkeys([*spec.sources, *build.user_dependencies(directory, objects)]))
    # A file saved while the build ran (even back to the bytes fingerprinted before it): what was compiled is
    # unknown, so it must look changed next time (at worst a ninja run that finds nothing to do).
    files = {p: fingerprint.unknown() if fingerprint.written_since(entry, started_ns) else before.get(p) or entry
             for p, entry in fingerprint.take(paths).items()}
    # Texts only where the bytes read now are the ones fingerprinted (for a file known before the build, the
    # ones compiled): a file saved during the build gets no text and no host view, so its next edit rebuilds
    # in full instead of being compared with code that was never compiled.
    texts = texts_as_built(files)
    hosts = {p: host_view(p, texts.get(p)) for p in files if p.endswith(DEVICE_CAPABLE)}
    for src, text in (captured or {}).items():
        view = ppview.host_view(directory, src, text) if hosts.get(src) is not None and texts.get(src) == text \
            else None
        hosts[src] = view.encode() if isinstance(view, ppview.View) else None
    units = {}
    if spec.with_cuda:
        for src, obj in zip(spec.sources, build.source_objects(directory), strict=False):
            if obj:  # a .cpp unit too: a header it shares with a .cu unit is host code there
                units[src] = [h for h in build.user_dependencies(directory, [obj]) if h != src]
    digests = imagecmp.host_digests(directory, build.source_objects(directory))
    kernels = {}
    for src, obj in zip(spec.sources, build.source_objects(directory), strict=False):
        if src.endswith(".cu") and obj:
            try:
                image = imagecmp.device_image(os.path.join(directory, obj))
                kernels[src] = sorted(imagecmp.image_symbols(image)[0]) if image else []
            except (OSError, RuntimeError):
                pass  # unknown: a swap of this source is refused (its kernels cannot be checked)
    state = manifest.State(key, tag, files, hosts, units, digests, kernels)
    return state, texts
