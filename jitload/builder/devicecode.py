"""Which parts of a CUDA C++ file are device code, and a torch-free translation unit that holds only them.

A source written the seed article's way (``torch/extension.h``, TORCH_CHECKs, ``__global__`` kernels, a torch
wrapper launching them with ``<<<>>>``, ``PYBIND11_MODULE``) costs 30-60 s to compile, nearly all of it torch's
headers; its kernels alone compile in under a second. This module reads the file's top level (namespaces,
preprocessor lines, declarations, type and function definitions; comments and literals masked) and gives:

The swap decision itself reads the preprocessor's output (:mod:`jitload.builder.ppview`); this module's reading of the
spelling names *where* a host edit is ("add() at line 17") and cuts the device unit:

- :func:`host_view`: the file as the host compiler sees it *for the purposes of a swap*: every item in full,
  except that a ``__global__``/``__device__`` function contributes only its signature. Two versions with the
  same host view differ only inside device-function bodies, so the compiled host code (wrappers, bindings,
  launch stubs, registration) is still right for the new version and only the kernels need replacing.
- :func:`added_device_headers`: whether a change of host view is only new ``#include "..."`` lines of headers
  that hold ``__device__`` functions alone, which the host compiler turns into nothing (so a swap will do).
- :func:`device_unit`: the file without host functions, module/op registrations, torch declarations and torch
  includes; the light c10/ATen headers its device code names (``c10::Half``, ``BFloat16``,
  ``PackedTensorAccessor32``, c10 macros) are included instead, and each templated kernel that the loaded
  library registered is explicitly instantiated from its demangled name. ``#line`` directives keep compiler
  messages pointing at the user's file.

Limits, each of which makes the caller fall back to a full build (never to stale or wrong code): kernels in
an anonymous namespace or ``static`` (their device names carry a per-unit hash), kernels instantiated with
lambdas or local types, device code that needs a torch header other than the light ones, user headers that
include torch headers, ``__constant__``/``__device__`` variables (the host code fills the loaded module's
copies), braces split across preprocessor branches. ``__host__ __device__`` functions, types
(structs, classes, enums), constants and macros are host code too: editing them rebuilds.
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Items of these kinds are compiled into the device unit; the rest stay on the host side only.
DEVICE_KINDS = frozenset({"kernel", "device", "hostdevice", "type", "decl", "pp", "namespace", "end"})
_ATTRIBUTE_CALLS = frozenset({"__launch_bounds__", "__attribute__", "__align__", "__declspec", "alignas",
                              "C10_LAUNCH_BOUNDS_0", "C10_LAUNCH_BOUNDS_1", "__maxnreg__", "__cluster_dims__",
                              "__noinline__", "decltype"})
_REGISTRATIONS = frozenset({"PYBIND11_MODULE", "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT"})
_TORCH_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](torch|ATen|c10|pybind11|caffe2)/|^\s*#\s*include\s*[<"]Python\.h')
_HOST_ONLY_DECL = re.compile(
    r"\bpybind11\b|\bpy::|\btorch::|\bTensor\b|\bPYBIND11_|\bTORCH_|\bat::(?!Half\b|BFloat16\b)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
# Runs of code between whitespace, a string or char literal kept whole: spaces inside a literal are its value.
_TOKENS = re.compile(r"""(?:"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|[^\s"'])+""")

# Light headers that device code may need, by what it names; each costs well under a second in cicc.
_LIGHT_HEADERS = (
    (re.compile(r"\bHalf\b"), "c10/util/Half.h"),
    (re.compile(r"\bBFloat16\b"), "c10/util/BFloat16.h"),
    (re.compile(r"\b(Generic)?(Packed)?TensorAccessor(32|64)?\b|\bRestrictPtrTraits\b|\bDefaultPtrTraits\b"),
     "ATen/core/TensorAccessor.h"),
    (re.compile(r"\bC10_[A-Z_0-9]+\b"), "c10/macros/Macros.h"),
    (re.compile(r"\bc10::complex\b"), "c10/util/complex.h"),
    (re.compile(r"\bopmath_type\b|\bOpMathType\b"), "ATen/OpMathType.h"),
)


class Unsure(Exception):
    """The file's shape is outside what this module reads with certainty; the caller does a full build."""


@dataclass(frozen=True)
class Item:
    kind: str  # pp, namespace, end, kernel, device, hostdevice, host, registration, type, decl
    name: str  # a function's or namespace's name ('' for others)
    line: int  # 1-based line of the item's first character
    start: int
    end: int
    body: int  # offset of a function body's '{' (-1 when there is none)
    scope: tuple[str, ...]  # enclosing namespaces, '' for an anonymous one
    is_template: bool = False


def _line_comment_end(text: str, i: int) -> int:
    """Offset of the newline that ends the ``//`` comment at ``i`` (a backslash-newline continues it)."""
    j, n = i, len(text)
    while j < n and text[j] != "\n":
        j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n" else 1
    return j


def _block_comment_end(text: str, i: int) -> int:
    """Offset just past the ``*/`` that closes the ``/*`` at ``i`` (the end of the text if none does)."""
    j = text.find("*/", i + 2)
    return len(text) if j < 0 else j + 2


def _starts_raw_string(text: str, i: int) -> bool:
    """Whether the ``R"`` at ``i`` opens a raw string literal rather than ending an identifier (``FOOR"``)."""
    return text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))


