"""A source as the compiler sees it, in well under a second: its own text preprocessed against a macro snapshot.

A kernel swap is only right when the host program a full build would make is the one already loaded. Read
from the file's spelling, that question has no safe answer: comments, line splices, digraphs, ``#if``
branches, macros, ``_Pragma`` and merged redeclarations decide what the compiler sees. So the question is
asked of the preprocessor itself, the one nvcc runs (its command lines, from ``nvcc -dryrun`` of the build's
own compile line), in two steps:

1. **At each full build** (:func:`capture`), the source's *prefix* (its leading block of directives, up to
   the last toolchain include before any user header) is preprocessed once in host and once in device mode
   with ``-dM``: the macro state torch's headers leave behind, minus what the compiler predefines. This costs
   what preprocessing torch costs (about 2 s), and runs beside the compile.
2. **At each edit** (:func:`host_view`), the rest of the source is preprocessed for real, in host mode, with
   the snapshot in place of the prefix (milliseconds: no torch header is read again). In the output every
   ``__global__``/``__device__``/``__host__``, however it was spelled, is an ``__attribute__((global))``,
   ``((device))`` or ``((host))``. The view is that output, token by token, except that a function that is
   device code alone (``device`` and no ``host``, on every declaration of its name, defined by its plain name,
   and named nowhere in host code, where a declaration nvcc would merge may hide) contributes nothing and a
   kernel contributes its signature (its host stub). Lines that come from the toolchain's headers
   (libstdc++, CUDA's, torch's: a file may include its own header first, and theirs after it) count whole,
   unparsed. Two texts with the same view compile to the same host program.

``__LINE__`` is pinned to 0 for the view that decides, so that a kernel edit that adds a line does not
count as a host edit; a second view with real line numbers says whether the host code's line numbers
(``TORCH_CHECK``'s ``__LINE__``) moved, in which case the full build that verifies the swap is loaded
when it is done. The device unit of a swap (:mod:`jitload.builder.devicecode`) starts from the device-mode snapshot
(:func:`device_prelude`), so it sees torch's version macros, ``NDEBUG`` and ``assert`` as the full build did.

Anything this cannot read (no snapshot yet, a changed prefix, a preprocessor error, an unparsable output)
is :class:`Unknown`, and the caller builds in full.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import build, devicecode, trust

PP_DIR = os.path.join("swap", "pp")
_FUNCTION_KINDS = ("kernel", "device", "hostdevice", "host", "decl")  # devicecode's items that name a function
_ATTRIBUTE = re.compile(r"__attribute(?:__)?\s*\(\s*\(|\[\s*\[")  # GNU's two spellings, and C++11's [[...]]
_LINE_MARKER_LINE = re.compile(r"^#\s*\d+\s+\".*(?:\n|$)", re.M)
_LINE_MARKER_FILE = re.compile(r'^#\s*\d+\s+"((?:[^"\\]|\\.)*)".*$', re.M)
_USER_INCLUDE = re.compile(r'^\s*#\s*include\s*"')
_TOOLCHAIN_INCLUDE = re.compile(r'^\s*#\s*include\s*<|^\s*#\s*include\s*"(torch|ATen|c10|pybind11|caffe2)/')
_DIRECTIVE_OR_BLANK = re.compile(r"^\s*(#.*)?$")


@dataclass(frozen=True)
class Unknown:
    """The view could not be taken; ``reason`` says why (the caller builds in full)."""

    reason: str


@dataclass(frozen=True)
class View:
    """A unit's host view: ``decides`` (``__LINE__`` pinned), ``exact`` (real line numbers), and the user
    files its preprocessing read."""

    decides: str
    exact: str
    files: tuple[str, ...] = ()

    def encode(self) -> str:
        return f"{self.decides}:{self.exact}"


def split_prefix(text: str, user_dirs: Iterable[str] = ()) -> tuple[str, int]:
    """The prefix of ``text`` (leading directives, comments and blank lines, up to and including the last
    toolchain include that comes before any user include) and its number of lines. An include is the user's
    when it is spelled with quotes, or found in one of ``user_dirs`` (the source's folder and -I folders that
    are not the toolchain's): the snapshot would freeze its text."""
    masked = devicecode._mask_comments_only(text)
    lines = masked.split("\n")
    end = 0
    for i, line in enumerate(lines):
        if line.rstrip().endswith("\\") or not _DIRECTIVE_OR_BLANK.match(line) or _USER_INCLUDE.match(line):
            break
        if _TOOLCHAIN_INCLUDE.match(line):
            target = re.search(r"[<\"]([^>\"]+)[>\"]", line)
            if target and any(os.path.exists(os.path.join(d, target.group(1))) for d in user_dirs):
                break
            end = i + 1
    prefix = "\n".join(text.split("\n")[:end])
    return prefix, end


def _user_dirs(command: list[str], source: str) -> list[str]:
    """The source's folder and the -I folders of ``command`` outside the toolchain's."""
    dirs = [os.path.dirname(source)]
    for i, arg in enumerate(command):
        folder = arg[2:] if arg.startswith("-I") and len(arg) > 2 else command[i + 1] if arg in ("-I", "-iquote") \
            and i + 1 < len(command) else None
        if folder and not os.path.realpath(folder).startswith(build.toolchain_roots()):
            dirs.append(folder)
    return dirs


def _ninja_command(build_directory: str, source: str) -> list[str] | None:
    done = subprocess.run([build.ninja_binary(), "-t", "compdb"], cwd=build_directory, capture_output=True,
                          text=True)
    if done.returncode != 0:
        return None
    for entry in json.loads(done.stdout or "[]"):
        if os.path.normpath(os.path.join(entry["directory"], entry["file"])) == os.path.normpath(source):
            cmd = shlex.split(entry["command"])
            while cmd and os.path.basename(cmd[0]) in ("ccache", "sccache"):
                cmd = cmd[1:]
            if cmd and os.path.basename(cmd[0]) == "nvcc":
                return cmd
    return None


def preprocess_commands(build_directory: str, source: str) -> dict[str, list[str]] | None:
    """nvcc's own host and device preprocessing commands for ``source`` (from ``nvcc -dryrun`` of the build's
    compile line), the input as ``{input}``; None where the build has no nvcc line for it."""
    cmd = _ninja_command(build_directory, source)
    if cmd is None:
        return None
    cmd = [a for a in cmd if a not in ("-MD", "-MMD")]
    if "-MF" in cmd:
        i = cmd.index("-MF")
        del cmd[i:i + 2]
    done = subprocess.run([*cmd, "-dryrun"], cwd=build_directory, capture_output=True, text=True)
    found: dict[str, list[str]] = {}
    for line in (done.stdout + done.stderr).splitlines():
        if not line.startswith("#$ ") or " -E " not in line or "-x c++" not in line:
            continue
        args = shlex.split(line[3:])
        if "=" in args[0] and not args[0].startswith("-"):
            continue  # an environment assignment line
        mode = "device" if any(a.startswith("-D__CUDA_ARCH__=") for a in args) else "host"
        if mode in found:
            continue  # one device arch is enough to read macros by
        out = args.index("-o") if "-o" in args else -1
        if out >= 0:
            del args[out:out + 2]
        args = [("{input}" if os.path.basename(a) == os.path.basename(source) and not a.startswith("-") else a)
                for a in args]
        found[mode] = args
    return found if {"host", "device"} <= set(found) else None


def _without_runtime(args: list[str]) -> list[str]:
    """A preprocessing command without nvcc's ``-include cuda_runtime.h``."""
    out: list[str] = []
    for a in args:
        if a == "cuda_runtime.h" and out and out[-1] == "-include":
            out.pop()
        else:
            out.append(a)
    return out


def _run(args: list[str], text: str, extra: list[str], cwd: str) -> subprocess.CompletedProcess:
    with tempfile.NamedTemporaryFile("w", suffix=".cu", dir=cwd, delete=False) as f:
        f.write(text)
    try:
        cmd = [f.name if a == "{input}" else a for a in args]
        return subprocess.run([*cmd, *extra], cwd=cwd, capture_output=True, text=True, errors="replace")
    finally:
        os.unlink(f.name)


def _defines(output: str) -> dict[str, str]:
    macros = {}
    for line in output.splitlines():
        if line.startswith("#define "):
            head = line[8:]
            match = re.match(r"[A-Za-z_]\w*(\([^)]*\))?", head)
            if match:
                macros[match.group()] = head
    return macros


def _paths(build_directory: str, source: str) -> tuple[str, str]:
    folder = trust.private_dir(os.path.join(build_directory, PP_DIR))
    stem = hashlib.blake2b(source.encode(), digest_size=6).hexdigest()
    return folder, f"{os.path.splitext(os.path.basename(source))[0]}-{stem}"


def capture(build_directory: str, source: str, text: str) -> str | None:
    """Record ``source``'s prefix and the macro state it leaves in host and device mode; returns an error
    message, or None when done."""
    commands = preprocess_commands(build_directory, source)
    if commands is None:
        return "the build has no nvcc compile line for it"
    user_dirs = _user_dirs(commands["host"], source)
    prefix, lines = split_prefix(text, user_dirs)
    folder, stem = _paths(build_directory, source)
    marker = f'#line 1 "{source}"\n'
    # The base is what the compiler and the command line predefine; nvcc's implicit cuda_runtime.h belongs to
    # the snapshot, since the rest of the file is preprocessed without it.
    jobs = {(mode, kind): (commands[mode] if kind == "prefix" else _without_runtime(commands[mode]),
                           (marker + prefix + "\n") if kind == "prefix" else "\n")
            for mode in ("host", "device") for kind in ("prefix", "base")}
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip(jobs, pool.map(lambda j: _run(j[0], j[1], ["-dM"], build_directory), jobs.values()),
                        strict=True))
    for key, result in done.items():
        if result.returncode != 0:
            return f"preprocessing its includes failed ({key[0]}): {result.stderr.strip()[:300]}"
    with contextlib.suppress(FileNotFoundError):  # an older snapshot must not be read with the new headers
        os.remove(os.path.join(folder, f"{stem}.json"))
    for mode in ("host", "device"):
        base, state = _defines(done[mode, "base"].stdout), _defines(done[mode, "prefix"].stdout)
        lines_out = [f"#undef {name.split('(')[0]}\n#define {head}" for name, head in state.items()
                     if base.get(name) != head]
        _write_whole(os.path.join(folder, f"{stem}.{mode}.h"), "\n".join(lines_out) + "\n")
    meta = {"prefix": prefix, "lines": lines, "host": commands["host"], "device": commands["device"],
            "user_dirs": user_dirs}
    # The JSON last: a snapshot is read only through it, so a kill before it leaves no half of one in use.
    _write_whole(os.path.join(folder, f"{stem}.json"), json.dumps(meta))
    return None


