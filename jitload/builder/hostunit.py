"""An extension's sources as one C++ unit for the host JIT (:mod:`jitload.builder.hostjit`): host code, stubs, ops.

A host edit (a TORCH_CHECK, the grid math, a new argument) of a source that includes torch costs a full build
of 30-60 s, nearly all of it torch's headers. A C++ interpreter that has parsed those headers once (cling)
compiles the same host code in a fraction of a second, if the code is given to it as host C++:

- every source of the extension, in order, inside one namespace of its own (``jl_<name>_<n>``), so that an
  edited function is a new definition and not a redefinition; toolchain ``#include`` lines (torch, CUDA, the
  standard library) are hoisted above it, and the user's own headers are read in place (``#line`` directives
  keep every message on the user's file and line). Each macro the unit defines is ``#undef``'d after it, so
  a define removed by an edit is gone, and include guards open again for the next unit;
- a kernel keeps its declaration with an empty body (the name its launches take the address of); ``__device__``
  functions are left out (only kernels call them);
- ``k<<<grid, block, shmem, stream>>>(args)`` becomes ``::jitload_rt::launch<k>(grid, block, shmem,
  stream)(args)``: the arguments are converted to the kernel's parameter types as nvcc's stub converts them,
  and the launch goes to the kernel of the device code nvcc compiles from the same namespace (the names match
  by construction: both sides mangle the same declaration);
- ``PYBIND11_MODULE`` becomes a ``TORCH_LIBRARY`` block: each ``m.def("f", &f)`` is an op whose schema torch
  infers from ``f``'s type (``int``/``float`` parameters widened to ``int64_t``/``double``), because a
  pybind11 module cannot be created inside the interpreter (its weak symbols would be defined twice);
- an op library's ``TORCH_LIBRARY`` blocks (schemas only, registered once per process by the loaded library)
  are left out and their schemas kept for the caller to compare with the registered ones; each
  ``TORCH_LIBRARY_IMPL`` block becomes a deferred registration, made once the unit's kernels are bound, that
  overrides the loaded library's kernels for its dispatch key.

What this cannot take raises :class:`Unsupported` with the reason; the caller builds in full.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from . import devicecode, swapplan

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
_DEFINE = re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)")
_DEFINE_OR_UNDEF = re.compile(r"(?m)^[ \t]*#[ \t]*(?:define|undef)[ \t]+([A-Za-z_]\w*)")
_ASSERT_HEADERS = frozenset({"assert.h", "cassert"})  # no include guard: each inclusion reads NDEBUG anew
_HOISTED = "\0jitload-hoisted {}\0"  # where a toolchain include stood in the body (see :func:`build`)
_HOISTED_AT = re.compile(re.escape(_HOISTED).replace(r"\{\}", "([^\0]*)"))


class Unsupported(Exception):
    """The sources hold something the host JIT does not take; the message says what, and where."""


@dataclass
class Unit:
    """The C++ text for the interpreter and what it defines."""

    namespace: str
    code: str
    module: bool = False  # a PYBIND11_MODULE block, as the function MODULE_INIT
    has_kernels: bool = False
    schemas: list[tuple[str, str]] = field(default_factory=list)  # an op library's (namespace, schema) defs
    impls: int = 0  # an op library's TORCH_LIBRARY_IMPL blocks, registered by ::jitload_rt::register_pending()
    files: list[str] = field(default_factory=list)  # every user file read (sources, then headers)
    registered: set[str] = field(default_factory=set)  # an op library's "ns::op" defs and "ns::op KEY" kernels


def _label(path: str) -> str:
    return os.path.basename(path)


def _launch_start(masked: str, end: int) -> int:
    """Where the kernel expression before a ``<<<`` at ``end`` starts: ``ns::k<T, 4>``, read backwards."""
    i = end
    while i > 0 and masked[i - 1].isspace():
        i -= 1
    start = i
    while i > 0:
        ch = masked[i - 1]
        if ch == ">":
            opening = devicecode.matching_open(masked[:i], i - 1)
            if opening < 0:
                break
            i = opening
        elif ch.isalnum() or ch == "_":
            i -= 1
        elif ch == ":" and i > 1 and masked[i - 2] == ":":
            i -= 2
        else:
            break
        start = i
    return start


def rewrite_launches(text: str) -> str:
    """``text`` with each ``kernel<<<config>>>(args)`` turned into a call of jitload's launcher (lines kept)."""
    masked = devicecode._mask(text)
    edits: list[tuple[int, int, str]] = []
    pos = 0
    while (at := masked.find("<<<", pos)) >= 0:
        close = masked.find(">>>", at + 3)
        if close < 0:
            raise Unsupported(f"a '<<<' without its '>>>' at line {text.count(chr(10), 0, at) + 1}")
        paren = at + 3 + len(masked[at + 3:close]) + 3
        while paren < len(masked) and masked[paren].isspace():
            paren += 1
        start = _launch_start(masked, at)
        if start == at or paren >= len(masked) or masked[paren] != "(":
            raise Unsupported(f"a launch whose kernel or arguments jitload cannot read, at line "
                              f"{text.count(chr(10), 0, at) + 1}")
        kernel = text[start:at].strip()
        config = text[at + 3:close]
        edits.append((start, close + 3, f"::jitload_rt::launch<{kernel} >({config})"))
        pos = close + 3
    for a, b, new in reversed(edits):
        text = text[:a] + new + text[b:]
    return text


