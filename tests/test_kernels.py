"""The kernel library (kernels/*): every op against its reference with jitload.check (opcheck and gradients
included), bad input, use in an nn.Module under torch.compile(fullgraph=True), the CUDA sources compiled
for sm_90 in CI, and, marked cuda, everything again on the GPU."""

import ast
import functools
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from jitload import kernels, objdump, toolchain
from jitload.checker import check

NAMES = ["add", "add_relu", "bias_gelu", "rmsnorm", "softmax"]


@pytest.fixture(scope="module")
def built():
    """Every kernel built once (CUDA sources too where nvcc exists), by name: (kernel, extension)."""
    return {name: (kernels.get(name), kernels.get(name).build()) for name in NAMES}


def _check_all(built, name, device):
    kernel, ext = built[name]
    for label, fn in kernel.functions(ext).items():
        report = check(fn, kernel.reference, kernel.spec.make_inputs, dtypes=kernel.spec.DTYPES, device=device,
                       grad=getattr(kernel.spec, "GRAD", False), trials=1)
        assert report.ok, f"{label}: {report}"
        assert report.summary().startswith("PASS")


@pytest.mark.parametrize("name", NAMES)
def test_cpu_twin_matches_reference(built, name):
    _check_all(built, name, "cpu")


def test_torch_version_is_reported():
    # Three torch versions meet this code (2.8 container, 2.11 H200, 2.14 here): say which one ran.
    print(f"torch {torch.__version__}")
    assert torch.__version__ >= "2.8"


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_bias_gelu_variants(built, approximate, device="cpu"):
    kernel, _ = built["bias_gelu"]
    report = check(functools.partial(torch.ops.jitload.bias_gelu, approximate=approximate),
                   functools.partial(kernel.reference, approximate=approximate), kernel.spec.make_inputs,
                   dtypes=kernel.spec.DTYPES, device=device, grad=True, trials=1)
    assert report.ok, report


def _widths_case(device, dtype):
    # every launch path of both row kernels: a warp a row (up to 128 vectors), a block a row with 2 bfloat16
    # vectors a thread (up to 2048: 16384 wide), with 4 (65536), and the scalar path (odd widths)
    for width in (1, 7, 31, 32, 33, 1000, 1024, 4097, 4104, 16384, 65536):
        yield width, torch.randn(3, width, device=device, dtype=dtype) * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_row_kernels_from_1_to_65536_wide(built, device, dtype):
    for width, x in _widths_case(device, dtype):
        torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1), msg=f"softmax width {width}")
        res, w = torch.randn_like(x), torch.randn(width, device=device, dtype=dtype)
        out, new_res = torch.ops.jitload.rmsnorm(x, res, w, 1e-6)
        expected, expected_res = built["rmsnorm"][0].reference(x, res, w, 1e-6)
        torch.testing.assert_close(new_res, expected_res, msg=f"rmsnorm residual width {width}")
        torch.testing.assert_close(out, expected, msg=f"rmsnorm width {width}")


def test_batched_inputs_use_the_last_dimension(built):
    x = torch.randn(2, 3, 5)
    torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1))
    b = torch.randn(5)
    torch.testing.assert_close(torch.ops.jitload.bias_gelu(x, b), F.gelu(x + b))


BAD_INPUTS = [
    ("add", (torch.ones(3), torch.ones(4)), "shape mismatch"),
    ("add", (torch.ones(3), torch.ones(3, dtype=torch.float16)), "no implicit type promotion"),
    ("add", (torch.ones(3, dtype=torch.int32), torch.ones(3, dtype=torch.int32)), "expected a float32"),
    ("add_relu", (torch.ones(2, 3), torch.ones(3, 2)), "shape mismatch"),
    ("add_relu", (torch.ones(3), torch.ones(3), 4), "version must be 1"),
    ("add_relu_backward", (torch.ones(3), torch.ones(3), torch.ones(4)), "shape mismatch"),
    ("bias_gelu", (torch.ones(2, 3), torch.ones(4)), "bias has 4 elements"),
    ("bias_gelu", (torch.ones(2, 3), torch.ones(1, 3)), "bias must be 1-D"),
    ("bias_gelu", (torch.ones(()), torch.ones(1)), "at least one dimension"),
    ("bias_gelu", (torch.ones(2, 3), torch.ones(3), "fast"), "approximate must be"),
    ("bias_gelu", (torch.ones(2, 3), torch.ones(3, dtype=torch.bfloat16)), "no implicit type promotion"),
    ("rmsnorm", (torch.ones(2, 3), torch.ones(2, 4), torch.ones(3)), "shape mismatch"),
    ("rmsnorm", (torch.ones(2, 3), torch.ones(2, 3), torch.ones(4)), "weight must be 1-D with 3"),
    ("rmsnorm", (torch.ones(()), torch.ones(()), torch.ones(1)), "at least one dimension"),
    ("rmsnorm", (torch.ones(2, 3), torch.ones(2, 3), torch.ones(3), -1.0), "eps must be non-negative"),
    ("softmax", (torch.ones(()),), "at least one dimension"),
    ("softmax", (torch.ones(3, dtype=torch.int64),), "expected a float32"),
]