def _write_whole(path: str, text: str) -> None:
    """Write to a temporary name and rename, so a reader sees the old file or the new one, never a part."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _meta(build_directory: str, source: str) -> tuple[dict, str] | None:
    folder, stem = _paths(build_directory, source)
    try:
        with open(os.path.join(folder, f"{stem}.json")) as f:
            return json.load(f), os.path.join(folder, stem)
    except (OSError, ValueError):
        return None


def device_prelude(build_directory: str, source: str) -> str:
    """The device-mode macro state of ``source``'s prefix, for its device unit ('' when none was captured):
    only names a user may write (no reserved ``_X``/``__x`` names, which are the toolchain's own guards)."""
    found = _meta(build_directory, source)
    if found is None:
        return ""
    try:
        with open(f"{found[1]}.device.h") as f:
            lines = f.read().split("\n")
    except OSError:
        return ""
    kept = []
    for undef, define in zip(lines[::2], lines[1::2], strict=False):
        name = undef[len("#undef "):]
        if not re.match(r"_[A-Z_]", name):
            kept.append(f"{undef}\n{define}")
    return "\n".join(kept) + "\n"


def host_view(build_directory: str, source: str, text: str) -> View | Unknown:
    """The host view of ``source`` with the text ``text`` (its headers as they are on disk now)."""
    found = _meta(build_directory, source)
    if found is None:
        return Unknown("no macro snapshot of its includes (the next full build takes one)")
    meta, stem = found
    prefix, lines = split_prefix(text, meta.get("user_dirs", ()))
    if _code_lines(prefix) != _code_lines(meta["prefix"]):
        return Unknown("host code changed: the includes at its top")
    rest = "\n".join(text.split("\n")[lines:])
    args = [*_without_runtime(meta["host"]), "-iquote", os.path.dirname(source)]
    body = f'#include "{stem}.host.h"\n#line {lines + 1} "{source}"\n{rest}\n'
    pinned = f'#include "{stem}.host.h"\n#undef __LINE__\n#define __LINE__ 0\n#line {lines + 1} "{source}"\n{rest}\n'
    folder = os.path.dirname(stem)
    with ThreadPoolExecutor(max_workers=2) as pool:
        exact_run, pinned_run = pool.map(lambda t: _run(args, t, ["-w"], folder), [body, pinned])
    for run in (exact_run, pinned_run):
        if run.returncode != 0:
            first = next((ln for ln in run.stderr.splitlines() if "error" in ln), run.stderr.strip()[:300])
            return Unknown(f"the preprocessor stopped: {first}")
    try:
        roots = build.toolchain_roots()
        decides, exact = view_of(pinned_run.stdout, roots), view_of(exact_run.stdout, roots)
    except devicecode.Unsure as err:
        return Unknown(f"its preprocessed text is outside what a kernel swap reads: {err}")
    files = sorted({m for m in _LINE_MARKER_FILE.findall(exact_run.stdout)
                    if os.path.isabs(m) and os.path.exists(m)})
    return View(decides, exact, tuple(files))


def same_output(build_directory: str, source: str, old: str, new: str) -> bool:
    """Whether the preprocessor turns ``old`` and ``new`` (two texts of ``source``, its headers as on disk)
    into the same code, line for line, in host and in device mode: then every compile of them is the same."""
    found = _meta(build_directory, source)
    if found is None or "device" not in found[0]:
        return False
    meta, stem = found
    runs = []
    for text in (old, new):
        prefix, lines = split_prefix(text, meta.get("user_dirs", ()))
        if _code_lines(prefix) != _code_lines(meta["prefix"]):
            return False
        rest = "\n".join(text.split("\n")[lines:])
        for mode in ("host", "device"):
            args = [*_without_runtime(meta[mode]), "-iquote", os.path.dirname(source)]
            runs.append((args, f'#include "{stem}.{mode}.h"\n#line {lines + 1} "{source}"\n{rest}\n'))
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda r: _run(r[0], r[1], ["-w"], os.path.dirname(stem)), runs))
    if any(d.returncode != 0 for d in done):
        return False
    out = [_LINE_MARKER_LINE.sub("", d.stdout) for d in done]
    return out[0] == out[2] and out[1] == out[3]