def _statements(text: str, item: devicecode.Item, where: str) -> tuple[int, str, list[tuple[int, int]]]:
    """A registration block's body: its offset in ``text``, its masked text and its top-level statements'
    spans (relative to the body)."""
    masked = devicecode._mask(text)
    body_start, body_end = item.body + 1, item.end - 1
    while body_end > body_start and masked[body_end] != "}":
        body_end -= 1
    body = masked[body_start:body_end]
    statements, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == ";" and depth == 0:
            statements.append((start, i))
            start = i + 1
    if body[start:].strip():
        raise Unsupported(f"{where}: the {item.name} block ends without ';'")
    return body_start, body, statements


_MODULE_HEAD = re.compile(r"PYBIND11_MODULE\s*\(\s*(\w+)\s*,\s*(\w+)\s*(?:,[^)]*)?\)\s*$", re.S)


def _module_init(path: str, text: str, item: devicecode.Item) -> str:
    """A ``PYBIND11_MODULE(name, m) {...}`` block as the function the caller runs on a module object of its
    own, on one line so that the body keeps its line numbers. The body is pybind11's own code: ``m.def`` with
    ``py::arg`` keywords and defaults, docstrings, ``py::class_`` and the rest convert and reject arguments, name
    their signature and raise as the full build's module does, because they are the same templates."""
    head = _MODULE_HEAD.match(text[item.start:item.body].strip())
    if not head:
        raise Unsupported(f"{_label(path)}:{item.line}: a PYBIND11_MODULE head jitload cannot read")
    body = devicecode._mask(text[item.body:item.end])
    registered = re.search(r"\b(class_|enum_|register_exception|register_local_exception)\b", body)
    if registered:
        # pybind11 registers a C++ type once per process: the full build could not be loaded after it either.
        raise Unsupported(f"{_label(path)}:{item.line}: py::{registered.group(1)} registers a type with pybind11, "
                          "once per process")
    return f"void {MODULE_INIT}(::pybind11::module_& {head.group(2)}) " + text[item.body:item.end]


MODULE_INIT = "jitload_module_init"  # the PYBIND11_MODULE block's body, as a function of its module
MODULE_FILL = "jitload_module"  # the unit's function that fills a Python module: '' or the error's message


_LITERALS = re.compile(r'\s*(?:"(?:\\.|[^"\\])*"\s*)+')
_IMPL_HEAD = re.compile(r"TORCH_LIBRARY_IMPL\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)\s*$")


def _schemas(text: str, item: devicecode.Item, where: str) -> list[tuple[str, str]]:
    """An op library's ``TORCH_LIBRARY(ns, m)`` block as (namespace, schema) pairs; only ``m.def("schema")``
    is taken (a kernel given to m.def would be registered with the namespace, once per process)."""
    import ast

    head = re.match(r"TORCH_LIBRARY\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)", text[item.start:item.body])
    if not head:
        raise Unsupported(f"{where}: a TORCH_LIBRARY head jitload cannot read")
    body_start, body, statements = _statements(text, item, where)
    out = []
    for a, b in statements:
        call = re.fullmatch(rf"\s*{head.group(2)}\s*\.\s*def\s*\((.*)\)\s*", body[a:b], re.S)
        literal = text[body_start + a + call.start(1):body_start + a + call.end(1)] if call else ""
        if not call or not _LITERALS.fullmatch(literal):
            shown = " ".join(text[body_start + a:body_start + b].split())[:80]
            raise Unsupported(f"{where}: '{shown}' in TORCH_LIBRARY (only m.def(\"schema\") is taken: a kernel "
                              "registered there is registered with the namespace, once per process)")
        out.append((head.group(1), "".join(ast.literal_eval(part) for part in re.findall(r'"(?:\\.|[^"\\])*"',
                                                                                          literal))))
    return out


