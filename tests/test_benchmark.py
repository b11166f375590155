"""jitload.bench: quantiles in order, the copy peak, speedups named for their baseline, compile time kept apart,
repetitions bounded by wall time, contenders timed in rounds, and the plot."""

import time

import matplotlib.pyplot as plt
import pytest
import torch

import jitload.harness.benchmark
from jitload.harness.benchmark import PEAK, bench


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
                 device="cpu", target_ms=20, peak=True)  # the copy's machinery, on a CPU (where it is off)


def test_rows_quantiles_and_bandwidth(result):
    table = result.table
    assert list(table["name"].unique()) == [PEAK, "add", "slow"]
    timed = table[table["name"] != PEAK]
    assert (timed["p20_ms"] > 0).all()
    assert (timed["p20_ms"] <= timed["median_ms"]).all() and (timed["median_ms"] <= timed["p80_ms"]).all()
    assert (timed["GB/s"] > 0).all() and (timed["% of peak"] > 0).all()
    assert result.device == "cpu" and result.device_name.startswith("CPU")


def test_speedup_is_named_for_the_first_entry_without_eager(result):
    table = result.table
    assert result.baseline == "add" and result.speedup_column == "vs add" and "speedup" not in table
    assert (table.loc[table["name"] == "add", "vs add"] == 1.0).all()
    # each entry's value is add's median over its own, at the same size and dtype
    for _, rows in table[table["name"] != PEAK].groupby(["size", "dtype"]):
        by_name = rows.set_index("name")
        assert by_name.loc["slow", "vs add"] == pytest.approx(by_name.loc["add", "median_ms"] /
                                                              by_name.loc["slow", "median_ms"])
    assert table.loc[table["name"] == PEAK, "vs add"].isna().all()


def test_speedup_is_against_eager_when_given():
    res = bench({"slow": slow_add}, make_inputs, sizes=(1024,), device="cpu", eager=torch.add, peak=False,
                target_ms=5, min_reps=5, progress=False)
    assert res.baseline == "eager" and list(res.table.columns)[-1] == "vs eager"
    by_name = res.table.set_index("name")
    assert by_name.loc["eager", "vs eager"] == 1.0
    assert by_name.loc["slow", "vs eager"] == pytest.approx(by_name.loc["eager", "median_ms"] /
                                                           by_name.loc["slow", "median_ms"])


def test_plot_one_panel_per_dtype_in_percent_of_the_copy():
    res = bench({"add": torch.add, "slow": slow_add, "mul": torch.mul}, make_inputs, sizes=(1024, 4096),
                dtypes=(torch.float32, torch.float64), bytes_moved=bytes_moved, device="cpu", target_ms=2,
                min_reps=3, peak=True, progress=False)
    open_before = plt.get_fignums()
    fig = res.plot(title="add on a CPU")
    assert plt.get_fignums() == open_before  # closed in pyplot: a notebook shows it once, as the cell's value
    assert [ax.get_title() for ax in fig.axes] == ["float32", "float64"]
    assert fig._suptitle.get_text() == "add on a CPU"
    first = {line.get_label(): line for line in fig.axes[0].get_lines()}
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.get_xlabel() == "elements"
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines) == [PEAK, "add", "slow", "mul"]
        assert list(lines[PEAK].get_ydata()) == pytest.approx([100.0, 100.0])  # the copy is the 100% line
        styles = {(str(ln.get_color()), ln.get_linestyle(), ln.get_marker()) for ln in lines.values()}
        assert len(styles) == 4  # the copy and every entry drawn distinctly
        for name, line in lines.items():  # an entry keeps its style in every panel
            assert (line.get_color(), line.get_linestyle(), line.get_marker()) == (
                first[name].get_color(), first[name].get_linestyle(), first[name].get_marker())
    assert "% of the copy" in fig.axes[0].get_ylabel()
    assert [t.get_text() for t in fig.axes[-1].get_legend().get_texts()] == [PEAK, "add", "slow", "mul"]


def test_plot_into_given_axes(result):
    fig, ax = plt.subplots()
    try:
        assert result.plot(ax=ax) is fig and len(ax.get_lines()) == 3
        with pytest.raises(ValueError, match="one Axes per dtype"):
            result.plot(ax=[ax, ax])
    finally:
        plt.close(fig)


def test_repetitions_are_bounded_by_wall_time():
    # 1024 elements take microseconds, the 64 MB flush before each repetition milliseconds: counted by kernel
    # time alone this would run max_reps (1000) repetitions, seconds of wall time for 20 ms measured.
    calls = []
    res = bench({"add": lambda a, b: calls.append(1) or torch.add(a, b)}, make_inputs, sizes=(1024,),
                device="cpu", target_ms=20, peak=False, progress=False)
    reps = res.table["reps"].item()
    assert reps < 1000 and len(calls) < 1000  # what the wall budget stopped, counted in calls
    capped = bench({"add": torch.add}, make_inputs, sizes=(1024,), device="cpu", target_ms=20, wall_ms=1e6,
                   max_reps=50, peak=False, progress=False)
    assert capped.table["reps"].item() == 50  # a large wall budget leaves the kernel-time count (clipped) alone


