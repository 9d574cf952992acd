"""The free rigid body solved exactly: body momentum by Jacobi elliptic functions, attitude by
one quadrature of a periodic function (numpy + scipy only; shares no code with the integrators).

**Momentum.** Euler's equations `Π̇ = Π × 𝕀⁻¹Π` for a diagonal inertia `(I_1, I_2, I_3)` keep
`L² = |Π|²` and `2H = Σ Π_i²/I_i`. With `m` the axis of the middle moment, `s` the extreme axis
whose component keeps its sign and `c` the other extreme axis,

    Π_c = A_c cn(u),  Π_m = ε_m A_m sn(u),  Π_s = ε_s A_s dn(u | k²),  u = λt + u₀,

where eliminating two components from the invariants gives
`A_c² = (L²/I_s − 2H)/(1/I_s − 1/I_c)`, `A_m² = (L²/I_s − 2H)/(1/I_s − 1/I_m)`,
`A_s² = (2H − L²/I_c)/(1/I_s − 1/I_c)`, `k² = (A_m/A_s)² (1/I_m − 1/I_c)/(1/I_s − 1/I_c)`,
and substituting into `Π̇_m = ε_{mcs} Π_c Π_s (1/I_s − 1/I_c)` gives
`λ = A_c A_s |1/I_s − 1/I_c| / A_m` and the sign `ε_m`. Of the two extreme axes, `s` is the one
for which these are positive with `k² ≤ 1`. Equal moments (`k = 0`: sn, cn, dn = sin, cos, 1)
are covered; the separatrix (`k = 1`) is not.

**Attitude.** The spatial momentum `π = RΠ` is constant. With `n = Π/|π|`, `a = ε_s e_s` (so
`a·n = |Π_s|/|π| > 0` for all t) and `Q(n)` the shortest-arc rotation taking `n` to `a`,

    R(t) = P · exp(ψ(t) â) · Q(n(t)),   P = R₀ Q(n₀)ᵀ,

keeps `RΠ = π`. Matching `RᵀṘ = Ω̂` along `n` (the angular velocity of `Q` has `a`-component
`a·(n × ṅ)/(1 + a·n)`, and `ṅ = n × Ω`, `n·Ω = 2H/|π|`) leaves

    ψ̇ = (2H/|π| + a·Ω) / (1 + a·n) = (2H/|π| + A_s dn(u)/I_s) / (1 + A_s dn(u)/|π|),

a smooth function of `dn(u)` alone, period 2K in `u`. So `ψ(t) = (1/λ)∫_{u₀}^{u₀+λt} ψ̇ du` is
`N` whole periods (the trapezoidal rule, exponentially convergent for a periodic analytic
integrand) plus a remainder (Gauss–Legendre). At t = 10⁴ the result is limited by the float64
rounding of `λt` (≈ 1e-12 absolute), far below the 1e-10 the work–precision runs resolve.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import ellipj, ellipk, ellipkinc


def _levi_civita(i, j, k):
    return float(np.linalg.det(np.eye(3)[[i, j, k]]))


class _Elliptic(NamedTuple):
    c: int
    m: int
    s: int
    Ac: float
    Am: float
    As: float
    eps_m: float
    eps_s: float
    lam: float
    u0: float
    k2: float
    K: float
    L: float  # |π|
    H2: float  # 2H


def _elliptic_solution(moments, Pi0) -> _Elliptic:
    I = np.asarray(moments, float)
    P = np.asarray(Pi0, float)
    if I.shape != (3,) or P.shape != (3,):
        raise ValueError(f"expected 3 moments and a 3-vector Π₀, got {I.shape} and {P.shape}")
    L2, H2 = P @ P, P @ (P / I)
    order = np.argsort(I, kind="stable")
    m = order[1]
    for s, c in ((order[0], order[2]), (order[2], order[0])):
        ds, dc = 1 / I[s] - 1 / I[c], 1 / I[s] - 1 / I[m]
        if ds == 0 or dc == 0:
            continue
        Ac2, Am2 = (L2 / I[s] - H2) / ds, (L2 / I[s] - H2) / dc
        As2 = (H2 - L2 / I[c]) / ds
        if min(Ac2, Am2, As2) <= 0:
            continue
        k2 = Am2 / As2 * (1 / I[m] - 1 / I[c]) / ds
        if 0 <= k2 < 1:
            break
    else:
        raise ValueError("on (or numerically at) a separatrix or a fixed point: not supported")
    Ac, Am, As = np.sqrt([Ac2, Am2, As2])
    eps_s = float(np.sign(P[s]))
    eps_m = _levi_civita(m, c, s) * eps_s * np.sign(ds)
    lam = Ac * As * abs(ds) / Am
    # Initial phase: am(u₀) = atan2(sn, cn).
    phi0 = np.arctan2(np.clip(eps_m * P[m] / Am, -1, 1), np.clip(P[c] / Ac, -1, 1))
    u0 = float(ellipkinc(phi0, k2))
    return _Elliptic(
        c,
        m,
        s,
        Ac,
        Am,
        As,
        eps_m,
        eps_s,
        lam,
        u0,
        k2,
        float(ellipk(k2)),
        float(np.sqrt(L2)),
        float(H2),
    )


def _momentum(e: _Elliptic, ts) -> np.ndarray:
    u = e.lam * ts + e.u0
    # sn, cn, dn have period 4K: reduce first so that large t loses only the rounding of λt.
    u = u - 4 * e.K * np.round(u / (4 * e.K))
    sn, cn, dn, _ = ellipj(u, e.k2)
    out = np.empty((ts.size, 3))
    out[:, e.c], out[:, e.m], out[:, e.s] = e.Ac * cn, e.eps_m * e.Am * sn, e.eps_s * e.As * dn
    return out


def free_body_momentum(moments, Pi0, ts):
    """Body momentum `Π(t) (len(ts), 3)` from `Π(0) = Pi0` for the diagonal inertia `moments`."""
    ts = np.atleast_1d(np.asarray(ts, float))
    return _momentum(_elliptic_solution(moments, Pi0), ts)


def _psi_rate(e: _Elliptic, moments, u):
    """`ψ̇` as a function of `u` (module docstring)."""
    dn = ellipj(u, e.k2)[2]
    I_s = np.asarray(moments, float)[e.s]
    return (e.H2 / e.L + e.As * dn / I_s) / (1 + e.As * dn / e.L)


def _precession_angle(e: _Elliptic, moments, ts, *, nodes=256, gauss=24):
    """`ψ(t) = (1/λ) ∫_{u₀}^{u₀+λt} ψ̇ du`: whole periods 2K by the trapezoidal rule on `nodes`
    points, the remainder by `gauss`-point Gauss–Legendre on pieces of length ≤ K/4."""
    period = 2 * e.K
    u_nodes = period * np.arange(nodes) / nodes
    per_period = period * np.mean(_psi_rate(e, moments, u_nodes))
    x, w = np.polynomial.legendre.leggauss(gauss)
    psi = np.empty(ts.size)
    for i, t in enumerate(ts):
        U = e.lam * t
        whole = np.floor(U / period)
        rest = U - whole * period
        pieces = max(1, int(np.ceil(rest / (e.K / 4))))
        edges = e.u0 + rest * np.arange(pieces + 1) / pieces
        mid, half = (edges[1:] + edges[:-1]) / 2, (edges[1:] - edges[:-1]) / 2
        u = mid[:, None] + half[:, None] * x
        part = np.sum(half[:, None] * w * _psi_rate(e, moments, u))
        psi[i] = (whole * per_period + part) / e.lam
    return psi


def float64_error_bound(moments, Pi0, t) -> float:
    """`10·eps·(1 + λt)`: the float64 evaluation's error bound on `ψ(t)` and on `Π(t)/|π|` (the
    rounding of `λt`; tests/test_free_body_exact.py checks it against 30 digits at t = 10⁴).
    The attitude's error is at most ≈ 3× this."""
    return 10 * float(np.finfo(float).eps) * (1 + _elliptic_solution(moments, Pi0).lam * float(t))