def _deferred_impl(path: str, text: str, item: devicecode.Item, n: int) -> str:
    """A ``TORCH_LIBRARY_IMPL(ns, key, m) {...}`` block as a function registered later (on one line, so the
    body keeps its line numbers): a static initialiser would point the dispatcher at this code before its
    kernels are bound, and the interpreter runs static initialisers as it compiles."""
    head = _IMPL_HEAD.match(text[item.start:item.body].strip())
    if not head:
        raise Unsupported(f"{_label(path)}:{item.line}: a TORCH_LIBRARY_IMPL head jitload cannot read")
    ns, key, lib = head.groups()
    fn = f"jitload_impl_{n}"
    quoted = path.replace("\\", "\\\\").replace('"', '\\"')
    return (f"static void {fn}(torch::Library&); static const int jitload_deferred_{n} = ::jitload_rt::defer("
            f'"{ns}", c10::DispatchKey::{key}, "{quoted}", {item.line}, &{fn}); '
            f"void {fn}(torch::Library& {lib}) " + text[item.body:item.end])


@dataclass
class _Reader:
    """Reads sources and their user headers into the unit's body, hoisting toolchain includes."""

    include_dirs: list[str]
    read: Callable[[str], str]
    hoisted: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    modules: int = 0
    schemas: list[tuple[str, str]] = field(default_factory=list)
    impls: int = 0
    registered: set[str] = field(default_factory=set)
    files: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    has_kernels: bool = False
    stack: list[str] = field(default_factory=list)
    kernels: set[str] = field(default_factory=set)  # kernels' names
    host_code: list[str] = field(default_factory=list)  # masked host items after the launches' rewrite
    own: dict[str, tuple[set[str], set[str], bool]] = field(default_factory=dict)  # source -> see _own_names
    macros: dict[str, set[str]] = field(default_factory=dict)  # file -> the macros it defines or undefines
    words: dict[str, set[str]] = field(default_factory=dict)  # file -> the identifiers it spells
    under: dict[str, list[str]] = field(default_factory=dict)  # source -> the files read for it, in order
    again: list[tuple[str, str]] = field(default_factory=list)  # (header, source) a header read once met again
    toolchain: list[tuple[str, str]] = field(default_factory=list)  # each hoisted include: (source, its target)

    def resolve(self, target: str, quoted: bool, including: str) -> str | None:
        """The user file an include names, or None for the toolchain's and for one not found in the user's
        folders (the interpreter searches torch's, CUDA's and the system's, and reports one missing)."""
        dirs = [os.path.dirname(including)] if quoted else []
        for d in [*dirs, *self.include_dirs]:
            candidate = os.path.normpath(os.path.join(d, target))
            if os.path.isfile(candidate):
                return candidate if swapplan.is_user_file(candidate) else None
        return None

    def add(self, path: str) -> None:
        if path in self.stack:
            return  # a header that includes itself (guarded): the guard decides, as for the compiler
        top = not self.stack
        self.stack.append(path)
        try:
            text = self.read(path)
            if path in self.files and not top:
                # Read once per unit (as a guarded or #pragma once header is read once per translation unit);
                # its macros stay defined for the sources after the first that includes it. Where that could
                # make a source read other code than its own translation unit would, build() refuses.
                self.again.append((path, self.stack[0]))
                return
            self.files.append(path)
            self.under.setdefault(self.stack[0], []).append(path)
            start = len(self.body)
            self._add_text(path, text)
            if top:
                self.own[path] = _own_names(text)
                # A source's own macros end with it, as they end with its translation unit in a full build.
                names = list(dict.fromkeys(_DEFINE.findall(devicecode._mask(text))))
                self.body.insert(start, "".join(f'#pragma push_macro("{n}")\n' for n in names))
                self.body.append("".join(f'#pragma pop_macro("{n}")\n' for n in names))
                self.body.append(_HOISTED.format(f"end {path}"))
        finally:
            self.stack.pop()

    def _add_text(self, path: str, text: str) -> None:
        items = self._read_items(path, text)
        for item in items:
            snippet = self._item_code(path, text, item)
            if snippet is None:
                continue
            code = rewrite_launches(snippet)
            if item.kind != "kernel" and not (item.kind == "decl" and "__global__" in snippet):
                self.host_code.append(devicecode._mask(code))
            self.body.append(f'#line {item.line} "{path}"\n{code}\n')

    def _read_items(self, path: str, text: str) -> list[devicecode.Item]:
        """The source's items, its ``#define``s noted; Unsupported where the interpreter would read it wrong."""
        try:
            items = devicecode.parse(text)
            devicecode.check_no_device_variables(text, items)
        except devicecode.Unsure as err:
            raise Unsupported(f"{_label(path)}: {err}") from err
        masked = devicecode._mask(text)
        if "__COUNTER__" in masked:
            raise Unsupported(f"{_label(path)}: __COUNTER__ counts differently in the interpreter")
        for name in ("__TIMESTAMP__", "__BASE_FILE__"):
            if re.search(rf"\b{name}\b", masked):
                raise Unsupported(f"{_label(path)}: {name} names another file, or time, in the interpreter")
        if re.search(r"(?m)^[ \t]*#[ \t]*line\b", masked):
            raise Unsupported(f"{_label(path)}: a #line directive of its own")
        self.defines += _DEFINE.findall(masked)
        self.macros[path] = set(_DEFINE_OR_UNDEF.findall(masked))
        self.words[path] = set(re.findall(r"[A-Za-z_]\w*", masked))
        return items

    def _item_code(self, path: str, text: str, item: devicecode.Item) -> str | None:
        """The code ``item`` contributes to the unit, or None where it is taken in (an include, a binding,
        a schema) or is device code the kernels' units compile."""
        snippet = text[item.start:item.end]
        if item.kind == "pp":
            if self._include(path, snippet, item.line) or re.match(r"\s*#\s*pragma\s+once\b", snippet):
                return None
            return snippet
        if item.kind == "registration":
            return self._registration(path, text, item)
        if item.kind in ("device", "kernel"):
            # Only kernels call device functions; directives inside the body still act on what follows.
            directives = "\n".join(re.findall(r"(?m)^[ \t]*#.*(?:\\\n.*)*", text[item.body:item.end]))
            if item.kind == "kernel":
                self.has_kernels = True
                self.kernels.add(item.name)
                return text[item.start:item.body] + "{}\n" + directives
            if directives:
                self.body.append(f'#line {item.line} "{path}"\n' + directives + "\n")
            return None
        return snippet

    def _registration(self, path: str, text: str, item: devicecode.Item) -> str | None:
        """A ``PYBIND11_MODULE``'s bindings and a ``TORCH_LIBRARY``'s schemas are noted (None); a
        ``TORCH_LIBRARY_IMPL`` becomes a deferred registration; any other is refused."""
        where = f"{_label(path)}:{item.line}"
        if item.name == "PYBIND11_MODULE":
            self.modules += 1
            if self.modules > 1:
                raise Unsupported(f"{where}: a second PYBIND11_MODULE block (a module has one)")
            return _module_init(path, text, item)
        if item.name == "TORCH_LIBRARY":
            schemas = _schemas(text, item, where)
            self.schemas += schemas
            self.registered |= {f"{ns}::{schema.split('(')[0].strip()}" for ns, schema in schemas}
            return None
        if item.name != "TORCH_LIBRARY_IMPL":
            raise Unsupported(f"{where}: {item.name} (its definitions would be registered again, and a "
                              "namespace's are registered once per process)")
        snippet = _deferred_impl(path, text, item, self.impls)
        self.impls += 1
        head = _IMPL_HEAD.match(text[item.start:item.body].strip())
        self.registered |= {f"{head.group(1)}::{op} {head.group(2)}"
                            for op in re.findall(r'\.\s*impl\s*\(\s*"([^"]+)"', text[item.body:item.end])}
        return snippet

    def _include(self, path: str, snippet: str, line: int) -> bool:
        match = _INCLUDE.match(snippet)
        if not match:
            if re.match(r"\s*#\s*include\b", snippet):
                # The interpreter would read the file itself, once per process: an edit of it would be missed.
                raise Unsupported(f"{_label(path)}:{line}: a computed #include")
            return False
        quoted, target = match.group(1) == '"', match.group(2)
        user = self.resolve(target, quoted, path)
        if user is None:
            self.hoisted.append(f'#line {line} "{path}"\n{snippet.strip()}')
            # Its place is kept: assert.h, read here by the full build, reads the NDEBUG of this point.
            self.body.append(_HOISTED.format(len(self.toolchain)))
            self.toolchain.append((self.stack[0], target))
            return True
        self.add(user)
        self.body.append(f'#line {line + 1} "{path}"\n')
        return True


