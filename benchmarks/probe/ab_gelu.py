"""Time bias_gelu's contenders in turn, rep by rep, over several memory placements: is torch.compile's lead.

Runs 12-15 (benchmarks/results/2026-12-03-h200-kernels/) timed ours and torch.compile's float32 bias_gelu at
2^26 in seven fresh processes with ``jitload.bench``, which times one contender's repetitions and then the next's.
Ours was 0.1310-0.1312 ms in all seven; torch.compile was level in four and 0.5-0.6% faster in three, with the
same generated code each time. Run 14, in a process without torch.compile, found production and Inductor's
kernel written out in Triton at one speed. This probe asks whether the lead belongs to Inductor's kernel or to
when and where each contender ran. In the bench loop the contenders run minutes apart, and each may get
its own output block from the caching allocator.

Here one cycle calls every contender once, in an order rotated each cycle. Each call is bracketed by CUDA
events, with the L2 flush of ``jitload.bench`` before it. A contender's output is freed before the next one
runs, so they all write the same block. Every round makes fresh inputs behind a pad of random size, so the
rounds sample different placements. The summary gives each contender's median over all calls and, round by
round, how ours compares with torch.compile's. Hand-written rather than ``jitload.bench`` because that times
contenders one after another, which is what this probe tests.

``--kernel`` times another kernel of kernels/ the same way (its op against torch.compile of its reference), e.g.
add_relu, whose float32 bench at 2^28 put torch.compile 0.5% ahead (benchmarks/results/2026-12-02-h200-kernels).
The copy then moves the kernel's bytes (``bytes_moved``): half read, half written. With ``--variants``, add_relu
also gets its v3's differences from Inductor's kernel, one knob each (variants/variants_add_relu.cu).

    python benchmarks/probe/ab_gelu.py [--out DIR] [--size 67108864] [--dtype float32] [--rounds 8] [--cycles 200]
                                       [--seed 0] [--variants] [--kernel bias_gelu]
"""

import argparse
import glob
import os
import random
import statistics
import sys
import tempfile

import torch

from jitload import kernels
from jitload.benchmark import FLUSH_BYTES
from jitload.checker import TOLERANCES

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the probe's neighbours: variants.py, triton_flat_gelu.py


