"""Train a small model built on jitload's ops for a few steps and save its parameters after every step.

    python tests/ddp_train.py --device cpu --out single.pt                  # one process, the whole batch
    torchrun --nproc-per-node 2 tests/ddp_train.py --device cpu --out ddp.pt   # DistributedDataParallel

Under torchrun each rank takes its half of every batch and DistributedDataParallel averages the gradients, so
with a mean loss both runs must follow the same trajectory (tests/test_ddp.py compares them). CPU runs use gloo;
CUDA runs use NCCL with one GPU per rank (cuda:LOCAL_RANK) and NVLink multicast left off.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

from jitload import kernels

OPS = ["add_relu", "bias_gelu", "rmsnorm"]
WIDTH, HIDDEN, BATCH, STEPS = 64, 128, 32, 20


class Block(nn.Module):
    """rmsnorm on the input (forward only: its weight is a buffer), then a GELU MLP with a ReLU skip."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("norm_weight", 1 + 0.1 * torch.randn(WIDTH))
        self.up = nn.Linear(WIDTH, HIDDEN, bias=False)
        self.bias = nn.Parameter(0.1 * torch.randn(HIDDEN))
        self.down = nn.Linear(HIDDEN, WIDTH, bias=False)
        self.skip = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h, _ = torch.ops.jitload.rmsnorm(x, residual, self.norm_weight, 1e-6)
        h = torch.ops.jitload.bias_gelu(self.up(h), self.bias)
        return torch.ops.jitload.add_relu(self.down(h), self.skip(x))


def batches(device: torch.device) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(1)
    return [tuple(torch.randn(BATCH, WIDTH, generator=g).to(device) for _ in range(3)) for _ in range(STEPS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    for name in OPS:
        kernels.get(name).build()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = torch.device(args.device)
    if args.device == "cuda":
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off: not every host allows it
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = Block().to(device)
    if world > 1:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if args.device == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    share = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    trajectory = []
    for x, residual, target in batches(device):
        opt.zero_grad()
        loss = (model(x[share], residual[share]) - target[share]).pow(2).mean()
        loss.backward()
        opt.step()
        params = (model.module if world > 1 else model).named_parameters()
        trajectory.append({k: v.detach().cpu().clone() for k, v in params})
    if rank == 0:
        torch.save({"world": world, "device": str(device), "trajectory": trajectory}, args.out)
    if world > 1:
        # Both ranks reach the teardown together, and the DDP wrapper (which holds the process group) goes first.
        dist.barrier()
        del model, opt
        dist.destroy_process_group()
        # Then leave without the interpreter's finalization. gloo's worker threads are still running after
        # destroy_process_group, and one may drop its last work item (the barrier's, which holds a Python object)
        # only while Python finalizes: taking the GIL then ends that thread inside a noexcept destructor and
        # libstdc++ aborts the rank ("terminate called without an active exception", a core's stack shows
        # ~AsyncBarrierWork -> SafePyObject decref -> PyThread_exit_thread). On a busy 2-core machine with torch 2.14,
        # 5 of 25 two-rank runs aborted so; 0 of 50 leaving this way. Nothing is left to write but what stdio holds.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
