"""The heavy symmetric (Lagrange) top solved exactly: the tilt by Jacobi elliptic functions, the
precession and spin by one quadrature each of a periodic function (numpy + scipy only; shares no
code with the integrators).

**Model.** `Ṙ = RΩ̂`, `Π = 𝕀Ω`, `𝕀 = diag(I₁, I₁, I₃)`, `V = c R₃₃` (`HeavyTopPotential` with
`weighted_com = (0, 0, c)`, `up = e₃`). In ZXZ Euler angles `R = R_z(φ) R_x(θ) R_z(ψ)` the third
row of `R` is `(sθ sψ, sθ cψ, cθ)` and `Ω = (φ̇ sθ sψ + θ̇ cψ, φ̇ sθ cψ − θ̇ sψ, φ̇ cθ + ψ̇)`.
The Lagrangian `½I₁(θ̇² + φ̇² s²θ) + ½I₃Ω₃² − c cθ` conserves `p_ψ = Π₃`, `p_φ = π₃ = (RΠ)₃`, `E`.
With `u = cθ`, `a = p_ψ/I₁`, `b = p_φ/I₁`, `β = 2c/I₁` it leaves `φ̇ = (b − au)/(1 − u²)`,
`ψ̇ = Π₃/I₃ − uφ̇` and `u̇² = f(u) = (1 − u²)(α − βu) − (b − au)²`.

**Roots without cancellation.** In `w = u − u₀`, with `s² = R₃₁² + R₃₂²`, `g = Ω₁² + Ω₂²`
`(= θ̇² + φ̇²s²)`, `h = b − au₀ = Ω₁R₃₁ + Ω₂R₃₂ (= φ̇s²)` and `u̇₀ = Ω₂R₃₁ − Ω₁R₃₂ (= −sθ̇)`,

    f = βw³ + (2u₀β − g − a²)w² + (2ah − 2u₀g − βs²)w + u̇₀²,

all from the initial state with no difference of conserved quantities. `f ≤ 0` at `u = ±1`, so
the roots are real: `w₃` outside `[−1 − u₀, 1 − u₀]` (on the side of `sign β`; found by
`numpy.roots`, polished by Newton) and a pair bracketing 0 from `f = β(w − w₃)(w² + pw + q)`,
`q = −u̇₀²/(βw₃) ≤ 0`, `p = C₂/β + w₃ = (q − C₁/β)/w₃` (whichever rounds less), solved by the
stable quadratic formula. Let `w_a` be the pair's root farther from `w₃`, `w_b` the other.
The turning points' distances to the vertical, `1 ∓ u`, would lose `u₀`'s digits by subtraction;
where that rounds less they are polished by Newton on `f` about `u = ±1`
(`D = b − a = h − a(1 − u₀)`, `S = b + a = h + a(1 + u₀)`, `α ∓ β = g ∓ β(1 ∓ u₀)`):

    f(1 − v) = −βv³ + (2β − (α − β) − a²)v² + 2((α − β) − aD)v − D²,
    f(−1 + v) = βv³ − (2β + (α + β) + a²)v² + 2((α + β) + aS)v − S².

**Tilt.** Both signs of `β` in one form: `w = w_a + (w_b − w_a) sn²(τ | k²)` gives
`ẇ² = 4(w_b − w_a)² sn²cn²dn² τ̇²` and `f = β(w_b − w_a)²(w₃ − w_a) sn²cn²dn²`, so

    k² = (w_b − w_a)/(w₃ − w_a),   τ̇ = √(β(w₃ − w_a))/2,   τ = τ₀ + τ̇t.

For `β > 0` (`w₃` above) this is `u = u₁ + (u₂ − u₁) sn²`, `k² = (u₂ − u₁)/(u₃ − u₁)`; for
`β < 0` (`w₃` below) the mirror image `u = u₂ − (u₂ − u₁) sn²`, `k² = (u₂ − u₁)/(u₂ − u₃)`,
`τ̇ = √(|β|(u₂ − u₃))/2`.
`τ₀ = F(atan2(√|w_a|, √|w_b|) | k²)` (`sn²τ₀ = −w_a/(w_b − w_a)`, `cn²τ₀ = w_b/(w_b − w_a)`),
negated when `u̇₀` and `w_b − w_a` differ in sign. Steady precession is `k = 0`.

**Precession and spin.** `φ̇ = (h − aw)/((1 − u)(1 + u))` and `uφ̇` are functions of `sn²τ`,
period `2K` (`1 ∓ u` from the nearer turning point: a sum of non-negative terms). With `⟨·⟩`
their means (the trapezoidal rule, exponentially convergent for a periodic analytic integrand;
nodes doubled until it converges) and `T = τ̇t = n·2K + r`,

    Φ(t) = ⟨φ̇⟩t + (1/τ̇)∫_{τ₀}^{τ₀+r} (φ̇ − ⟨φ̇⟩) dτ,   J(t) likewise for uφ̇,

the remainder by Gauss–Legendre. Then `R(t) = R_z(φ₀) R_z(Φ) R_x(θ) R_z(Π₃t/I₃) R_z(−J)
R_x(θ₀)ᵀ R_z(φ₀)ᵀ R₀`, where `Π₃t/I₃` (≈ 5·10⁵ at t = 10⁴) is carried as an exact double-double
product so that only `np.sin`/`np.cos` reduce it; `Π = (I₁ R_z(ψ)ᵀ(θ̇, φ̇ sθ), Π₃)`. Refused:
a sleeping top or one whose axis reaches (within 1e-9 in `1 ∓ u`) the vertical, where the Euler
angles are singular; `c = 0` (the free body: `jaxrigid.reference.free_body`).
"""

