"""Notebook panels (ipywidgets): ``jitload.watch(handle)`` rebuilds on file changes; ``BenchPanel(result)``
re-times a :class:`jitload.BenchResult` at the size, dtype and versions picked with its controls.

The top floor of the package: it uses the extension, the watcher's file events and the benchmark, and
nothing below imports it.
"""

from __future__ import annotations

import html
import os
import threading
import time
from typing import Any

import ipywidgets as widgets

from ..builder.errors import BuildError
from ..builder.extension import Extension
from ..harness.benchmark import METRIC_LABELS, PEAK, BenchResult
from .filewatch import snapshot, wait_for_change, with_new_files

LOG_TAIL = 80


class WatchPanel:
    """Status, last build time, a log toggle and a Rebuild button; rebuilds when a source or header changes
    on disk (edited in another tab, or over SSH). ``stop()`` ends the watching thread."""

    def __init__(self, ext: Extension, *, start: bool = True) -> None:
        self.ext = ext
        self.status = widgets.HTML()
        self.errors = widgets.HTML()
        self.log = widgets.Textarea(layout=widgets.Layout(width="100%", height="240px", display="none"),
                                    disabled=True)
        self.rebuild_button = widgets.Button(description="Rebuild", icon="refresh")
        self.log_toggle = widgets.ToggleButton(description="Build log", icon="file-text")
        self.rebuild_button.on_click(lambda _b: self.rebuild())
        self.log_toggle.observe(self._toggle_log, names="value")
        self.widget = widgets.VBox([widgets.HBox([self.rebuild_button, self.log_toggle, self.status]),
                                    self.errors, self.log])
        self.builds = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        ext.on_verified.append(self._settled)  # the full build behind a swap reports here when it ends
        self.rebuild()
        if start:
            self.start()

    def _toggle_log(self, change: dict) -> None:
        self.log.layout.display = "" if change["new"] else "none"
        if change["new"]:
            self._refresh_log()

    def _refresh_log(self) -> None:
        path = os.path.join(self.ext.build_directory, "build.log")
        try:
            with open(path, errors="replace") as f:
                self.log.value = "".join(f.readlines()[-LOG_TAIL:])
        except OSError:
            self.log.value = "(no build log yet)"

    def _settled(self, ext: Extension) -> None:
        stamp = time.strftime("%H:%M:%S")
        text = html.escape(f"{ext.info}")
        color = "#070" if ext.info is not None and ext.info.verification.startswith("verified") else "#b60"
        self.status.value = f"<span style='color:{color}'>{stamp} {text}</span>"

    def rebuild(self) -> None:
        """Rebuild now (what the button does); the previous module stays loaded if this fails."""
        with self._lock:
            started_ns, self._before = time.time_ns(), snapshot(self.ext.files())
            stamp = time.strftime("%H:%M:%S")
            try:
                self.ext.reload()
            except BuildError as err:
                self.status.value = f"<b style='color:#b00'>{stamp} build {html.escape(str(self.ext.info))}</b>"
                self.errors.value = err._repr_html_()
            else:
                self.builds += 1
                self.status.value = f"<span style='color:#070'>{stamp} {html.escape(str(self.ext.info))}</span>"
                self.errors.value = ""
            self._before = with_new_files(self._before, self.ext.files(), started_ns)
            if self.log_toggle.value:
                self._refresh_log()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if wait_for_change(self.ext.files(), self._stop, since=self._before):
                self.rebuild()

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"jitload-watch-{self.ext.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def watch(ext: Extension, *, start: bool = True) -> WatchPanel:
    """A panel that rebuilds ``ext`` whenever one of its files changes; display it in a notebook cell."""
    return WatchPanel(ext, start=start)


class BenchPanel:
    """Controls for size, dtype and the versions to time; each change re-times and redraws."""

    def __init__(self, result: BenchResult) -> None:
        if result.rerun is None:
            raise ValueError("this BenchResult cannot be re-run (it was not made by jitload.bench)")
        self.result = result
        table = result.table
        names = [n for n in table["name"].unique() if n != PEAK]
        sizes = sorted(table["size"].unique())
        self.size = widgets.SelectionSlider(options=[int(s) for s in sizes], value=int(sizes[-1]), description="size")
        self.dtype = widgets.Dropdown(options=list(table["dtype"].unique()), description="dtype")
        self.versions = widgets.SelectMultiple(options=names, value=tuple(names), description="versions")
        self.out = widgets.Output()
        for control in (self.size, self.dtype, self.versions):
            control.observe(lambda _c: self.refresh(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.size, self.dtype, self.versions]), self.out])
        self.refresh()

    def refresh(self) -> Any:
        """Re-time the chosen versions at the chosen size and dtype, and redraw."""
        import matplotlib.pyplot as plt
        from IPython.display import display

        run = self.result.rerun(list(self.versions.value), self.size.value, self.dtype.value)
        self.last = run
        with self.out:
            self.out.clear_output(wait=True)
            metric = run.metric
            fig, ax = plt.subplots(figsize=(6, 3))
            ax.barh(run.table["name"], run.table[metric], color=["black" if n == PEAK else "C0"
                                                                  for n in run.table["name"]])
            ax.set_xlabel(METRIC_LABELS[metric])
            ax.set_title(f"{run.device_name}: {self.size.value} elements, {self.dtype.value}")
            fig.tight_layout()
            plt.close(fig)  # shown once, here, not again by the inline backend at the end of the cell
            display(fig)
            display(run.table)
        return run

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
