"""The kernel-swap oracle (benchmarks/swap_oracle.py) on a sample: every edit decided "swap" must compile to the
loaded build's host code and to the full file's PTX, kernel by kernel.

CPU with nvcc: torch-free bases (a few seconds a compile), edits of which some must be swapped and some
refused, so that the test can fail either way. The whole sweep, torch sources included, is the script's.
"""

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_oracle():
    spec = importlib.util.spec_from_file_location("swap_oracle", os.path.join(ROOT, "benchmarks", "swap_oracle.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["swap_oracle"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


oracle = _load_oracle()
needs_nvcc = pytest.mark.skipif(not oracle.nvcc_available(),
                                reason="nvcc not found (no CUDA toolkit): the oracle compiles every swapped edit")

# (base, edited file, kind): kernel-body, header, comment, splice and CRLF edits that a swap should take, and
# host-visible ones (a device variable, a helper made __host__ __device__, a host statement) that it must refuse.
SAMPLE = [
    ("tf_templ", "tf_templ.cu", "operator"),
    ("tf_templ", "tf_templ.cu", "blank_line"),  # no __LINE__ in its host code: the host object stays equal
    ("tf_templ", "tf_templ.cu", "splice_body"),
    ("tf_templ", "tf_ops.cuh", "constant"),
    ("tf_templ", "tf_templ.cu", "line_ends"),
    ("tf_templ", "tf_templ.cu", "device_variable"),
    ("tf_templ", "tf_ops.cuh", "space_macro"),
    ("tf_templ", "tf_templ.cu", "host_statement"),
    ("tf_folder", "tf_folder.cu", "operator"),  # its own header first, CUDA's and libstdc++'s after it
    ("tf_folder", "tf_ops.cuh", "constant"),
    ("tf_folder", "tf_folder.cu", "device_variable"),
    ("tf_folder", "tf_folder.cu", "splice_host"),
]


def _edits(base, chosen):
    by_key = {(e.file, e.kind): e for e in oracle.generate(base, 1)}
    return [by_key[(file, kind)] for name, file, kind in chosen if name == base.name]


def _run(tmp_path, chosen):
    outcomes = []
    with oracle.one_compiler_at_a_time():
        for name in dict.fromkeys(name for name, _, _ in chosen):
            base = oracle.bases()[name]
            prepared = oracle.prepare(base, str(tmp_path))
            outcomes += [oracle.check(prepared, edit) for edit in _edits(base, chosen)]
    return outcomes


def _explain(outcomes):
    return "\n".join(f"{o.base}/{o.file}/{o.kind}: {o.decision} host={o.host} ptx={o.ptx} {o.reason}\n{o.failure}\n"
                     f"{o.diff if o.failure else ''}" for o in outcomes)


def _assert_sound(outcomes, expected):
    assert len(outcomes) == expected
    failures = [o for o in outcomes if o.failure]
    assert not failures, _explain(failures)
    swapped = [o for o in outcomes if o.decision in ("swap", "keep") and o.ptx == "equal"]
    assert swapped, "no edit was swapped and checked:\n" + _explain(outcomes)
    assert any(o.decision == "refused" for o in outcomes), "no edit was refused:\n" + _explain(outcomes)
    return swapped


@needs_nvcc
def test_swapped_edits_of_torch_free_sources_compile_to_the_loaded_host_code_and_the_units_ptx(tmp_path):
    outcomes = _run(tmp_path, SAMPLE)
    swapped = _assert_sound(outcomes, len(SAMPLE))
    # Without __LINE__ in the host code, a swap whose lines moved must still leave the object equal.
    assert all(o.host == "equal" for o in swapped), _explain(swapped)


def test_ptx_comparison_ignores_comments_line_info_and_label_numbers_but_not_code():
    full = """
.version 8.8
.target sm_90
.file 1 "/tmp/a.cu"
// a comment
.visible .entry _Z1kPf(
    .param .u64 _Z1kPf_param_0
)
{
    .loc 1 3 1
    @%p1 bra $L__BB2_2;
    st.global.f32 [%rd1], %f1;
$L__BB2_2:
    ret;
}
"""
    moved = full.replace("$L__BB2_", "$L__BB0_").replace(".loc 1 3 1", ".loc 1 9 1").replace("// a comment", "")
    assert oracle.compare_ptx(full, moved, None) == ([], [])
    other = full.replace("st.global.f32", "st.global.f64")
    differences, _ = oracle.compare_ptx(full, other, None)
    assert differences and "_Z1kPf: PTX differs" in differences[0]
    missing, _ = oracle.compare_ptx(full, ".version 8.8\n", None)
    assert missing and "not in the unit" in missing[0]
    unchanged, notes = oracle.compare_ptx(full, ".version 8.8\n", full)
    assert unchanged == [] and "unchanged since the base" in notes[0]


# Edits the oracle once found wrong (a swap where the compiler disagreed): each must now be refused or be a
# swap that the compiler agrees with.
FOUND_WRONG = [
    pytest.param("tf_basic", "tf_basic.cu", "string_literal",
                 id="a printf format edited in a kernel is code, not a comment"),
    pytest.param("tf_basic", "tf_basic.cu", "new_helper",
                 id="a new non-inline __device__ helper adds a host symbol (nvcc's trap stub)"),
    pytest.param("tf_templ", "tf_templ.cu", "macro_kernel",
                 id="a kernel spelled through a macro for __global__ must be in the unit's image"),
]


@needs_nvcc
@pytest.mark.parametrize(("base", "file", "kind"), FOUND_WRONG)
def test_edits_the_oracle_found_wrong_are_now_sound(tmp_path, base, file, kind):
    outcomes = _run(tmp_path, [(base, file, kind)])
    assert len(outcomes) == 1
    assert not outcomes[0].failure, _explain(outcomes)


@needs_nvcc
@pytest.mark.slow
def test_a_swapped_edit_of_the_seed_file_compiles_to_the_loaded_host_code(tmp_path):
    # torch/extension.h: about 80 s a compile on 2 cores, the base build and the swapped edit's full compile
    chosen = [("seed_add", "seed_add.cu", "operator"), ("seed_add", "seed_add.cu", "host_statement")]
    _assert_sound(_run(tmp_path, chosen), len(chosen))
