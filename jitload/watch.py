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

from .errors import BuildError
from .extension import Extension
from .kernels import Kernel


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


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

    def files(self) -> list[str]:
        return self.ext.files()

    def cycle(self) -> bool:
        """One rebuild, then the check and bench if asked; prints what happened. True if the build worked."""
        stamp = time.strftime("%H:%M:%S")
        try:
            self.ext.reload()
        except BuildError as err:
            self.console.print(Panel(str(err), title=f"{stamp} {self.ext.name}: build failed (last good build "
                                     "kept)" if self.ext.info and self.ext.info.module_name else
                                     f"{stamp} {self.ext.name}: build failed", border_style="red"))
            return False
        self.builds += 1
        self.console.print(f"[bold]{stamp}[/] {self.ext.name}: [green]{self.ext.info}[/]")
        fn = getattr(self.ext, self.kernel.spec.FUNCTION) if self.kernel else None
        if self.do_check:
            from .checker import check

            report = check(fn, self.kernel.reference, self.kernel.spec.make_inputs, dtypes=self.kernel.spec.DTYPES,
                           sizes=getattr(self.kernel.spec, "CHECK_SIZES", None), trials=1)
            style = "green" if report.ok else "red"
            self.console.print(f"  check: [{style}]{report._summary()}[/]")
            for failure in report.failures[:3]:
                self.console.print(f"    {failure}", markup=False)
            if not report.ok:
                return True
        if self.do_bench:
            self._bench(fn)
        return True

    def _bench(self, fn: Callable[..., Any]) -> None:
        from .benchmark import bench

        spec = self.kernel.spec
        device = "cuda" if _cuda() else "cpu"
        result = bench({self.kernel.name: fn}, spec.make_inputs, sizes=spec.BENCH_SIZES[device][-2:],
                       dtypes=spec.DTYPES[:1], bytes_moved=spec.bytes_moved, eager=self.kernel.reference,
                       target_ms=20, progress=False)
        table = Table(title=f"bench on {result.device_name}", title_justify="left")
        columns = [c for c in ("name", "size", "dtype", "median_ms", "GB/s", "% of peak", "speedup")
                   if c in result.table]
        for col in columns:
            table.add_column(col, justify="left" if col in ("name", "dtype") else "right")
        for row in result.table[columns].itertuples(index=False):
            table.add_row(*(_fmt(v) for v in row))
        self.console.print(table)

    def _snapshot(self) -> dict[str, tuple[int, int] | None]:
        def stat(path: str) -> tuple[int, int] | None:
            try:
                st = os.stat(path)
            except OSError:
                return None
            return st.st_mtime_ns, st.st_size

        return {f: stat(f) for f in self.files()}

    def run(self, stop_event: threading.Event | None = None) -> None:
        """Build once, then rebuild on every change until Ctrl-C (or ``stop_event`` is set)."""
        import watchfiles

        before = self._snapshot()
        self.cycle()
        while not (stop_event and stop_event.is_set()):
            # A file saved while the last build or check ran was not being watched: rebuild at once.
            if any(self._snapshot().get(f) != s for f, s in before.items()):
                before = self._snapshot()
                self.cycle()
                continue
            files = set(self.files())
            folders = sorted({os.path.dirname(f) for f in files if os.path.isdir(os.path.dirname(f))})
            self.console.print(f"watching {len(files)} files in {len(folders)} folder(s); Ctrl-C stops",
                               style="dim")
            for _changes in watchfiles.watch(*folders, stop_event=stop_event,
                                             watch_filter=lambda _change, path, files=files: path in files):
                break
            else:
                return  # stop_event was set
            before = self._snapshot()
            self.cycle()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def watch_target(targets: Iterable[str], *, name: str | None = None, check: bool = False, bench: bool = False,
                 console: Console | None = None) -> Watcher:
    """A Watcher for a kernel (by name or folder) or for a list of source files."""
    from . import kernels
    from .extension import prepare

    targets = list(targets)
    if len(targets) == 1 and not os.path.isfile(targets[0]):
        kernel = kernels.get(targets[0])
        return Watcher(kernel.extension(), kernel, check=check, bench=bench, console=console)
    missing = [t for t in targets if not os.path.isfile(t)]
    if missing:
        raise FileNotFoundError(f"not a kernel and not files: {', '.join(missing)}")
    ext_name = name or os.path.splitext(os.path.basename(targets[0]))[0]
    return Watcher(prepare(ext_name, targets), None, check=check, bench=bench, console=console)