def _code_lines(text: str) -> list[str]:
    """``text`` line by line without its comments, spaces collapsed: what the preprocessor acts on, where."""
    return [" ".join(line.split()) for line in devicecode._mask_comments_only(text).split("\n")]


def _spaces(head: str) -> set[str]:
    """The execution spaces ``head``'s attributes name, however the list is spelled: ``((host, device))``,
    ``((__device__))`` and ``((host,))`` are nvcc's as much as ``((device))`` is."""
    found: set[str] = set()
    for match in _ATTRIBUTE.finditer(head):
        bracket = head[match.end() - 1]
        try:
            close = devicecode._match(head, match.end() - 1, bracket, ")" if bracket == "(" else "]")
        except devicecode.Unsure:
            return {"host", "device"}  # unreadable: host code, the safe side
        depth, part = 0, []
        for ch in head[match.end():close - 1] + ",":
            depth += ch in "(["
            depth -= ch in ")]"
            if ch == "," and depth == 0:
                # gnu::host, __gnu__::__host__, host(...): the attribute's own name
                word = re.match(r"\s*(?:\w+\s*::\s*)?_*([A-Za-z]\w*?)_*\s*(?:\(|$)", "".join(part))
                if word and word.group(1) in ("global", "device", "host"):
                    found.add(word.group(1))
                part = []
            else:
                part.append(ch)
    return found