def _raw_string_end(text: str, i: int) -> int:
    """Offset just past the raw string literal ``R"delim(...)delim"`` that opens at ``i``."""
    open_paren = text.find("(", i + 2)
    if open_paren < 0:
        raise Unsure("unterminated raw string")
    delim = text[i + 2:open_paren]
    close = text.find(f"){delim}\"", open_paren)
    if close < 0:
        raise Unsure("unterminated raw string")
    return close + len(delim) + 2


def _is_digit_separator(text: str, i: int) -> bool:
    """Whether the ``'`` at ``i`` separates digits (1'000'000) rather than opening a char literal (L'x', u8'x')."""
    if i + 1 >= len(text) or not text[i + 1].isalnum():
        return False
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] in "'._"):
        j -= 1
    return text[j + 1:i][:1].isdigit()


def _quoted_end(text: str, i: int) -> int:
    """Offset of the quote that closes the string or char literal opened at ``i``."""
    quote, j, n = text[i], i + 1, len(text)
    while j < n and text[j] != quote:
        if text[j] == "\n":
            raise Unsure("unterminated literal")
        j += 2 if text[j] == "\\" else 1
    return j


def _mask(text: str, fill: str = " ") -> str:
    """``text`` with comments and string/char literals blanked (newlines kept), so braces can be counted.
    With another ``fill`` than a space, everything inside them is ``fill``, newlines too."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n" or fill != " ":
                out[k] = fill

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = _line_comment_end(text, i)
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = _block_comment_end(text, i)
            blank(i, j)
            i = j
        elif c == "R" and _starts_raw_string(text, i):
            j = _raw_string_end(text, i)
            blank(i + 1, j)
            i = j
        elif c == '"' or (c == "'" and not _is_digit_separator(text, i)):
            j = _quoted_end(text, i)
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _directive_spans(masked: str) -> list[tuple[int, int]]:
    """(start, end) of each preprocessor directive, continuation lines included."""
    spans = []
    for match in re.finditer(r"(?m)^[ \t]*#", masked):
        end = match.start()
        while True:
            nl = masked.find("\n", end)
            if nl < 0:
                end = len(masked)
                break
            if masked[:nl].rstrip(" \t\r").endswith("\\"):
                end = nl + 1
                continue
            end = nl + 1
            break
        spans.append((match.start(), end))
    return spans


def _match(code: str, i: int, open_ch: str, close_ch: str) -> int:
    """Offset just past the bracket that closes the one at ``i``."""
    depth = 0
    for j in range(i, len(code)):
        ch = code[j]
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return j + 1
    raise Unsure(f"unbalanced '{open_ch}'")


def _strip_template_prefix(head: str) -> tuple[str, bool]:
    stripped = head.lstrip()
    if not stripped.startswith("template"):
        return stripped, False
    rest = stripped[len("template"):].lstrip()
    if not rest.startswith("<"):
        return stripped, False
    depth = 0
    for j, ch in enumerate(rest):
        depth += ch == "<"
        depth -= ch == ">"
        if depth == 0:
            inner, _ = _strip_template_prefix(rest[j + 1:])
            return inner, True
    raise Unsure("unbalanced template parameter list")


def _function_name(head: str) -> str | None:
    """The name before the head's parameter list, or None when the head is no function (no paren group)."""
    depth = 0
    for match in re.finditer(r"[()]", head):
        if match.group() == "(":
            if depth == 0:
                before = head[:match.start()].rstrip()
                operator = re.search(r"\boperator\s*([^\w\s(]+)$", before)
                if operator:
                    return f"operator{operator.group(1)}"
                ident = re.search(r"([A-Za-z_]\w*)\s*(<[^()]*>)?$", before)
                name = ident.group(1) if ident else ""
                if name not in _ATTRIBUTE_CALLS:
                    if "=" in re.sub(r"[<>!=]=|operator\s*\S+", "", before):
                        return None  # an initializer: int x = f(...) { ... } is not a function head
                    return name or None
            depth += 1
        else:
            depth -= 1
    return None