from __future__ import annotations

import inspect
from collections import namedtuple

import numpy as np
from scipy.special import ellipj, ellipk, ellipkinc

_EPS = float(np.finfo(float).eps)
_VERTICAL = 1e-9  # refuse when 1 ∓ u comes this close to 0 (Euler angles singular)
_GAUSS = np.polynomial.legendre.leggauss(24)


# The solution's constants: I₁, Π₃, a, h, u₀; `1 − u` at the upper and `1 + u` at the lower turning
# point; w_a, w_b, w_b − w_a; τ̇, k², K, τ₀; Π₃/I₃ as (hi, lo); R_z(φ₀) and R_x(θ₀)ᵀR_z(φ₀)ᵀR₀.
# From `_means`: ⟨φ̇⟩ and ⟨uφ̇⟩, the trapezoidal nodes, max(|φ̇| + |uφ̇| + |θ̇|) over a period,
# and ⟨(|h| + |aw|)(1 + |u|)/(1 − u²)⟩ (the rounding scale of φ̇, uφ̇).
_Top = namedtuple(
    "_Top",
    "I1 Pi3 a h u0 gap_up gap_down wa wb dw rate k2 K tau0 spin left right "
    "mean nodes rate_max noise",
    defaults=(None, 0, 0.0, 0.0),
)


def _two_prod(x, y):
    """`x·y = p + e` exactly (Dekker)."""
    p = x * y
    sx, sy = 134217729.0 * x, 134217729.0 * y
    xh, yh = sx - (sx - x), sy - (sy - y)
    xl, yl = x - xh, y - yh
    return p, ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def _checked(moments, c, R0, Pi0):
    I, R0, Pi0, c = (np.asarray(x, float) for x in (moments, R0, Pi0, c))
    if I.shape != (3,) or R0.shape != (3, 3) or Pi0.shape != (3,) or c.shape != ():
        raise ValueError(
            f"expected 3 moments, a scalar c, R0 (3, 3), Pi0 (3,); got {I.shape}, "
            f"{c.shape}, {R0.shape}, {Pi0.shape}"
        )
    if not all(np.all(np.isfinite(x)) for x in (I, c, R0, Pi0)):
        raise ValueError("non-finite input")
    if I[0] != I[1] or np.any(I <= 0):
        raise ValueError(f"a Lagrange top needs positive moments (I₁, I₁, I₃); got {I}")
    if c == 0:
        raise ValueError("c = 0 is the free body: use jaxrigid.reference.free_body_exact")
    if not np.allclose(R0.T @ R0, np.eye(3), rtol=0, atol=1e-12) or np.linalg.det(R0) < 0:
        raise ValueError("R0 must be a 3×3 rotation matrix (orthonormal to 1e-12)")
    return I, float(c), R0, Pi0


