"""Whether an edit can be taken by a kernel swap, decided in one place: a :class:`Plan` or a :class:`Refusal`.

The handle (:mod:`jitload.builder.extension`) asks :func:`decide` with the files that changed since its last build and
gets back either a plan (the device units to compile, the kernels each replaces, the fingerprints and host
views to record once it is loaded) or the reason a full build is needed. The plan is a bet that the loaded
host code is what a full build of the new sources would give; :mod:`jitload.builder.background` settles every bet
with that full build, so a wrong decision costs a reload, never stale code for long.

The decision reads each changed file as the compiler sees it (:mod:`jitload.builder.ppview`): its own text after the
preprocessor, in host mode, with the macro state of its includes that a full build captured, and execution
spaces (``__host__``/``__device__``/``__global__``, however spelled) taken from the attributes they expand to.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from . import build, devicecode, fingerprint, fullbuild, manifest, ppview, swap

DEVICE_CAPABLE = (".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".inc")


@dataclass(frozen=True)
class Plan:
    """A kernel swap to make: the device unit of each affected source and the kernels each replaces."""

    units: dict[str, str]  # source -> its torch-free device unit
    kernels: dict[str, list[str]]  # source -> the registered kernels (mangled) its unit replaces
    files: fingerprint.Record  # the changed (and newly included) files' fingerprints, taken before the read
    texts: dict[str, str]  # the changed files' texts, as judged
    hosts: dict[str, str] = field(default_factory=dict)  # source -> host view to record once loaded
    added: dict[str, list[str]] = field(default_factory=dict)  # source -> user headers it now includes
    lines_moved: bool = False  # the host code's line numbers (__LINE__) differ from the loaded library's
    nothing: bool = False  # the compiler would see the same code (a comment edit): nothing to compile


@dataclass(frozen=True)
class Refusal:
    """Why the edit needs a full build."""

    reason: str


@dataclass(frozen=True)
class Compiled:
    """A plan's device units compiled: each source's fatbin and the kernels (mangled) it replaces."""

    images: dict[str, bytes]
    names: dict[str, list[str]]

    @property
    def kernels(self) -> int:
        return sum(len(n) for n in self.names.values())


def open_library(path: str) -> tuple[swap.Shim, list[str]] | Refusal:
    """The swap shim of the loaded library at ``path`` and the kernels it registered, or why there is none."""
    try:
        shim = swap.Shim(path)
        return shim, shim.kernels()
    except (swap.SwapError, OSError) as err:
        return Refusal(f"kernel swap not possible: {err}")


def compile_plan(plan: Plan, registered: list[str], *, build_directory: str,
                 built_kernels: Callable[[str], set[str]]) -> Compiled | Refusal:
    """Compile ``plan``'s device units and match their kernels with the registered ones, or say why not.

    A unit that does not compile is no verdict on the edit: the unit lacks whatever torch's headers gave the
    kernel, so only the full file's compiler may call the edit wrong, and the full build decides."""
    try:
        images = swap.compile_units(build_directory, plan.units)
        names = {src: swap.image_kernels(images[src], plan.kernels[src], registered, built_kernels(src))
                 for src in images}
    except swap.CompileError as err:
        return Refusal(f"the kernel code alone did not compile ({err.first}): the whole file decides")
    except (swap.SwapError, OSError, RuntimeError) as err:
        return Refusal(f"kernel swap not possible: {err}")
    return Compiled(images, names)