def _function_kind(head: str, name: str) -> str:
    words = set(_IDENT.findall(head))
    if name in _REGISTRATIONS:
        return "registration"
    if "__global__" in words:
        return "kernel"
    device = bool(words & {"__device__", "C10_DEVICE"})
    host = bool(words & {"__host__", "C10_HOST"}) or "C10_HOST_DEVICE" in words
    if "C10_HOST_DEVICE" in words:
        device = True
    if device and (host or words & {"constexpr", "consteval"}):
        # torch builds with --expt-relaxed-constexpr: host code may call a constexpr __device__ function.
        return "hostdevice"
    return "device" if device else "host"


def _blank_spans(masked: str, spans: list[tuple[int, int]]) -> str:
    """``masked`` with the given spans (directives) blanked too, newlines kept."""
    code = list(masked)
    for a, b in spans:
        for k in range(a, b):
            if code[k] != "\n":
                code[k] = " "
    return "".join(code)


def parse(text: str) -> list[Item]:
    """The file's top-level items, namespaces opened and closed as items of their own."""
    masked = _mask(text)
    spans = _directive_spans(masked)
    code_s = _blank_spans(masked, spans)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(offset: int) -> int:
        return bisect.bisect_right(line_starts, offset)

    span_at = {a: b for a, b in spans}
    items: list[Item] = []
    scope: list[str] = []
    i, n, start = 0, len(text), None
    while i < n:
        if start is None:
            if i in span_at:
                items.append(Item("pp", "", line_of(i), i, span_at[i], -1, tuple(scope)))
                i = span_at[i]
                continue
            if code_s[i].isspace():
                i += 1
                continue
            start = i
        ch = code_s[i]
        if ch in "([":
            i = _match(code_s, i, ch, ")" if ch == "(" else "]")
            continue
        if ch == ";":
            items.append(_declaration(text, code_s, start, i + 1, line_of(start), tuple(scope)))
            start, i = None, i + 1
            continue
        if ch == "}":
            if not scope or code_s[start:i].strip():
                raise Unsure("unbalanced '}'")
            items.append(Item("end", scope.pop(), line_of(i), i, i + 1, -1, tuple(scope)))
            start, i = None, i + 1
            continue
        if ch != "{":
            i += 1
            continue
        item = _braced_item(text, code_s, start, i, line_of(start), tuple(scope))
        items.append(item)
        if item.kind == "namespace":
            scope.append(item.name)
        start, i = None, item.end
    _check_ends_at_top_level(code_s[start:] if start is not None else "", scope)
    return items


