"""Fit erf(x) ~ x * P(x^2) / Q(x^2) on [0, 3.9] for dlc's f32 erf (interpreter/src/exec/elementwise.rs).

Minimax in relative error by Lawson's iteratively reweighted least squares on the linearised
problem P(z) - f(z) Q(z) = 0 (f = erf(x)/x), Q's constant term fixed at 1 (Loeb's reweighting by
the previous Q). Prints the coefficients rounded to f32 and the error they give in float64.
Needs only numpy: python scripts/fit_erf.py
"""
import math
import numpy as np

NP, NQ = 7, 5  # P: degree 6 in z = x^2, Q: degree 4
x = np.concatenate([np.linspace(0, 3.9, 40001), 3.9 * np.cos(np.linspace(0, math.pi / 2, 20001))])
x = np.unique(x)
z = x * x
erf = np.array([math.erf(v) for v in x])
f = np.where(x > 0, erf / np.where(x > 0, x, 1), 2 / math.sqrt(math.pi))

w = np.ones_like(z)
qprev = np.ones_like(z)
best = None
for it in range(400):
    # Columns: z^k for P (k < NP), -f z^k for Q (1 <= k < NQ); right-hand side f (q0 = 1).
    A = np.concatenate([np.stack([z**k for k in range(NP)], 1), np.stack([-f * z**k for k in range(1, NQ)], 1)], 1)
    s = np.sqrt(w) / (np.abs(qprev) * f)
    coef, *_ = np.linalg.lstsq(A * s[:, None], f * s, rcond=None)
    p = coef[:NP]
    q = np.concatenate([[1.0], coef[NP:]])
    P = np.polyval(p[::-1], z)
    Q = np.polyval(q[::-1], z)
    err = np.abs(P / Q - f) / f
    m = err.max()
    if best is None or m < best[0]:
        best = (m, p.copy(), q.copy())
    w = w * err
    w /= w.sum()
    qprev = Q

m, p, q = best
p32 = p.astype(np.float32).astype(np.float64)
q32 = q.astype(np.float32).astype(np.float64)
approx = x * np.polyval(p32[::-1], z) / np.polyval(q32[::-1], z)
print(f"max relative error of the fit {m:.3e}; with f32 coefficients {np.max(np.abs(approx - erf) / np.maximum(erf, 1e-300)):.3e}")
print("P (z^0 first):", ", ".join(repr(float(np.float32(c))) for c in p))
print("Q (z^0 first):", ", ".join(repr(float(np.float32(c))) for c in q))