def _pragmas(body: str) -> list[str]:
    """The pragmas inside a device body that can act beyond it (``#pragma unroll`` cannot)."""
    return [p.strip() for p in re.findall(r"^\s*#\s*pragma\b.*$", body, re.M)
            if not re.match(r"#\s*pragma\s+(unroll|nounroll)\b", p.strip())]


_MEMBER = re.compile(r"[;{}:]\s*([^;{}]*?__attribute__\s*\(\(\s*device\s*\)\)[^;{}]*?\))\s*(const\s*)?\{")


def _blank_member_bodies(text: str, named_by_host: Callable[[str, int, int], bool]) -> str:
    """A type's text with the bodies of its device-only member functions left out, except where the host's code
    names the member elsewhere (``named_by_host(name, start, end)``, offsets in ``text``): a friend declared
    ``__host__ __device__`` outside the type merges with it. Braces are counted outside literals."""
    masked = devicecode._mask(text)
    out, pos = [], 0
    for match in _MEMBER.finditer(masked):
        if match.start() < pos:
            continue
        head = match.group(1)
        if "host" in _spaces(head) or re.search(r"\bconst(expr|eval)\b", head):
            continue
        open_brace = match.end() - 1
        try:
            close = devicecode._match(masked, open_brace, "{", "}")
        except devicecode.Unsure:
            return text
        # An operator is reached through its type; any other member by its name, which the host may declare.
        name = re.search(r"(~?[A-Za-z_]\w*)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*(?:const\s*)?$", head)
        if not re.search(r"\boperator\b", head) and (
                name is None or named_by_host(name.group(1), match.start(1), close)):
            continue
        out.append(text[pos:open_brace] + "{}")
        pos = close
    return "".join(out) + text[pos:]


