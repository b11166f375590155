"""The host-JIT oracle (benchmarks/host_oracle.py) on a sample: after a host edit, every call must see the same
from the interpreter's code as from the full build that replaces it (value, exception, printed output, warnings).

CPU (cppyy installed): four programs of tests/host_corpus, one edit each, chosen so that every family of the
corpus is called at least once: the Python boundary's types, keywords, exceptions, printing and tensor identity
(boundary); compiler flags and floating point under -O2 (flags_o2); NDEBUG defined by the source (ndebug); an op
library called through torch.ops (op_library). Each program is one process of its own: its base build, then the
edit, which the interpreter must take. Two full builds a program, about 4 minutes on 2 cores.
The recorder's own checks need no build. The whole corpus is the script's.
"""

import ctypes
import importlib.util
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_oracle():
    spec = importlib.util.spec_from_file_location("host_oracle", os.path.join(ROOT, "benchmarks", "host_oracle.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["host_oracle"] = module
    spec.loader.exec_module(module)
    return module


oracle = _load_oracle()
needs_cppyy = pytest.mark.skipif(not oracle.cppyy_available(),
                                 reason="cppyy is not installed (the host JIT runs host edits in its interpreter)")

SAMPLE = [("boundary", "keywords"), ("flags_o2", "v2"), ("ndebug", "v2"), ("op_library", "v2")]
# two_sources' shared header is read under each source's own macros: the unit refuses it, a refusal that
# tests/test_hostjit.py shows without a build, so a build here would compare nothing.
REFUSED = {"two sources", "shared header macro"}


def test_the_sample_covers_every_family_of_the_corpus():
    every = oracle.programs()
    covered = {f for name, _ in SAMPLE for f in every[name].families}
    assert covered | REFUSED == {f for p in every.values() for f in p.families}
    for name, edit in SAMPLE:
        assert edit in every[name].edits


def _explain(outcomes):
    lines = []
    for o in outcomes:
        lines.append(f"{o['program']} / {o['edit']}: {o['status']} {o['reason'][:300]}")
        lines += [f"  {call}:\n    interpreter: {jit}\n    full build:  {full}" for call, jit, full in o["differences"]]
    return "\n".join(lines)


@needs_cppyy
@pytest.mark.parametrize(("program", "edit"), SAMPLE, ids=[f"{p}-{e}" for p, e in SAMPLE])
def test_a_host_edit_run_by_the_interpreter_behaves_as_its_full_build(tmp_path, program, edit):
    outcomes = oracle.run_program(program, [edit], str(tmp_path), progress=lambda _: None)
    assert len(outcomes) == 1
    # The interpreter must take each of these edits (else nothing is compared), and agree on every call.
    assert outcomes[0]["status"] == "jit", _explain(outcomes)
    assert not outcomes[0]["differences"], _explain(outcomes)


def test_records_keep_sign_bits_nan_positions_and_types():
    neg, pos = torch.tensor([-0.0, float("nan"), 1.0]), torch.tensor([0.0, float("nan"), 1.0])
    assert oracle.record_value(neg) != oracle.record_value(pos)  # equal under ==, apart in bits
    assert oracle.record_value(neg) == oracle.record_value(neg.clone())
    assert oracle.record_value(torch.ones(2)) != oracle.record_value(torch.ones(2, dtype=torch.float64))
    assert oracle.record_value(1) != oracle.record_value(True)
    assert oracle.record_value((1,)) != oracle.record_value([1])
    assert oracle.record_value(torch.ones(2, 2).t()) != oracle.record_value(torch.ones(2, 2))  # strides


def test_printed_output_is_captured_at_the_file_descriptor():
    libc = ctypes.CDLL(None)
    out = {}
    with oracle.captured_fds(out):
        libc.printf(b"from C, unflushed")
        os.write(2, b"raw fd 2\n")
    assert out == {"fd1": "from C, unflushed", "fd2": "raw fd 2\n"}


def test_normalisation_leaves_the_users_text_alone():
    text = ("<object at 0x7f3a2b1c9d40> in host_oracle_boundary_v3 and jl_host_oracle_boundary_2\n"
            "[W1207 06:21:00.123456789 boundary.cpp:61] Warning: careful v2\n"
            "Exception raised from f at /tmp/a.cpp:3 (most recent call first):\nframe #0: c10::Error 0x12 + 0x1")
    assert oracle.normalise(text) == ("<object at 0xADDR> in <module> and <module>\n"
                                      "[W<time> boundary.cpp:61] Warning: careful v2\n"
                                      "Exception raised from f at /tmp/a.cpp:3 (most recent call first):")
    assert oracle.normalise("v2 got 0x10 and 12345") == "v2 got 0x10 and 12345"