def _label(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


def decide(state: manifest.State, changed: Iterable[str], registered: list[str], *, build_directory: str,
           texts: dict[str, str]) -> Plan | Refusal:
    """Plan a swap of the units ``changed`` touches, or say why a full build is needed.

    ``state`` is the loaded build's manifest, ``registered`` the loaded library's kernels (mangled), ``texts``
    what the loaded code was built from (for "where" messages).
    """
    changed = list(changed)
    before = fingerprint.take(changed)  # taken first: a save from here on must look changed next time
    read = _read_changed(state, changed)
    if isinstance(read, Refusal):
        return read
    new_texts, touched = read
    views = _host_views(state, changed, touched, build_directory, texts, new_texts, before)
    if isinstance(views, Refusal):
        return views
    if (not views.lines_moved and not views.added
            and _compiler_sees_the_same(state, changed, build_directory, texts, new_texts)):
        return Plan({}, {}, before, new_texts, views.hosts, nothing=True)
    kernels: dict[str, list[str]] = {}
    units: dict[str, str] = {}
    try:
        for src in sorted(touched):
            headers = [*state.units[src], *views.added.get(src, ())]
            units[src], kernels[src] = swap.plan_unit(src, headers, registered, new_texts,
                                                      prelude=ppview.device_prelude(build_directory, src))
    except swap.SwapError as err:
        return Refusal(f"kernel swap not possible: {err}")
    return Plan(units, kernels, before, new_texts, views.hosts, views.added, views.lines_moved)


def _read_changed(state: manifest.State, changed: list[str]) -> tuple[dict[str, str], set[str]] | Refusal:
    """The changed files' texts and the units that include them, or why a file's change is host code."""
    new_texts: dict[str, str] = {}
    touched: set[str] = set()
    for path in changed:
        label = _label(path)
        text = fullbuild.read_text(path)
        if text is None:
            return Refusal(f"{label} is gone")
        if not path.endswith(DEVICE_CAPABLE):
            return Refusal(f"host code changed: {label}")
        users = [src for src, headers in state.units.items() if path == src or path in headers]
        if not users:
            return Refusal(f"host code changed: {label}")
        host_users = [src for src in users if not src.endswith(".cu")]
        if host_users:  # g++ reads __device__ as nothing: there the header's functions are host code
            return Refusal(f"host code changed: {label} is part of {_label(host_users[0])}, a host-only unit")
        new_texts[path] = text
        touched.update(users)
    return new_texts, touched


@dataclass
class _HostViews:
    """What the touched units' host views say: each to record once loaded, the user headers each now
    includes, and whether any host line moved."""

    hosts: dict[str, str] = field(default_factory=dict)
    added: dict[str, list[str]] = field(default_factory=dict)
    lines_moved: bool = False


def _host_views(state: manifest.State, changed: list[str], touched: set[str], build_directory: str,
                texts: dict[str, str], new_texts: dict[str, str], before: fingerprint.Record) -> _HostViews | Refusal:
    """Compare each touched unit's host view with the loaded build's, or say why the host code changed.

    Newly included user headers join ``before`` (their fingerprints) and ``new_texts``."""
    views = _HostViews()
    for src in sorted(touched):
        text = new_texts.get(src) or fullbuild.read_text(src)
        if text is None:
            return Refusal(f"{_label(src)} is gone")
        view = ppview.host_view(build_directory, src, text)
        if isinstance(view, ppview.Unknown):
            return Refusal(f"{_label(src)}: {view.reason}")
        old_decides, _, old_exact = (state.hosts.get(src) or "").partition(":")
        if view.decides != old_decides:
            return Refusal(_where(changed, texts, new_texts))
        views.lines_moved |= view.exact != old_exact
        views.hosts[src] = view.encode()
        new_headers = [f for f in view.files if f != src and f not in state.units[src] and is_user_file(f)]
        if new_headers:
            views.added[src] = new_headers
            before.update(fingerprint.take(new_headers))
            for header in new_headers:
                if (header_text := fullbuild.read_text(header)) is not None:
                    new_texts.setdefault(header, header_text)
    return views


def _compiler_sees_the_same(state: manifest.State, changed: list[str], build_directory: str,
                            old: dict[str, str], new: dict[str, str]) -> bool:
    """Whether every changed file is a loaded ``.cu`` whose edit the compiler does not see.

    Comments and spacing on the face of it, and the preprocessor agrees in both modes (a splice, a literal, a
    directive would show there): the code compiled is the same."""
    return (all(p in state.units and p.endswith(".cu") for p in changed) and _same_code(changed, old, new)
            and all(ppview.same_output(build_directory, p, old[p], new[p]) for p in changed))


def is_user_file(path: str) -> bool:
    """Not the toolchain's (torch, CUDA, Python, the system) nor jitload's own snapshot."""
    real = os.path.realpath(path)
    return not real.startswith(build.toolchain_roots()) and f"{os.sep}{ppview.PP_DIR}{os.sep}" not in real


def _lines(text: str) -> list[str]:
    """``text`` line by line with comments blanked and spaces collapsed: what the compiler reads, where."""
    try:
        masked = devicecode._mask(text)
    except devicecode.Unsure:
        return [text]
    return [" ".join(line.split()) for line in masked.split("\n")]


def _same_code(changed: list[str], old: dict[str, str], new: dict[str, str]) -> bool:
    """Whether every changed file differs from the text the loaded code was built from only inside comments
    and in spacing, line by line (a moved line would move __LINE__, in device code too)."""
    return all(p in old and p in new and _lines(old[p]) == _lines(new[p]) for p in changed)


def _where(changed: list[str], old: dict[str, str], new: dict[str, str]) -> str:
    """'host code changed: add() at line 17 in add.cu', as precisely as the texts allow."""
    for path in changed:
        if path in old and path in new:
            where = devicecode.first_host_difference(old[path], new[path])
            if where:
                return f"host code changed: {where} in {_label(path)}"
    return f"host code changed in {', '.join(_label(p) for p in changed)}"
