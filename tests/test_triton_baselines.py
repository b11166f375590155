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

from jitload import kernels

pytest.importorskip("triton")

# every kernel folder that holds a Triton file: its spec must hand it out, and it must pass
WITH_TRITON = [n for n in kernels.discover()
               if any(f.startswith("triton_") and f.endswith(".py") for f in os.listdir(kernels.get(n).folder))]

SCRIPT = """
import json, sys
import torch, triton
import jitload
from jitload import kernels

kernel = kernels.get(sys.argv[1])
# what the bench tables run on a GPU: baselines() only looks at the device type, nothing touches a GPU here
fns = kernel.baselines(torch.device("cuda"))
results = {}
for label, fn in fns.items():
    # sizes: empty, one element, odd rows (1003 wide, the masked tails), whole 4096-wide rows
    report = jitload.check(fn, kernel.reference, kernel.spec.make_inputs, sizes=[0, 1, 7, 1023, 5 * 1003, 3 * 4096],
                           dtypes=[torch.float32, torch.float16], device="cpu", trials=1)
    results[label] = {"ok": report.ok, "summary": report.summary(), "checks": len(report.table)}
print(json.dumps({"results": results, "versions": f"torch {torch.__version__}, triton {triton.__version__}"}))
"""


@pytest.mark.parametrize("name", WITH_TRITON)
def test_triton_baseline_matches_reference_in_interpreter(name):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-c", SCRIPT, name], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["results"], f"{name} has a triton_*.py but its spec's baselines() returns none"
    for label, result in out["results"].items():
        print(name, label, out["versions"], result["summary"])
        assert result["checks"] > 0
        assert result["ok"], f"{label}: {result['summary']}"


def test_the_triton_baselines_are_found():
    # guards the folder scan above: it would pass vacuously if it found nothing
    assert {"add_relu", "bias_gelu", "softmax", "rmsnorm"} <= set(WITH_TRITON)