def _vertical(why):
    msg = "the Euler angles are singular: sleeping tops and tops through it are not supported"
    return ValueError(f"the symmetry axis {why} the vertical (u = cos θ = ±1), where {msg}")


def _roots(C, beta):
    """`(w_a, w_b, w₃)` of `C[0]w³ + C[1]w² + C[2]w + C[3]` (module docstring)."""
    r = np.real(np.roots(C))
    w3 = r.max() if beta > 0 else r.min()
    w3 = _newton(C, w3)
    q = -C[3] / (beta * w3)
    p1, p2 = (q - C[2] / beta) / w3, C[1] / beta + w3
    p = p1 if (abs(q) + abs(C[2] / beta)) / abs(w3) < abs(C[1] / beta) + abs(w3) else p2
    big = -(p + np.copysign(np.sqrt(p * p - 4 * q), p)) / 2
    small = q / big if big != 0 else 0.0
    wa, wb = (big, small) if abs(big - w3) >= abs(small - w3) else (small, big)
    return wa, wb, w3


def _newton(C, x, steps=4):
    """Polish a simple root `x` of the polynomial `C`; stop where the steps stop shrinking."""
    for _ in range(steps):
        dx = np.polyval(C, x) / np.polyval(np.polyder(C), x)
        if not abs(dx) < abs(x) / 4:
            break
        x -= dx
    return x


def _gap(C, v, scale):
    """`1 ∓ u` at a turning point, `v = (1 ∓ u₀) ∓ w` (error ≈ eps·scale), polished by Newton on
    `f` about `∓1` (coefficients `C`) where that rounds less (error ≈ eps·Σ|C_i vⁱ|/|f'(v)|)."""
    if np.polyval(np.abs(C), v) < scale * abs(np.polyval(np.polyder(C), v)):
        v = _newton(C, v)
    return v


def _tilt(top: _Top, tau):
    """`w`, `1 − u`, `1 + u` and `dw/dτ` at phase τ (reduced by the period 2K first), each from
    the nearer turning point: no cancellation near the vertical."""
    tau = tau - 2 * top.K * np.round(tau / (2 * top.K))
    sn, cn, dn, _ = ellipj(tau, top.k2)
    sn2, cn2 = sn * sn, cn * cn
    w = np.where(sn2 <= 0.5, top.wa + top.dw * sn2, top.wb - top.dw * cn2)
    up, down = (cn2, sn2) if top.dw >= 0 else (sn2, cn2)  # sn² = 0 at w_a, cn² = 0 at w_b
    omu, opu = top.gap_up + abs(top.dw) * up, top.gap_down + abs(top.dw) * down
    return w, omu, opu, 2 * top.dw * sn * cn * dn


def _rates(top: _Top, w, omu, opu):
    """`φ̇` and `uφ̇` at `w = u − u₀`, `1 − u`, `1 + u`."""
    phidot = (top.h - top.a * w) / (omu * opu)
    return np.stack([phidot, (top.u0 + w) * phidot])


def _means(top: _Top, *, start=32, most=2**14):
    """`⟨φ̇⟩, ⟨uφ̇⟩` over a period by the trapezoidal rule, nodes doubled until two agree."""
    n, old = start, None
    while n <= most:
        w, omu, opu, slope = _tilt(top, 2 * top.K * np.arange(n) / n)
        g = _rates(top, w, omu, opu)
        new = g.mean(axis=1)
        scale = np.abs(g).mean(axis=1)
        if old is not None and np.all(np.abs(new - old) <= 8 * _EPS * scale):
            thetadot = slope * top.rate / np.sqrt(omu * opu)
            noise = (abs(top.h) + abs(top.a * w)) * (1 + abs(top.u0 + w)) / (omu * opu)
            rate_max = float(np.max(np.abs(g).sum(axis=0) + np.abs(thetadot)))
            return new, n, rate_max, float(np.mean(noise))
        old, n = new, 2 * n
    raise _vertical("passes too close to")