def _own_names(text: str) -> tuple[set[str], set[str], bool]:
    """A source's names of internal linkage (``static`` functions and variables, anonymous namespaces' items),
    every identifier it spells, and whether it has a top-level ``using namespace``."""
    try:
        items = devicecode.parse(text)
    except devicecode.Unsure:
        return set(), set(), False
    masked = devicecode._mask(text)
    internal = {item.name for item in items if item.name and item.kind in {"host", "hostdevice", "decl"}
                and ("" in item.scope or re.match(r"\s*(template\s*<[^{;]*>\s*)?(inline\s+)?static\b",
                                                  masked[item.start:item.body if item.body > 0 else item.end]))}
    using = bool(re.search(r"(?m)^\s*using\s+namespace\b", masked))
    return internal, set(re.findall(r"[A-Za-z_]\w*", masked)), using


def _check_sources_apart(own: dict[str, tuple[set[str], set[str], bool]]) -> None:
    """Sources compiled apart by a full build share one unit here: refuse where that could change a name's
    meaning (one source's internal names spelled in another, a using-directive reaching another source)."""
    if len(own) < 2:
        return
    for path, (internal, _, using) in own.items():
        if using:
            raise Unsupported(f"{_label(path)}: a top-level 'using namespace' would reach the extension's other "
                              "sources in the interpreter's one unit")
        for other, (_, words, _) in own.items():
            shared = sorted(internal & words) if other != path else []
            if shared:
                raise Unsupported(f"{_label(path)}'s internal {shared[0]} is a name {_label(other)} uses too: "
                                  "in the interpreter's one unit they would meet")


