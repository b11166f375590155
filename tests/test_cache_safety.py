"""The build cache survives any kill and refuses bad input cleanly: each fault is planted, then the next load.

A library cut short (a link killed half-way) is never loaded; a header replaced during a build by a copy that
keeps its mtime is rebuilt; names and source paths that the build could not handle are refused before it.
"""

import os
import signal
import subprocess
import textwrap

import pytest
from extensions import PYBIND_BINDING, PYTHON, make_extension

import jitload
from jitload import build, manifest

LOAD = ("import jitload; e = jitload.load('{name}', {sources!r}, build_directory={bdir!r});"
        "print(e.info.status, e.value(), flush=True)")


def load_in_new_process(name: str, sources: list[str], bdir: str, env: dict | None = None) -> list[str]:
    """``[status, value]`` of a load in a fresh process (this one may have the library mapped already)."""
    done = subprocess.run([PYTHON, "-c", LOAD.format(name=name, sources=sources, bdir=bdir)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def library_of(bdir: str, name: str) -> str:
    return os.path.join(bdir, f"{name}_{manifest.read(bdir).tag}.so")


# A compiler that, asked to link, links and then leaves the output cut short and SIGKILLs the loading process,
# as the OOM killer would in the middle of writing the library.
DYING_LINKER = """\
    #!/bin/sh
    case " $* " in
      *" -shared "*) ;;
      *) exec {cxx} "$@" ;;
    esac
    {cxx} "$@" || exit 1
    if [ -n "$KILL_IN_LINK" ]; then
      for out; do :; done  # the last argument: torch's link rule ends with -o $out
      truncate -s 1000 "$out"
      kill -9 "$KILL_IN_LINK"
      sleep 60
    fi
"""


def test_a_link_killed_half_way_leaves_nothing_a_later_load_trusts(tmp_path, monkeypatch):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    bdir = str(tmp_path / "build")
    wrapper = tmp_path / "c++"
    wrapper.write_text(textwrap.dedent(DYING_LINKER).format(cxx=os.environ.get("CXX") or "c++"))
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))  # the same compiler for both loads: the same build key and tag
    script = ("import os, jitload; os.environ['KILL_IN_LINK'] = str(os.getpid()); "
              f"jitload.load('killed_link', {sources!r}, build_directory={bdir!r})")
    killed = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not [f for f in os.listdir(bdir) if f.endswith(".so")]  # the cut-short file is under no library name
    assert load_in_new_process("killed_link", sources, bdir) == ["built", "11"]


@pytest.mark.parametrize("size", [0, 1000, "half"])
def test_a_library_cut_short_is_linked_again(tmp_path, size):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    bdir = str(tmp_path / "build")
    name = f"cut_short_{size}"
    assert load_in_new_process(name, sources, bdir) == ["built", "11"]
    library = library_of(bdir, name)
    whole = os.path.getsize(library)
    os.truncate(library, whole // 2 if size == "half" else size)
    assert load_in_new_process(name, sources, bdir) == ["built", "11"]  # never "loaded" from the cut-short file
    assert os.path.getsize(library) == whole
    assert load_in_new_process(name, sources, bdir) == ["loaded", "11"]


def test_a_linked_library_is_closed_to_others_and_no_partial_file_stays(tmp_path):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    bdir = str(tmp_path / "build")
    stale = os.path.join(str(tmp_path / "build"), f"{build.LINK_PREFIX}0123456789ab-{2 ** 22 + 7}.tmp")
    os.makedirs(bdir, mode=0o700)
    with open(stale, "wb") as f:  # what a link killed in a process long gone left
        f.write(b"\x7fELF")
    old = os.umask(0)
    try:
        ext = jitload.load("closed_lib", sources, build_directory=bdir)
    finally:
        os.umask(old)
    assert ext.value() == 11
    assert not os.stat(ext.module.__file__).st_mode & 0o022
    assert not [f for f in os.listdir(bdir) if f.startswith(build.LINK_PREFIX)]