def copy_source(kernel, size: int, dtype: torch.dtype, inputs: tuple) -> torch.Tensor:
    """What the copy copies: the first input where it holds half the bytes moved (bias_gelu's x: the bias is one
    row), so that the copy's output shares the ops' block; else a flat tensor of half the bytes (add_relu: 1.5 x)."""
    x = inputs[0]
    half = kernel.spec.bytes_moved(size, dtype) // 2
    if abs(half - x.nbytes) <= half // 100:
        return x
    return torch.empty(half // x.element_size(), dtype=dtype, device=x.device)


def contenders(kernel, dtype: torch.dtype, variants: bool, src: list) -> dict:
    fns = {
        # the copy's output allocated like the ops' so that it shares their block too; src[0] is set each round
        "copy": lambda *inputs: torch.empty_like(src[0]).copy_(src[0]),
        "jitload": getattr(torch.ops.jitload, kernel.spec.FUNCTION),
        "torch.compile": torch.compile(kernel.reference),
    }
    if kernel.name == "add_relu" and variants:  # v3's differences from Inductor's kernel (variants_add_relu.cu)
        from variants import build_add_relu

        ext = build_add_relu()
        for i, name in enumerate(ext.add_relu_cfg_names()):
            fns[name] = lambda x, y, i=i: ext.add_relu_cfg(x, y, i)
    if kernel.name != "bias_gelu" or dtype != torch.float32:  # the written-out kernel is float32 bias_gelu's only
        return fns
    try:  # Inductor's chosen candidate written out (triton_flat_gelu.py): its kernel without its wrapper
        from triton_flat_gelu import bias_gelu_flat

        fns["inductor kernel (Triton)"] = lambda x, b: bias_gelu_flat(x, b, 1024, 4)
    except ImportError as e:
        print(f"no written-out Inductor kernel: {e}")
    if variants:  # Inductor's int32 indexing in CUDA (variants_gelu.cu): is a placement's cost ours or int64's
        from variants import build

        fns["flat1024 int32"] = build().bias_gelu_flat1024
    return fns


def time_round(fns: dict, inputs: tuple, flush: torch.Tensor, cycles: int, first: int) -> dict:
    names = list(fns)
    events = {name: [] for name in names}
    for cycle in range(cycles):
        shift = (first + cycle) % len(names)
        for name in names[shift:] + names[:shift]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            fns[name](*inputs)
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    return {name: [s.elapsed_time(e) for s, e in pairs] for name, pairs in events.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--size", type=int, default=2**26)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", action="store_true",
                        help="also time variants.py's flat1024 int32 (bias_gelu float32) or add_relu's knobs")
    parser.add_argument("--kernel", default="bias_gelu", help="which kernel of kernels/ (default bias_gelu)")
    args = parser.parse_args()
    if args.variants and args.kernel not in ("bias_gelu", "add_relu"):
        parser.error("--variants has probe kernels for bias_gelu and add_relu only")
    if not torch.cuda.is_available():
        sys.exit("ab_gelu.py times CUDA kernels: no GPU here")
    cache = tempfile.mkdtemp(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # fresh, so this process's autotune choice can be read back
    rng = random.Random(args.seed)
    dtype = getattr(torch, args.dtype)
    kernel = kernels.get(args.kernel)
    kernel.build()
    src = [None]
    fns = contenders(kernel, dtype, args.variants, src)
    flush = torch.empty(FLUSH_BYTES["cuda"] // 4, dtype=torch.int32, device="cuda")
    inputs = kernel.spec.make_inputs(args.size, dtype, "cuda")
    src[0] = copy_source(kernel, args.size, dtype, inputs)
    for name, fn in fns.items():  # compile, autotune, load; and check each against the reference once
        out = fn(*inputs)
        if name != "copy":
            rtol, atol = TOLERANCES[dtype]
            torch.testing.assert_close(out, kernel.reference(*inputs), rtol=rtol, atol=atol,
                                       msg=lambda m, n=name: f"{n}: {m}")
    del out
    torch.cuda.synchronize()
    chosen = [open(p).read().strip() for p in glob.glob(os.path.join(cache, "**", "*.best_config"), recursive=True)]
    lines = [f"# {args.kernel} {args.dtype}, {args.size} elements, {args.rounds} rounds x {args.cycles} cycles, "
             f"{torch.cuda.get_device_name()}, torch {torch.__version__}, pid {os.getpid()}",
             f"torch.compile's autotune choice: {chosen or 'none saved'}", "",
             "x and out: where the round's input and the block every output took start, in MiB of virtual address",
             "", "| round | pad MiB | x | out | " + " | ".join(f"{n} ms (%)" for n in fns) +
             " | jitload / torch.compile |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in fns) + " | --- |"]
    print("\n".join(lines), flush=True)
    every = {name: [] for name in fns}
    ratios = []
    for r in range(args.rounds):
        inputs = x = src[0] = None  # the last round's tensors freed before the pad moves the new ones
        pad_mib = 2 * rng.randrange(0, 64)  # moves the inputs (and the outputs behind them) to other memory
        pad = torch.empty(pad_mib * 2**20, dtype=torch.uint8, device="cuda")
        inputs = kernel.spec.make_inputs(args.size, dtype, "cuda")
        src[0] = copy_source(kernel, args.size, dtype, inputs)
        x = inputs[0]
        out_at = torch.empty_like(x).data_ptr()  # freed at once: the block each contender's output gets next
        times = time_round(fns, inputs, flush, args.cycles, r)
        del pad
        med = {name: statistics.median(t) for name, t in times.items()}
        for name, t in times.items():
            every[name] += t
        ratios.append(med["jitload"] / med["torch.compile"])
        cells = " | ".join(f"{med[n]:.4f} ({100 * med['copy'] / med[n]:.1f})" for n in fns)
        lines.append(f"| {r} | {pad_mib} | {x.data_ptr() >> 20} | {out_at >> 20} | {cells} | {ratios[-1]:.4f} |")
        print(lines[-1], flush=True)
    pooled = {name: statistics.median(t) for name, t in every.items()}
    ahead = sum(q < 1 for q in ratios)
    level = sum(q == 1 for q in ratios)
    lines += ["", "| contender | median ms over all calls | % of the copy | p20 ms | p80 ms |",
              "| --- | --- | --- | --- | --- |"]
    for name, t in every.items():
        q = statistics.quantiles(t, n=5)
        lines.append(f"| {name} | {pooled[name]:.4f} | {100 * pooled['copy'] / pooled[name]:.1f} | {q[0]:.4f} | "
                     f"{q[3]:.4f} |")
    lines += ["", f"jitload / torch.compile, round medians: {statistics.median(ratios):.4f} median, "
              f"{min(ratios):.4f}-{max(ratios):.4f}; jitload faster in {ahead}, level in {level}, "
              f"slower in {len(ratios) - ahead - level} of {len(ratios)} rounds"]
    print("\n".join(lines[-(len(fns) + 5):]), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        prefix = "ab" if args.kernel == "bias_gelu" else f"ab-{args.kernel}"  # bias_gelu's: as in runs 19-21
        with open(os.path.join(args.out, f"{prefix}-{args.dtype}-{args.size}-{os.getpid()}.md"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
