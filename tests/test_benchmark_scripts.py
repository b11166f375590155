"""The scripts under benchmarks/ that a maintainer re-runs: variants.py (a kernel's launch knobs swept) and
fit_gelu_erfc.py (the generator of gelu_fast.cuh's constants). Their numbers need a GPU or scipy; what they
build and produce is checked here."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from jitload import kernels
from jitload.builder import toolchain
from jitload.harness import objdump

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = os.path.join(ROOT, "benchmarks", "variants.py")


def _variants():
    spec = importlib.util.spec_from_file_location("benchmarks_variants", VARIANTS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_variants_plans_one_build_per_combination(capsys):
    argv = ["bias_gelu", "-D", "BIAS_GELU_BLOCK=128,256", "-D", "BIAS_GELU_ROWS=1,2", "--dry-run"]
    assert _variants().main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"BIAS_GELU_BLOCK={b} BIAS_GELU_ROWS={r}: build folder bias_gelu_block{b}_rows{r}, "
                     f"nvcc -DBIAS_GELU_BLOCK={b} -DBIAS_GELU_ROWS={r}" for b in (128, 256) for r in (1, 2)]


def test_variants_offers_the_knobs_the_source_reads():
    variants = _variants()
    assert variants.knob_names(kernels.get("bias_gelu")) == {"BIAS_GELU_COLS", "BIAS_GELU_ROWS", "BIAS_GELU_BLOCK"}
    with pytest.raises(SystemExit, match="bias_gelu has no knob BIAS_GELU_THREADS; its knobs: BIAS_GELU_BLOCK"):
        variants.main(["bias_gelu", "-D", "BIAS_GELU_THREADS=128", "--dry-run"])
    with pytest.raises(SystemExit):  # not NAME=values
        variants.main(["bias_gelu", "-D", "BIAS_GELU_BLOCK", "--dry-run"])


@pytest.mark.slow
@pytest.mark.skipif(toolchain.find_cuda_home() is None, reason="no CUDA toolkit: the knobs are in the CUDA source")
def test_a_knob_reaches_the_kernel():
    # Built in its own process (as a user runs it): the variant registers the op again, which this process's
    # other tests must not see. The default float32 shape is 2 vectors x 1 row x 128 threads; the knob must
    # change the threads and nothing else, and the CPU twin in the same module still works.
    proc = subprocess.run([sys.executable, VARIANTS, "bias_gelu", "-D", "BIAS_GELU_BLOCK=256", "--build-only"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    build_dir = re.search(r"^BIAS_GELU_BLOCK=256: built in (.+)$", proc.stdout, re.M).group(1)
    # The knob is on the nvcc line alone and the module keeps the kernel's name: the C++ compile lines are the
    # default build's, so ccache can hand their objects back instead of compiling the binding again.
    with open(os.path.join(build_dir, "build.ninja")) as f:
        ninja = dict(line.split(" = ", 1) for line in f.read().splitlines() if " = " in line)
    assert "-DTORCH_EXTENSION_NAME=bias_gelu " in ninja["cflags"] and "BIAS_GELU_BLOCK" not in ninja["cflags"]
    assert "-DBIAS_GELU_BLOCK=256" in ninja["cuda_cflags"]
    names = objdump.resources(build_dir)["kernel"]
    rows = names[names.str.contains("bias_gelu_rows_kernel<float, ", regex=False)]
    assert len(rows) == 4 and rows.str.contains("bias_gelu_rows_kernel<float, 4, 2, 1, 256, true", regex=False).all(), \
        rows.tolist()
    assert names.str.contains("bias_gelu_rows_kernel<__nv_bfloat16, 8, 1, 2, 256,", regex=False).sum() == 4


def test_fit_reproduces_the_constants_of_gelu_fast():
    pytest.importorskip("scipy", reason="fit_gelu_erfc.py needs scipy, not a dependency of the project")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "fit_gelu_erfc.py")], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    fitted = re.search(r"coefficients of w\^1 \.\. w\^n: (.+)", out).group(1).split(", ")
    with open(os.path.join(ROOT, "kernels", "bias_gelu", "gelu_fast.cuh")) as f:
        source = f.read()
    half_erfc = source[source.index("float half_erfc("):]
    in_kernel = re.findall(r"(-?\d\.\d{9}e[-+]\d\d)f", half_erfc[:half_erfc.index("return")])
    assert [c.removesuffix("f") for c in reversed(fitted)] == in_kernel  # Horner: highest power first
    assert "p = 0.447000" in out and "constexpr float p = 0.447f" in source
