"""jitload's op registration across rebuilds: undoing an edit loads the earlier build again, and the torch
dispatcher runs it (not the build in between)."""

import ast
import subprocess
import sys

UNDO_SCRIPT = r"""
import os, shutil, sys, torch
from jitload import kernels
src, scratch = sys.argv[1], sys.argv[2]
shutil.copytree(kernels.get(src).folder, f"{scratch}/kernels/add")
shutil.copytree(kernels.get(src).common_dir, f"{scratch}/kernels/common")
spec = f"{scratch}/kernels/add/spec.py"
text = open(spec).read()
open(spec, "w").write(text.replace('NAME = "add"', 'NAME = "add_undo"'))
cpu = f"{scratch}/kernels/add/add_cpu.cpp"
good = open(cpu).read()
lab = kernels.get(f"{scratch}/kernels/add")
x = torch.ones(4)
seen = []
for text in (good, good.replace("static_cast<jk::acc_t<T>>(x[i]) +", "2 * static_cast<jk::acc_t<T>>(x[i]) +"), good):
    open(cpu, "w").write(text)
    st = os.stat(cpu)
    os.utime(cpu, ns=(st.st_mtime_ns + 10**9, st.st_mtime_ns + 10**9))
    ext = lab.build(with_cuda=False)
    seen.append((ext.info.module_name, torch.ops.jitload.add(x, x)[0].item(), ext.add(x, x)[0].item()))
print(seen)
"""


def test_undoing_an_edit_reregisters_the_earlier_build(tmp_path):
    # The third build's objects equal the first's. Its library was loaded before; without a fresh link the
    # dispatcher would keep the second build's kernel (3 = 2x + y) while the module's own function gives 2.
    proc = subprocess.run([sys.executable, "-c", UNDO_SCRIPT, "add", str(tmp_path)], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (first, v1, f1), (second, v2, f2), (third, v3, f3) = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert (v1, f1, v2, f2, v3, f3) == (2.0, 2.0, 3.0, 3.0, 2.0, 2.0)
    assert len({first, second, third}) == 3
