"""The first checker and timer: they catch a wrong candidate and report what they measured."""

import torch

from jitload.bench import bench
from jitload.check import check


def _inputs(size, dtype, device):
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def test_check_passes_a_correct_candidate():
    report = check(torch.add, lambda a, b: a + b, _inputs, sizes=(0, 7, 1023), device="cpu")
    assert report.ok and len(report.table) == 9


def test_check_names_wrong_values_with_index_and_seed():
    def off_by_one_at_5(a, b):
        out = a + b
        if out.numel() > 5:
            out[5] += 1
        return out

    report = check(off_by_one_at_5, lambda a, b: a + b, _inputs, sizes=(7,), trials=1, device="cpu")
    assert not report.ok
    assert "flat index 5" in report.failures[0] and "seed=" in report.failures[0]


def test_check_names_wrong_dtype_and_exceptions():
    report = check(lambda a, b: (a + b).double(), lambda a, b: a + b, _inputs, sizes=(3,), trials=1, device="cpu")
    assert "wrong dtype" in report.failures[0]

    def raises(a, b):
        raise RuntimeError("boom")

    report = check(raises, lambda a, b: a + b, _inputs, sizes=(3,), trials=1, device="cpu")
    assert "raised RuntimeError: boom" in report.failures[0]


def test_bench_reports_positive_times_and_bandwidth():
    table = bench({"add": torch.add, "mul": torch.mul}, _inputs, sizes=(1024, 4096),
                  bytes_moved=lambda n, dt: 12 * n, device="cpu", reps=5)
    assert list(table["name"]) == ["add", "mul", "add", "mul"]
    assert (table["median_ms"] > 0).all() and (table["GB/s"] > 0).all()
    assert (table.loc[table["name"] == "add", "speedup"] == 1.0).all()
