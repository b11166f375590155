"""kernels/add: against its reference (opcheck included), bad input, empty tensors, its sm_90 object (16-byte
loads, no spills), and, marked cuda, misaligned inputs and more than 2^31 elements on the GPU."""

import pytest
import torch
from kernel_cases import HAVE_NVCC, NO_CUDA_BUILDS, check_all, cuda_source_compiled_for_sm90, no_spills

from jitload.harness import objdump


@pytest.fixture(scope="module")
def add(build_kernel):
    return build_kernel("add")


def test_cpu_twin_matches_reference(add):
    check_all(*add, "cpu")


BAD_INPUTS = [
    ((torch.ones(3), torch.ones(4)), "shape mismatch"),
    ((torch.ones(3), torch.ones(3, dtype=torch.float16)), "no implicit type promotion"),
    ((torch.ones(3, dtype=torch.int32), torch.ones(3, dtype=torch.int32)), "expected a float32"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[b[1] for b in BAD_INPUTS])
def test_bad_input_is_a_clear_error(add, args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.jitload.add(*args)


def test_pybind_functions_check_too(add):
    with pytest.raises(RuntimeError, match="shape mismatch"):
        add[1].add(torch.ones(3), torch.ones(4))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_empty_tensors(add, device):
    e = torch.empty(0, 4, device=device)
    assert torch.ops.jitload.add(e, e).shape == (0, 4)


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_cuda_source_compiled_for_sm90(add):
    cuda_source_compiled_for_sm90(*add)


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_no_spills_and_16_byte_loads(add):
    no_spills(add[1])
    sass = objdump.sass(add[1], "map_vec_kernel<float")
    assert "LDG.E.128" in sass and "STG.E.128" in sass


# ---- on the GPU ---------------------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cuda_kernel_matches_reference(add):
    check_all(*add, "cuda")


@pytest.mark.cuda
def test_cuda_misaligned_inputs_take_the_scalar_path(add):
    base = torch.randn(2**20 + 8, device="cuda")
    a, b = base[1:2**20 + 1], base[3:2**20 + 3]  # 4 and 12 bytes past a 16-byte boundary
    torch.testing.assert_close(torch.ops.jitload.add(a, b), a + b)


@pytest.mark.cuda
def test_cuda_more_than_2_31_elements(add):
    n = 2**31 + 5  # past int32 indexing; bfloat16 keeps it at 4 GiB per tensor
    if torch.cuda.get_device_properties(0).total_memory < 3 * 2 * n * 2:
        pytest.skip("needs about 12 GiB of GPU memory")
    a = torch.ones(n, dtype=torch.bfloat16, device="cuda")
    total = torch.ops.jitload.add(a, a)
    assert total[-1].item() == 2.0 and total.eq(2.0).all().item()