# Kernel attributes that the device image carries and the host stub never sees (the shim answers attribute
# queries from the swapped image).
_DEVICE_ATTRIBUTES = re.compile(r"__attribute__\s*\(\(\s*(launch_bounds|maxnreg|cluster_dims|min_blocks_per_sm)"
                                r"\s*\((?:[^()]|\([^()]*\))*\)\s*\)\)")
_KEYWORDS = frozenset("bool char short int long signed unsigned float double void auto const volatile restrict "
                      "__restrict__ __restrict struct class enum typename".split())


def _stub_signature(head: str) -> str:
    """A kernel's head as its host stub depends on it: without the attributes only the device image reads,
    and without parameter names (a renamed parameter compiles to the same stub; a changed type changes the
    mangled name, which the swap refuses on its own)."""
    head = _DEVICE_ATTRIBUTES.sub("", head)
    close = head.rfind(")")
    open_ = devicecode.matching_open(head, close) if close >= 0 else -1
    if open_ < 0:
        return head
    params, depth, start = [], 0, open_ + 1
    for i in range(open_ + 1, close):
        ch = head[i]
        depth += ch in "(<[{"
        depth -= ch in ")>]}"
        if ch == "," and depth == 0:
            params.append(head[start:i])
            start = i + 1
    params.append(head[start:close])
    kept = []
    for param in params:
        words = re.findall(r"::|[A-Za-z_]\w*|\S", param)
        named = (len(words) > 1 and re.fullmatch(r"[A-Za-z_]\w*", words[-1]) and words[-1] not in _KEYWORDS
                 and words[-2] != "::" and not set("=([") & set(param))
        kept.append(" ".join(words[:-1] if named else words))
    return head[:open_ + 1] + ", ".join(kept) + head[close:]


