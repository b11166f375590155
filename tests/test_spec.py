"""KernelSpec: every kernel folder's spec.py read in one place, what is missing named, the kernel list found."""

import os
import types

import pytest
import torch

from jitload import kernels
from jitload.harness.spec import KernelSpec, from_module


def test_every_kernel_folder_is_found_and_read():
    root = kernels.default_kernels_dir()
    on_disk = sorted(e.name for e in os.scandir(root) if os.path.isfile(os.path.join(e.path, "spec.py")))
    assert kernels.names() == on_disk and "common" not in on_disk and len(on_disk) >= 5
    found = kernels.discover()
    assert list(found) == on_disk
    for name, kernel in found.items():
        spec = kernel.spec
        assert isinstance(spec, KernelSpec) and spec.sources and spec.dtypes
        assert kernel.reference is getattr(kernel.module, f"reference_{name}")
        assert {"cpu", "cuda"} <= set(spec.bench_sizes)
        assert all(os.path.isfile(p) for p in kernel.sources(with_cuda=True)), name


def test_optional_names_default_and_declared_ones_are_read():
    add, softmax = kernels.get("add").spec, kernels.get("softmax").spec
    assert add.grad is True and softmax.grad is False  # softmax's spec declares no GRAD
    assert add.cuda_sources == ("add_kernel.cu",) and add.check_sizes is None and add.tolerances is None
    assert softmax.baselines is not None and add.baselines is None


def _module(**names):
    module = types.ModuleType("spec_under_test")
    module.__file__ = "/k/thing/spec.py"
    module.__dict__.update(names)
    return module


def test_a_missing_name_is_named_with_the_file():
    module = _module(NAME="thing", SOURCES=["a.cpp"], FUNCTION="f", DTYPES=[torch.float32],
                     BENCH_SIZES={"cpu": [8]})
    with pytest.raises(AttributeError, match=r"/k/thing/spec.py does not define make_inputs, reference_thing"):
        from_module(module, "thing")


def test_a_kernel_without_cuda_sources_runs_on_the_cpu_where_a_gpu_is_visible(monkeypatch):
    # Its code takes data_ptr() as host memory: handed CUDA tensors, it would read GPU pointers and crash.
    monkeypatch.setattr(kernels.toolchain, "default_device", lambda: torch.device("cuda"))
    module = _module(NAME="thing", SOURCES=["a.cpp"], FUNCTION="f", DTYPES=[torch.float32], BENCH_SIZES={"cpu": [8]},
                     CHECK_SIZES=[8], reference_thing=torch.neg,
                     make_inputs=lambda size, dtype, device: (torch.ones(size, dtype=dtype, device=device),))
    cpu_only = kernels.Kernel("thing", "/k/thing", from_module(module, "thing"))
    assert cpu_only.device_for() == cpu_only.device_for("cuda") == torch.device("cpu")
    assert kernels.get("add").device_for() == torch.device("cuda")
    # Inputs made on "cuda" would raise here (no GPU), so a passing check ran on the CPU.
    assert cpu_only.check(torch.neg, trials=1).ok
