"""The compiler probe: a C++ compiler whose extensions crash on their first error message is named, with a fix.

The crashing compiler is made here the way the real one fails: g++ whose shared libraries carry their own
``std::ostream::operator<<(long)``, one that crashes (hidden, so the library's own calls bind to it).
"""

import os
import shutil
import subprocess
import warnings

import pytest

import jitload
from jitload.builder import compiler_probe
from jitload.ui import doctor

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/g++"), reason="needs /usr/bin/g++")

CRASH = r"""
#include <signal.h>
__attribute__((visibility("hidden"))) void* _ZNSolsEl(void* self, long value) {
    (void)value;
    raise(SIGSEGV);
    return self;
}
"""


@pytest.fixture(scope="module")
def crashing_cxx(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crashing_cxx")
    (folder / "crash.c").write_text(CRASH)
    subprocess.run([shutil.which("gcc") or "/usr/bin/gcc", "-fPIC", "-c", str(folder / "crash.c"), "-o",
                    str(folder / "crash.o")], check=True)
    wrapper = folder / "g++"
    wrapper.write_text("#!/bin/sh\n"
                       f'case " $* " in *" -shared "*) exec /usr/bin/g++ "$@" {folder / "crash.o"} ;;\n'
                       '*) exec /usr/bin/g++ "$@" ;; esac\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_probe_finds_the_crash_and_doctor_names_a_working_compiler(crashing_cxx, monkeypatch):
    outcome = doctor.probe_compiler(crashing_cxx)
    assert not outcome.ok and "crashed the process (signal 11)" in outcome.detail
    assert compiler_probe.known_crash(crashing_cxx) == outcome  # recorded: the next question costs no build
    assert doctor.probe_compiler("/usr/bin/g++").ok
    monkeypatch.setenv("CXX", crashing_cxx)
    text, usable = doctor.report()
    assert not usable
    assert f"ERROR: CXX={crashing_cxx}: an extension it built crashed" in text
    assert "export CXX=/usr/bin/g++ CC=/usr/bin/gcc" in text


def test_a_build_with_a_known_crashing_compiler_says_so_first(crashing_cxx, tmp_path, monkeypatch):
    doctor.probe_compiler(crashing_cxx)
    (tmp_path / "ok.cpp").write_text("#include <pybind11/pybind11.h>\n"
                                     "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"one\", [] { return 1; }); }\n")
    monkeypatch.setenv("CXX", crashing_cxx)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ext = jitload.load("probe_warned", [str(tmp_path / "ok.cpp")], build_directory=str(tmp_path / "build"))
    assert ext.one() == 1
    assert any("crashed the process" in str(w.message) and "jitload doctor" in str(w.message) for w in caught)