def split_toolchain(pre: str, roots: Iterable[str]) -> tuple[str, str]:
    """``pre`` (preprocessed, with line markers) as the user's part and the toolchain's text: each run of lines
    that came from files under ``roots`` is, in the user's part, one ``#pragma jitload_toolchain <digest>`` line,
    so where it stands counts as much as what it says.

    The toolchain's headers (libstdc++, CUDA's, torch's) are taken whole, not parsed: their text changes only
    with the macros and includes before them, and a file whose own includes come first (a user header, then
    ``<cuda_fp16.h>``) would otherwise put half of libstdc++ in front of the parser. A marker line that ends the
    user's text stays in the user's part, for :func:`view_of` to tell a real one from a raw string's line that
    looks like one; markers inside a run are left out of its digest (they carry the user's line numbers)."""
    roots = tuple(roots)
    seen: dict[str, bool] = {}  # thousands of markers name a few hundred files
    user: list[str] = []
    toolchain: list[str] = []
    run: list[str] = []
    pos, in_toolchain = 0, False

    def close_run() -> None:
        text = _LINE_MARKER_LINE.sub("", "".join(run))
        toolchain.append(text)
        user.append(f"#pragma jitload_toolchain {hashlib.blake2b(text.encode(), digest_size=8).hexdigest()}\n")
        run.clear()

    for marker in [*_LINE_MARKER_FILE.finditer(pre), None]:
        end = marker.start() if marker else len(pre)
        chunk = pre[pos:end]
        if in_toolchain:
            run.append(chunk)
        else:
            if run:
                close_run()
            if "jitload_toolchain" in chunk:
                raise devicecode.Unsure("the source spells jitload's own toolchain digest line")
            user.append(chunk)
        if marker:
            path = marker.group(1)
            if path not in seen:
                try:
                    seen[path] = bool(roots) and os.path.isabs(path) and os.path.realpath(path).startswith(roots)
                except ValueError as err:  # a NUL in the path: no file, and nothing to guess
                    raise devicecode.Unsure(f"a line marker names no readable path ({err})") from None
            if seen[path] and not in_toolchain:
                user.append(marker.group(0) + "\n")  # the marker that opens the run, in the user's text
                pos = min(marker.end() + 1, len(pre))
            else:
                pos = marker.start()
            in_toolchain = seen[path]
    if run:
        close_run()
    return "".join(user), "".join(toolchain)


def _named_in(toolchain: str, name: str) -> bool:
    """Whether the toolchain's text may declare a host-and-device function ``name`` (the last part of a
    qualified name): nvcc merges such a declaration's execution spaces with the user's device definition. A
    host-only declaration does not merge (nvcc calls the host's use of the device definition an error)."""
    short = name.rsplit("::", 1)[-1]
    if not re.fullmatch(r"[A-Za-z_]\w*", short) or short not in toolchain:
        return False  # an operator of the user's own type: no toolchain header can declare it
    for match in re.finditer(rf"\b{short}\s*\(", toolchain):
        head = toolchain[max(toolchain.rfind(c, 0, match.start()) for c in ";{}") + 1:match.start()]
        if {"host", "device"} <= _spaces(head):
            return True
    return False