def _check_ends_at_top_level(unfinished: str, scope: list[str]) -> None:
    """Raise :class:`Unsure` unless the file ends outside any declaration (``unfinished`` is its last
    statement's text so far) and any namespace."""
    if unfinished.strip():
        raise Unsure("the file ends inside a declaration")
    if scope:
        raise Unsure("a namespace is not closed")


def _braced_item(text: str, code_s: str, start: int, brace: int, line: int, scope: tuple[str, ...]) -> Item:
    """The item whose head runs from ``start`` to the ``{`` at ``brace``: a namespace (or ``extern "C"``)
    opening, which ends at its brace, or a type, braced declaration or function, which end past their body."""
    head_code = code_s[start:brace]
    ns = re.fullmatch(r"\s*(?:inline\s+)?namespace\s*([\w:]*)\s*", head_code)
    if ns or re.fullmatch(r'\s*extern\s*"C(\+\+)?"\s*', text[start:brace]):
        name = ns.group(1) if ns else 'extern "C"'
        return Item("namespace", name, line, start, brace + 1, -1, scope)
    close = _match(code_s, brace, "{", "}")
    rest, is_template = _strip_template_prefix(head_code)
    first = _IDENT.match(rest)
    name = _function_name(rest)
    if first and first.group() in {"struct", "class", "union", "enum"} and name is None:
        end = code_s.find(";", close)
        if end < 0:
            raise Unsure("type definition without ';'")
        return Item("type", "", line, start, end + 1, -1, scope, is_template)
    if name is None:  # an initialiser list or another braced declaration: up to its ';'
        end = code_s.find(";", close)
        if end < 0:
            raise Unsure("braced declaration without ';'")
        return _declaration(text, code_s, start, end + 1, line, scope)
    end = close
    after = re.match(r"\s*;", code_s[end:])
    if after:  # a stray ';' after a function body
        end += after.end()
    return Item(_function_kind(head_code, name), name, line, start, end, brace, scope, is_template)


def _declaration(text: str, code_s: str, start: int, end: int, line: int, scope: tuple[str, ...]) -> Item:
    head = code_s[start:end]
    words = set(_IDENT.findall(head))
    rest, is_template = _strip_template_prefix(head)
    name = _function_name(rest.rstrip(";"))
    invoked = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*\(.*\)\s*;?\s*", rest, re.S)
    if words & {"__global__", "__device__", "__constant__", "__shared__", "__managed__", "C10_DEVICE",
                "C10_HOST_DEVICE"}:
        kind = "decl"
    elif invoked and re.search(rf"(?m)^[ \t]*#[ \t]*define[ \t]+{invoked.group(1)}\(", text):
        kind = "decl"  # an invocation of the file's own macro (it may define kernels): the unit keeps it
    elif name is not None and not rest.lstrip().startswith(("using", "typedef", "static_assert")):
        kind = "host"  # a host function's declaration
    elif _HOST_ONLY_DECL.search(text[start:end]):
        kind = "host"
    else:
        kind = "decl"
    return Item(kind, name or "", line, start, end, -1, scope, is_template)


def qualified_name(item: Item) -> str:
    """``ns::name`` of a parsed item (``extern "C"`` blocks add nothing; an anonymous namespace adds '')."""
    return "::".join(s for s in (*item.scope, item.name) if s != 'extern "C"')


def _is_device_function(item: Item) -> bool:
    return item.kind in {"kernel", "device"}