def _top(moments, c, R0, Pi0) -> _Top:
    I, c, R0, Pi0 = _checked(moments, c, R0, Pi0)
    W = Pi0 / I
    s2 = R0[2, 0] ** 2 + R0[2, 1] ** 2
    u0 = R0[2, 2]
    omu, opu = (s2 / (1 + u0), 1 + u0) if u0 >= 0 else (1 - u0, s2 / (1 - u0))
    a, beta, g = Pi0[2] / I[0], 2 * c / I[0], W[0] ** 2 + W[1] ** 2
    h = W[0] * R0[2, 0] + W[1] * R0[2, 1]
    udot0 = W[1] * R0[2, 0] - W[0] * R0[2, 1]
    C = np.array([beta, 2 * u0 * beta - g - a * a, 2 * a * h - 2 * u0 * g - beta * s2, udot0**2])
    wa, wb, w3 = _roots(C, beta)
    D, S, Gm, Gp = h - a * omu, h + a * opu, g - beta * omu, g + beta * opu
    hi, lo = max(wa, wb), min(wa, wb)
    C_up = [-beta, 2 * beta - Gm - a * a, 2 * (Gm - a * D), -D * D]
    gap_up = _gap(C_up, omu - hi, omu + abs(hi))
    C_down = [beta, -2 * beta - Gp - a * a, 2 * (Gp + a * S), -S * S]
    gap_down = _gap(C_down, opu + lo, opu + abs(lo))
    if min(gap_up, gap_down) < _VERTICAL:
        raise _vertical("reaches (or starts at)")
    dw = wb - wa
    k2 = dw / (w3 - wa)
    tau0 = float(ellipkinc(np.arctan2(np.sqrt(abs(wa)), np.sqrt(abs(wb))), k2))
    if udot0 * dw < 0:
        tau0 = -tau0
    s = np.sqrt(s2)
    left = np.array([[-R0[1, 2], -R0[0, 2], 0], [R0[0, 2], -R0[1, 2], 0], [0, 0, s]]) / s
    left[2, 2] = 1.0
    right = np.array([[1, 0, 0], [0, u0, s], [0, -s, u0]]) @ left.T @ R0
    spin_hi = Pi0[2] / I[2]
    p, e = _two_prod(spin_hi, I[2])
    rate, K = np.sqrt(beta * (w3 - wa)) / 2, float(ellipk(k2))
    spin = (spin_hi, (Pi0[2] - p - e) / I[2])
    top = _Top(
        I[0], Pi0[2], a, h, u0, gap_up, gap_down, wa, wb, dw, rate, k2, K, tau0, spin, left, right
    )
    mean, nodes, rate_max, noise = _means(top)
    return top._replace(mean=mean, nodes=nodes, rate_max=rate_max, noise=noise)


def _angles(top: _Top, ts):
    """`w(t)`, `sin θ(t)`, `ẇ(t)`, `Φ(t)`, `J(t)` (module docstring). The remainder's
    Gauss–Legendre pieces are `8K/nodes` long: shorter than the distance at which the trapezoidal
    rule's convergence puts the integrands' nearest singularity."""
    period = 2 * top.K
    T = top.rate * ts
    r = T - period * np.floor(T / period)
    x, wgt = _GAUSS
    pieces = np.maximum(1, np.ceil(r / (4 * period / top.nodes))).astype(int)
    PhiJ = np.empty((2, ts.size))
    for i in range(ts.size):
        edges = top.tau0 + r[i] * np.arange(pieces[i] + 1) / pieces[i]
        mid, half = (edges[1:] + edges[:-1]) / 2, (edges[1:] - edges[:-1]) / 2
        w, omu, opu, _ = _tilt(top, (mid[:, None] + half[:, None] * x).ravel())
        g = _rates(top, w, omu, opu).reshape(2, pieces[i], x.size) - top.mean[:, None, None]
        PhiJ[:, i] = np.sum(half[:, None] * wgt * g, axis=(1, 2)) / top.rate
    w, omu, opu, slope = _tilt(top, top.tau0 + r)
    PhiJ += top.mean[:, None] * ts
    return w, np.sqrt(omu * opu), slope * top.rate, PhiJ[0], PhiJ[1]


def _rz(c, s):
    out = np.zeros(np.shape(c) + (3, 3))
    out[..., 0, 0], out[..., 0, 1], out[..., 1, 0], out[..., 1, 1] = c, -s, s, c
    out[..., 2, 2] = 1.0
    return out


