"""A build cache that another user can reach is refused, never used: symlinks, foreign folders and libraries.

Each attack leaves the state another user would leave (files owned by ``nobody``, made here with chown); the
tests need root for that, as CI has.
"""

import os
import pwd
import stat
import subprocess
import sys

import pytest
from extensions import PYBIND_BINDING, make_extension

import jitload
from jitload.builder import build, toolchain, trust

try:
    NOBODY = pwd.getpwnam("nobody")
except KeyError:
    NOBODY = None
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or NOBODY is None,
                                reason="needs root to leave files owned by another user (nobody)")


def _as_nobody(path):
    os.lchown(path, NOBODY.pw_uid, NOBODY.pw_gid)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    return toolchain.cache_root()


@pytest.fixture
def sources(tmp_path):
    return make_extension(tmp_path / "src", binding=PYBIND_BINDING)


def test_a_symlinked_build_folder_is_refused(cache, sources, tmp_path):
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    (project / "train.py").write_text("# mine\n")
    os.makedirs(cache)
    os.symlink(project, os.path.join(cache, "victim"))
    _as_nobody(os.path.join(cache, "victim"))
    with pytest.raises(trust.UnsafePathError, match="symbolic link") as err:
        jitload.load("victim", sources)
    assert "TORCH_EXTENSIONS_DIR" in str(err.value)
    assert sorted(os.listdir(project)) == ["train.py"] and (project.stat().st_mode & 0o777) == 0o755


def test_a_planted_lock_link_is_refused_and_its_target_untouched(cache, sources, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    build = os.path.join(cache, "locked")
    os.makedirs(build, mode=0o700)
    os.symlink(victim, os.path.join(build, "jitload.lock"))
    _as_nobody(os.path.join(build, "jitload.lock"))
    with pytest.raises(trust.UnsafePathError, match="another user owns it"):
        jitload.load("locked", sources)
    os.lchown(os.path.join(build, "jitload.lock"), 0, 0)  # even a link of this user's is never followed
    with pytest.raises(RuntimeError, match="symbolic link"):
        jitload.load("locked", sources)
    assert victim.read_text() == "precious\n"


def test_a_cache_base_of_another_user_is_refused(tmp_path, monkeypatch, sources):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o1777)
    _as_nobody(shared)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(shared))
    with pytest.raises(trust.UnsafePathError, match=r"another user owns it \(owner nobody"):
        jitload.load("shared_ext", sources)


def test_a_library_replaced_by_another_user_is_not_loaded(cache, sources):
    ext = jitload.load("swapped_so", sources)
    assert ext.value() == 11
    library = ext.module.__file__
    _as_nobody(library)  # another user left their own library under the expected name
    code = f"import jitload; jitload.load('swapped_so', {sources!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, TORCH_EXTENSIONS_DIR=os.environ["TORCH_EXTENSIONS_DIR"]))
    assert done.returncode != 0
    assert "UnsafePathError" in done.stderr and "another user owns it" in done.stderr


def test_a_build_folder_others_can_write_is_refused_as_it_is(cache, sources):
    ext = jitload.load("opened_build", sources)
    folder = ext.build_directory
    os.chmod(folder, 0o777)  # others could replace the library the next process imports
    code = f"import jitload; jitload.load('opened_build', {sources!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and "every user can write it" in done.stderr
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o777  # refused, not changed


@pytest.mark.parametrize("mode", [0o1777, 0o2775])
def test_a_shared_cache_base_is_refused_unchanged(tmp_path, monkeypatch, sources, mode):
    # This user's own folder, shared on purpose: a sticky scratch (1777) or a group folder (2775). Closing it
    # would lock its other users out, so it is refused as it is.
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, -1, NOBODY.pw_gid)  # a group this user does not own alone
    os.chmod(shared, mode)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(shared))
    with pytest.raises(trust.UnsafePathError, match="can write it") as err:
        jitload.load("shared_base", sources)
    assert "TORCH_EXTENSIONS_DIR" in str(err.value) and "chmod go-w" in str(err.value)
    assert stat.S_IMODE(os.stat(shared).st_mode) == mode and os.listdir(shared) == []


@pytest.mark.parametrize("foreign", [False, True])
def test_a_shared_ccache_folder_is_refused_unchanged_naming_its_setting(tmp_path, monkeypatch, foreign):
    shared = tmp_path / "ccache"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    if foreign:
        _as_nobody(shared)
    monkeypatch.setenv("JITLOAD_CCACHE_DIR", str(shared))
    with pytest.raises(trust.UnsafePathError, match="another user owns it" if foreign else "every user") as err:
        build.ccache_dir()
    assert "JITLOAD_CCACHE_DIR" in str(err.value) and "TORCH_EXTENSIONS_DIR" not in str(err.value)
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777


def test_a_folder_of_this_users_own_group_may_be_group_writable(tmp_path, monkeypatch, sources):
    # A umask of 002 with per-user groups makes torch's own cache base 775: nobody else is in that group.
    base = tmp_path / "base"
    base.mkdir()
    os.chown(base, -1, os.getegid())
    os.chmod(base, 0o775)
    if not trust._private_group(os.getegid()):
        pytest.skip("this user's primary group has other members")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(base))
    assert trust.private_dir(str(base / "jitload")) and stat.S_IMODE(os.stat(base).st_mode) == 0o775


def test_folders_are_created_private(cache, sources):
    ext = jitload.load("private_ext", sources)
    for path in (toolchain.cache_base(), cache, ext.build_directory):
        assert (os.stat(path).st_mode & 0o077) == 0, path
