"""Fit the coefficients of kernels/bias_gelu/gelu_fast.cuh and measure the error of that formula in float32.

0.5 * erfc(t) = exp(-t^2) * 0.5 * erfcx(t) for t >= 0, and erfcx is smooth and free of cancellation, so a
polynomial in w = 1 / (1 + p t) (the form of Abramowitz & Stegun 7.1.26) fits it with a small *relative*
error over all of [0, inf): the fit is a linear program (minimax of the relative error) for each p, and p is
scanned. Needs numpy and scipy (not the project's dependencies: run it with any Python that has them).

    python3 benchmarks/fit_gelu_erfc.py [--degree 6]
"""

import argparse

import numpy as np
from scipy.optimize import linprog
from scipy.special import erfcx, ndtr


def fit(degree: int, p: float) -> tuple[float, np.ndarray]:
    w = np.linspace(1 / (1 + p * 20), 1, 6000)  # t from 0 to 20 (erfc(20) underflows float32)
    f = 0.5 * erfcx((1 / w - 1) / p)
    a = np.stack([w ** (k + 1) for k in range(degree)], 1) / f[:, None]  # relative: w P(w) / f - 1
    n = degree
    ones = np.ones((len(w), 1))
    res = linprog(np.r_[np.zeros(n), 1.0], A_ub=np.vstack([np.hstack([a, -ones]), np.hstack([-a, -ones])]),
                  b_ub=np.r_[np.ones(len(w)), -np.ones(len(w))], bounds=[(None, None)] * n + [(0, None)],
                  method="highs")
    return res.x[-1], res.x[:n]


def gelu_f32(x: np.ndarray, p: float, c: np.ndarray) -> np.ndarray:
    """The kernel's arithmetic (gelu_fast::erf), step by step in float32: max(x, 0) - |x| h."""
    f = np.float32
    a = np.abs(x)
    with np.errstate(over="ignore"):
        w = f(1) / (f(1) + f(p * 0.70710678118654752) * a)
        q = np.full_like(w, f(c[-1]))
        for k in reversed(range(len(c) - 1)):
            q = q * w + f(c[k])
        e = np.exp2(a * (a * f(-0.5 * 1.4426950408889634))).astype(np.float32)
    return np.maximum(x, f(0)) - a * (q * w * e)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degree", type=int, default=6)
    args = parser.parse_args()
    err, p = min((fit(args.degree, q)[0], q) for q in np.linspace(0.3, 0.9, 61))
    err, p = min((fit(args.degree, q)[0], q) for q in np.linspace(p - 0.01, p + 0.01, 21))
    _, c = fit(args.degree, p)
    x = np.linspace(-14, 14, 400001).astype(np.float32)
    got, want = gelu_f32(x, p, c), x * ndtr(x.astype(np.float64))
    nonzero = np.abs(want) > 1e-35
    rel = np.abs(got - want)[nonzero] / np.abs(want[nonzero])
    print(f"degree {args.degree}, p = {p:.6f}: fit's relative error {err:.2e}; gelu in float32 over [-14, 14]: "
          f"max relative error {rel.max():.2e}, max absolute {np.abs(got - want).max():.2e}")
    print("coefficients of w^1 .. w^n:", ", ".join(f"{v:.9e}f" for v in c))


if __name__ == "__main__":
    main()