def _check_kernels_launched_only(reader: _Reader) -> None:
    """A kernel named outside a ``<<<>>>`` launch (cudaFuncSetAttribute, cudaLaunchKernel, occupancy queries)
    would name the interpreter's stand-in, not device code: refused."""
    for name in sorted(reader.kernels):
        for code in reader.host_code:
            uses = len(re.findall(rf"\b{name}\b", code))
            launches = len(re.findall(rf"::jitload_rt::launch<\s*(?:[\w:]*::)?{name}\b", code))
            if uses > launches:
                raise Unsupported(f"the kernel {name} is named outside a <<<>>> launch (as by cudaFuncSetAttribute "
                                  "or cudaLaunchKernel): the interpreter has no device code behind that name")


@dataclass(frozen=True)
class Predefined:
    """The full build's compiler's predefined macros for the unit's flags, as the unit sets them over the
    interpreter's own: ``define`` maps each name to its ``#define`` line, ``undefine`` names the interpreter's
    macros that compiler does not define (``__clang__``, its CPU's ``__AVX2__``, ...)."""

    define: dict[str, str] = field(default_factory=dict)
    undefine: list[str] = field(default_factory=list)


def _check_macros_apart(reader: _Reader) -> None:
    """Sources compiled apart by a full build read their headers each with its own macros; the interpreter's one
    unit reads a guarded header once, and a header's macros reach the sources after it. Refuse where a macro
    one source (or its headers) defines could be spelled in code another source reads."""
    sources = list(reader.under)
    for header, later in reader.again:
        first = next(src for src in sources if header in reader.under[src])
        if first == later:
            continue
        defined = set().union(*(reader.macros[f] for f in [*reader.under[first], *reader.under[later]]
                                if f != header))
        hit = sorted(defined & reader.words[header])
        if hit:
            raise Unsupported(f"{_label(header)}, included by {_label(first)} and {_label(later)}, spells {hit[0]}, "
                              "which one of them defines: the interpreter's one unit reads a header once for all "
                              "the extension's sources, a full build once for each")
    for n, first in enumerate(sources):
        leaked = set().union(*(reader.macros[f] for f in reader.under[first][1:]))  # its headers' (not popped)
        for later in sources[n + 1:]:
            spelled = set().union(*(reader.words[f] for f in reader.under[later]))
            hit = sorted(leaked & spelled - reader.macros[later])
            included = {h for h, src in reader.again if src == later}
            hit = [name for name in hit if not any(name in reader.macros[h] for h in included)]
            if hit:
                raise Unsupported(f"{_label(later)} spells {hit[0]}, a macro of a header only {_label(first)} "
                                  "includes: in the interpreter's one unit it would reach the later source")


