"""Time launch configurations of softmax, bias_gelu and rmsnorm that their launchers do not choose, beside the
production op, Triton and eager torch, in one run on a GPU: which share of a row per thread, how many
vectors in flight, column vectors and rows a thread, block order, loads and register caps (float32). The
kernels are kernels/'s own (variants/*.cu include them; the float32 "occ" kernel is a probe-only copy of the
rows kernel that takes those knobs).

    python benchmarks/probe/variants.py [--out DIR] [--kernels softmax bias_gelu rmsnorm] [--dtypes ...]
                                        [--only LABEL-PART ...]

Prints one table per kernel and dtype (% of a device copy of the same bytes in the same run).
"""

import argparse
import os
from types import SimpleNamespace

import torch
from torch.utils.cpp_extension import load

import jitload
from jitload import kernels

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "..", "..", "kernels")


FLAGS = ["-O3", "-DJITLOAD_WITH_CUDA"]


def build():
    return load(name="jitload_variants", sources=[os.path.join(HERE, "variants", f)
                                                   for f in ("variants.cu", "variants_gelu.cu", "variants_rmsnorm.cu")],
                extra_include_paths=[os.path.join(KERNELS, d) for d in ("common", "softmax", "bias_gelu", "rmsnorm")],
                extra_cflags=FLAGS, extra_cuda_cflags=FLAGS, verbose=False)


def build_add_relu():
    """add_relu's knobs (variants/variants_add_relu.cu), on their own: ab_gelu.py --kernel add_relu --variants."""
    return load(name="jitload_variants_add_relu", sources=[os.path.join(HERE, "variants", "variants_add_relu.cu")],
                extra_include_paths=[os.path.join(KERNELS, "common")], extra_cflags=FLAGS, extra_cuda_cflags=FLAGS,
                verbose=False)