def host_parts(text: str, items: list[Item]) -> list[tuple[str, str]]:
    """(label, text) of everything a swap must leave unchanged: device-function bodies left out."""
    parts = []
    for item in items:
        if _is_device_function(item):
            # Directives inside the body act on the rest of the file too (a #define used by a launch).
            directives = re.findall(r"(?m)^[ \t]*#.*(?:\\\n.*)*", text[item.body:item.end])
            snippet = text[item.start:item.body] + "\n".join(directives)
        else:
            snippet = text[item.start:item.end]
        label = f"{item.name}() at line {item.line}" if item.name else f"line {item.line}"
        parts.append((label, " ".join(_TOKENS.findall(snippet))))
    return parts


def host_view(text: str) -> str:
    """A fingerprint of ``text``'s host side (see the module docstring); raises :class:`Unsure`."""
    parts = host_parts(text, parse(text))
    return hashlib.blake2b("\0".join(p for _, p in parts).encode(), digest_size=16).hexdigest()


def first_host_difference(old: str, new: str) -> str | None:
    """Where the host side of ``new`` first differs from ``old``'s, in words ('add() at line 17'), or None."""
    try:
        a, b = host_parts(old, parse(old)), host_parts(new, parse(new))
    except Unsure:
        return None
    for (_, x), (label, y) in zip(a, b, strict=False):
        if x != y:
            return label
    if len(a) != len(b):
        return b[len(a)][0] if len(b) > len(a) else "the end of the file"
    return None


def include_lines(text: str) -> list[str]:
    """The targets of the file's ``#include "..."``/``<...>`` lines."""
    return re.findall(r'(?m)^\s*#\s*include\s*[<"]([^>"]+)[>"]', _mask_comments_only(text))


def _mask_comments_only(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)


def includes_torch(text: str) -> bool:
    return any(_TORCH_INCLUDE.match(f"#include <{target}>") for target in include_lines(text))


_MACRO_LIKE = re.compile(r"\b_*[A-Z][A-Z0-9]*_[A-Z0-9_]*\b|\b_*[A-Z]{3,}[A-Z0-9]*\b")
# Names of the implementation, the standard library, CUDA, torch and the libraries they include.
_RESERVED_NAME = re.compile(r"_|NDEBUG$|(std|c10|at|torch|caffe2|cub|thrust|cuda|cutlass|cute|pybind11)$"
                            r"|(C10|AT|TORCH|CAFFE2|CUB|THRUST|CUDA|CUTLASS|PYBIND11|CCCL|LIBCUDACXX)_", re.I)


def device_only_names(text: str) -> set[str] | None:
    """The names a header declares when it holds ``__device__`` functions alone, else None.

    Alone means: no kernels (their host stubs are host code), no ``__host__ __device__`` or ``constexpr``
    functions, types, variables, macros, pragmas or includes of its own; namespaces around the functions,
    ``#pragma once`` and a classic include guard are fine. Anything this reader does not follow with certainty
    (attributes, ``_Pragma``, token pasting, digraphs, a macro call in a function's head, operators) is None
    too. Including such a header changes nothing the host compiler emits, provided nothing else names what it
    declares (see :func:`added_device_headers`).
    """
    followed = _followed_header(text)
    if followed is None:
        return None
    items, masked = followed
    names: set[str] = set()
    guard = None
    for item in items:
        if item.kind == "device":
            if not _plain_device_head(masked[item.start:item.body], item.name):
                return None
            names.add(item.name)
        elif item.kind == "namespace":
            parts = [part for part in item.name.split("::") if part]
            if item.name == 'extern "C"' or any(_RESERVED_NAME.match(part) for part in parts):
                return None
            names.update(parts)
        elif item.kind == "pp":
            line = " ".join(masked[item.start:item.end].split())
            opened = _guard_opened(line)
            if opened and guard is None and not names:
                if _RESERVED_NAME.match(opened):  # a name the implementation or a library's headers read
                    return None
                guard = opened
                names.add(guard)
            elif not _guard_or_once(line, guard):
                return None
        elif item.kind != "end":
            return None
    return names


