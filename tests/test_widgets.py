"""Notebook panels: jitload.watch rebuilds on a file change and shows errors; BenchPanel re-times a bench result."""

import time

import torch
from extensions import KERNEL, PYBIND_BINDING, make_extension, write

import jitload
from jitload.builder.extension import PREVIOUS_KEPT
from jitload.ui.widgets import BenchPanel


def _wait(predicate, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_watch_panel_rebuilds_on_change_and_shows_errors(tmp_path):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    ext = jitload.prepare("panel_ext", sources, build_directory=str(tmp_path / "b"))
    panel = jitload.watch(ext)
    try:
        assert panel.builds == 1 and ext.value() == 11 and "full rebuild" in panel.status.value
        # at once, before the watching thread may be up: the snapshot taken at the build still sees it
        write(tmp_path / "src" / "kernel.cpp", KERNEL.format(base=40))
        assert _wait(lambda: panel.builds == 2), panel.status.value
        assert ext.value() == 41
        write(tmp_path / "src" / "kernel.cpp", "int kernel_value() { return nope; }\n")
        assert _wait(lambda: "failed" in panel.status.value), panel.status.value
        assert PREVIOUS_KEPT in panel.status.value and "nope" in panel.errors.value
        assert ext.value() == 41
        panel.log_toggle.value = True
        assert "nope" in panel.log.value and panel.log.layout.display == ""
        panel.rebuild_button.click()  # still broken: still failed, still the old module
        assert "failed" in panel.status.value and ext.value() == 41
    finally:
        panel.stop()
    assert not panel._thread.is_alive()


def test_bench_widget_retimes_the_chosen_point():
    def make_inputs(size, dtype, device):
        return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))

    result = jitload.bench({"add": torch.add, "mul": torch.mul}, make_inputs, sizes=(1024, 4096), device="cpu",
                           bytes_moved=lambda n, dt: 12 * n, target_ms=5, progress=False)
    panel = BenchPanel(result)
    assert panel.size.value == 4096 and set(panel.versions.value) == {"add", "mul"}
    panel.versions.value = ("mul",)
    panel.size.value = 1024
    assert list(panel.last.table["name"]) == ["mul"]  # a CPU run times no copy beside it
    assert set(panel.last.table["size"]) == {1024}
