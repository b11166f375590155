"""Time the backward kernels (add_relu_backward, bias_gelu_backward) against eager and torch.compile.

    python benchmarks/backward.py [--out FOLDER]   (a markdown table and a plot per op; GPU if one exists)
    python benchmarks/backward.py --write-results  (the same as this machine's "Backward kernels" section in
                                                    benchmarks/results/, the plots beside the page)
"""

import argparse
import os
import sys

import torch

import jitload
from jitload import kernels


def _add_relu_inputs(size, dtype, device):
    return tuple(torch.randn(size, dtype=dtype, device=device) for _ in range(3))


def _add_relu_eager(grad, x, y):
    return grad * ((x + y) > 0).to(grad.dtype)


def _bias_gelu_inputs(size, dtype, device):
    rows, width = kernels.row_shape(size, 4096)
    return (torch.randn(rows, width, dtype=dtype, device=device), torch.randn(rows, width, dtype=dtype, device=device),
            torch.randn(width, dtype=dtype, device=device))


def _bias_gelu_eager(grad, x, bias):
    # autograd's own backward of gelu(x + bias): grad_x and the bias gradient summed over rows
    u = x + bias
    grad_x = torch.ops.aten.gelu_backward(grad, u)
    return grad_x, grad_x.sum(0)


NOTE = ("bias_gelu_backward's % is of a copy of 3 passes (grad and x read, grad_x written: what any form must "
        "move); eager and torch.compile read grad_x again for the bias gradient.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="build/backward")
    parser.add_argument("--write-results", action="store_true",
                        help="write the tables into this machine's page under benchmarks/results/ instead")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import results_page

    if args.write_results:  # the plots go beside the page, in a folder named after it
        page = results_page.page_name(results_page.gpu_name())
        args.out = os.path.join(results_page.RESULTS, page.removesuffix(".md"))
        plots = os.path.basename(args.out) + "/"
    else:
        plots = ""
    os.makedirs(args.out, exist_ok=True)
    for name in ("add_relu", "bias_gelu"):
        kernels.get(name).build()
    device = jitload.builder.toolchain.default_device()
    sizes = [2**16, 2**20, 2**24, 2**26, 2**28] if device.type == "cuda" else [2**16, 2**20]
    cases = {
        "add_relu_backward": (torch.ops.jitload.add_relu_backward, _add_relu_inputs, _add_relu_eager,
                              lambda n, dt: 4 * n * dt.itemsize),  # reads grad, x, y; writes grad_in
        "bias_gelu_backward": (lambda g, x, b: torch.ops.jitload.bias_gelu_backward(g, x, b, "none"),
                               _bias_gelu_inputs, _bias_gelu_eager,
                               # reads grad and x, writes grad_x: the least any form must move. Ours on CUDA sums
                               # the bias gradient as it writes grad_x; eager and torch.compile read grad_x again
                               lambda n, dt: 3 * n * dt.itemsize),
    }
    lines = [f"# Backward kernels on {jitload.harness.benchmark.device_name(device)}, torch {torch.__version__}", ""]
    import matplotlib.pyplot as plt

    for label, (fn, make, eager, nbytes) in cases.items():
        report = jitload.check(fn, eager, make, dtypes=[torch.float32, torch.bfloat16], device=device, trials=1)
        print(label, report.summary())
        result = jitload.bench({label: fn}, make, sizes=sizes, dtypes=[torch.float32, torch.bfloat16],
                               bytes_moved=nbytes, device=device, eager=eager, compiled=True)
        print(result)
        figure = result.plot()
        figure.axes[0].set_title(f"{label} on {result.device_name}")
        figure.savefig(os.path.join(args.out, f"{label}.png"), dpi=120)
        plt.close(figure)
        lines += [f"## {label}", "", f"Check: {report.summary()}.", "", result.to_markdown(), "",
                  f"![{label}]({plots}{label}.png)", ""]
    if args.write_results:
        body = "\n".join(line.replace("## ", "### ", 1) if line.startswith("## ") else line for line in lines[2:])
        print(results_page.write_section("backward", "Backward kernels", NOTE + "\n" + body))
        return
    with open(os.path.join(args.out, "backward.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
