"""Fit the f32 approximations of dlc's vectorised math (interpreter/src/exec/elementwise.rs).

erf(x) and tanh(x): x * P(x^2) / Q(x^2), minimax in relative error (odd functions, so the relative
error stays small near 0). log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2/2 + f^3 R(f),
minimax in absolute error of R's contribution. Lawson's iteratively reweighted least squares on the
linearised problem (for rationals, P - g Q = 0 with Q(0) = 1, reweighted by the previous Q).
Prints the coefficients rounded to f32 (lowest degree first) and the fit's error in float64.
Needs only numpy:  python scripts/fit_math.py
"""
import math
import numpy as np


def lawson(A, y, scale, iters=400):
    """Coefficients c minimising max |(A c - y) * scale| (approximately)."""
    w = np.ones(len(y))
    best = None
    for _ in range(iters):
        s = np.sqrt(w) * scale
        c, *_ = np.linalg.lstsq(A * s[:, None], y * s, rcond=None)
        err = np.abs(A @ c - y) * scale
        if best is None or err.max() < best[0]:
            best = (err.max(), c)
        w = w * err
        w /= w.sum()
    return best[1]


def odd_rational(name, fn, top, n_p, n_q):
    x = np.unique(np.concatenate([np.linspace(0, top, 40001), top * np.cos(np.linspace(0, math.pi / 2, 20001))]))
    z = x * x
    u = z / top**2  # fit in u = (x / top)^2 in [0, 1], for conditioning; scaled back below
    g = np.array([fn(v) / v if v > 0 else 0.0 for v in x])
    g[x == 0] = np.array([fn(1e-8) / 1e-8])  # the limit at 0
    w, q_prev, best = np.ones_like(z), np.ones_like(z), None
    for _ in range(400):  # Lawson's weights, and Loeb's reweighting by the previous Q each step
        A = np.concatenate([np.stack([u**k for k in range(n_p)], 1), np.stack([-g * u**k for k in range(1, n_q)], 1)], 1)
        s = np.sqrt(w) / (np.abs(q_prev) * g)
        c, *_ = np.linalg.lstsq(A * s[:, None], g * s, rcond=None)
        p, q = c[:n_p], np.concatenate([[1.0], c[n_p:]])
        q_prev = np.polyval(q[::-1], u)
        err = np.abs(np.polyval(p[::-1], u) / q_prev - g) / g
        if best is None or err.max() < best[0]:
            best = (err.max(), p, q)
        w = w * err
        w /= w.sum()
    _, p, q = best
    p = p / top ** (2 * np.arange(n_p))
    q = q / top ** (2 * np.arange(n_q))
    p32, q32 = p.astype(np.float32).astype(np.float64), q.astype(np.float32).astype(np.float64)
    f = np.array([fn(v) for v in x])
    approx = x * np.polyval(p32[::-1], z) / np.polyval(q32[::-1], z)
    rel = np.max(np.abs(approx - f)[1:] / np.abs(f[1:]))
    print(f"{name}: x P(x^2)/Q(x^2) on [0, {top}], max relative error {rel:.3e} (f32 coefficients, float64 arithmetic)")
    print("  P:", ", ".join(repr(float(np.float32(v))) for v in p))
    print("  Q:", ", ".join(repr(float(np.float32(v))) for v in q))


def log1p_poly(n):
    f = np.linspace(math.sqrt(0.5) - 1, math.sqrt(2) - 1, 60001)
    f = f[np.abs(f) > 1e-6]
    r = np.array([(math.log1p(v) - v + v * v / 2) / v**3 for v in f])
    A = np.stack([f**k for k in range(n)], 1)
    c = lawson(A, r, np.abs(f) ** 3)
    c32 = c.astype(np.float32).astype(np.float64)
    approx = f - f * f / 2 + f**3 * np.polyval(c32[::-1], f)
    err = np.max(np.abs(approx - np.log1p(f)))
    print(f"log: log(1+f) = f - f^2/2 + f^3 R(f), R of degree {n - 1}, max absolute error {err:.3e} on [sqrt(1/2)-1, sqrt(2)-1]")
    print("  R:", ", ".join(repr(float(np.float32(v))) for v in c))


if __name__ == "__main__":
    odd_rational("erf", math.erf, 3.9, 7, 5)
    odd_rational("tanh", math.tanh, 9.1, 7, 4)
    log1p_poly(7)