def _followed_header(text: str) -> tuple[list[Item], str] | None:
    """A header's items and masked text, or None where it uses syntax this reader does not follow."""
    try:
        items = parse(text)
        masked = _mask(text)
    except Unsure:
        return None
    if re.search(r"\b(_Pragma|__attribute__|__host__|__declspec)\b|##|%:|\?\?=|<%|%>|\[\[", masked):
        return None
    return items, masked


def _plain_device_head(head: str, name: str) -> bool:
    """Whether a ``__device__`` function's head holds nothing a macro could expand into more declarations."""
    # One parenthesised group in the head, the parameter list: a macro call there could expand to anything.
    depth = groups = 0
    for ch in re.sub(r"[^()]", "", head):
        groups += ch == "(" and depth == 0
        depth += 1 if ch == "(" else -1
    # A word spelled like a macro (HOST_FN, __CUDA_HOSTDEVICE__) in the head could expand to anything too.
    return groups == 1 and name.isidentifier() and not _MACRO_LIKE.search(head)


def _guard_opened(line: str) -> str | None:
    """The macro an include guard's opening line (``#ifndef G`` or ``#if !defined(G)``) tests, or None."""
    opened = re.fullmatch(r"#\s*(?:ifndef\s+(\w+)|if\s+!\s*defined\s*\(?\s*(\w+)\s*\)?)", line)
    return (opened.group(1) or opened.group(2)) if opened else None


def _guard_or_once(line: str, guard: str | None) -> bool:
    """Whether a directive is ``#pragma once``, an ``#endif`` or the ``#define`` of the include guard."""
    return bool(re.fullmatch(r"#\s*pragma\s+once", line) or re.fullmatch(r"#\s*endif", line)
                or (guard and re.fullmatch(rf"#\s*define\s+{guard}", line)))


def added_device_headers(old: str, new: str, read_header, others: Iterable[str] = ()) -> list[str] | None:
    """Where ``new``'s host side differs from ``old``'s only by added ``#include "..."`` lines of headers that
    hold device functions alone (:func:`device_only_names`): the added headers' paths. None for any other host
    difference (or none at all).

    ``read_header(target)`` gives ``(path, text)`` for an include target, as the compiler would find it, or
    None; ``others`` are the texts of the user headers the file included already. Nothing outside device-function
    bodies in ``new``, and nothing in ``others``, may name what the added headers declare (an overload, a guard
    macro shared with another header), and each include must come after the file's torch includes (the device
    code alone is compiled with light c10 headers first, so it would see names the full build does not). Such
    an edit leaves the compiled host code right, so it can be swapped like a kernel-body edit."""
    try:
        before = [part for _, part in host_parts(old, parse(old))]
        after = [part for _, part in host_parts(new, parse(new))]
    except Unsure:
        return None
    kept, added, declared = [], [], set()
    torch_seen = [i for i, part in enumerate(after) if _TORCH_INCLUDE.match(part)]
    for i, part in enumerate(after):
        include = re.fullmatch(r'#\s*include\s*"([^"\s]+)"\s*(?://.*|/\*.*\*/)?', part)
        if include is None or part in before:
            kept.append(part)
            continue
        found = read_header(include.group(1))
        names = device_only_names(found[1]) if found else None
        if names is None or (torch_seen and i < torch_seen[-1]):
            return None
        added.append(found[0])
        declared |= names
    elsewhere = set(_IDENT.findall(" ".join(kept))).union(*(_IDENT.findall(_mask_comments_only(t)) for t in others))
    if not added or kept != before or declared & elsewhere:
        return None
    return added


# ---- explicit instantiations from the mangled names the loaded library registered ----

@functools.lru_cache(maxsize=1)
def _cxa_demangle():
    path = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    fn = ctypes.CDLL(path).__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return fn


@functools.lru_cache(maxsize=1)
def _free():
    fn = ctypes.CDLL(None).free
    fn.argtypes = [ctypes.c_void_p]
    return fn


