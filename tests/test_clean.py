"""`jitload clean` takes extension names only, stays inside the cache root, never follows a symbolic link and
waits for a build running in what it deletes, and leaves the lock of a build that came meanwhile."""

import os
import shutil
import threading
import time

import pytest
from extensions import lock_held_elsewhere

from jitload.builder import toolchain
from jitload.builder.lock import build_lock
from jitload.ui import cli


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    root = toolchain.cache_root()
    os.makedirs(os.path.join(root, "built"))
    return root


@pytest.mark.parametrize("name", ["..", "/", "a/b", "../other", "."])
def test_clean_refuses_paths(cache, tmp_path, name, capsys):
    outside = tmp_path / "precious"
    outside.mkdir()
    assert cli.main(["clean", name if name != "/" else str(outside)]) == 2
    assert "is not an extension name" in capsys.readouterr().err
    assert outside.is_dir() and os.path.isdir(os.path.join(cache, "built"))


def test_clean_never_follows_a_symlinked_name(cache, tmp_path, capsys):
    target = tmp_path / "project"
    target.mkdir()
    (target / "keep.cu").write_text("// mine\n")
    os.symlink(target, os.path.join(cache, "linked"))
    assert cli.main(["clean", "linked"]) == 1
    assert "symbolic link" in capsys.readouterr().out
    assert (target / "keep.cu").exists()


def test_clean_removes_a_build_and_says_so(cache, capsys):
    assert cli.main(["clean", "built", "missing"]) == 0
    out = capsys.readouterr().out
    assert f"removed {os.path.join(cache, 'built')}" in out and "nothing to clean" in out
    assert not os.path.exists(os.path.join(cache, "built"))


@pytest.mark.parametrize("linked", ["jitload", "version"])
@pytest.mark.parametrize("names", [[], ["built"]])
def test_clean_never_follows_a_symlinked_folder_above_the_builds(tmp_path, monkeypatch, capsys, linked, names):
    # The base's own jitload/ folder (or the version folder under it) is a link to somewhere outside.
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    root = toolchain.cache_root()
    link = os.path.dirname(root) if linked == "jitload" else root
    outside = tmp_path / "elsewhere"
    (outside / os.path.relpath(root, link) / "built").mkdir(parents=True)
    (outside / "keep.txt").write_text("mine\n")
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(outside, link)
    assert cli.main(["clean", *names]) == 1
    out = capsys.readouterr().out
    assert f"{link} is a symbolic link" in out or "it is a symbolic link" in out
    assert "nothing was deleted" in out
    assert (outside / "keep.txt").exists() and os.path.isdir(os.path.join(root, "built"))


@pytest.mark.parametrize("names", [[], ["built"]])
def test_clean_waits_for_a_running_build(cache, capsys, names):
    build_dir = os.path.join(cache, "built")
    held, release = threading.Event(), threading.Event()

    def build():
        with build_lock(build_dir):
            held.set()
            release.wait()

    builder = threading.Thread(target=build)
    builder.start()
    held.wait()
    cleaner = threading.Thread(target=lambda: results.append(cli.main(["clean", *names])))
    results = []
    cleaner.start()
    said = ""
    for _ in range(600):  # a bound on the wait for the announcement, not a timing assertion
        said += capsys.readouterr().err
        if "waiting for the build" in said:
            break
        time.sleep(0.05)
    assert f"waiting for the build in {build_dir}" in said
    assert os.path.isdir(build_dir)  # not deleted under the running build
    release.set()
    builder.join()
    cleaner.join()
    assert results == [0] and not os.path.exists(build_dir)


def test_clean_leaves_the_lock_of_a_build_that_came_while_it_deleted(cache, monkeypatch):
    build_dir = os.path.join(cache, "built")
    holding, cleaned, seen = threading.Event(), threading.Event(), []

    def build():
        try:
            with build_lock(build_dir, poll_s=0.01):
                holding.set()
                cleaned.wait(30)
                seen.append(lock_held_elsewhere(build_dir))
        except Exception as err:
            seen.append(err)
            holding.set()

    builder = threading.Thread(target=build)
    rmtree = shutil.rmtree

    def a_build_arrives(path, *args, **kwargs):
        builder.start()
        holding.wait(5)  # a bound on the wait for the build to lock its folder, not a timing assertion
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(cli.shutil, "rmtree", a_build_arrives)
    assert cli.main(["clean", "built"]) == 0
    cleaned.set()
    builder.join()
    # The build locked the folder made again and still holds that lock after clean let go of its own.
    assert seen == [True]
    assert os.path.isdir(build_dir) and not os.listdir(build_dir)  # and, done, deleted its lock file itself
    assert not [e for e in os.listdir(cache) if e.startswith(".")]  # nothing left moved aside
