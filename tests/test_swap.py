"""Kernel swap: device-only edits of torch-style sources reach the loaded extension without a full rebuild.

CPU: the derivation of torch-free device units from a corpus of real-world-style files (each compiled for
sm_90), the host/device decision, the shim in a real build, and re-saves that start no process.
GPU: each layout (the seed article's one file, AT_DISPATCH templates in half and bfloat16, a device header,
PackedTensorAccessor32, load_inline with a torch wrapper, a TORCH_LIBRARY op library) cold, kernel edit,
re-save and host edit, with the new value checked on the GPU after each; a CUDA graph captured before a swap.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import torch
from kernel_cases import HAVE_NVCC, NO_CUDA_BUILDS

import jitload
from jitload.builder import devicecode, fingerprint, manifest, swap, toolchain

CORPUS = os.path.join(os.path.dirname(__file__), "swap_corpus")
NVCC = os.path.join(toolchain.find_cuda_home() or "/usr/local/cuda", "bin", "nvcc")
needs_nvcc = pytest.mark.skipif(not os.path.exists(NVCC) or not HAVE_NVCC,
                                reason=str(NO_CUDA_BUILDS or "nvcc not found (no CUDA toolkit)"))


def _read(name):
    with open(os.path.join(CORPUS, name)) as f:
        return f.read()


def _copy(tmp_path, *names):
    for name in names:
        shutil.copy(os.path.join(CORPUS, name), tmp_path / name)
    return str(tmp_path / names[0])


def _edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, f"{old!r} not in {path}"
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def _nvcc_cubin(source, out, *extra):
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    cmd = [NVCC, "-cubin", "-arch=sm_90", "-std=c++17", "--expt-relaxed-constexpr", f"-I{include}",
           f"-I{CORPUS}", *extra, str(source), "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as f:
        return set(re.findall(rb"\.text\.(_Z\w+)", f.read()))


# ---- the host/device decision (pure text) ----

def test_body_edit_keeps_the_host_view():
    text = _read("seed_add.cu")
    edited = text.replace("C[idx] = A[idx] + B[idx];", "C[idx] = A[idx] - B[idx];\n        C[idx] *= 2;")
    assert devicecode.host_view(edited) == devicecode.host_view(text)
    assert devicecode.first_host_difference(text, edited) is None


@pytest.mark.parametrize(("old", "new", "where"), [
    ('"B must be a CUDA tensor"', '"B: CUDA please"', "add_tensors_cuda() at line 13"),
    ("dim3 block(256);", "dim3 block(128);", "add_tensors_cuda() at line 13"),
    ("float* C, int size)", "float* C, long size)", "add_kernel() at line 6"),
    ('"CUDA-accelerated tensor addition"', '"addition"', "PYBIND11_MODULE() at line 34"),
    ("#include <cuda.h>", "#include <cuda.h>\n#define EXTRA 1", "line 4"),
    ('"B must be a CUDA tensor"', '"B must be  a CUDA tensor"', "add_tensors_cuda() at line 13"),  # its value
])
def test_host_edit_changes_the_host_view(old, new, where):
    text = _read("seed_add.cu")
    edited = text.replace(old, new)
    assert edited != text
    assert devicecode.host_view(edited) != devicecode.host_view(text)
    assert devicecode.first_host_difference(text, edited) == where


def test_device_header_edit_keeps_its_host_view_and_a_host_device_edit_does_not():
    header = _read("block_reduce.cuh")
    assert devicecode.host_view(header.replace("offset >>= 1", "offset /= 2")) == devicecode.host_view(header)
    both = header.replace("__device__ __forceinline__ float warp_sum", "__host__ __device__ float warp_sum")
    assert devicecode.host_view(both.replace("offset >>= 1", "offset /= 2")) != devicecode.host_view(both)


ADD_OP = ("#pragma once\n// the arithmetic of add_kernel\n"
          "__device__ inline float add_op(float a, float b) { return a + b; }\n")
GUARDED = ("#ifndef OPS_CUH\n#define OPS_CUH\nnamespace ops {\ntemplate <class T>\n"
           "__device__ __forceinline__ T twice(T x) { return x + x; }\n}  // namespace ops\n#endif\n")


@pytest.mark.parametrize(("header", "names"), [
    (ADD_OP, {"add_op"}),
    (GUARDED, {"OPS_CUH", "ops", "twice"}),
    (ADD_OP + "__global__ void k(float* x) { x[0] = 1; }\n", None),  # a kernel has a host stub
    (ADD_OP + "__host__ __device__ float h(float a) { return a; }\n", None),
    (ADD_OP + "constexpr __device__ int tile() { return 128; }\n", None),  # host code may call it
    (ADD_OP + "struct Pair { float a, b; };\n", None),
    (ADD_OP + "#define TILE 128\n", None),
    ("#pragma once\n#include <cuda_fp16.h>\n__device__ float f(float a) { return a; }\n", None),
    (ADD_OP + "__device__ float g(float a);\n", None),  # a declaration: its definition is elsewhere
    (ADD_OP + "__constant__ float table[4];\n", None),
    # what this reader does not follow with certainty: a pragma, attributes, a macro call in a head, digraphs
    ('_Pragma("pack(push, 1)")\n' + ADD_OP, None),
    (ADD_OP + "__device__ __attribute__((host)) float h(float a) { return a; }\n", None),
    (ADD_OP + "REGISTER(h) __device__ float h(float a) { return a; }\n", None),
    ("%:pragma once\n__device__ float f(float a) { return a; }\n", None),
    ('extern "C" {\n__device__ float f(float a) { return a; }\n}\n', None),
    (ADD_OP + "HOST_FN __device__ float h(float a) { return a; }\n", None),  # a macro could say __host__
    (ADD_OP + "__device__ [[gnu::always_inline]] float h(float a) { return a; }\n", None),
    (GUARDED.replace("OPS_CUH", "NDEBUG"), None),  # a guard that other headers read
    (GUARDED.replace("OPS_CUH", "_OPS_CUH"), None),
    (GUARDED.replace("OPS_CUH", "C10_MACROS_MACROS_H_"), None),  # torch's own guard: torch's header emptied
    (GUARDED.replace("namespace ops", "namespace c10"), None),
])
def test_a_header_of_device_functions_alone_is_told_apart(header, names):
    assert devicecode.device_only_names(header) == names


def test_an_added_include_of_device_functions_alone_keeps_the_host_side():
    text = _read("seed_add.cu")
    include = text.replace("#include <cuda_runtime.h>\n", '#include <cuda_runtime.h>\n#include "add_op.cuh"\n')
    used = include.replace("C[idx] = A[idx] + B[idx];", "C[idx] = add_op(A[idx], B[idx]);")
    headers = {"add_op.cuh": ADD_OP, "ops.cuh": GUARDED, "host.cuh": ADD_OP + "inline int h() { return 1; }\n"}

    def read_header(target):
        return (f"/src/{target}", headers[target]) if target in headers else None

    assert devicecode.host_view(used) != devicecode.host_view(text)  # an #include is host code, as read alone
    assert devicecode.added_device_headers(text, used, read_header) == ["/src/add_op.cuh"]
    two = used.replace('#include "add_op.cuh"\n', '#include "add_op.cuh"  // helpers\n#include "ops.cuh"\n')
    assert devicecode.added_device_headers(text, two, read_header) == ["/src/add_op.cuh", "/src/ops.cuh"]
    # Anything else that changes the host side, and it is a host edit as before.
    assert devicecode.added_device_headers(text, text, read_header) is None
    assert devicecode.added_device_headers(text, used.replace("block(256)", "block(128)"), read_header) is None
    assert devicecode.added_device_headers(text, used.replace("add_op.cuh", "host.cuh"), read_header) is None
    assert devicecode.added_device_headers(text, used.replace("add_op.cuh", "missing.cuh"), read_header) is None
    # The host code naming what the header declares (an overload, a variable of that name) is host code.
    clash = used.replace("int size = A.numel();", "int size = A.numel(); int add_op = 0;")
    assert devicecode.added_device_headers(text, clash, read_header) is None
    # An include taken away: the loaded host code saw the header, which may have changed since.
    assert devicecode.added_device_headers(used, text, read_header) is None
    # Above torch's headers: the full build compiles the header without them (the device code alone has c10's
    # light headers first), so a header naming c10::Half would compile alone and fail in full.
    first = '#include "add_op.cuh"\n' + text
    assert devicecode.added_device_headers(text, first, read_header) is None
    # A name another of the file's headers uses (a copied include guard would empty that header in full).
    assert devicecode.added_device_headers(text, two, read_header, others=["#ifndef OPS_CUH\n#endif\n"]) is None
    assert devicecode.added_device_headers(text, two, read_header, others=["int unrelated();\n"]) == [
        "/src/add_op.cuh", "/src/ops.cuh"]


@pytest.mark.parametrize("text", [
    "#if X\nvoid f() {\n#else\nvoid f() { {\n#endif\n}\n",  # braces split across preprocessor branches
    'const char* s = "unterminated;\n',
    "namespace a {\n__global__ void k() {}\n",  # a namespace never closed
])
def test_unreadable_shapes_are_unsure(text):
    with pytest.raises(devicecode.Unsure):
        devicecode.host_view(text)


@pytest.mark.parametrize("decl", ["__constant__ float table[16];", "__device__ int counter = 0;",
                                  "static __device__ __managed__ float m;"])
def test_device_variables_refuse_a_swap(decl):
    # The host fills the loaded module's copy (cudaMemcpyToSymbol); new kernels would read their own.
    text = _read("seed_add.cu").replace("__global__ void add_kernel", decl + "\n__global__ void add_kernel")
    with pytest.raises(devicecode.Unsure, match="device variables"):
        devicecode.device_unit(text, "add.cu")
    devicecode.device_unit(_read("seed_add.cu").replace("float* C, int size) {",
                                                        "float* C, int size) {\n    __shared__ float s[32];"),
                           "add.cu")


def test_host_visible_device_code_is_host_code():
    # A constexpr __device__ function can size a launch (torch builds with --expt-relaxed-constexpr), and a
    # #define inside a kernel body is seen by the host code after it: editing either must rebuild in full.
    text = ("constexpr __device__ int tile() { return 128; }\n"
            "__global__ void k(float* x) {\n#define TILE 128\n  x[0] = TILE;\n}\n"
            "void launch(float* x) { k<<<1, tile() + TILE>>>(x); }\n")
    for old, new in (("return 128", "return 64"), ("#define TILE 128", "#define TILE 64")):
        assert devicecode.host_view(text.replace(old, new)) != devicecode.host_view(text)
    assert devicecode.host_view(text.replace("x[0] = TILE", "x[0] = 2 * TILE")) == devicecode.host_view(text)


def test_operators_and_prefixed_char_literals_parse():
    text = ("__device__ float2 operator+(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }\n"
            "__device__ bool operator==(float2 a, float2 b) { return a.x == b.x; }\n"
            "int table[] = {1, 2};\nconst wchar_t w = L'x';\nlong n = 1'000'000;\nchar c = u8'a';\n"
            "__global__ void k(float2* p) { p[0] = p[0] + p[1]; }\n")
    kinds = [(i.kind, i.name) for i in devicecode.parse(text)]
    assert kinds[:2] == [("device", "operator+"), ("device", "operator==")] and kinds[-1] == ("kernel", "k")
    assert devicecode.host_view(text.replace("a.x + b.x", "a.x - b.x")) == devicecode.host_view(text)


def test_a_kernel_that_cannot_be_matched_refuses_the_swap(tmp_path):
    # An anonymous namespace's kernel is registered under a per-unit name: its edit must not be dropped.
    path = tmp_path / "anon.cu"
    path.write_text("namespace {\n__global__ void k(float* x) { x[0] = 1; }\n}\n"
                    "__global__ void plain(float* x) { x[0] = 2; }\n")
    with pytest.raises(swap.SwapError, match="cannot be matched"):
        swap.plan_unit(str(path), [], ["_ZN12_GLOBAL__N_11kEPf", "_Z5plainPf"])
    assert swap.kernel_name("scale_kernel") == "scale_kernel"  # an extern "C" kernel keeps its name


def test_items_are_classified():
    kinds = {(i.kind, i.name) for i in devicecode.parse(_read("op_library.cu"))}
    assert {("kernel", "muladd_kernel"), ("host", "mymuladd_cuda"), ("registration", "TORCH_LIBRARY"),
            ("registration", "TORCH_LIBRARY_IMPL"), ("namespace", "extension_cpp")} <= kinds
    shared = {(i.kind, i.name) for i in devicecode.parse(_read("shared_reduce.cu"))}
    assert ("kernel", "row_sums") in shared and ("host", "sums") in shared


# ---- device units of the corpus, compiled for sm_90 ----

REFERENCE = {  # the instantiations AT_DISPATCH makes, written in source types: nvcc mangles them for us
    "dispatch_template.cu": """
        template <typename scalar_t> __global__ void scale_shift_kernel(const scalar_t* __restrict__ x,
            scalar_t* __restrict__ y, float scale, float shift, int64_t n) {}
        template __global__ void scale_shift_kernel<float>(const float*, float*, float, float, int64_t);
        template __global__ void scale_shift_kernel<double>(const double*, double*, float, float, int64_t);
        template __global__ void scale_shift_kernel<c10::Half>(const c10::Half*, c10::Half*, float, float, int64_t);
        template __global__ void scale_shift_kernel<c10::BFloat16>(const c10::BFloat16*, c10::BFloat16*, float,
            float, int64_t);""",
    "accessor.cu": """
        template <typename T> __global__ void row_sum_kernel(const at::PackedTensorAccessor32<T, 2,
            at::RestrictPtrTraits> x, at::PackedTensorAccessor32<T, 1, at::RestrictPtrTraits> out) {}
        template __global__ void row_sum_kernel<float>(const at::PackedTensorAccessor32<float, 2,
            at::RestrictPtrTraits>, at::PackedTensorAccessor32<float, 1, at::RestrictPtrTraits>);
        template __global__ void row_sum_kernel<double>(const at::PackedTensorAccessor32<double, 2,
            at::RestrictPtrTraits>, at::PackedTensorAccessor32<double, 1, at::RestrictPtrTraits>);""",
    "shared_reduce.cu": """
        namespace reduce { template <int B> __global__ void row_sums(const float* __restrict__ x,
            float* __restrict__ out, int cols) {}
        template __global__ void row_sums<256>(const float* __restrict__, float* __restrict__, int); }""",
}


@needs_nvcc
@pytest.mark.parametrize("name", ["seed_add.cu", "dispatch_template.cu", "accessor.cu", "shared_reduce.cu",
                                  "op_library.cu"])
def test_device_unit_compiles_torch_free_with_every_kernel(name, tmp_path):
    registered = []
    if name in REFERENCE:
        ref = tmp_path / "reference.cu"
        ref.write_text("#include <c10/util/Half.h>\n#include <c10/util/BFloat16.h>\n"
                       "#include <ATen/core/TensorAccessor.h>\n#include <cstdint>\n" + REFERENCE[name])
        registered = sorted(n.decode() for n in _nvcc_cubin(ref, tmp_path / "reference.cubin"))
        assert registered
    path = os.path.join(CORPUS, name)
    unit, instantiated = devicecode.device_unit(_read(name), path, registered)
    assert "torch/extension.h" not in unit and "PYBIND11_MODULE" not in unit and "TORCH_LIBRARY" not in unit
    assert sorted(instantiated) == registered
    (tmp_path / "unit.cu").write_text(unit)
    start = time.perf_counter()
    names = _nvcc_cubin(tmp_path / "unit.cu", tmp_path / "unit.cubin")
    print(f"{name}: device unit compiled in {time.perf_counter() - start:.2f} s")
    assert {n.encode() for n in registered} <= names
    defined = {swap.kernel_name(n.decode()) for n in names}
    kernels = {i.name for i in devicecode.parse(_read(name)) if i.kind == "kernel"}
    assert kernels <= {d.rpartition("::")[2] for d in defined}


@needs_nvcc
def test_device_unit_errors_point_at_the_users_file(tmp_path):
    text = _read("seed_add.cu").replace("C[idx] = A[idx] + B[idx];", "C[idx] = A[idx] + undefined_name;")
    unit, _ = devicecode.device_unit(text, "/home/me/add.cu")
    (tmp_path / "unit.cu").write_text(unit)
    done = subprocess.run([NVCC, "-cubin", "-arch=sm_90", str(tmp_path / "unit.cu"), "-o",
                           str(tmp_path / "u.cubin")], capture_output=True, text=True)
    assert done.returncode != 0
    assert '/home/me/add.cu(9): error: identifier "undefined_name" is undefined' in done.stdout + done.stderr


@needs_nvcc
def test_a_kernel_template_in_a_shared_header_is_instantiated_for_the_files_own_instances(tmp_path):
    # kernels/add: add_kernel.cu's host code launches jk::map_vec_kernel / map_scalar_kernel, templates that
    # kernels/common/jk_elementwise.cuh defines, with the file's own AddOp. The unit leaves that host code out,
    # so it must instantiate them itself; an instance with another file's functor is that file's to provide.
    kernels_dir = os.path.join(os.path.dirname(CORPUS), "..", "kernels")
    common, folder = os.path.join(kernels_dir, "common"), os.path.join(kernels_dir, "add")
    source = os.path.join(folder, "add_kernel.cu")
    registered = sorted(n.decode() for n in _nvcc_cubin(source, tmp_path / "full.cubin", f"-I{common}",
                                                         f"-I{folder}"))
    assert len(registered) >= 8 and all("AddOp" in devicecode.demangle(n) for n in registered)
    foreign = registered[0].replace("5AddOp", "10ReluGradOp")
    headers = [os.path.join(common, "jk_elementwise.cuh"), os.path.join(common, "jk_cuda.cuh"),
               os.path.join(folder, "add.h")]
    unit, names = swap.plan_unit(source, headers, [*registered, foreign])
    assert "ReluGradOp" not in unit and sorted(names) == sorted([*registered, foreign])  # its load is refused
    (tmp_path / "unit.cu").write_text(unit)
    assert {n.encode() for n in registered} <= _nvcc_cubin(tmp_path / "unit.cu", tmp_path / "unit.cubin",
                                                            f"-I{common}", f"-I{folder}")


def test_demangled_template_instances_become_explicit_instantiations():
    items = devicecode.parse(_read("shared_reduce.cu"))
    lines, names = devicecode.instantiations(items, ["_ZN6reduce8row_sumsILi256EEEvPKfPfi", "_Z1fv"])
    assert lines == ["template __global__ void reduce::row_sums<256>(float const*, float*, int);"]
    assert names == ["_ZN6reduce8row_sumsILi256EEEvPKfPfi"]
    assert swap.kernel_name("_ZN6reduce8row_sumsILi256EEEvPKfPfi") == "reduce::row_sums"
    assert swap.kernel_name("_Z10add_kernelPKfS0_Pfi") == "add_kernel"


# ---- the shim in a real build, and re-saves that start no process ----

@pytest.fixture(scope="module")
def seed_ext(tmp_path_factory):
    """The seed article's one-file add.cu, built by jitload (about a minute on 2 cores, once)."""
    folder = tmp_path_factory.mktemp("seed")
    path = _copy(folder, "seed_add.cu")
    return jitload.load("seed_add", [path], build_directory=str(folder / "build")), path