@pytest.mark.parametrize("op, args, message", BAD_INPUTS, ids=[f"{b[0]}-{b[2]}" for b in BAD_INPUTS])
def test_bad_input_is_a_clear_error(built, op, args, message):
    with pytest.raises(RuntimeError, match=message):
        getattr(torch.ops.jitload, op)(*args)


def test_pybind_functions_check_too(built):
    with pytest.raises(RuntimeError, match="shape mismatch"):
        built["add"][1].add(torch.ones(3), torch.ones(4))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_empty_tensors(built, device):
    e = torch.empty(0, 4, device=device)
    assert torch.ops.jitload.add(e, e).shape == (0, 4)
    assert torch.ops.jitload.add_relu(e, e).shape == (0, 4)
    assert torch.ops.jitload.bias_gelu(e, torch.ones(4, device=device)).shape == (0, 4)
    assert torch.ops.jitload.softmax(e).shape == (0, 4)
    out, res = torch.ops.jitload.rmsnorm(e, e, torch.ones(4, device=device))
    assert out.shape == res.shape == (0, 4)


def test_non_contiguous_inputs(built):
    a, b = torch.randn(8, 6).t(), torch.randn(8, 6).t()
    torch.testing.assert_close(torch.ops.jitload.add_relu(a, b), (a + b).relu())
    x = torch.randn(6, 8)[:, ::2]
    torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1))


