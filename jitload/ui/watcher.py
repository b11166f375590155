"""``jitload watch``: rebuild on every save, re-check, re-time and redraw, for work in a terminal over SSH.

File events come from ``watchfiles`` (inotify underneath, with debouncing), on the folders of every source
and user header the last build depended on, so a header included later is watched from the next build on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .. import kernels
from ..builder.errors import BuildError
from ..builder.extension import Extension, prepare
from ..harness.benchmark import bench, fmt
from ..harness.checker import CheckReport
from ..kernels import Kernel
from .filewatch import folders, snapshot, wait_for_change, with_new_files


class Watcher:
    """Rebuilds an extension (and optionally checks and times a kernel) each time its files change."""

    def __init__(self, ext: Extension, kernel: Kernel | None = None, *, check: bool = False, bench: bool = False,
                 console: Console | None = None) -> None:
        if (check or bench) and kernel is None:
            raise ValueError("--check and --bench need a kernel folder (its spec names the reference)")
        self.ext, self.kernel = ext, kernel
        self.do_check, self.do_bench = check, bench
        self.console = console or Console()
        self.builds = 0
        ext.on_verified.append(self._settled)

    def _settled(self, ext: Extension) -> None:
        """The full build behind a swap ended: say whether it verified the swap or runs in its place."""
        info = ext.info
        style = "green" if info is not None and info.verification.startswith("verified") else "yellow"
        self.console.print(f"[bold]{time.strftime('%H:%M:%S')}[/] {ext.name}: [{style}]{info}[/]")

    def files(self) -> list[str]:
        return self.ext.files()

    def cycle(self) -> bool:
        """One rebuild, then the check and bench if asked; prints what happened. True if the build worked."""
        stamp = time.strftime("%H:%M:%S")
        try:
            self.ext.reload()
        except BuildError as err:
            self.console.print(Panel(Text(str(err)), title=f"{stamp} {self.ext.name}: build {self.ext.info}",
                                     border_style="red"))
            return False
        self.builds += 1
        self.console.print(f"[bold]{stamp}[/] {self.ext.name}: [green]{self.ext.info}[/]")
        fn = getattr(self.ext, self.kernel.spec.function) if self.kernel else None
        if self.do_check:
            report = self.kernel.check(fn, grad=False, trials=1)  # gradients: `jitload check`, not every save
            if not self._said(report, "check"):
                return True
        if self.do_bench:
            self._bench(fn)
        return True

    def _said(self, report: CheckReport, what: str) -> bool:
        """Print a check's summary line and its first failures; True if it passed."""
        style = "green" if report.ok else "red"
        self.console.print(f"  {what}: [{style}]{report.summary()}[/]")
        for failure in report.failures[:3]:
            self.console.print(f"    {failure}", markup=False)
        return report.ok

    def _bench(self, fn: Callable[..., Any]) -> None:
        spec = self.kernel.spec
        device = self.kernel.device_for()
        sizes, dtypes = list(spec.bench_sizes[device.type][-2:]), list(spec.dtypes[:1])
        # What is timed is checked first, in the layout bench makes: a fast wrong kernel is not timed.
        report = self.kernel.check(fn, grad=False, trials=1, sizes=[], timed_sizes=sizes, dtypes=dtypes)
        if not self._said(report, f"check of the timed sizes {', '.join(map(str, sizes))}"):
            self.console.print("  not timed, since the timed sizes failed their check", style="red")
            return
        result = bench({self.kernel.name: fn}, spec.make_inputs, sizes=sizes, dtypes=dtypes,
                       bytes_moved=spec.bytes_moved, device=device, eager=self.kernel.reference, target_ms=20,
                       progress=False)
        table = Table(title=f"bench on {result.device_name}", title_justify="left")
        columns = [c for c in ("name", "size", "dtype", "median_ms", "GB/s", "% of peak", result.speedup_column)
                   if c in result.table]
        for col in columns:
            table.add_column(col, justify="left" if col in ("name", "dtype") else "right")
        for row in result.table[columns].itertuples(index=False):
            table.add_row(*(fmt(v) for v in row))
        self.console.print(table)

    def run(self, stop_event: threading.Event | None = None) -> None:
        """Build once, then rebuild on every change until Ctrl-C (or ``stop_event`` is set)."""
        while not (stop_event and stop_event.is_set()):
            started_ns, before = time.time_ns(), snapshot(self.files())
            self.cycle()
            files = self.files()
            before = with_new_files(before, files, started_ns)
            self.console.print(f"watching {len(files)} files in {len(folders(files))} folder(s); Ctrl-C stops",
                               style="dim")
            if not wait_for_change(files, stop_event, since=before):
                return  # stop_event was set


def watch_target(targets: Iterable[str], *, name: str | None = None, check: bool = False, bench: bool = False,
                 console: Console | None = None) -> Watcher:
    """A Watcher for a kernel (by name or folder) or for a list of source files."""
    targets = list(targets)
    if len(targets) == 1 and not os.path.isfile(targets[0]):
        kernel = kernels.get(targets[0])
        return Watcher(kernel.extension(), kernel, check=check, bench=bench, console=console)
    missing = [t for t in targets if not os.path.isfile(t)]
    if missing:
        raise FileNotFoundError(f"not a kernel and not files: {', '.join(missing)}")
    ext_name = name or os.path.splitext(os.path.basename(targets[0]))[0]
    return Watcher(prepare(ext_name, targets), None, check=check, bench=bench, console=console)