def test_interleave_times_contenders_in_rounds():
    calls = []

    def recorder(name, fn):
        def run(*args):
            calls.append(name)
            return fn(*args)
        return run

    res = bench({"add": recorder("add", torch.add), "slow": recorder("slow", slow_add)}, make_inputs,
                sizes=(1024,), device="cpu", eager=recorder("eager", torch.add), interleave=True, target_ms=5,
                min_reps=6, max_reps=6, progress=False)
    assert list(res.table["name"]) == ["add", "slow", "eager"]  # (no bytes_moved: no copy)
    assert set(res.table["reps"]) == {6}
    timed = calls[-6 * 3:]  # after each contender's three warm-up calls
    rounds = [timed[i:i + 3] for i in range(0, len(timed), 3)]
    # every round calls each contender once, and the order turns from round to round
    assert all(sorted(r) == ["add", "eager", "slow"] for r in rounds), rounds
    assert len({tuple(r) for r in rounds}) > 1, rounds
    by_name = res.table.set_index("name")["median_ms"]
    assert by_name["slow"] >= 1.0  # slow sleeps 1 ms a call: its time stays with it, not spread over the round


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
    assert "torch.compile: first calls (compilation) took" in res._repr_html_()  # what a notebook shows


def test_a_cpu_table_has_no_copy_and_several_contenders_are_timed_in_rounds(monkeypatch):
    rounds = []
    monkeypatch.setattr("jitload.harness.benchmark._Timer.time_rounds",
                        lambda self, fns, real=jitload.harness.benchmark._Timer.time_rounds: rounds.append(list(fns)) or
                        real(self, fns))
    res = bench({"add": torch.add, "mul": torch.mul}, make_inputs, sizes=(1024,), bytes_moved=bytes_moved,
                device="cpu", target_ms=2, progress=False)
    assert PEAK not in set(res.table["name"]) and "% of peak" not in res.table and "GB/s" in res.table
    assert rounds == [["add", "mul"]]  # both in one set of rounds
    rounds.clear()
    bench({"add": torch.add, "mul": torch.mul}, make_inputs, sizes=(1024,), device="cpu", target_ms=2,
          interleave=False, progress=False)
    assert rounds == [["fn"], ["fn"]]  # one after the other


@pytest.mark.parametrize("compiled, expected", [(True, [False, False, False, False]), ("dynamic", [True])])
def test_torch_compile_is_compiled_for_each_shape_unless_dynamic(monkeypatch, compiled, expected):
    made = []
    monkeypatch.setattr(torch, "compile", lambda fn, dynamic=None: made.append(dynamic) or fn)
    res = bench({"add": torch.add}, make_inputs, sizes=(1024, 4096), dtypes=(torch.float32, torch.float64),
                device="cpu", eager=torch.add, compiled=compiled, target_ms=1, progress=False)
    assert made == expected  # dynamic=False: a compilation per (size, dtype), as a user timing one shape gets
    assert "torch.compile" in set(res.table["name"])


def test_each_shape_gets_a_compiled_graph_of_its_own(monkeypatch):
    # dynamo keeps 8 graphs a function by default: 12 shapes would leave the last ones running uncompiled
    import torch._dynamo.config as dynamo_config

    limits, before = [], dynamo_config.recompile_limit
    monkeypatch.setattr(torch, "compile", lambda fn, dynamic=None: lambda *a: limits.append(
        dynamo_config.recompile_limit) or fn(*a))
    bench({"add": torch.add}, make_inputs, sizes=(8, 16, 32, 64, 128, 256), dtypes=(torch.float32, torch.float64),
          device="cpu", eager=torch.add, compiled=True, target_ms=1, max_reps=10, progress=False)
    assert limits and min(limits) >= 12
    assert dynamo_config.recompile_limit == before  # as it was, after the bench


def test_bad_arguments():
    with pytest.raises(ValueError, match="eager="):
        bench({"add": torch.add}, make_inputs, sizes=(8,), device="cpu", compiled=True)
    with pytest.raises(ValueError, match="'static'"):
        bench({"add": torch.add}, make_inputs, sizes=(8,), device="cpu", eager=torch.add, compiled="fast")
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
    assert (peak["GB/s"] > 100).all()  # a data-centre GPU copies terabytes per second; anything this low is broken
    timed = table[table["name"] != PEAK]
    assert (timed["p20_ms"] <= timed["median_ms"]).all() and (timed["median_ms"] <= timed["p80_ms"]).all()
