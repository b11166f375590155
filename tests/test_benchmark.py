"""jitload.bench: quantiles in order, the copy peak, speedups, compile time kept apart, and the plot."""

import time

import pytest
import torch

from jitload.benchmark import PEAK, bench


def make_inputs(size, dtype, device):
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def bytes_moved(size, dtype):
    return 3 * size * torch.tensor([], dtype=dtype).element_size()


def slow_add(a, b):
    time.sleep(0.001)
    return a + b


@pytest.fixture(scope="module")
def result():
    return bench({"add": torch.add, "slow": slow_add}, make_inputs, sizes=(1024, 2**16), bytes_moved=bytes_moved,
                 device="cpu", target_ms=20)


def test_rows_quantiles_and_bandwidth(result):
    table = result.table
    assert list(table["name"].unique()) == [PEAK, "add", "slow"]
    timed = table[table["name"] != PEAK]
    assert (timed["p20_ms"] > 0).all()
    assert (timed["p20_ms"] <= timed["median_ms"]).all() and (timed["median_ms"] <= timed["p80_ms"]).all()
    assert (timed["GB/s"] > 0).all() and (timed["% of peak"] > 0).all()
    assert result.device == "cpu" and result.device_name.startswith("CPU")


def test_speedup_is_relative_to_the_first_entry(result):
    table = result.table
    assert (table.loc[table["name"] == "add", "speedup"] == 1.0).all()
    assert (table.loc[table["name"] == "slow", "speedup"] < 1.0).all()  # good but slow is seen as slow


def test_plot_has_the_expected_axes(result):
    fig = result.plot()
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "elements" and "GB/s" in ax.get_ylabel()
    labels = [line.get_label() for line in ax.get_lines()]
    assert f"{PEAK} (float32)" in labels and "add (float32)" in labels


def test_markdown_table(result):
    lines = result.to_markdown().splitlines()
    assert lines[0].startswith("| name | device | size") and set(lines[1].replace("|", "").split()) == {"---"}
    assert len(lines) == 2 + len(result.table)


def test_compiled_baseline_keeps_compile_time_out_of_the_median():
    res = bench({"add": torch.add}, make_inputs, sizes=(4096,), device="cpu", eager=lambda a, b: a + b,
                compiled=True, peak=False, target_ms=10)
    assert list(res.table["name"]) == ["add", "eager", "torch.compile"]
    compiled_ms = res.table.loc[res.table["name"] == "torch.compile", "median_ms"].item()
    assert res.compile_seconds["torch.compile"] > 10 * compiled_ms / 1e3
    assert "compilation" in repr(res)


def test_bad_arguments():
    with pytest.raises(ValueError, match="eager="):
        bench({"add": torch.add}, make_inputs, sizes=(8,), device="cpu", compiled=True)
    with pytest.raises(ValueError, match="non-negative"):
        bench({"add": torch.add}, make_inputs, sizes=(-1,), device="cpu")
    with pytest.raises(ValueError, match="at least one"):
        bench({}, make_inputs, sizes=(8,), device="cpu")


@pytest.mark.cuda
def test_cuda_events_timing_and_copy_peak():
    res = bench({"add": torch.add}, make_inputs, sizes=(2**20, 2**24), bytes_moved=bytes_moved, device="cuda",
                eager=lambda a, b: a + b)
    table = res.table
    assert res.device == "cuda"
    peak = table[table["name"] == PEAK]
    assert (peak["GB/s"] > 100).all()  # an H200 copies terabytes per second; anything this low is broken
    timed = table[table["name"] != PEAK]
    assert (timed["p20_ms"] <= timed["median_ms"]).all() and (timed["median_ms"] <= timed["p80_ms"]).all()