def view_of(pre: str, toolchain_roots: Iterable[str] = ()) -> str:
    """The digest of preprocessed host-mode text with device-only code left out (see the module docstring).

    Lines from files under ``toolchain_roots`` count as they are, unparsed (:func:`split_toolchain`)."""
    pre, toolchain = split_toolchain(pre, toolchain_roots)
    pre = _without_markers(pre)  # where each line came from: its place, not its meaning
    items = devicecode.parse(pre)
    masked = devicecode._mask(pre)
    heads = [masked[item.start:item.body if item.body >= 0 else item.end] for item in items]
    spaces_of = [_spaces(head) for head in heads]
    named_by_host = _host_mentions(masked, items, spaces_of)
    host_names: set[str] = set()
    for item, spaces in zip(items, spaces_of, strict=True):
        if item.kind in _FUNCTION_KINDS and item.name and ("host" in spaces or not spaces & {"device", "global"}):
            host_names.add(devicecode.qualified_name(item))
    parts = []
    for item, head, spaces in zip(items, heads, spaces_of, strict=True):
        snippet = pre[item.start:item.end]
        if item.kind in ("pp", "end", "namespace") or (not item.name and item.kind != "type"):
            parts.append(snippet if item.kind != "pp" or "pragma" in snippet else "")
            continue
        # A constexpr/consteval device function can be called by host code (--expt-relaxed-constexpr).
        device_only = ("device" in spaces and "host" not in spaces and not re.search(r"\bconst(expr|eval)\b", head)
                       and devicecode.qualified_name(item) not in host_names
                       and not _qualified_declarator(head, item.name)
                       and not named_by_host(item.name, item.start, item.end)
                       and not _named_in(toolchain, devicecode.qualified_name(item)))
        if item.kind == "type":
            parts.append(_blank_member_bodies(
                snippet, lambda name, a, b, at=item.start: named_by_host(name, at + a, at + b)))
        elif "global" in spaces and item.body >= 0:
            parts.append(_stub_signature(pre[item.start:item.body]) + " ".join(_pragmas(pre[item.body:item.end])))
        elif device_only:
            # The host compile keeps a stub of each device function that is neither inline nor a template
            # (static ones too, unoptimised): its body calls exit(), but its symbol is in the host object.
            emitted = item.body >= 0 and not item.is_template and not re.search(r"\b(inline|__inline__)\b", head)
            stub = _squeeze(pre[item.start:item.body]) if emitted else ""
            parts.append(" ".join([stub, *_pragmas(pre[item.body:item.end])]) if item.body >= 0 else "")
        else:
            parts.append(snippet)
    return hashlib.blake2b("\0".join(_squeeze(p) for p in parts if p).encode(), digest_size=16).hexdigest()


def _host_mentions(masked: str, items: list[devicecode.Item], spaces_of: list[set[str]]
                   ) -> Callable[[str, int, int], bool]:
    """``named(name, start, end)``: whether ``name`` (its last part) occurs in the host's code outside
    ``[start, end)``. The host's code is the text less the device-only functions and the kernels' bodies, so a
    helper that kernels alone call is not named there. A mention there may be a declaration that nvcc merges
    with the device definition (``__host__ __device__ int g(int), f(int);``, a friend, a block-scope or typedef'd
    declaration, a parenthesised name): the definition is then host code, the safe side."""
    chars = list(masked)
    for item, spaces in zip(items, spaces_of, strict=True):
        if item.kind not in _FUNCTION_KINDS:
            continue
        if "global" in spaces and item.body >= 0:
            chars[item.body:item.end] = " " * (item.end - item.body)
        elif "device" in spaces and "host" not in spaces:
            chars[item.start:item.end] = " " * (item.end - item.start)
    host = "".join(chars)

    def named(name: str, start: int, end: int) -> bool:
        short = name.rsplit("::", 1)[-1]
        if not re.fullmatch(r"~?[A-Za-z_]\w*", short):
            return False  # operators: found by their type, which host code names anyway
        pattern = re.compile(rf"(?<![\w~]){re.escape(short)}\b")
        return any(not start <= m.start() < end for m in pattern.finditer(host))
    return named


def _without_markers(pre: str) -> str:
    """``pre`` without its line markers; a line inside a raw string that looks like one is the string's value."""
    masked = devicecode._mask(pre, fill="\0")
    out, pos = [], 0
    for marker in _LINE_MARKER_LINE.finditer(masked):
        out.append(pre[pos:marker.start()])
        pos = marker.end()
    out.append(pre[pos:])
    return "".join(out)


def _qualified_declarator(head: str, name: str) -> bool:
    """Whether the definition ``head`` names its function through a scope (``a::f``, ``S::g``): a declaration
    elsewhere (in the namespace, in the class) may be ``__host__ __device__``, and nvcc merges it in."""
    return bool(name) and re.search(rf"::\s*{re.escape(name.rsplit('::', 1)[-1])}\s*\(", head) is not None


def _squeeze(code: str) -> str:
    """``code`` (preprocessed: no comments left) with each run of spacing outside literals made one space;
    inside a literal, spacing is its value and stays as it is."""
    masked = devicecode._mask(code, fill="\0")
    out, pos = [], 0
    for run in re.finditer(r"\s+", masked):
        out.append(code[pos:run.start()])
        out.append(" ")
        pos = run.end()
    out.append(code[pos:])
    return "".join(out).strip()