class Block(torch.nn.Module):
    """A small MLP block built from the ops, as the seed puts its op in an nn.Module."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(4 * width) * 0.1)
        self.down = torch.nn.Linear(4 * width, width)
        self.norm_weight = torch.nn.Parameter(1 + 0.1 * torch.randn(width))

    def hidden(self, x: torch.Tensor) -> torch.Tensor:  # differentiable: bias_gelu and add_relu have backward
        h = torch.ops.jitload.bias_gelu(self.up(x), self.bias, "tanh")
        return torch.ops.jitload.add_relu(self.down(h), x)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:  # inference: all four ops
        out, _ = torch.ops.jitload.rmsnorm(self.hidden(x), residual, self.norm_weight)
        return torch.ops.jitload.softmax(out)


def _eager_hidden(block: Block, x: torch.Tensor) -> torch.Tensor:
    return (block.down(F.gelu(block.up(x) + block.bias, approximate="tanh")) + x).relu()


def _eager_block(block: Block, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    r = _eager_hidden(block, x) + residual
    return torch.softmax(r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + 1e-6) * block.norm_weight, -1)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_module_compiles_fullgraph(built, device):
    torch.manual_seed(0)
    block = Block().to(device)
    x, residual = torch.randn(16, 64, device=device), torch.randn(16, 64, device=device)
    torch._dynamo.reset()
    # fullgraph: a graph break is an error. Training: gradients through bias_gelu and add_relu.
    hidden = torch.compile(block.hidden, fullgraph=True)
    weight = torch.randn(16, 64, device=device)
    (hidden(x) * weight).sum().backward()
    ours = [p.grad.clone() for p in (block.up.weight, block.bias, block.down.weight)]
    block.zero_grad()
    (_eager_hidden(block, x) * weight).sum().backward()
    for got, expected in zip(ours, (block.up.weight.grad, block.bias.grad, block.down.weight.grad), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # inference: rmsnorm and softmax are forward only
        torch.testing.assert_close(torch.compile(block, fullgraph=True)(x, residual), _eager_block(block, x, residual))


def test_forward_only_ops_refuse_backprop(built):
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="softmax is forward only"):
        torch.ops.jitload.softmax(x)
    with pytest.raises(RuntimeError, match="rmsnorm is forward only"):
        torch.ops.jitload.rmsnorm(x, torch.randn(2, 8), torch.ones(8))
    with torch.no_grad():
        torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1))


@pytest.mark.skipif(toolchain.find_cuda_home() is None, reason="no CUDA toolkit")
@pytest.mark.parametrize("name", NAMES)
def test_cuda_source_compiled_for_sm90(built, name):
    kernel, ext = built[name]
    ninja = open(os.path.join(ext.build_directory, "build.ninja")).read()
    (cu,) = kernel.spec.CUDA_SOURCES
    obj = os.path.splitext(cu)[0] + ".cuda.o"
    assert obj in ninja
    expected = os.environ.get("TORCH_CUDA_ARCH_LIST") or (None if torch.cuda.is_available() else "9.0")
    if expected == "9.0":
        assert "-gencode=arch=compute_90,code=sm_90" in ninja
    assert os.path.getsize(os.path.join(ext.build_directory, obj)) > 0


@pytest.mark.skipif(toolchain.find_cuda_home() is None, reason="no CUDA toolkit")
def test_no_kernel_spills_and_add_loads_16_bytes(built):
    # Read off the sm_90 objects, so CI sees a spill (a stack frame) or a lost vectorisation before any GPU does.
    tables = {name: objdump.resources(ext) for name, (_, ext) in built.items()}
    for name, table in tables.items():
        assert len(table) > 0, name
        touches = (table["stack"] > 0) | (table["local"] > 0)
        assert not touches.any(), table.loc[touches, ["kernel", "registers", "stack", "local"]]
    sass = objdump.sass(built["add"][1], "map_vec_kernel<float")
    assert "LDG.E.128" in sass and "STG.E.128" in sass


@pytest.mark.skipif(toolchain.find_cuda_home() is None, reason="no CUDA toolkit")
def test_bias_gelu_float32_forward_keeps_its_measured_shape(built):
    # bias_gelu's float32 forward reached torch.compile's speed on the H200 only with 32 registers (100%
    # occupancy at 128 threads), a plain ld.global for x and an evict_last load for the bias. ptxas
    # chooses the registers (no __launch_bounds__, see the kernel), so a change that costs occupancy or the
    # loads shows here, without a GPU.
    table = objdump.resources(built["bias_gelu"][1])
    shape = "bias_gelu_rows_kernel<float, 4, 2, 1, 128, true"  # C, K, threads, Triton's loads
    forward = table[table["kernel"].str.contains(shape, regex=False)]
    assert len(forward) == 4, table["kernel"].tolist()  # exact and tanh, with and without bounds checks
    assert (forward["registers"] <= 32).all(), forward[["kernel", "registers"]]
    sass = objdump.sass(built["bias_gelu"][1], shape)
    assert "LDG.E.EL.128" in sass and "LDG.E.128 " in sass and "LDG.E.128.CONSTANT" not in sass
    # Without the bounds checks, for shapes that need none, the exact forward is 278 instructions against 335
    # (nvcc 13.0): what the unchecked form is for (see the kernel's comment).
    exact = shape + ", false, "  # TANH false, then GUARD
    sizes = {guard: len([line for line in objdump.sass(built["bias_gelu"][1], f"{exact}{guard}").splitlines()
                         if not line.startswith("//") and " NOP" not in line])
             for guard in ("true", "false")}
    assert sizes["false"] < 0.9 * sizes["true"], sizes


UNDO_SCRIPT = r"""
import os, shutil, sys, torch
from jitload import kernels
src, scratch = sys.argv[1], sys.argv[2]
shutil.copytree(kernels.get(src).folder, f"{scratch}/kernels/add")
shutil.copytree(kernels.get(src).common_dir, f"{scratch}/kernels/common")
spec = f"{scratch}/kernels/add/spec.py"
text = open(spec).read()
open(spec, "w").write(text.replace('NAME = "add"', 'NAME = "add_undo"'))
cpu = f"{scratch}/kernels/add/add_cpu.cpp"
good = open(cpu).read()
lab = kernels.get(f"{scratch}/kernels/add")
x = torch.ones(4)
seen = []
for text in (good, good.replace("static_cast<jk::acc_t<T>>(x[i]) +", "2 * static_cast<jk::acc_t<T>>(x[i]) +"), good):
    open(cpu, "w").write(text)
    st = os.stat(cpu)
    os.utime(cpu, ns=(st.st_mtime_ns + 10**9, st.st_mtime_ns + 10**9))
    ext = lab.build(with_cuda=False)
    seen.append((ext.info.module_name, torch.ops.jitload.add(x, x)[0].item(), ext.add(x, x)[0].item()))
