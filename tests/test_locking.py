"""Concurrent and killed builds: one build shared by two processes; a SIGKILLed build never blocks; a relink
holds the lock; a folder removed while a build waits for it is made again."""

import fcntl
import os
import shutil
import signal
import stat
import subprocess
import threading
import time

import pytest
from extensions import PYBIND_BINDING, PYTHON, lock_held_elsewhere, make_extension

import jitload
from jitload.builder import build, lock, manifest
from jitload.builder.errors import BuildError
from jitload.builder.extension import BuildInfo, Extension
from jitload.builder.fullbuild import BuildSpec
from jitload.builder.lock import LOCK_NAME, build_lock

LOAD = ("import jitload; e = jitload.load('{name}', {sources!r}, build_directory={bdir!r});"
        "print(e.info.status, e.info.commands, e.value(), flush=True)")


def test_two_processes_building_at_once_share_one_build(tmp_path):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    bdir = str(tmp_path / "build")
    script = LOAD.format(name="shared_ext", sources=sources, bdir=bdir)
    procs = [subprocess.Popen([PYTHON, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(out.split())
    assert sorted(r[0] for r in results) == ["built", "loaded"]
    assert sorted(int(r[1]) for r in results)[0] == 0  # the second process compiled nothing
    assert all(r[2] == "11" for r in results)
    libs = [f for f in os.listdir(bdir) if f.startswith("shared_ext_") and f.endswith(".so")]
    assert len(libs) == 1


def test_sigkilled_build_does_not_block_the_next_load(tmp_path):
    # A torch-heavy binding: its compile lasts long enough (~20 s) to be killed in the middle.
    sources = make_extension(tmp_path / "src")
    bdir = str(tmp_path / "build")
    script = LOAD.format(name="killed_ext", sources=sources, bdir=bdir)
    proc = subprocess.Popen([PYTHON, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    ninja_file = os.path.join(bdir, "build.ninja")
    deadline = time.monotonic() + 60
    while not os.path.exists(ninja_file) and time.monotonic() < deadline:
        time.sleep(0.05)  # written under the lock, just before ninja starts compiling
    assert os.path.exists(ninja_file), "the build never started"
    time.sleep(2.0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not [f for f in os.listdir(bdir) if f.endswith(".so")], "the build finished before it was killed"
    # The killed build's lock file is still there, and free at once: nothing to wait for.
    fd = os.open(os.path.join(bdir, LOCK_NAME), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    ext = jitload.load("killed_ext", sources, build_directory=bdir)
    assert ext.value() == 11
    assert ext.info.status == "built"
    assert not os.path.exists(os.path.join(bdir, LOCK_NAME))  # a finished build leaves no lock file


def test_lock_waits_for_a_live_holder(tmp_path):
    released = tmp_path / "released"
    holder = subprocess.Popen(
        [PYTHON, "-c", "from jitload.builder.lock import build_lock\nimport time\n"
                       f"with build_lock({str(tmp_path)!r}):\n"
                       f"    print('held', flush=True); time.sleep(1.5); open({str(released)!r}, 'w').close()"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with build_lock(str(tmp_path), announce_after_s=0.2):
        # the holder's last act under the lock is done: this waited for it instead of building alongside it
        assert released.exists()
    holder.wait()


def test_lock_file_removed_and_lock_still_exclusive(tmp_path):
    with build_lock(str(tmp_path)):
        assert os.path.exists(tmp_path / LOCK_NAME)
        fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                raise AssertionError("a second holder got the lock")
            except BlockingIOError:
                pass
        finally:
            os.close(fd)
    assert not os.path.exists(tmp_path / LOCK_NAME)


def _relinking_handle(directory, tag):
    spec = BuildSpec(name="relinked", sources=(), build_directory=str(directory))
    state = manifest.State(key="k", tag=tag)
    manifest.write(str(directory), state)
    return Extension(spec), state


def test_relinking_a_build_holds_its_folders_lock(tmp_path, monkeypatch):
    handle, state = _relinking_handle(tmp_path, "0123456789ab")
    held = []

    def link_library(directory, name, tag, **kwargs):
        held.append(lock_held_elsewhere(directory))
        return build.NinjaRun(0, "", 1, 0.0)

    monkeypatch.setattr(build, "link_library", link_library)
    relinked, library = handle._relink(state, BuildInfo("loaded", 0.0))
    assert held == [True]
    assert relinked.tag != state.tag and library.endswith(f"relinked_{relinked.tag}.so")
    assert not os.path.exists(tmp_path / LOCK_NAME)  # released


def test_relinking_objects_another_process_rebuilt_is_refused(tmp_path, monkeypatch):
    handle, state = _relinking_handle(tmp_path, "0123456789ab")
    manifest.write(str(tmp_path), manifest.State(key="other", tag="ba9876543210"))
    monkeypatch.setattr(build, "link_library", lambda *a, **k: pytest.fail("linked objects it did not build"))
    with pytest.raises(BuildError, match="rebuilt by another process"):
        handle._relink(state, BuildInfo("loaded", 0.0))


class _Said:
    """Stands in for the lock's logger: what it said, and an event set at its wait's announcement."""

    def __init__(self):
        self.lines, self.waiting = [], threading.Event()

    def info(self, message, *args):
        self.lines.append(message % args)
        if "waiting for the build" in self.lines[-1]:
            self.waiting.set()


def test_a_build_waiting_for_a_folder_that_is_removed_makes_it_again(tmp_path, monkeypatch):
    folder = tmp_path / "build"
    folder.mkdir(mode=0o700)
    (folder / "stale.so").write_text("")
    said = _Said()
    monkeypatch.setattr(lock, "log", said)
    seen = []

    def build():
        try:
            with build_lock(str(folder), poll_s=0.01, announce_after_s=0.0):
                seen.append((sorted(os.listdir(folder)), stat.S_IMODE(os.stat(folder).st_mode)))
        except Exception as err:
            seen.append(err)

    builder = threading.Thread(target=build)
    with build_lock(str(folder)):  # what `jitload clean` does under the lock
        builder.start()
        assert said.waiting.wait(30)
        shutil.rmtree(folder)
    builder.join()
    assert seen == [([LOCK_NAME], 0o700)]  # made again, empty and private, and locked
    assert any("was removed while this process waited" in line for line in said.lines)