@needs_nvcc
@pytest.mark.slow
def test_shim_records_kernels_and_the_derived_unit_provides_them(seed_ext):
    ext, path = seed_ext
    shim = swap.Shim(ext.module.__file__)
    assert shim.kernels() == ["_Z10add_kernelPKfS0_Pfi"]
    assert shim.swaps() == 0
    unit, names = swap.plan_unit(path, ext._state.units[path], shim.kernels())
    assert names == ["_Z10add_kernelPKfS0_Pfi"]
    image = swap.compile_units(ext.build_directory, {path: unit})[path]
    assert image  # compiled with the build's own flags: its arch list and defines
    assert not any("cuda_runtime.h" in h for h in ext._state.units[path])  # toolchain headers are not "user"


@needs_nvcc
@pytest.mark.slow
def test_resave_of_identical_bytes_starts_no_process(seed_ext, monkeypatch):
    ext, path = seed_ext
    ext.reload()
    with open(path, "rb") as f:
        data = f.read()
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    with open(path, "wb") as f:
        f.write(data)

    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started for an identical re-save: {args[:1]}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)
    again = jitload.load("seed_add", [path], build_directory=ext.build_directory)
    assert again is ext and ext.info.status == "unchanged", ext.info


@needs_nvcc
@pytest.mark.slow
def test_without_a_gpu_a_kernel_edit_is_compiled_alone_and_verified(seed_ext, monkeypatch):
    ext, path = seed_ext
    monkeypatch.setattr(swap, "gpu_available", lambda: False)
    module = ext.module
    try:
        _edit(path, "C[idx] = A[idx] + B[idx];", "C[idx] = B[idx] + A[idx];")
        assert ext.reload().info.status == "compiled", ext.info
        assert str(ext.info).startswith("kernel code compiled alone") and ext.info.kernels == 1
        assert ext.module is module  # nothing here can run the new kernel: the library is kept
        assert ext.reload().info.status == "unchanged"
        # The full build behind it runs in the background; once done, the build on disk is the source's.
        ext.wait(timeout=900)
        assert ext.info.verification.startswith("verified"), ext.info
        assert manifest.read(ext.build_directory).up_to_date(ext.spec.key())
        # Half-precision intrinsics: the device code alone sees cuda_fp16.h, as torch's headers give it.
        _edit(path, "C[idx] = B[idx] + A[idx];", "C[idx] = __half2float(__float2half(A[idx])) + B[idx];")
        assert ext.reload().info.status == "compiled", ext.info
        # A typo inside the kernel: only the whole file's compiler calls an edit wrong; the module stays.
        _edit(path, "+ B[idx];", "+ B[idx]")
        with pytest.raises(jitload.BuildError, match=re.escape('seed_add.cu:10: expected a ";"')):
            ext.reload()
        assert ext.info.status == "failed" and ext.module is module
        # A host edit still needs the full build, and says why.
        _edit(path, "+ B[idx]", "+ B[idx];")
        _edit(path, '"B must be a CUDA tensor"', '"B: CUDA"')
        assert ext._try_swap([path], time.perf_counter()).startswith("host code changed: add_tensors_cuda()")
    finally:
        with open(path, "w") as f:
            f.write(_read("seed_add.cu"))


