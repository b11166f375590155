"""The Triton baselines that the bench tables time ours against, checked on CPU through Triton's interpreter
(TRITON_INTERPRET=1), so a wrong baseline shows in CI rather than first in a GPU run's table. The interpreter
runs the same kernel code through numpy: it proves indexing, masks, reductions and arithmetic, not speed.
bfloat16 is left to the GPU run (numpy has no bfloat16); the cuda-marked kernel tests check it there.

Each check runs in a fresh process: the interpreter is chosen when ``triton.jit`` decorates a kernel, at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

# (kernel, module in its folder, function): every baseline a spec's baselines() returns
BASELINES = [("add_relu", "triton_add_relu", "add_relu"), ("bias_gelu", "triton_bias_gelu", "bias_gelu"),
             ("softmax", "triton_softmax", "softmax"), ("rmsnorm", "triton_rmsnorm", "rmsnorm")]

SCRIPT = """
import json, os, sys
import torch, triton
import jitload
from jitload import kernels
from jitload.kernels import sibling

name, module, function = sys.argv[1:4]
kernel = kernels.get(name)
baseline = getattr(sibling(os.path.join(kernel.folder, "spec.py"), module), function)
# sizes: empty, one element, odd rows (1003 wide, the masked tails), whole 4096-wide rows
report = jitload.check(baseline, kernel.reference, kernel.spec.make_inputs, sizes=[0, 1, 7, 1023, 5 * 1003, 3 * 4096],
                       dtypes=[torch.float32, torch.float16], device="cpu", trials=1)
print(json.dumps({"ok": report.ok, "summary": report.summary(), "checks": len(report.table),
                  "versions": f"torch {torch.__version__}, triton {triton.__version__}"}))
"""


@pytest.mark.parametrize("name,module,function", BASELINES, ids=[b[0] for b in BASELINES])
def test_triton_baseline_matches_reference_in_interpreter(name, module, function):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-c", SCRIPT, name, module, function], env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print(name, result["versions"], result["summary"])
    assert result["checks"] > 0
    assert result["ok"], result["summary"]


def test_every_triton_baseline_is_listed():
    # a new triton_*.py in a kernel folder must be checked here too
    from jitload import kernels

    found = {(n, f[:-3]) for n in kernels.discover() for f in os.listdir(kernels.get(n).folder)
             if f.startswith("triton_") and f.endswith(".py")}
    assert found == {(n, m) for n, m, _ in BASELINES}