def lagrange_top_exact(moments, c, R0, Pi0, ts):
    """Exact `(R(t), Π(t))`, shapes `(len(ts), 3, 3)` and `(len(ts), 3)`, of the heavy symmetric
    top `moments = (I₁, I₁, I₃)`, `V = c R₃₃`, from `(R₀, Π₀)` (module docstring)."""
    top = _top(moments, c, R0, Pi0)
    ts = np.atleast_1d(np.asarray(ts, float))
    if ts.ndim != 1 or not np.all(np.isfinite(ts)):
        raise ValueError("ts must be a finite 1-D array of times")
    w, st, wdot, Phi, J = _angles(top, ts)
    Rx = np.zeros((ts.size, 3, 3))
    Rx[:, 0, 0], Rx[:, 1, 1], Rx[:, 2, 2] = 1.0, top.u0 + w, top.u0 + w
    Rx[:, 1, 2], Rx[:, 2, 1] = -st, st
    hi, lo = _two_prod(top.spin[0], ts)  # Π₃t/I₃ = hi + lo
    lo = lo + top.spin[1] * ts
    ch, sh, cl, sl = np.cos(hi), np.sin(hi), np.cos(lo), np.sin(lo)
    Zpsi = _rz(ch * cl - sh * sl, sh * cl + ch * sl) @ _rz(np.cos(J), -np.sin(J)) @ top.right
    R = top.left @ _rz(np.cos(Phi), np.sin(Phi)) @ Rx @ Zpsi
    YX = np.stack([-wdot / st, (top.h - top.a * w) / st], axis=-1)  # (θ̇, φ̇ sθ)
    Pi = np.empty((ts.size, 3))
    Pi[:, :2] = top.I1 * np.einsum("tji,tj->ti", Zpsi[:, :2, :2], YX)  # Zpsi ≈ R_z(ψ(t))
    Pi[:, 2] = top.Pi3
    return R, Pi


def float64_error_bound(moments, c, R0, Pi0, t) -> float:
    """`10·eps·(1 + (ρ(1 + k²/(k'²K)) + σ)(|t| + 2K/τ̇))`, `ρ = max(|φ̇| + |uφ̇| + |θ̇|)`,
    `k'² = 1 − k²`, `σ = ⟨(|h| + |aw|)(1 + |u|)/(1 − u²)⟩`: a bound on the float64 evaluation's
    attitude error `‖R − R_exact‖_F` and on `|Π − Π_exact|/|Π|`. It covers the rounding of the
    phase τ₀ + τ̇t, of `k²` (scipy's `ellipj`, `ellipk` take `k²`, not `1 − k²`: near 1 the period
    errs by `eps·k²/(2k'²)`) and of the mean rates (σ: large for tops passing near the vertical).
    tests/test_lagrange_top_exact.py checks it against 40 digits at t = 10⁴. The spin `Π₃t/I₃`
    is evaluated exactly and does not enter."""
    top = _top(moments, c, R0, Pi0)
    rates = top.rate_max * (1 + top.k2 / ((1 - top.k2) * top.K)) + top.noise
    return 10 * _EPS * (1 + rates * (abs(float(t)) + 2 * top.K / top.rate))


def _am(mp, tau, k2):
    """Jacobi's amplitude for |τ| ≤ K."""
    return mp.atan2(mp.ellipfun("sn", tau, m=k2), mp.ellipfun("cn", tau, m=k2))


def real_parts_of_roots(mp, coefficients):
    """The real parts of the roots of the polynomial with `coefficients` (highest power
    first), sorted, by `mp.polyroots` (Durand–Kerner; 200 steps at 200 extra bits). mpmath 1.4
    deprecates the highest-power-first order that mpmath 1.3 assumes: where `polyroots`
    takes `asc`, the coefficients go lowest power first with `asc=True`, so that a later
    mpmath whose default order changed cannot silently solve the reversed polynomial."""
    keywords = {"maxsteps": 200, "extraprec": 200}
    if "asc" in inspect.signature(mp.polyroots).parameters:
        roots = mp.polyroots(list(coefficients)[::-1], asc=True, **keywords)
    else:
        roots = mp.polyroots(list(coefficients), **keywords)
    return sorted(mp.re(x) for x in roots)