# ---- on the GPU ----

def _timed_reload(ext):
    start = time.perf_counter()
    ext.reload()
    return time.perf_counter() - start


@pytest.mark.cuda
@pytest.mark.slow
def test_seed_layout_kernel_edit_is_swapped(seed_ext):
    ext, path = seed_ext
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    add = ext.add  # a reference taken before the swap sees the new kernel too
    torch.testing.assert_close(add(a, b), a + b)
    try:
        _edit(path, "C[idx] = A[idx] + B[idx];", "C[idx] = A[idx] + 2.0f * B[idx];")
        seconds = _timed_reload(ext)
        print(f"seed add.cu kernel edit: {ext.info} ({seconds:.2f} s)")
        assert ext.info.status == "swapped" and ext.info.kernels == 1
        assert str(ext.info).startswith("kernel swap (1 kernel)")
        torch.testing.assert_close(add(a, b), a + 2 * b)
        torch.testing.assert_close(ext.add(a, b), a + 2 * b)
        assert ext.reload().info.status == "unchanged"

        # A CUDA graph captured now keeps replaying the kernel it captured after the next swap.
        out = torch.empty_like(a)
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            ext.add(a, b)  # warm-up outside capture
            with torch.cuda.graph(graph, stream=stream):
                out.copy_(ext.add(a, b))
        torch.cuda.synchronize()
        _edit(path, "C[idx] = A[idx] + 2.0f * B[idx];", "C[idx] = A[idx] - B[idx];")
        ext.reload()
        assert ext.info.status == "swapped"
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, a + 2 * b)
        torch.testing.assert_close(ext.add(a, b), a - b)
        with torch.cuda.stream(stream):  # launches on a side stream see the new kernel as well
            side = ext.add(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(side, a - b)

        # A typo in the kernel: the whole file's compiler reports it, and the swapped kernel stays.
        _edit(path, "C[idx] = A[idx] - B[idx];", "C[idx] = A[idx] - B[idx] + undefined_name;")
        start = time.perf_counter()
        with pytest.raises(jitload.BuildError, match="undefined_name"):
            ext.reload()
        print(f"seed add.cu typo in the kernel: reported in {time.perf_counter() - start:.2f} s")
        assert ext.info.status == "failed"
        torch.testing.assert_close(ext.add(a, b), a - b)
        _edit(path, " + undefined_name;", ";")
        assert ext.reload().info.status == "unchanged"  # the typo undone: what is loaded is this code

        # The file back as built, with a full reload: the module's own kernel again, not the swapped one.
        with open(path, "w") as f:
            f.write(_read("seed_add.cu"))
        ext.reload(full=True)
        assert ext.info.status == "built", ext.info
        torch.testing.assert_close(ext.add(a, b), a + b)

        # Host code (a TORCH_CHECK message) changed: a full rebuild that says why, and the current kernel.
        _edit(path, "C[idx] = A[idx] + B[idx];", "C[idx] = A[idx] - B[idx];")
        assert ext.reload().info.status == "swapped"
        _edit(path, '"B must be a CUDA tensor"', '"B must live on the GPU"')
        seconds = _timed_reload(ext)
        print(f"seed add.cu host edit: {ext.info} ({seconds:.1f} s)")
        assert ext.info.status == "built"
        assert "host code changed: add_tensors_cuda() at line 13" in ext.info.reason
        torch.testing.assert_close(ext.add(a, b), a - b)
        with pytest.raises(RuntimeError, match="B must live on the GPU"):
            ext.add(a, b.cpu())
    finally:
        with open(path, "w") as f:
            f.write(_read("seed_add.cu"))


@pytest.mark.cuda
@pytest.mark.slow
def test_dispatch_template_swaps_every_instance(tmp_path):
    path = _copy(tmp_path, "dispatch_template.cu")
    ext = jitload.load("swap_dispatch", [path], build_directory=str(tmp_path / "build"))
    dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    xs = {dt: torch.randn(4099, device="cuda").to(dt) for dt in dtypes}
    for dt, x in xs.items():
        torch.testing.assert_close(ext.scale_shift(x, 2.0, 1.0), (x.float() * 2 + 1).to(dt))
    _edit(path, "x[i]) * scale + shift", "x[i]) * scale - shift")
    seconds = _timed_reload(ext)
    print(f"AT_DISPATCH template edit: {ext.info} ({seconds:.2f} s)")
    assert ext.info.status == "swapped" and ext.info.kernels == 4
    for dt, x in xs.items():
        torch.testing.assert_close(ext.scale_shift(x, 2.0, 1.0), (x.float() * 2 - 1).to(dt))


@pytest.mark.cuda
@pytest.mark.slow
def test_device_header_and_accessor_edits_are_swapped(tmp_path):
    path = _copy(tmp_path, "shared_reduce.cu", "block_reduce.cuh")
    acc_path = _copy(tmp_path, "accessor.cu")
    ext = jitload.load("swap_reduce", [path], build_directory=str(tmp_path / "build"))
    acc = jitload.load("swap_accessor", [acc_path], build_directory=str(tmp_path / "build_acc"))
    x = torch.randn(64, 1000, device="cuda")
    torch.testing.assert_close(ext.sums(x)[0], x.sum(1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(acc.row_sum(x), x.sum(1), rtol=1e-4, atol=1e-4)
    _edit(str(tmp_path / "block_reduce.cuh"), "warp_sum(v) : 0.0f", "2.0f * warp_sum(v) : 0.0f")
    seconds = _timed_reload(ext)
    print(f"device header edit: {ext.info} ({seconds:.2f} s)")
    assert ext.info.status == "swapped"
    torch.testing.assert_close(ext.sums(x)[0], 2 * x.sum(1), rtol=1e-4, atol=1e-4)
    _edit(acc_path, "out[row] = acc;", "out[row] = -acc;")
    seconds = _timed_reload(acc)
    print(f"PackedTensorAccessor32 kernel edit: {acc.info} ({seconds:.2f} s)")
    assert acc.info.status == "swapped" and acc.info.kernels == 2
    torch.testing.assert_close(acc.row_sum(x), -x.sum(1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(acc.row_sum(x.double()), -x.double().sum(1))


KERNEL_FOLDER_EDIT = r"""
import json, os, sys, time
import torch
import jitload.kernels
from jitload.builder import swap

root = sys.argv[1]
ext = jitload.kernels.get(os.path.join(root, "add")).build(with_cuda=True)
path = os.path.join(root, "add", "add_kernel.cu")
with open(path) as f:
    text = f.read()
with open(path, "w") as f:
    f.write(text.replace("return v[0] + v[1];", "return v[0] + v[1] + v[1];"))
start = time.perf_counter()
ext.reload()
seconds = time.perf_counter() - start
out = {"status": ext.info.status, "info": str(ext.info), "kernels": ext.info.kernels, "seconds": seconds}
if swap.gpu_available():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        a, b = (torch.randn(100_003, device="cuda", dtype=dtype) for _ in range(2))
        acc = torch.float64 if dtype == torch.float64 else torch.float32  # the kernel's accumulator, rounded once
        torch.testing.assert_close(ext.module.add(a, b), (a.to(acc) + b.to(acc) + b.to(acc)).to(dtype))
ext.wait(timeout=900)
out["verification"] = ext.info.verification
print(json.dumps(out))
"""


@needs_nvcc
@pytest.mark.slow
def test_a_kernel_folders_edit_is_swapped(tmp_path):
    """kernels/add includes its own headers before CUDA's (add.h, then jk_elementwise.cuh, which includes
    cuda_fp16.h and libstdc++): the host view takes the toolchain's lines whole and parses the user's. Run in a
    process of its own: the kernel registers torch.ops.jitload.add, which another test may have loaded."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in ("add", "common"):
        shutil.copytree(os.path.join(repo, "kernels", name), tmp_path / name)
    done = subprocess.run([sys.executable, "-c", KERNEL_FOLDER_EDIT, str(tmp_path)], capture_output=True,
                          text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"kernels/add kernel edit: {result['info']} ({result['seconds']:.2f} s)")
    assert result["status"] == ("swapped" if torch.cuda.is_available() else "compiled"), result
    assert result["kernels"] >= 4, result  # one launch_map instance per dtype
    assert result["verification"].startswith("verified"), result


INLINE_CUDA = _read("inline_scale.cu")


@pytest.mark.cuda
@pytest.mark.slow
def test_load_inline_with_a_torch_wrapper_is_swapped(tmp_path):
    kwargs = dict(functions=["scale"], build_directory=str(tmp_path / "build"))
    decl = "torch::Tensor scale(torch::Tensor x, double k);"
    ext = jitload.load_inline("swap_inline", decl, cuda_sources=INLINE_CUDA, **kwargs)
    x = torch.randn(5000, device="cuda")
    torch.testing.assert_close(ext.scale(x, 3.0), x * 3)
    ext = jitload.load_inline("swap_inline", decl, cuda_sources=INLINE_CUDA.replace("x[i] * k", "x[i] * k + 1.0f"),
                              **kwargs)
    print(f"load_inline kernel edit: {ext.info}")
    assert ext.info.status == "swapped"
    torch.testing.assert_close(ext.scale(x, 3.0), x * 3 + 1)
    assert jitload.load_inline("swap_inline", decl, cuda_sources=INLINE_CUDA.replace("x[i] * k", "x[i] * k + 1.0f"),
                               **kwargs).info.status == "unchanged"


@pytest.mark.cuda
@pytest.mark.slow
def test_op_library_kernel_edit_is_swapped_and_a_host_edit_asks_for_a_restart(tmp_path):
    path = _copy(tmp_path, "op_library.cu")
    ext = jitload.load("swap_oplib", [path], build_directory=str(tmp_path / "build"), is_python_module=False)
    a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    op = torch.ops.extension_cpp.mymuladd
    torch.testing.assert_close(op(a, b, 0.5), a * b + 0.5)
    compiled = torch.compile(lambda u, v: op(u, v, 0.5) * 2)
    torch.testing.assert_close(compiled(a, b), (a * b + 0.5) * 2)
    _edit(path, "a[idx] * b[idx] + c", "a[idx] * b[idx] - c")
    seconds = _timed_reload(ext)
    print(f"op library kernel edit: {ext.info} ({seconds:.2f} s)")
    assert ext.info.status == "swapped"
    torch.testing.assert_close(op(a, b, 0.5), a * b - 0.5)
    torch.testing.assert_close(compiled(a, b), (a * b - 0.5) * 2)  # torch.compile over the op sees it too
    _edit(path, "TORCH_CHECK(a.sizes() == b.sizes());", 'TORCH_CHECK(a.sizes() == b.sizes(), "sizes");')
    with pytest.raises(jitload.BuildError, match="restart Python"):
        ext.reload()
    torch.testing.assert_close(op(a, b, 0.5), a * b - 0.5)  # the loaded library still works


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
def test_swapped_kernel_runs_on_a_second_gpu(seed_ext):
    ext, path = seed_ext
    try:
        _edit(path, "C[idx] = A[idx] + B[idx];", "C[idx] = A[idx] * B[idx];")
        ext.reload()
        assert ext.info.status == "swapped"
        with torch.cuda.device(1):
            a, b = torch.randn(100, device="cuda:1"), torch.randn(100, device="cuda:1")
            torch.testing.assert_close(ext.add(a, b), a * b)
    finally:
        with open(path, "w") as f:
            f.write(_read("seed_add.cu"))


@needs_nvcc
@pytest.mark.slow
def test_an_include_of_device_functions_alone_is_swapped_and_then_followed(seed_ext):
    # The seed article's next step: the kernel's arithmetic moves into a header. Adding the #include changes
    # no host code (the header holds __device__ functions alone), so it is a kernel edit, not a full build.
    ext, path = seed_ext
    gpu = torch.cuda.is_available()
    status = "swapped" if gpu else "compiled"
    header = os.path.join(os.path.dirname(path), "add_op.cuh")
    try:
        ext.reload()  # from whatever the tests before left: the file as in the corpus
        module = ext.module
        with open(header, "w") as f:
            f.write(ADD_OP)
        _edit(path, "#include <cuda_runtime.h>\n", '#include <cuda_runtime.h>\n#include "add_op.cuh"\n')
        _edit(path, "C[idx] = A[idx] + B[idx];", "C[idx] = add_op(B[idx], A[idx]);")
        assert ext.reload().info.status == status, ext.info
        assert header in ext.files() and ext.module is module
        assert ext.reload().info.status == "unchanged"
        # The header is followed from now on: an edit inside its function is a kernel edit too.
        _edit(header, "return a + b;", "return a - b;")
        assert ext.reload().info.status == status, ext.info
        if gpu:
            a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
            torch.testing.assert_close(ext.add(a, b), b - a)
        # Host code in the header (the host compiler would see it): a full build, which says why.
        _edit(header, "return a - b; }", "return a - b; }\ninline int host_side() { return 1; }")
        reason = ext._try_swap(fingerprint.changed(ext._state.files), time.perf_counter())
        assert reason.startswith("host code changed: host_side() at line 4 in") and reason.endswith("add_op.cuh")
    finally:
        with open(path, "w") as f:
            f.write(_read("seed_add.cu"))
        if os.path.exists(header):
            os.remove(header)


# ---- the host view of preprocessed text (what ppview hands the decision) ----

PRE = ('__attribute__((device)) float helper(float a) { return a + 1.0f; }\n'
       '__attribute__((host)) __attribute__((device)) float both(float a) { return a * 2.0f; }\n'
       '__attribute__((global)) void __attribute__((launch_bounds(256))) k(float* x) {\n'
       '#pragma unroll 4\n  for (int i = 0; i < 4; i++) x[i] = helper(x[i]);\n}\n'
       'struct Op { __attribute__((device)) float operator()(float v) const { return v; } int n = 3; };\n'
       'int host_fn() { return 7; }\n')


@pytest.mark.parametrize(("old", "new", "same"), [
    ("return a + 1.0f;", "return a - 1.0f;", True),  # a device-only body
    ("float helper(float a)", "float helper(double a)", False),  # the host object keeps a stub of it
    ("__attribute__((device)) float helper", "__attribute__((device)) inline float helper", False),
    ("int host_fn", "__attribute__((device)) inline float extra(float v) { return v; }\nint host_fn", True),
    ("int host_fn", "__attribute__((device)) float extra(float v) { return v; }\nint host_fn", False),
    ("x[i] = helper(x[i]);", "x[i] = 2 * helper(x[i]);", True),  # a kernel body
    ("#pragma unroll 4", "#pragma unroll 2", True),
    ("launch_bounds(256)", "launch_bounds(128)", True),  # the device image's, not the host stub's
    ("void __attribute__((launch", "void __attribute__((noinline)) __attribute__((launch", False),
    ("k(float* x) {", "k(float* y) {", True),  # a renamed parameter: the same stub
    ("k(float* x) {", "k(double* x) {", False),  # a changed type: another stub (and another mangled name)
    ("{ return v; }", "{ return -v; }", True),  # a functor's device operator()
    ("return a * 2.0f;", "return a * 3.0f;", False),  # __host__ __device__: host code too
    ("return 7;", "return 8;", False),
    ("int n = 3;", "int n = 4;", False),  # a type is host code
    ("  for (int i", "#pragma pack(push, 1)\n  for (int i", False),  # a pragma that outlives the body
])
def test_the_preprocessed_host_view(old, new, same):
    from jitload.builder import ppview
    assert old in PRE
    assert (ppview.view_of(PRE.replace(old, new)) == ppview.view_of(PRE)) is same


def test_a_device_function_declared_for_the_host_elsewhere_is_host_code():
    from jitload.builder import ppview
    # nvcc merges the execution spaces of a function's declarations: the definition below is host code too.
    text = ("__attribute__((host)) __attribute__((device)) float f(float a);\n"
            "__attribute__((device)) float f(float a) { return a; }\n")
    assert ppview.view_of(text.replace("return a;", "return -a;")) != ppview.view_of(text)
    alone = text.split("\n", 1)[1]
    assert ppview.view_of(alone.replace("return a;", "return -a;")) == ppview.view_of(alone)


def test_literals_keep_their_spacing_in_the_host_view():
    from jitload.builder import ppview
    text = 'const char* s() { return R"(a\n  b)"; }\nint f() {  return "http://x"[0]; }\n'
    assert ppview.view_of(text.replace("(a\n  b)", "(a\n b)")) != ppview.view_of(text)  # a raw string's value
    assert ppview.view_of(text.replace("http://x", "http://y")) != ppview.view_of(text)  # no comment in a string
    assert ppview.view_of(text.replace("{  return", "{\n    return")) == ppview.view_of(text)  # spacing of code


TOOLCHAIN_PRE = ('# 1 "/src/k.cu"\n'
                 '# 1 "/src/k.h" 1\n'
                 'void host_side(float* x);\n'
                 '# 1 "/usr/include/c++/12/new" 1 3\n'
                 'namespace std { inline namespace __cxx11 __attribute__((__abi_tag__ ("cxx11"))) { }\n'
                 '  extern "C++" { void operator delete[](void*) noexcept; }\n'
                 '  __attribute__((host)) __attribute__((device)) float clampf(float v); }\n'
                 '# 2 "/src/k.h" 2\n'
                 '# 2 "/src/k.cu" 2\n'
                 '__attribute__((device)) float twice(float v) { return 2.0f * v; }\n'
                 '__attribute__((device)) float clampf(float v) { return v; }\n'
                 '__attribute__((global)) void k(float* x) { x[0] = twice(x[0]); }\n')


def test_toolchain_headers_count_whole_and_the_users_code_is_parsed():
    from jitload.builder import ppview
    roots = ("/usr/include/",)
    with pytest.raises(devicecode.Unsure):
        ppview.view_of(TOOLCHAIN_PRE)  # read as the user's, libstdc++'s text is beyond the parser
    view = ppview.view_of(TOOLCHAIN_PRE, roots)
    user, toolchain = ppview.split_toolchain(TOOLCHAIN_PRE, roots)
    assert "abi_tag" in toolchain and "abi_tag" not in user and user.count("#pragma jitload_toolchain") == 1
    assert ppview.view_of(TOOLCHAIN_PRE.replace("2.0f * v", "3.0f * v"), roots) == view  # device-only body
    assert ppview.view_of(TOOLCHAIN_PRE.replace("x[0] = twice", "x[0] = 1 + twice"), roots) == view  # kernel body
    assert ppview.view_of(TOOLCHAIN_PRE.replace("float* x);", "double* x);"), roots) != view  # the user's header
    assert ppview.view_of(TOOLCHAIN_PRE.replace("{ }\n", "{ int added; }\n"), roots) != view  # macros changed it
    # A name the toolchain may declare for the host too: nvcc merges the declarations, so its body is host code.
    assert ppview.view_of(TOOLCHAIN_PRE.replace("{ return v; }", "{ return -v; }"), roots) != view


def _tc(body):
    """A preprocessed unit: the user's ``body`` around one libstdc++ include, spelled ``<TC>``."""
    header = '# 1 "/usr/include/dirent.h" 1 3\nstruct dirent { long d_ino; char d_name[256]; };\n'
    return '# 1 "/src/k.cu"\n' + body.replace("<TC>\n", header + '# 9 "/src/k.cu" 2\n')


@pytest.mark.parametrize(("old", "new"), [
    # Where the toolchain's text stands counts: the packing, the namespace of its declarations.
    ("#pragma pack(push, 1)\n#pragma pack(pop)\n<TC>\n", "#pragma pack(push, 1)\n<TC>\n#pragma pack(pop)\n"),
    ("namespace mine { }\n<TC>\n", "namespace mine {\n<TC>\n}\n"),
    # Defined through its scope: a __host__ __device__ declaration there merges in (nvcc).
    ("<TC>\nnamespace a { __attribute__((host)) __attribute__((device)) int f(int); }\n"
     "__attribute__((device)) int a::f(int v) { return v + 1; }\n", None),
    ("<TC>\nstruct S { __attribute__((host)) __attribute__((device)) int g(int); };\n"
     "__attribute__((device)) int S::g(int v) { return v + 1; }\n", None),
    # The execution spaces however the attribute list is spelled.
    ("<TC>\n__attribute__((device)) __attribute__((host,)) int f4(int v) { return v + 1; }\n", None),
    ("<TC>\n__attribute__((host, device)) int f5(int v) { return v + 1; }\n", None),
    ("<TC>\n__attribute__((__host__)) __attribute__((__device__)) int f6(int v) { return v + 1; }\n", None),
    # A raw string's line that looks like a line marker is the string's value.
    ('<TC>\nconst char* s() { return R"(\n# 1 "v1"\n)"; }\n', '<TC>\nconst char* s() { return R"(\n# 1 "v2"\n)"; }\n'),
])
def test_host_view_holes_found_by_attack(old, new):
    from jitload.builder import ppview
    roots = ("/usr/include/",)
    new = new if new is not None else old.replace("v + 1", "v + 2")
    assert ppview.view_of(_tc(old), roots) != ppview.view_of(_tc(new), roots)


def test_host_view_of_a_device_helper_named_like_a_host_only_toolchain_function():
    from jitload.builder import ppview
    roots = ("/usr/include/",)
    text = _tc("<TC>\n__attribute__((device)) float d_name(float v) { return v; }\n")
    text = text.replace("char d_name[256];", "char name[256]; float d_name(float);")  # host-only: no merge
    assert ppview.view_of(text.replace("return v;", "return -v;"), roots) == ppview.view_of(text, roots)
    host_device = text.replace("float d_name(float);", "__attribute__((host, device)) float d_name(float);")
    assert ppview.view_of(host_device.replace("return v;", "return -v;"), roots) != ppview.view_of(host_device, roots)


def test_a_line_marker_naming_no_readable_path_is_unsure():
    from jitload.builder import ppview
    with pytest.raises(devicecode.Unsure, match="no readable path"):
        ppview.view_of('# 1 "/src/k.cu"\n# 1 "/usr/include/a\0b" 1 3\nint x;\n', ("/usr/include/",))


H, D = "__attribute__((host))", "__attribute__((device))"


@pytest.mark.parametrize("text", [
    # A __host__ __device__ declaration that nvcc merges with the device definition, however it is written.
    f"{H} {D} int g(int), f(int);\n{D} int f(int v) {{ return v + 1; }}\nint host_call(int x) {{ return f(x); }}\n",
    f"{H} {D} int f(int);\n{D} int (f)(int v) {{ return v + 1; }}\nint host_call(int x) {{ return f(x); }}\n",
    f"typedef int fn_t(int);\n{H} {D} fn_t f;\n{D} int f(int v) {{ return v + 1; }}\n"
    "int host_call(int x) { return f(x); }\n",
    f"{D} int f(int v) {{ return v + 1; }}\nint host_call(int x) {{ {H} {D} int f(int); return f(x); }}\n",
    f"struct S {{ int v; friend {H} {D} int f(S); }};\n{D} int f(S s) {{ return s.v + 1; }}\n"
    "int host_call(S s) { return f(s); }\n",
    f"struct S;\n{H} {D} int f(S);\nstruct S {{ int v; friend {D} int f(S s) {{ return s.v + 1; }} }};\n"
    "int host_call(S s) { return f(s); }\n",
    # Host spaces in GNU's other spelling and in C++11 attributes.
    f"__attribute((host)) {D} int f(int v) {{ return v + 1; }}\nint host_call(int x) {{ return f(x); }}\n",
    f"[[gnu::host]] {D} int f(int v) {{ return v + 1; }}\nint host_call(int x) {{ return f(x); }}\n",
    f"struct S {{ int v; __attribute((host)) {D} int get() const {{ return v + 1; }} }};\n"
    "int host_call(S s) { return s.get(); }\n",
    # A brace in a device member's literal must not hide the host member after it.
    f"struct S {{\n  {D} int d() const {{ return '{{'; }}\n  int h() const {{ return v + 1; }}\n"
    f"  {D} int e() const {{ return '}}'; }}\n  int v;\n}};\nint host_call(S s) {{ return s.h(); }}\n",
])
def test_host_view_holes_found_by_a_second_attack(text):
    from jitload.builder import ppview
    assert ppview.view_of(text.replace("v + 1", "v + 2")) != ppview.view_of(text)


def test_a_helper_that_kernels_alone_call_is_still_device_code():
    from jitload.builder import ppview
    text = (f"{D} float twice(float v) {{ return 2.0f * v; }}\n"
            f"__attribute__((global)) void k(float* x) {{ x[0] = twice(x[0]); }}\n"
            "void launch(float* x) { k<<<1, 1>>>(x); }\n")
    assert ppview.view_of(text.replace("2.0f * v", "3.0f * v")) == ppview.view_of(text)


def test_the_toolchain_digest_line_spelt_by_the_source_is_unsure():
    from jitload.builder import ppview
    with pytest.raises(devicecode.Unsure, match="digest line"):
        ppview.view_of('# 1 "/src/k.cu"\n#pragma jitload_toolchain 0123456789abcdef\nint x;\n', ("/usr/include/",))
