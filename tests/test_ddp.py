"""A small model built on add_relu, bias_gelu and rmsnorm trains the same under DistributedDataParallel, two
processes with half the batch each, as in one process on the whole batch: on the CPU with gloo (CI), and on two
GPUs with NCCL where a machine has two (tests/ddp_train.py does the training; torchrun starts the ranks)."""

import os
import subprocess
import sys

import pytest
import torch

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_train.py")
REPO = os.path.dirname(os.path.dirname(SCRIPT))


@pytest.fixture(scope="module")
def built(build_kernel):
    # Built here once, so that the ranks only load them (two ranks building at once would wait on the lock).
    for name in ("add_relu", "bias_gelu", "rmsnorm"):
        build_kernel(name)


def _train(tmp_path, device: str, world: int) -> dict:
    out = tmp_path / f"{device}-{world}.pt"
    launcher = [] if world == 1 else ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
    # PYTHONFAULTHANDLER: a rank that aborts prints where Python was (or "<no Python frame>": at exit).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1",
               PYTHONFAULTHANDLER="1")
    proc = subprocess.run([sys.executable, *launcher, SCRIPT, "--device", device, "--out", str(out)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return torch.load(out)


@pytest.mark.slow  # four Python processes (one and two ranks), each importing torch and loading three kernels
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[
    pytest.mark.cuda, pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")])])
def test_ddp_follows_the_single_process_trajectory(built, tmp_path, device):
    single, ddp = _train(tmp_path, device, 1), _train(tmp_path, device, 2)
    assert (single["world"], ddp["world"]) == (1, 2)
    steps = list(zip(single["trajectory"], ddp["trajectory"], strict=True))
    assert len(steps) == 20
    first, last = steps[0][0], steps[-1][0]
    assert all(not torch.equal(first[k], last[k]) for k in first), "the parameters did not move"
    for step, (one, two) in enumerate(steps):
        assert one.keys() == two.keys()
        for k in one:  # float32 sums in another order: a few ulps after 20 steps
            torch.testing.assert_close(two[k], one[k], rtol=1e-5, atol=1e-6, msg=f"step {step}, {k}")