def _assert_includes(reader: _Reader, pulls_assert: Callable[[list[str]], int | None] | None) -> dict[str, str]:
    """What stands in the body where each toolchain include stood: ``#include <assert.h>`` where the full build
    reads assert.h (a direct include; the first include that pulls it in, in a source that sets NDEBUG itself;
    a source's end, where the build's own NDEBUG comes back), else nothing."""
    out: dict[str, str] = {}
    touched = {src for src, files in reader.under.items() if any("NDEBUG" in reader.macros[f] for f in files)}
    for k, (_, target) in enumerate(reader.toolchain):
        if os.path.basename(target) in _ASSERT_HEADERS:
            out[str(k)] = "#include <assert.h>"
    for src in touched:
        ks = [k for k, (owner, _) in enumerate(reader.toolchain) if owner == src]
        if ks:
            if pulls_assert is None:
                raise Unsupported(f"{_label(src)} sets NDEBUG, and where its includes read assert.h is not known")
            first = pulls_assert([reader.toolchain[k][1] for k in ks])
            if first is not None:
                out[str(ks[first])] = "#include <assert.h>"
        out[f"end {src}"] = "#include <assert.h>"
    return out


def build(sources: list[str], namespace: str, *, read: Callable[[str], str], include_dirs: list[str] = (),
          defines: dict[str, str] | None = None, predefined: Predefined | None = None,
          pulls_assert: Callable[[list[str]], int | None] | None = None) -> Unit:
    """The interpreter's unit for ``sources`` (read through ``read``), in ``namespace``.

    ``include_dirs`` are the build's ``-I`` folders (for the user's headers), ``defines`` its ``-D`` macros
    (``TORCH_EXTENSION_NAME`` among them), ``predefined`` its compiler's own macros for the user's code.
    ``pulls_assert(includes)``: which of a source's toolchain includes (their targets, in order) is the first
    to read assert.h in a full build, asked only for a source that sets NDEBUG itself. Raises
    :class:`Unsupported`.
    """
    reader = _Reader(list(include_dirs), read)
    for src in sources:
        reader.add(src)
    if reader.modules and (reader.impls or reader.schemas):
        raise Unsupported("PYBIND11_MODULE and TORCH_LIBRARY blocks in one extension")
    if not reader.modules and not reader.impls:
        raise Unsupported("no PYBIND11_MODULE and no TORCH_LIBRARY_IMPL in the sources: nothing to call")
    _check_sources_apart(reader.own)
    _check_macros_apart(reader)
    _check_kernels_launched_only(reader)
    placed = _assert_includes(reader, pulls_assert)
    body = [_HOISTED_AT.sub(lambda m: placed.get(m.group(1), ""), part) for part in reader.body]
    macros = dict(defines or {})
    predefined = predefined or Predefined()
    # Every macro the unit touches is pushed first and popped last: what torch, the C library or an earlier
    # unit defined is as it was after it, and a macro an edit removed is gone. NDEBUG is the build's (the
    # interpreter defines it; g++ under torch's flags does not), and assert follows it.
    touched = list(dict.fromkeys([*macros, *reader.defines, "NDEBUG", *predefined.define, *predefined.undefine]))
    lines = [f'#pragma push_macro("{n}")' for n in touched]
    lines += ["#undef NDEBUG", *(f"#define {k} {v}".rstrip() for k, v in macros.items()), "#include <assert.h>"]
    # The toolchain's headers with the interpreter's own macros (they are parsed as the interpreter's compiler
    # needs); the user's code with the full build's compiler's, and without contracting a * b + c into one
    # rounding (g++ does not on x86-64's baseline, which has no fused multiply-add; the interpreter's CPU may).
    lines += reader.hoisted
    lines += [*(f"#undef {n}" for n in [*predefined.define, *predefined.undefine]), *predefined.define.values()]
    lines += ["#pragma clang fp contract(off)", f"namespace {namespace} {{", *body]
    if reader.modules:
        lines.append(f"std::string {MODULE_FILL}(PyObject* module) "
                     f"{{ return ::jitload_rt::fill<&{MODULE_INIT}>(module); }}")
    lines.append(f"}}  // namespace {namespace}")
    lines += [f'#pragma pop_macro("{n}")' for n in touched]
    lines.append("#include <assert.h>")
    return Unit(namespace, "\n".join(lines) + "\n", bool(reader.modules), reader.has_kernels, reader.schemas,
                reader.impls, reader.files, reader.registered)
