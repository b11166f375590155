"""jitload watch in a terminal: edit under a running watcher, see the rebuild and the new check; break the
build, see file:line; fix it; Ctrl-C leaves no process and no lock file behind."""

import os
import queue
import re
import signal
import subprocess
import threading
import time

from extensions import PYTHON, processes_mentioning, write

SPEC = """
import torch

NAME = "wk"
SOURCES = ["wk.cpp", "wk_cpu.cpp"]
FUNCTION = "scale"
DTYPES = [torch.float32]
CHECK_SIZES = [1, 7, 1023]
BENCH_SIZES = {"cpu": [1024, 4096], "cuda": [1024, 4096]}


def reference_wk(x):
    return x * 2


def make_inputs(size, dtype, device):
    return (torch.randn(size, dtype=dtype, device=device),)


def bytes_moved(size, dtype):
    return 8 * size
"""
BINDING = """
#include <torch/extension.h>
#include "wk.h"
torch::Tensor scale(const torch::Tensor& x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    scale_cpu(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel());
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
"""
HEADER = "#pragma once\n#include <cstdint>\nvoid scale_cpu(const float* x, float* out, int64_t n);\n"
KERNEL = """
#include "wk.h"
void scale_cpu(const float* x, float* out, int64_t n) {{
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * {factor};
}}
"""


class Output:
    """The watcher's stdout, read on a thread, waited on by pattern."""

    def __init__(self, proc):
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream):
        for line in stream:
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(self.seen)}")


def test_watch_rebuilds_rechecks_reports_errors_and_stops_cleanly(tmp_path):
    folder = tmp_path / "wk"
    folder.mkdir()
    write(folder / "spec.py", SPEC)
    write(folder / "wk.h", HEADER)
    write(folder / "wk.cpp", BINDING)
    kernel = write(folder / "wk_cpu.cpp", KERNEL.format(factor=2))
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path / "cache"), COLUMNS="200")
    proc = subprocess.Popen([PYTHON, "-m", "jitload", "watch", str(folder), "--check", "--bench"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = Output(proc)
    try:
        out.wait_for(r"wk: full rebuild")
        out.wait_for(r"check: PASS")
        out.wait_for(r"GB/s")
        out.wait_for(r"watching 3 files")

        write(kernel, KERNEL.format(factor=3))  # a wrong kernel: the check must say so
        out.wait_for(r"wk: full rebuild")
        out.wait_for(r"check: FAIL")
        out.wait_for(r"wrong_values")

        write(kernel, KERNEL.format(factor="2 +"))  # a syntax error: file:line and the last good build kept
        out.wait_for(r"wk: build failed after [0-9.]+ s \(previous build kept\)")
        out.wait_for(re.escape(f"{kernel}:3:"))

        write(kernel, KERNEL.format(factor=2))  # fixed: rebuilt and right again
        out.wait_for(r"check: PASS")
        out.wait_for(r"watching")

        write(kernel, KERNEL.format(factor="(n == 4096 ? 3 : 2)"))  # wrong only at a size bench times
        out.wait_for(r"check: PASS")
        out.wait_for(r"check of the timed sizes 1024, 4096: FAIL")
        out.wait_for(r"not timed, since the timed sizes failed")
        out.wait_for(r"watching")

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        out.wait_for(r"stopped", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
    build_dir = tmp_path / "cache"
    assert not list(build_dir.rglob("jitload.lock"))
    assert not processes_mentioning(str(tmp_path))


def test_a_file_a_build_found_first_and_saved_while_it_ran_counts_as_changed(tmp_path):
    from jitload.ui.filewatch import snapshot, with_new_files

    known, old_header, saved_header = (tmp_path / n for n in ("k.cu", "old.cuh", "saved.cuh"))
    for path in (known, old_header):
        path.write_text("x")
    os.utime(old_header, ns=(1, 1))
    before = snapshot([str(known)])
    started_ns = time.time_ns() - 1_000_000
    saved_header.write_text("y")  # the build included it for the first time, and the editor saved it meanwhile
    after = with_new_files(before, [str(known), str(old_header), str(saved_header)], started_ns)
    assert after[str(known)] == before[str(known)]
    assert after[str(old_header)] == (1, 1)  # found first, but unchanged since: compared as usual
    assert after[str(saved_header)] is None  # never equal to a snapshot: the watcher rebuilds at once
