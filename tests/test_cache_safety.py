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
from jitload.builder import build, manifest

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


@pytest.mark.parametrize("length", [build.MAX_NAME_LENGTH + 1, 245, 300])
def test_a_name_too_long_for_its_library_file_is_refused_before_the_build(tmp_path, length):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    bdir = tmp_path / "build"
    with pytest.raises(ValueError, match=f"is {length} characters long; the limit is {build.MAX_NAME_LENGTH}"):
        jitload.load("n" * length, sources, build_directory=str(bdir))
    assert not bdir.exists()


def test_the_longest_name_builds(tmp_path):
    # The limit is the real one: the module of a name at the limit, NAME_<tag>, is the 200 characters of a
    # module name that CPython reads to find its init function.
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    ext = jitload.load("n" * build.MAX_NAME_LENGTH, sources, build_directory=str(tmp_path / "build"))
    assert ext.value() == 11 and len(ext.module.__name__) == 200


def test_a_dollar_and_a_colon_in_source_paths_build(tmp_path):
    folder = tmp_path / "src$HOME:x"
    binding, kernel = make_extension(folder, binding=PYBIND_BINDING)
    renamed = str(folder / "ker$nel:1.cpp")
    os.rename(kernel, renamed)
    ext = jitload.load("dollar_paths", [binding, renamed], build_directory=str(tmp_path / "build"))
    assert ext.value() == 11
    assert renamed in ext.files() and str(folder / "kernel.h") in ext.files()
    ext.reload()
    assert ext.info.status == "unchanged"


def test_a_line_break_in_a_source_path_is_refused_before_the_build(tmp_path):
    binding, kernel = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    renamed = str(tmp_path / "src" / "ker\nnel.cpp")
    os.rename(kernel, renamed)
    with pytest.raises(ValueError, match="holds a line break"):
        jitload.load("newline_path", [binding, renamed], build_directory=str(tmp_path / "build"))
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder"])
def test_a_source_that_is_no_regular_file_is_refused_by_what_it_is(tmp_path, kind):
    binding, _ = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    if kind == "fifo":
        odd = str(tmp_path / "pipe.cpp")
        os.mkfifo(odd)
    elif kind == "folder":
        odd = str(tmp_path / "folder.cpp")
        os.mkdir(odd)
    else:
        odd = "/dev/zero"
    what = {"fifo": "a FIFO", "dev_zero": "a character device", "folder": "a folder"}[kind]
    with pytest.raises(ValueError, match=f"is {what}.*not a regular file"):
        jitload.load("odd_source", [binding, odd], build_directory=str(tmp_path / "build"))
    assert not (tmp_path / "build").exists()