def run(name, fns, spec, dtypes, sizes, reference, out, only=()):
    for dtype in dtypes:
        checked = {}
        for label, fn in fns(dtype).items():
            if only and label != "production" and not any(part in label for part in only):
                continue
            # the variants take contiguous rows only; a variant that fails is reported and not timed
            report = jitload.check(fn, reference, spec.make_inputs, sizes=[2**20], dtypes=[dtype], device="cuda",
                                   trials=1, layouts=("contiguous",))
            if report.ok:
                checked[label] = fn
            else:
                print(f"{name} {label} {dtype}: FAILED the check: {report.summary()}")
        result = jitload.bench(checked, spec.make_inputs, sizes=sizes, dtypes=[dtype], bytes_moved=spec.bytes_moved,
                               device="cuda", progress=False)
        table = result.to_markdown()
        print(f"\n## {name} {dtype}\n\n{table}\n", flush=True)
        if out:
            with open(os.path.join(out, f"variants-{name.replace(' ', '-')}.md"), "a") as f:
                f.write(f"\n## {name} {dtype}\n\n{table}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--sizes", type=int, nargs="*", default=[2**26, 2**28])
    parser.add_argument("--repeat", type=int, default=1, help="time each kernel's table this many times")
    parser.add_argument("--kernels", nargs="*", default=["softmax", "bias_gelu"],
                        choices=["softmax", "bias_gelu", "bias_gelu_backward", "rmsnorm"])
    parser.add_argument("--only", nargs="*", default=[],
                        help="time production and the variants whose label contains one of these")
    parser.add_argument("--dtypes", nargs="*", default=["bfloat16", "float32"], choices=["bfloat16", "float32"])
    args = parser.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    m = build()
    sm, bg, rn = kernels.get("softmax"), kernels.get("bias_gelu"), kernels.get("rmsnorm")
    sm.build(), bg.build(), rn.build()
    triton_softmax = sm.baselines(torch.device("cuda")).get("triton")
    triton_gelu = bg.baselines(torch.device("cuda")).get("triton")
    triton_rmsnorm = rn.baselines(torch.device("cuda")).get("triton")

    def softmax_fns(dtype):
        fns = {"production": torch.ops.jitload.softmax}
        for threads in (128, 256, 512, 1024):
            fns[f"{threads} threads/row"] = lambda x, t=threads: m.softmax_threads(x, t)
        if triton_softmax:
            fns["triton"] = triton_softmax
        fns["eager"] = lambda x: torch.softmax(x, -1)
        return fns

    def gelu_fns(dtype):
        fns = {"production": torch.ops.jitload.bias_gelu}
        fast = dtype != torch.float32  # float32 keeps libm's erff
        for u, cap in ((1, 32), (2, 32), (4, 32)):
            label = f"flat {'fast' if fast else 'erff'} U={u} grid={f'{cap}/SM' if cap else 'all'}"
            fns[label] = lambda x, b, u=u, cap=cap: m.bias_gelu_cfg(x, b, u, fast, cap)
        for c, k, block in ((1, 2, 512), (1, 2, 256), (2, 1, 128), (2, 1, 256), (2, 1, 512), (4, 1, 256)):
            fns[f"tile C={c} K={k} block={block}"] = lambda x, b, c=c, k=k, block=block: m.bias_gelu_tile(
                x, b, c, k, block)
        if dtype == torch.float32:
            # block order, loads as Triton emits them, register caps (variants_gelu.cu says why); the cache hints
            # tried in run 10 (.cs, L1::no_allocate) all lost 1-8% and are gone
            for block, c, minb, linear, xload, bload in (
                    (128, 2, 1, False, 0, 0), (128, 2, 1, True, 0, 0), (128, 2, 1, True, 1, 0),
                    (128, 2, 1, True, 1, 1), (128, 2, 16, True, 1, 1), (256, 4, 1, True, 0, 0),
                    (256, 4, 1, True, 1, 0), (256, 4, 1, True, 1, 1), (512, 2, 1, True, 0, 0),
                    (512, 2, 1, True, 1, 0), (512, 2, 1, True, 1, 1), (512, 2, 4, True, 1, 1)):
                label = (f"occ block={block} C={c} minb={minb}{' linear' if linear else ''}"
                         f"{' x:ld.global' if xload else ''}{' bias:evict_last' if bload else ''}")
                fns[label] = lambda x, b, args=(block, c, minb, linear, xload, bload): m.bias_gelu_occ(x, b, *args)
            # Inductor's indexing in CUDA: int32, a block per 1024 elements, no guard (variants_gelu.cu)
            fns["flat1024 int32"] = m.bias_gelu_flat1024
            if triton_gelu:  # Inductor's two 1-D candidates, written out (triton_flat_gelu.py)
                from triton_flat_gelu import bias_gelu_flat

                for xblock, warps in ((1024, 4), (512, 8)):
                    fns[f"triton flat XBLOCK={xblock} warps={warps}"] = (
                        lambda x, b, xblock=xblock, warps=warps: bias_gelu_flat(x, b, xblock, warps))
        if triton_gelu:
            fns["triton"] = triton_gelu
        fns["eager"] = lambda x, b: torch.nn.functional.gelu(x + b)
        return fns

    def rmsnorm_fns(dtype):
        fns = {"production": torch.ops.jitload.rmsnorm}
        vectors = rn.spec.WIDTH * dtype.itemsize // 16
        for threads in (128, 256, 512, 1024):
            for plain in (False, True):
                if threads <= vectors and vectors // threads <= 4:
                    label = f"{threads} threads/row K={vectors // threads}{' x,r:ld.global' if plain else ''}"
                    fns[label] = lambda x, r, w, t=threads, p=plain: tuple(m.rmsnorm_shape(x, r, w, t, p))
        if triton_rmsnorm:
            fns["triton"] = triton_rmsnorm
        return fns

    # bias_gelu's backward as benchmarks/backward.py times it (grad_x and the bias gradient), by grad_x's kernel
    # then torch's sum over rows, or fused; and grad_x alone: which part lost bandwidth at 2^26 in bfloat16
    # (82% in run 12). The % is of a copy of 4 passes, so the fused forms, which make 3, can pass 100%.
    def backward_inputs(size, dtype, device):
        rows, width = kernels.row_shape(size, 4096)
        return tuple(torch.randn(*shape, dtype=dtype, device=device) for shape in ((rows, width), (rows, width),
                                                                                    (width,)))

    def backward_reference(grad, x, bias):
        grad_x = torch.ops.aten.gelu_backward(grad, x + bias)
        return grad_x, grad_x.sum(0)

    def with_sum(grad_x):
        return grad_x, grad_x.sum(0, dtype=torch.float32).to(grad_x.dtype)

    tiles = ((1, 2, 512), (1, 2, 256), (1, 4, 256), (2, 1, 256), (2, 1, 512))

    def backward_fns(dtype):
        fns = {"production": lambda g, x, b: torch.ops.jitload.bias_gelu_backward(g, x, b)}
        for c, k, block in tiles:
            fns[f"tile C={c} K={k} block={block} + sum"] = (
                lambda g, x, b, t=(c, k, block): with_sum(m.bias_gelu_tile_backward(g, x, b, *t)))
        # the bias gradient fused: K rows in flight, COLS column vectors x ROWL threads a column, blocks a
        # column stretch (wave: one wave of blocks, production's rule; run 17 had groups of rows instead)
        for k, cols, rowl in ((2, 64, 4), (1, 64, 4), (4, 64, 4), (2, 32, 8), (2, 128, 2), (1, 128, 4)):
            fns[f"fused K={k} COLS={cols} ROWL={rowl} wave"] = (
                lambda g, x, b, t=(k, cols, rowl): tuple(m.bias_gelu_backward_fused(g, x, b, *t, 0)))
        return fns

    def grad_x_fns(dtype):
        return {f"grad_x only: tile C={c} K={k} block={block}": (
            lambda g, x, b, t=(c, k, block): m.bias_gelu_tile_backward(g, x, b, *t)) for c, k, block in tiles}

    backward = SimpleNamespace(make_inputs=backward_inputs, bytes_moved=lambda n, dt: 4 * n * dt.itemsize)
    grad_x = SimpleNamespace(make_inputs=backward_inputs, bytes_moved=lambda n, dt: 3 * n * dt.itemsize)
    dtypes = [getattr(torch, d) for d in args.dtypes]
    if "softmax" in args.kernels:
        run("softmax", softmax_fns, sm.spec, [torch.bfloat16, torch.float32], args.sizes, sm.reference, args.out,
            args.only)
    for _ in range(args.repeat):  # repeated tables show the spread between runs of the same kernels
        if "bias_gelu" in args.kernels:
            run("bias_gelu", gelu_fns, bg.spec, dtypes, args.sizes, bg.reference, args.out, args.only)
        if "bias_gelu_backward" in args.kernels:
            run("bias_gelu_backward", backward_fns, backward, dtypes, args.sizes, backward_reference, args.out,
                args.only)
            run("bias_gelu_backward grad_x", grad_x_fns, grad_x, dtypes, args.sizes,
                lambda g, x, b: backward_reference(g, x, b)[0], args.out, args.only)
        if "rmsnorm" in args.kernels:
            run("rmsnorm", rmsnorm_fns, rn.spec, dtypes, args.sizes, rn.reference, args.out, args.only)


if __name__ == "__main__":
    main()