def lagrange_top_exact_mp(moments, c, R0, Pi0, t, dps=40):
    """`(R(t), Π(t))` (float64 arrays) of `lagrange_top_exact` at one time `t`, evaluated in
    `dps`-digit arithmetic (mpmath, the `test` extra; slow, for checks) by formulas independent of
    the float64 path: the roots of the cubic in u (from the conserved E, π₃, Π₃, by
    `mpmath.polyroots`), and the angles in closed form by incomplete elliptic integrals of the
    third kind, `φ̇ = A/(1 − u) + B/(1 + u)`, `uφ̇ = a + A/(1 − u) − B/(1 + u)`,
    `A, B = (b ∓ a)/2`, `1 ∓ u = (1 ∓ u_a)(1 − n± sn²τ)`, `∫dτ/(1 − n sn²τ) = Π(n; am τ | k²)`.
    (40 digits: at a turning point the initial phase costs the square root of the roots'
    precision.)"""
    import mpmath

    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.dps = dps
    I1, I3, c, t = (mp.mpf(float(x)) for x in (moments[0], moments[2], c, t))
    R0 = [[mp.mpf(float(x)) for x in row] for row in np.asarray(R0)]
    P = [mp.mpf(float(x)) for x in Pi0]
    I = [I1, I1, I3]
    a, b, beta = P[2] / I1, sum(R0[2][j] * P[j] for j in range(3)) / I1, 2 * c / I1
    E = sum(P[j] ** 2 / I[j] for j in range(3)) / 2 + c * R0[2][2]
    alpha = 2 * (E - P[2] ** 2 / (2 * I3)) / I1
    r = real_parts_of_roots(mp, [beta, -alpha - a * a, 2 * a * b - beta, alpha - b * b])
    ua, ub, u3 = (r[0], r[1], r[2]) if beta > 0 else (r[2], r[1], r[0])
    du, u0 = ub - ua, R0[2][2]
    k2, rate = du / (u3 - ua), mp.sqrt(beta * (u3 - ua)) / 2
    K = mp.ellipk(k2)
    tau0 = mp.ellipf(mp.asin(mp.sqrt(min(max((u0 - ua) / du, 0), 1))), k2)
    udot0 = P[1] / I1 * R0[2][0] - P[0] / I1 * R0[2][1]
    tau0 = -tau0 if udot0 * du < 0 else tau0
    tau = tau0 + rate * t
    whole = mp.nint(tau / (2 * K))
    rest = tau - 2 * K * whole
    sn, cn, dn = (mp.ellipfun(f, rest, m=k2) for f in ("sn", "cn", "dn"))

    def third(n):  # ∫_{τ₀}^{τ} dτ/(1 − n sn²τ)
        return (
            2 * whole * mp.ellippi(n, k2)
            + mp.ellippi(n, mp.atan2(sn, cn), k2)
            - mp.ellippi(n, _am(mp, tau0, k2), k2)
        )

    A, B = (b - a) / 2, (b + a) / 2
    Ip, Im = A / (1 - ua) * third(du / (1 - ua)), B / (1 + ua) * third(-du / (1 + ua))
    Phi, J = (Ip + Im) / rate, a * t + (Ip - Im) / rate
    u = ua + du * sn**2
    st = mp.sqrt(1 - u * u)
    phi = mp.atan2(R0[0][2], -R0[1][2]) + Phi
    psi = mp.atan2(R0[2][0], R0[2][1]) + P[2] / I3 * t - J

    def rz(x):
        return mp.matrix([[mp.cos(x), -mp.sin(x), 0], [mp.sin(x), mp.cos(x), 0], [0, 0, 1]])

    R = rz(phi) * mp.matrix([[1, 0, 0], [0, u, -st], [0, st, u]]) * rz(psi)
    thetadot = -2 * du * sn * cn * dn * rate / st
    X = (b - a * u) / st
    Pi = [
        I1 * (X * mp.sin(psi) + thetadot * mp.cos(psi)),
        I1 * (X * mp.cos(psi) - thetadot * mp.sin(psi)),
        P[2],
    ]
    return np.array(R.tolist(), float), np.array([float(x) for x in Pi])
