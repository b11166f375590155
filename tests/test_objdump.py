"""jitload.harness.objdump on objects nvcc compiles here for sm_90 (no GPU needed): a kernel that spills shows local
memory, one that does not shows none, SASS can be picked by kernel name, and bad targets say what is wrong."""

import os
import subprocess

import pytest

from jitload.builder import toolchain
from jitload.harness import objdump

pytestmark = pytest.mark.skipif(toolchain.find_cuda_home() is None, reason="no CUDA toolkit")

SOURCE = r"""
// A per-thread array indexed by a runtime value cannot live in registers: it goes to local memory.
__global__ void spills(const int* idx, float* out) {
    float a[256];
    for (int i = 0; i < 256; ++i) a[i] = out[i];
    for (int i = 0; i < 64; ++i) a[idx[i] & 255] += 1.0f;  // writes at runtime positions: no way around memory
    out[threadIdx.x] = a[idx[threadIdx.x] & 255];
}
__global__ void scale(const float4* __restrict__ x, float4* __restrict__ y, float s) {
    float4 v = x[threadIdx.x];
    y[threadIdx.x] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
}
"""


@pytest.fixture(scope="module")
def obj(tmp_path_factory):
    d = tmp_path_factory.mktemp("objdump")
    (d / "probe.cu").write_text(SOURCE)
    nvcc = os.path.join(toolchain.find_cuda_home(), "bin", "nvcc")
    subprocess.run([nvcc, "-c", "-O3", "-gencode=arch=compute_90,code=sm_90", "probe.cu", "-o", "probe.cuda.o"],
                   cwd=d, check=True)
    return str(d / "probe.cuda.o")


def test_resources_show_the_stack_frame_of_a_local_array(obj):
    table = objdump.resources(obj)
    assert list(table.columns) == objdump.COLUMNS
    by_kernel = table.set_index("kernel")
    spills = by_kernel.loc[next(k for k in by_kernel.index if k.startswith("spills("))]
    scale = by_kernel.loc[next(k for k in by_kernel.index if k.startswith("scale("))]
    assert spills["stack"] + spills["local"] >= 256 * 4 and spills["arch"] == "sm_90"
    assert scale["stack"] == scale["local"] == 0 and scale["registers"] > 0
    assert table.iloc[0]["kernel"].startswith("spills(")  # kernels using local memory sort first


def test_sass_by_kernel_name(obj):
    text = objdump.sass(obj, "scale")
    assert "LDG.E.128" in text and "STG.E.128" in text and "spills" not in text
    assert "/* 0x" not in text  # encodings dropped
    assert "spills" in objdump.sass(obj)


def test_bad_targets(obj, tmp_path):
    with pytest.raises(KeyError, match="no kernel matching 'nope'; there are: scale"):
        objdump.sass(obj, "nope")
    with pytest.raises(FileNotFoundError, match=r"no \*\.cuda\.o"):
        objdump.resources(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        objdump.resources(str(tmp_path / "missing.cuda.o"))