print(seen)
"""


def test_undoing_an_edit_reregisters_the_earlier_build(tmp_path):
    # The third build's objects equal the first's. Its library was loaded before; without a fresh link the
    # dispatcher would keep the second build's kernel (3 = 2x + y) while the module's own function gives 2.
    proc = subprocess.run([sys.executable, "-c", UNDO_SCRIPT, "add", str(tmp_path)], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (first, v1, f1), (second, v2, f2), (third, v3, f3) = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert (v1, f1, v2, f2, v3, f3) == (2.0, 2.0, 3.0, 3.0, 2.0, 2.0)
    assert len({first, second, third}) == 3


# ---- on the GPU ---------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("name", NAMES)
def test_cuda_kernel_matches_reference(built, name):
    _check_all(built, name, "cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_cuda_bias_gelu_variants(built, approximate):
    test_bias_gelu_variants(built, approximate, device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize(("dtype", "width"), [(torch.bfloat16, 4096), (torch.bfloat16, 3 * 4096),
                                              (torch.bfloat16, 1003), (torch.bfloat16, 2**28 + 2**20),
                                              (torch.float32, 4096), (torch.float32, 4096 + 4)])
def test_cuda_bias_gelu_each_launch_path(built, dtype, width):
    # Width 4096 takes the rows kernel without bounds checks (every row and column in range; in bfloat16 a
    # thread keeps one bias vector for 2 rows), 3 x 4096 in bfloat16 the checked one for its odd row count
    # (5461: the last block's second row is past the end); the odd width the flat kernel, one element at a
    # time; a row of 2^28 + 2^20 bfloat16 the rows kernel with 65792 blocks a row (each block finds its row and
    # stretch by dividing its index). float32 at 4096: 2 vectors x 128 threads a block, 4 blocks a row,
    # unchecked; at 4100 checked, 5 blocks a row, the last holding one vector. A wrong column shows as a wrong
    # value somewhere here. (The flat kernel's 16-byte form now runs only past 2^31 - 1 blocks.)
    n = max(2**26, width)
    x = torch.randn(n // width, width, dtype=dtype, device="cuda")
    bias = torch.randn(width, dtype=dtype, device="cuda")
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}  # float32: assert_close's own
    for approximate in ("none", "tanh"):
        expected = F.gelu(x + bias, approximate=approximate)
        torch.testing.assert_close(torch.ops.jitload.bias_gelu(x, bias, approximate), expected, **tol)


def _gelu_exact(x: torch.Tensor, approximate: str) -> tuple[torch.Tensor, torch.Tensor]:
    """gelu and its derivative in float64, written without 1 + erf or 1 + tanh, which cancel for x < 0."""
    x = x.double()
    if approximate == "tanh":
        z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        s = torch.sigmoid(2 * z)  # (1 + tanh z) / 2
        return x * s, s + 2 * x * s * (1 - s) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
    phi = 0.5 * torch.special.erfc(-x / math.sqrt(2))
    return x * phi, phi + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_cuda_fast_gelu_rounds_like_the_exact_value(built, dtype, approximate):
    # The 16-bit dtypes use gelu_fast.cuh (float math, ~2e-5 relative error): on every finite 16-bit value in
    # [-16, 16], each result is the exact value rounded, or one unit in the last place from it, and almost all
    # are exactly it. The check's tolerances (1e-3, 1e-2) would hide a far worse formula. Torch's own gelu is
    # not the yardstick here: its float 1 + erf(x / sqrt 2) cancels for x < -4 (3 ulps off at -4.56 in
    # bfloat16, 3x off at -5.14 in float16, measured on the H200), where gelu_fast.cuh stays within one.
    every = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    x = every[torch.isfinite(every) & (every.abs() <= 16)].cuda()
    x = torch.cat([x, x[: (-len(x)) % 8]])[None]  # whole 16-byte vectors: the vectorised kernel
    got = torch.ops.jitload.bias_gelu(x, torch.zeros(x.shape[-1], dtype=dtype, device="cuda"), approximate)
    exact, exact_grad = _gelu_exact(x, approximate)
    want = exact.to(dtype)
    ulps = (got.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    # ex2/rcp.approx.ftz flush what falls below float's smallest normal: a factor Phi < 1.2e-38, so results
    # up to |x| * 1.2e-38 (bfloat16 only, x < -10) come out as zero.
    tiny = 16 * torch.finfo(torch.float32).tiny
    flushed = exact.abs() < tiny
    off = (got != want) & (ulps > 1) & ~flushed
    assert not off.any(), list(zip(x[off][:5].tolist(), got[off][:5].tolist(), want[off][:5].tolist(), strict=True))
    assert (got[flushed].abs() <= tiny).all()
    assert (got == want).float().mean().item() > 0.99
    nan = torch.full((1, 8), float("nan"), dtype=dtype, device="cuda")
    assert torch.ops.jitload.bias_gelu(nan, torch.zeros(8, dtype=dtype, device="cuda"), approximate).isnan().all()
    grad_x, _ = torch.ops.jitload.bias_gelu_backward(torch.ones_like(x), x, torch.zeros_like(x[0]), approximate)
    # The derivative Phi(x) + x phi(x) cancels near x = -0.75, where Phi's 2e-5 relative error (Phi ~ 0.23)
    # becomes an absolute ~5e-6: an absolute bound of 1e-5 there, one unit in the last place elsewhere.
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(grad_x.double(), exact_grad.to(dtype).double(), rtol=eps, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64],
                         ids=["float32", "bfloat16", "float16", "float64"])
def test_cuda_bias_gelu_backward_fuses_the_bias_gradient(built, dtype):
    # The CUDA backward sums grad_x into the bias gradient in its own kernel: blocks of 64 column vectors x 4
    # row lanes, one wave of them striding down the rows 8 at a time (kernels/bias_gelu). Widths of one
    # vector, one past a block, 4096, and an odd width (no whole vectors: grad_x's kernel, then torch's sum);
    # from 1 row to 5000 (at 4096 wide on an H200, 49 bfloat16 blocks a stretch, each 12-13 strides).
    # The bias gradient must be the sum of grad_x as stored, within what accumulating `rows` values in
    # float32 (float64) can lose, and the same bits on every call.
    vec = 16 // torch.tensor([], dtype=dtype).element_size()
    acc_eps = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps
    shapes = [(rows, width) for rows in (1, 63, 64, 65, 200) for width in (vec, 65 * vec, 4096, 1003)]
    for rows, width in [*shapes, (5000, 4096)]:
        grad, x = (torch.randn(rows, width, dtype=dtype, device="cuda") for _ in range(2))
        bias = torch.randn(width, dtype=dtype, device="cuda")
        grad_x, grad_bias = torch.ops.jitload.bias_gelu_backward(grad, x, bias)
        want = torch.ops.aten.gelu_backward(grad.double(), (x + bias).double())
        tol = {"rtol": 1e-2, "atol": 1e-2} if vec == 8 else {}
        torch.testing.assert_close(grad_x, want.to(dtype), **tol, msg=f"grad_x {rows} x {width}")
        exact = grad_x.double().sum(0)
        bound = torch.finfo(dtype).eps * exact.abs() + rows * acc_eps * grad_x.double().abs().sum(0)
        assert ((grad_bias.double() - exact).abs() <= bound).all(), f"grad_bias {rows} x {width}"
        assert torch.equal(torch.ops.jitload.bias_gelu_backward(grad, x, bias)[1], grad_bias)


@pytest.mark.cuda
def test_cuda_misaligned_inputs_take_the_scalar_path(built):
    base = torch.randn(2**20 + 8, device="cuda")
    a, b = base[1:2**20 + 1], base[3:2**20 + 3]  # 4 and 12 bytes past a 16-byte boundary
    for version in (1, 2, 3):
        torch.testing.assert_close(torch.ops.jitload.add_relu(a, b, version), (a + b).relu())
    torch.testing.assert_close(torch.ops.jitload.add(a, b), a + b)


@pytest.mark.cuda
def test_cuda_device_mismatch_is_a_clear_error(built):
    with pytest.raises(RuntimeError, match="x is on cuda:0 but y is on cpu"):
        torch.ops.jitload.add_relu(torch.ones(3, device="cuda"), torch.ones(3))
    with pytest.raises(RuntimeError, match="weight is on cpu"):
        torch.ops.jitload.rmsnorm(torch.ones(2, 3, device="cuda"), torch.ones(2, 3, device="cuda"), torch.ones(3))


@pytest.mark.cuda
def test_cuda_more_than_2_31_elements(built):
    n = 2**31 + 5  # past int32 indexing; bfloat16 keeps it at 4 GiB per tensor
    if torch.cuda.get_device_properties(0).total_memory < 4 * 2 * n * 2:
        pytest.skip("needs about 20 GiB of GPU memory")
    a = torch.ones(n, dtype=torch.bfloat16, device="cuda")
    b = torch.full((n,), -3.0, dtype=torch.bfloat16, device="cuda")
    b[-7:] = 2.0
    out = torch.ops.jitload.add_relu(a, b)
    assert out[:-7].max().item() == 0.0 and out[-7:].eq(3.0).all().item()
    del out
    total = torch.ops.jitload.add(a, a)
    assert total[-1].item() == 2.0 and total.eq(2.0).all().item()
