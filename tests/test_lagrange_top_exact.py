"""The exact heavy symmetric top (`jaxrigid.reference.lagrange_top`): against scipy's DOP853 (the
formulas), against an independent 40-digit mpmath evaluation at t = 10⁴ (the float64 roots,
reductions and quadratures), its invariants, and its refusals."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.lie import so3
from jaxrigid.models.rigid_body import HeavyTopPotential, RigidBody, RigidBodyState
from jaxrigid.reference import lagrange_top as lte
from jaxrigid.reference import rigid_body_reference


def _rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _exp1(angle):
    return np.asarray(so3.exp(jnp.array([angle, 0.0, 0.0])))


# (I₁, I₃, c, R₀, Π₀). Krysl's fast top (cuspidal start, nutation amplitude 8e-3 in cos θ), the
# slow top (k² = 0.9993: it falls from θ = 0.05 to θ = 2.64 and back, its φ̇ spiking near the
# top), a hanging top (c < 0, the mirrored form) and a generic oblate one (Ω₁, Ω₂ ≠ 0).
CASES = {
    "fast": (5.0, 1.0, 20.0, _exp1(0.3), np.array([0.0, 0.0, 50.0])),
    "slow": (5.0, 1.0, 20.0, _exp1(0.05), np.array([0.0, 0.0, 5.0])),
    "hanging": (
        5.0,
        1.0,
        -20.0,
        np.asarray(so3.exp(jnp.array([0.5, 0.2, 0.0]))),
        np.array([1.5, -1.0, 8.0]),
    ),
    "generic": (2.0, 3.0, 1.5, _rotation(np.random.default_rng(0)), np.array([2.0, -1.4, 18.0])),
}

# DOP853 at rtol = atol = 1e-13 differs from this solution by (measured, max over R and Π
# entries) fast 1.1e-10, slow 1.2e-8 (Π; its rates spike near the vertical), hanging 5.4e-11,
# generic 1.4e-11 at t = 100, growing ≈ linearly in t; DOP853 at 1e-12 differs from DOP853 at
# 1e-13 by 10× as much, so these differences are DOP853's own error. Tolerance κ(1 + t) with κ
# 4–6× the largest measured difference/(1 + t) at t = 0.5, 7, 20, 100; any error in a formula (a
# sign, a factor, a wrong root or phase) is O(nutation amplitude) or O(1), far above.
KAPPA = {"fast": 5e-12, "slow": 5e-10, "hanging": 3e-12, "generic": 7e-13}


def _model(I1, I3, c):
    return RigidBody(
        inertia=jnp.diag(jnp.array([I1, I1, I3])),
        potential=HeavyTopPotential(jnp.array([0.0, 0.0, c]), jnp.array([0.0, 0.0, 1.0])),
    )


@pytest.mark.parametrize("name", list(CASES))
def test_matches_dop853(name):
    """R(t), Π(t) at t = 0.5, 7, 20, 100 against DOP853 within κ(1 + t) (`KAPPA`)."""
    I1, I3, c, R0, Pi0 = CASES[name]
    ts = np.array([0.5, 7.0, 20.0, 100.0])
    R, Pi = lte.lagrange_top_exact((I1, I1, I3), c, R0, Pi0, ts)
    ref = rigid_body_reference(
        _model(I1, I3, c),
        RigidBodyState(jnp.asarray(R0), jnp.asarray(Pi0)),
        ts,
        rtol=1e-13,
        atol=1e-13,
    )
    tol = KAPPA[name] * (1 + ts)
    assert np.all(np.abs(R - np.asarray(ref.R)).max(axis=(1, 2)) <= tol)
    assert np.all(np.abs(Pi - np.asarray(ref.Pi)).max(axis=1) <= tol)


def _exact_mp(moments, c, R0, Pi0, t):
    pytest.importorskip("mpmath")
    return lte.lagrange_top_exact_mp(moments, c, R0, Pi0, t)


def _fast_members(n, seed=0):
    """Krysl's ensemble: the fast top's Π₀ scaled componentwise by 1 + 0.01 N(0, 1)."""
    I1, I3, c, R0, Pi0 = CASES["fast"]
    rng = np.random.default_rng(seed)
    return [(I1, I3, c, R0, Pi0 * (1 + 0.01 * rng.normal(size=3))) for _ in range(n)]


@pytest.mark.parametrize("t", [100.0, 1e4])
def test_float64_evaluation_within_its_bound_of_40_digits(t):
    """At t = 10⁴ the float64 evaluation loses only the rounding of the phase τ̇t, of the mean
    rates and (slow top, k² = 0.9993) of k² near 1; `float64_error_bound` (5.3e-11 for the fast
    top at 10⁴) must hold for R (Frobenius) and for Π relative to |Π₀|. Measured: fast top and
    its members 2e-13 – 1.3e-12 in R, ≤ 1.2e-11 in Π (≤ 1/40 of the bound); over 700 random tops
    at most 0.15 of it. A root or a mean rate off by 1e-13 relative (≈ 4e-10 at 10⁴), a wrong
    initial phase or a period miscounted would exceed it for the fast top."""
    states = [CASES[k] for k in ("fast", "slow", "hanging", "generic")] + _fast_members(2)
    for I1, I3, c, R0, Pi0 in states:
        moments = (I1, I1, I3)
        R_mp, Pi_mp = _exact_mp(moments, c, R0, Pi0, t)
        R, Pi = lte.lagrange_top_exact(moments, c, R0, Pi0, [t])
        bound = lte.float64_error_bound(moments, c, R0, Pi0, t)
        assert np.linalg.norm(R[0] - R_mp) <= bound
        assert np.max(np.abs(Pi[0] - Pi_mp)) <= bound * np.linalg.norm(Pi0)


def test_fast_top_spin_is_not_rounded():
    """The fast top's ψ ≈ 5·10⁵ at t = 10⁴: rounding Π₃t/I₃ alone would cost ≈ 3e-11; the
    double-double product keeps R within 3e-12 of 40 digits (measured ≤ 1.3e-12)."""
    for I1, I3, c, R0, Pi0 in [CASES["fast"]] + _fast_members(2, seed=1):
        R_mp, _ = _exact_mp((I1, I1, I3), c, R0, Pi0, 1e4)
        R, _ = lte.lagrange_top_exact((I1, I1, I3), c, R0, Pi0, [1e4])
        assert np.linalg.norm(R[0] - R_mp) <= 3e-12


def test_roots_are_of_the_polynomial_as_written_highest_power_first():
    """`real_parts_of_roots` solves x³ − 6x² + 11x − 6 = (x − 1)(x − 2)(x − 3), highest power
    first, on whichever mpmath is installed: the reversed order's polynomial has the roots 1,
    1/2, 1/3, and mpmath 1.4 warns (DeprecationWarning, an error here) when it is left to
    assume the order. 1e-30: Durand–Kerner at 40 digits converges to the working precision."""
    mp = pytest.importorskip("mpmath")
    with warnings.catch_warnings(), mp.workdps(40):
        warnings.simplefilter("error")
        roots = lte.real_parts_of_roots(mp, [1, -6, 11, -6])
        errors = [abs(r - k) for r, k in zip(roots, (1, 2, 3))]
    assert len(roots) == 3 and max(errors) < 1e-30, roots


def test_turning_point_near_the_vertical_is_polished():
    """The slow top restarted at its lowest point (u₀ = −0.875) rises to 1.25e-3 of the vertical:
    `1 − u₀ − w_b` there loses 3 digits (measured 1.6e-10 relative); Newton on f about u = 1
    gives 1.2e-13, the conditioning of b − a (a 3-digit cancellation in the input's π₃ − Π₃)."""
    mp = pytest.importorskip("mpmath")
    I1, I3, c, R0, Pi0 = CASES["slow"]
    top = lte._top((I1, I1, I3), c, R0, Pi0)
    R, Pi = lte.lagrange_top_exact((I1, I1, I3), c, R0, Pi0, [top.K / top.rate])
    low = lte._top((I1, I1, I3), c, R[0], Pi[0])
    with mp.workdps(40):  # not the global context's precision: the worker's other tests share it
        Rm = [[mp.mpf(float(x)) for x in row] for row in R[0]]
        P = [mp.mpf(float(x)) for x in Pi[0]]
        a, b, beta = P[2] / I1, sum(Rm[2][j] * P[j] for j in range(3)) / I1, mp.mpf(2 * c / I1)
        E = (P[0] ** 2 / I1 + P[1] ** 2 / I1 + P[2] ** 2 / I3) / 2 + c * Rm[2][2]
        alpha = 2 * (E - P[2] ** 2 / (2 * I3)) / I1
        cubic = [beta, -alpha - a * a, 2 * a * b - beta, alpha - b * b]
        gap = float(1 - lte.real_parts_of_roots(mp, cubic)[1])
    assert gap == pytest.approx(1.2497e-3, rel=1e-4)
    assert abs(low.gap_up - gap) <= 1e-12 * gap


@pytest.mark.parametrize("name", list(CASES))
def test_invariants_and_start(name):
    """Energy, π₃ = (RΠ)₃, Π₃ and RᵀR = 1 along the solution up to t = 10⁴, and (R, Π)(0) =
    (R₀, Π₀). They hold by construction, so to round-off: measured ≤ 7e-16 relative for E and
    π₃, 2e-15 for RᵀR, 1.2e-15 at t = 0; 1e-14 is a 15–50× margin. A wrong Euler-angle
    kinematics (θ̇, φ̇ or their signs in Π) or a wrong initial phase fails by O(1)."""
    I1, I3, c, R0, Pi0 = CASES[name]
    I = np.array([I1, I1, I3])
    ts = np.linspace(0.0, 1e4, 201)
    R, Pi = lte.lagrange_top_exact(I, c, R0, Pi0, ts)
    E0, scale = 0.5 * np.sum(Pi0**2 / I) + c * R0[2, 2], 0.5 * np.sum(Pi0**2 / I) + abs(c)
    E = 0.5 * np.sum(Pi**2 / I, axis=1) + c * R[:, 2, 2]
    np.testing.assert_allclose(E, E0, rtol=0, atol=1e-14 * scale)
    pi3 = np.einsum("tj,tj->t", R[:, 2, :], Pi)
    np.testing.assert_allclose(pi3, R0[2] @ Pi0, rtol=0, atol=1e-14 * np.linalg.norm(Pi0))
    assert np.all(Pi[:, 2] == Pi0[2])
    RtR = np.einsum("tki,tkj->tij", R, R)
    np.testing.assert_allclose(RtR, np.broadcast_to(np.eye(3), RtR.shape), atol=1e-14)
    np.testing.assert_allclose(R[0], R0, atol=1e-14)
    np.testing.assert_allclose(Pi[0], Pi0, atol=1e-14 * np.linalg.norm(Pi0))


def test_steady_precession():
    """Krysl's top with the slow steady-precession rate `φ̇ = (a − √(a² − 2βu₀))/(2u₀)` (the root
    of f at u₀ is double, k = 0): R(t) = R_z(φ̇t) R_x(θ₀) R_z(ψ̇t), ψ̇ = Ω₃ − u₀φ̇. Rounding of Π₀
    leaves a nutation and a rate error of order eps: 1e-12 at t ≤ 100 (measured 2e-14)."""
    I1, I3, c, theta0 = 5.0, 1.0, 20.0, 0.3
    a, beta, u0, s = 50.0 / I1, 2 * c / I1, np.cos(theta0), np.sin(theta0)
    phidot = (a - np.sqrt(a * a - 2 * beta * u0)) / (2 * u0)
    Pi0 = np.array([0.0, I1 * phidot * s, 50.0])
    R0 = _exp1(theta0)
    top = lte._top((I1, I1, I3), c, R0, Pi0)
    assert top.k2 < 1e-12
    ts = np.array([0.0, 1.0, 10.0, 100.0])
    R, Pi = lte.lagrange_top_exact((I1, I1, I3), c, R0, Pi0, ts)
    psidot = 50.0 / I3 - u0 * phidot

    def rz(x):
        return np.array([[np.cos(x), -np.sin(x), 0], [np.sin(x), np.cos(x), 0], [0, 0, 1]])

    for t, Rt, Pit in zip(ts, R, Pi):
        np.testing.assert_allclose(Rt, rz(phidot * t) @ R0 @ rz(psidot * t), atol=1e-12)
        ps = psidot * t
        expected = [I1 * phidot * s * np.sin(ps), I1 * phidot * s * np.cos(ps), 50.0]
        np.testing.assert_allclose(Pit, expected, atol=1e-12)


def test_refusals():
    I1, I3, c, R0, Pi0 = CASES["fast"]
    I = (I1, I1, I3)
    with pytest.raises(ValueError, match="I₁, I₁, I₃"):
        lte.lagrange_top_exact((5.0, 4.0, 1.0), c, R0, Pi0, [1.0])
    with pytest.raises(ValueError, match="rotation"):
        lte.lagrange_top_exact(I, c, np.diag([1.0, 1.0, 1.0 + 1e-9]) @ R0, Pi0, [1.0])
    with pytest.raises(ValueError, match="rotation"):
        lte.lagrange_top_exact(I, c, -R0, Pi0, [1.0])
    with pytest.raises(ValueError, match="expected"):
        lte.lagrange_top_exact((5.0, 5.0), c, R0, Pi0, [1.0])
    with pytest.raises(ValueError, match="expected"):
        lte.lagrange_top_exact(I, c, R0, Pi0[:2], [1.0])
    with pytest.raises(ValueError, match="free_body_exact"):
        lte.lagrange_top_exact(I, 0.0, R0, Pi0, [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        lte.lagrange_top_exact(I, c, R0, [0.0, np.nan, 50.0], [1.0])
    with pytest.raises(ValueError, match="ts"):
        lte.lagrange_top_exact(I, c, R0, Pi0, [1.0, np.inf])
    with pytest.raises(ValueError, match="vertical"):  # the sleeping top
        lte.lagrange_top_exact(I, c, np.eye(3), Pi0, [1.0])
    # π₃ = Π₃: u = 1 is a root of f and the axis swings through the vertical.
    s, u0 = np.sin(0.3), np.cos(0.3)
    with pytest.raises(ValueError, match="vertical"):
        lte.lagrange_top_exact(I, c, R0, [0.0, 50.0 * (1 - u0) / s, 50.0], [1.0])
    with pytest.raises(ValueError, match="vertical"):
        lte.float64_error_bound(I, -c, R0, [0.0, -50.0 * (1 + u0) / s, 50.0], 1.0)
