"""Content fingerprints: a save during a build is never taken for done, and identical bytes are no change."""

import os
import textwrap

from extensions import HEADER, KERNEL, PYBIND_BINDING, make_extension, write

import jitload
from jitload.builder import build, fingerprint


def test_record_sees_bytes_not_timestamps(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("a")
    record = fingerprint.take([str(path)])
    os.utime(path, ns=(1, 1))
    assert fingerprint.changed(record) == []
    assert record[str(path)][0] == 1  # the stat is refreshed, so the next check is a stat again
    path.write_text("b")
    assert fingerprint.changed(record) == [str(path)]
    path.unlink()
    assert fingerprint.changed(record) == [str(path)]


def save_while_compiling(monkeypatch, path: str, text: str, writer=write) -> list:
    """Make the next build's ninja run save ``text`` to ``path`` (with ``writer``) once the compilers are done
    with it, as a user saving before the build ends would; the returned list is non-empty once that happened."""
    real = build.run_ninja
    saved = []

    def run_ninja(*args, **kwargs):
        result = real(*args, **kwargs)
        if not saved and kwargs.get("ninja_file", build.NINJA_FILE) == build.NINJA_FILE:
            writer(path, text)
            saved.append(True)
            monkeypatch.setattr(build, "run_ninja", real)
        return result

    monkeypatch.setattr(build, "run_ninja", run_ninja)
    return saved


def test_a_save_during_the_build_is_rebuilt_next_time(tmp_path, monkeypatch):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING, base=10)
    saved = save_while_compiling(monkeypatch, sources[1], KERNEL.format(base=20))  # compiled: value 11
    ext = jitload.load("save_during", sources, build_directory=str(tmp_path / "build"))
    assert saved and ext.value() == 11
    ext.reload()
    assert ext.info.status == "built" and ext.value() == 21  # never "unchanged" with the old code
    ext.reload()
    assert ext.info.status == "unchanged"


def test_a_header_saved_during_the_build_gets_no_host_view(tmp_path, monkeypatch):
    # The host view recorded for a file is what later edits are compared with to allow a kernel swap; it must
    # describe the text that was compiled, never a text saved while the compilers ran.
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING, base=10, offset=1)
    header = str(tmp_path / "src" / "kernel.h")
    saved = save_while_compiling(monkeypatch, header, HEADER.format(offset=5))
    ext = jitload.load("save_header_during", sources, build_directory=str(tmp_path / "build"))
    assert saved and ext.value() == 11
    assert ext._state.hosts[header] is None
    ext.reload()
    assert ext.info.status == "built" and ext.value() == 15
    assert ext._state.hosts[header] is not None


def keep_times(path: str, text: str) -> None:
    """Replace ``path``'s bytes and put its times back, as ``cp -p``, ``rsync -a`` or ``tar`` do."""
    st = os.stat(path)
    with open(path, "w") as f:
        f.write(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_copy_that_keeps_mtime_and_size_is_a_change(tmp_path):
    path = str(tmp_path / "k.h")
    with open(path, "w") as f:
        f.write("#define OFFSET 1\n")
    record = fingerprint.take([path])
    keep_times(path, "#define OFFSET 5\n")  # the same size and mtime: only the ctime moved
    assert fingerprint.changed(record) == [path]


def test_a_header_replaced_during_the_first_build_keeping_its_mtime_is_rebuilt(tmp_path, monkeypatch):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING, base=10, offset=1)
    header = str(tmp_path / "src" / "kernel.h")
    # compiled with OFFSET 1, then replaced keeping its times
    replaced = save_while_compiling(monkeypatch, header, textwrap.dedent(HEADER.format(offset=5)).lstrip(),
                                    writer=keep_times)
    ext = jitload.load("copied_header", sources, build_directory=str(tmp_path / "build"))
    assert replaced and ext.value() == 11
    ext.reload()
    assert ext.info.status == "built" and ext.value() == 15  # never "unchanged" with the old code
    ext.reload()
    assert ext.info.status == "unchanged"