def _shortest_arc(n, a):
    """Rotations `(len(n), 3, 3)` taking the unit vectors `n` to the unit vector `a` about
    `n × a` (defined while `a·n > −1`)."""
    v = np.cross(n, a)
    c = n @ a
    V = np.zeros(n.shape[:-1] + (3, 3))
    V[..., 0, 1], V[..., 0, 2], V[..., 1, 2] = -v[..., 2], v[..., 1], -v[..., 0]
    V = V - np.swapaxes(V, -1, -2)
    return np.eye(3) + V + V @ V / (1 + c)[..., None, None]


def _rotation_about(a, psi):
    A = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    s, c = np.sin(psi)[:, None, None], np.cos(psi)[:, None, None]
    return np.eye(3) + s * A + (1 - c) * (A @ A)


def free_body_exact(moments, R0, Pi0, ts):
    """Exact `(R(t), Π(t))`, shapes `(len(ts), 3, 3)` and `(len(ts), 3)`, of the free rigid body
    with diagonal inertia `moments` from `(R₀, Π₀)` (module docstring)."""
    R0 = np.asarray(R0, float)
    if R0.shape != (3, 3) or not np.allclose(R0.T @ R0, np.eye(3), atol=1e-12):
        raise ValueError("R0 must be a 3×3 rotation matrix (orthonormal to 1e-12)")
    ts = np.atleast_1d(np.asarray(ts, float))
    e = _elliptic_solution(moments, Pi0)
    Pi = _momentum(e, ts)
    a = np.zeros(3)
    a[e.s] = e.eps_s
    n0 = np.asarray(Pi0, float) / e.L
    P = R0 @ _shortest_arc(n0, a).T
    psi = _precession_angle(e, moments, ts)
    R = P @ _rotation_about(a, psi) @ _shortest_arc(Pi / e.L, a)
    return R, Pi