def demangle(name: str) -> str | None:
    """The C++ spelling of a mangled name (libstdc++'s own demangler), or None."""
    status = ctypes.c_int()
    out = _cxa_demangle()(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not out:
        return None
    try:
        return ctypes.string_at(out).decode()
    finally:
        _free()(out)


def matching_open(text: str, close: int) -> int:
    """Index of the bracket that opens the one at ``text[close]`` (``)`` or ``>``), or -1."""
    closer = text[close]
    opener = {")": "(", ">": "<"}[closer]
    depth = 0
    for j in range(close, -1, -1):
        depth += text[j] == closer
        depth -= text[j] == opener
        if depth == 0:
            return j
    return -1


def _split_demangled(text: str) -> tuple[str, str, str] | None:
    """'void ns::k<float>(float*, int)' -> ('void', 'ns::k', '<float>(float*, int)'), for templates only."""
    if not text.endswith(")"):
        return None
    j = matching_open(text, len(text) - 1)
    before = text[:j]
    if j < 0 or not before.endswith(">"):
        return None
    k = matching_open(before, len(before) - 1)
    if k < 0:
        return None
    qualified = before[:k]
    # Kernels are never class members, so the qualified name (namespaces only) holds no space.
    ret, _, qual = qualified.rpartition(" ")
    return ret.strip(), qual.strip(), text[k:]


def instantiations(items: list[Item], mangled: list[str], header_templates: Iterable[str] = (),
                   visible: str = "") -> tuple[list[str], list[str]]:
    """Explicit instantiations for the registered kernels that are instances of the file's kernel templates,
    and the mangled names the device unit will then define (its plain kernels' names are added by the
    caller's check against the compiled image).

    ``header_templates`` names kernel templates the file's own headers define (the kernel of a split layout
    often lives in a shared header and is instantiated by the file's host code, which the unit leaves out).
    Their instances are instantiated only where every name in the template arguments is spelled in ``visible``
    (the file and its headers): an instance whose functor another file defines belongs to that file's unit."""
    own = {qualified_name(item) for item in items if item.kind == "kernel" and item.is_template}
    from_headers = set(header_templates) - own
    lines, names = [], []
    for name in mangled:
        text = demangle(name)
        if not text or "(anonymous namespace)" in text or "{lambda" in text or "::'" in text:
            continue
        parts = _split_demangled(text)
        if not parts or parts[1] not in own | from_headers:
            continue
        ret, qual, rest = parts
        if qual in from_headers and not _arguments_visible(rest, visible):
            continue
        lines.append(f"template __global__ {ret or 'void'} {qual}{rest};")
        names.append(name)
    return lines, names


# Names a template argument may use without being spelled in the unit's own files.
_BUILTIN_WORDS = frozenset("bool char short int long signed unsigned float double void const volatile true false "
                           "__half __nv_bfloat16 __half2 __nv_bfloat162".split())


def _arguments_visible(rest: str, visible: str) -> bool:
    """Whether every name in an instance's template arguments and parameters (``rest``: '<T, 2, Op>(params)')
    is a builtin or is spelled in ``visible``, a namespace included (``jk::Vec`` needs both words)."""
    words = set(re.findall(r"[A-Za-z_]\w*", rest)) - _BUILTIN_WORDS
    return all(re.search(rf"\b{re.escape(w)}\b", visible) for w in words)


def check_no_device_variables(text: str, items: list[Item] | None = None) -> None:
    """Raise :class:`Unsure` if ``text`` defines ``__constant__``/``__device__``/``__managed__`` variables.

    The host code writes those through the loaded module's symbols (``cudaMemcpyToSymbol``); swapped-in kernels
    would read their own, never-written copies.
    """
    for item in items if items is not None else parse(text):
        if item.kind == "decl" and not item.name and re.search(
                r"\b(__constant__|__device__|__managed__)\b", text[item.start:item.end]):
            raise Unsure(f"device variables at line {item.line} belong to the loaded module")


def device_unit(text: str, path: str, mangled: list[str] = (), headers: dict[str, str] | None = None,
                prelude: str = "", namespace: str = "", extra: Iterable[str] = ()) -> tuple[str, list[str]]:
    """The torch-free unit for ``text`` (the file at ``path``) and the template instances it defines.

    ``headers`` (path -> text) are the file's own headers, which the unit includes as the file does: the kernel
    templates they define are instantiated too, for the instances this file's host code launched. ``prelude``
    (``#undef``/``#define`` lines) is the macro state the full build's device pass had after torch's includes;
    the CUDA half and bfloat16 headers, which torch's headers include, come first in every unit.
    ``namespace`` wraps the file's code (the host JIT's own namespace, :mod:`jitload.builder.hostunit`), and ``extra``
    lines (its explicit instantiations) follow at global scope.
    Raises :class:`Unsure` where the file cannot be read with certainty, or holds device variables.
    """
    items = parse(text)
    check_no_device_variables(text, items)
    masked = _mask(text)
    # Neither can be carried over: the unit leaves host items out, so __COUNTER__ would count differently,
    # and its own #line directives would override the user's.
    if "__COUNTER__" in masked:
        raise Unsure("__COUNTER__ counts differently in the device code alone")
    if re.search(r"(?m)^[ \t]*#[ \t]*line\b", masked):
        raise Unsure("a #line directive of its own")
    body = []
    for item in items:
        if item.kind not in DEVICE_KINDS:
            # A host item is left out, but a directive inside it (a #define or #undef in a host function)
            # still acts on the device code after it.
            found = re.finditer(r"(?m)^[ \t]*#.*(?:\\\n.*)*", masked[item.start:item.end])
            directives = [d for m in found
                          if not _TORCH_INCLUDE.match(d := text[item.start + m.start():item.start + m.end()])]
            if directives:
                body.append(f'#line {item.line} "{path}"\n' + "\n".join(directives) + "\n")
            continue
        snippet = text[item.start:item.end]
        if item.kind == "pp" and _TORCH_INCLUDE.match(snippet):
            continue
        if item.kind == "decl" and _HOST_ONLY_DECL.search(snippet) and not re.search(
                r"__global__|__device__|__constant__", snippet):
            continue
        body.append(f'#line {item.line} "{path}"\n{snippet}\n')
    header_templates = {qualified_name(item) for header in (headers or {}).values() for item in parse(header)
                        if item.kind == "kernel" and item.is_template}
    visible = "\n".join([text, *(headers or {}).values()])
    own, names = instantiations(items, list(mangled), header_templates, visible)
    extra = [*own, *extra]
    if namespace:
        # The standard headers a user header may include come first: inside the namespace they would break.
        body = ["#include <cstdint>\n#include <cstddef>\n#include <cmath>\n#include <type_traits>\n",
                f"namespace {namespace} {{\n", *body, f"}}  // namespace {namespace}\n"]
    joined = "".join(body) + "\n".join(extra)
    headers = [h for pattern, h in _LIGHT_HEADERS if pattern.search(joined)]
    lines = ["#include <cuda_fp16.h>", "#include <cuda_bf16.h>", *(f"#include <{h}>" for h in headers)]
    lines.append("namespace c10 {}\nnamespace at {}\nnamespace torch { using namespace at; }")
    if "c10/util/Half.h" in headers:
        lines.append("namespace at { using c10::Half; }")
    if "c10/util/BFloat16.h" in headers:
        lines.append("namespace at { using c10::BFloat16; }")
    header = (f"// The device code of {path}, derived by jitload for a kernel swap; torch-free.\n"
              + "\n".join(lines) + "\n" + prelude)
    tail = f'\n#line 1 "{path} (jitload: explicit instantiations)"\n' + "\n".join(extra) + "\n" if extra else ""
    return header + "".join(body) + tail, names
