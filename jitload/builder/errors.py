"""BuildError: a failed build as the few compiler errors a person needs, with the full log kept aside."""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass

# gcc/clang: "file:line:col: error: msg"; nvcc/cudafe: "file(line): error: msg"; both may say "fatal error".
_GCC = re.compile(r"^(?P<file>[^\s:()][^:()]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal\s+)?error:\s*(?P<msg>.+)$")
_NVCC = re.compile(r"^(?P<file>[^\s()][^()]*?)\((?P<line>\d+)\):\s*(?:catastrophic\s+)?error:?\s*(?P<msg>.+)$")
# Errors with no source position: the linker, a missing compiler, nvcc's own complaints.
_PLAIN = re.compile(r"(undefined reference|cannot find -l|collect2: error|nvcc fatal|ld: |No such file)", re.I)

MAX_ERRORS = 5
CONTEXT_LINES = 2
_MANGLED = re.compile(r"\b_Z[A-Za-z0-9_]+")


def demangled(text: str) -> str:
    """``text`` with each mangled C++ name followed by its spelling: ``_Z6helperv`` -> ``helper() (_Z6helperv)``."""
    from .devicecode import demangle  # devicecode imports nothing of jitload's: no circle

    def spell(match: re.Match) -> str:
        name = demangle(match.group())
        return f"{name} ({match.group()})" if name else match.group()

    return _MANGLED.sub(spell, text)


@dataclass(frozen=True)
class CompileDiagnostic:
    """One compiler error: where, what, and the source lines around it."""

    file: str
    line: int
    message: str
    context: tuple[tuple[int, str], ...]  # (line number, text), the failing line included

    def format(self) -> str:
        out = [f"{self.file}:{self.line}: {self.message}"]
        for num, text in self.context:
            mark = ">" if num == self.line else " "
            out.append(f"  {mark} {num:5d} | {text}")
        return "\n".join(out)


def _source_context(path: str, line: int) -> tuple[tuple[int, str], ...]:
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ()
    lo, hi = max(1, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES)
    return tuple((n, lines[n - 1]) for n in range(lo, hi + 1))


def parse_diagnostics(log: str, cwd: str) -> list[CompileDiagnostic]:
    """The first distinct errors in a compiler log, each with two lines of source either side."""
    found: list[CompileDiagnostic] = []
    seen: set[tuple[str, int, str]] = set()
    for raw in log.splitlines():
        line = raw.strip()
        match = _GCC.match(line) or _NVCC.match(line)
        if not match:
            continue
        path = match["file"]
        full = path if os.path.isabs(path) else os.path.normpath(os.path.join(cwd, path))
        key = (full, int(match["line"]), match["msg"])
        if key in seen:
            continue  # nvcc reports host-side errors once per pass
        seen.add(key)
        found.append(CompileDiagnostic(full, int(match["line"]), match["msg"].strip(),
                                       _source_context(full, int(match["line"]))))
        if len(found) == MAX_ERRORS:
            break
    return found


class BuildError(RuntimeError):
    """A build that failed. ``str()`` holds the first errors as ``file:line: message`` with source around
    them; ``.log`` is the compiler's whole output and ``.log_path`` where it was saved."""

    def __init__(self, name: str, log: str, build_directory: str, log_path: str | None = None) -> None:
        self.name = name
        self.log = log
        self.build_directory = build_directory
        self.log_path = log_path
        self.diagnostics = parse_diagnostics(log, build_directory)
        super().__init__(self._message())

    def _fallback_lines(self) -> list[str]:
        picked = [ln for ln in self.log.splitlines() if _PLAIN.search(ln) or "undefined symbol" in ln]
        return [demangled(ln) for ln in (picked or self.log.strip().splitlines()[-15:])[:15]]

    def _message(self) -> str:
        head = f"building extension '{self.name}' failed"
        if self.diagnostics:
            head += f" ({len(self.diagnostics)} error{'s' if len(self.diagnostics) > 1 else ''} shown)"
        body = [d.format() for d in self.diagnostics] or self._fallback_lines()
        tail = f"full log: {self.log_path}" if self.log_path else "full log: BuildError.log"
        return "\n".join([head + ":", *body, tail])

    def _repr_html_(self) -> str:
        parts = [f"<div style='font-family:monospace'><b style='color:#b00'>building extension "
                 f"'{html.escape(self.name)}' failed</b>"]
        for d in self.diagnostics:
            parts.append(f"<div><b>{html.escape(d.file)}:{d.line}</b>: {html.escape(d.message)}<pre style='margin:0'>")
            for num, text in d.context:
                row = f"{num:5d} | {html.escape(text)}"
                if num == d.line:
                    row = f"<span style='background:#fdd;font-weight:bold'>{row}</span>"
                parts.append(row)
            parts.append("</pre></div>")
        if not self.diagnostics:
            parts.append("<pre>" + html.escape("\n".join(self._fallback_lines())) + "</pre>")
        parts.append(f"<details><summary>full log</summary><pre>{html.escape(self.log)}</pre></details></div>")
        return "".join(parts)
