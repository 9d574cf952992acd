"""The exact free rigid body (`jaxrigid.reference.free_body`): against scipy's DOP853 (the
formulas), against a 30-digit mpmath evaluation of the same formulas at t = 10⁴ (the float64
reductions and quadratures), its invariants, and its refusals."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.models.rigid_body import RigidBody, RigidBodyState
from jaxrigid.reference import free_body as fbe
from jaxrigid.reference import rigid_body_reference

# Krysl's torque-free body, a generic one with the axes out of order (so `s` is the smallest
# moment for some states and the largest for others), and a symmetric one (k = 0).
MOMENTS = [(0.9144, 1.098, 1.66), (3.0, 1.2, 2.1), (1.5, 1.5, 2.5)]


def _rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _states(seed, n=3):
    rng = np.random.default_rng(seed)
    return [(_rotation(rng), rng.normal(size=3)) for _ in range(n)]


@pytest.mark.parametrize("moments", MOMENTS)
def test_matches_dop853(moments):
    """R(t) and Π(t) at t = 0.5, 7, 100 against DOP853 at rtol = atol = 1e-13, whose own error
    reaches ≈ 3e-12 at t = 100 (measured against this solution and consistent with its 1e-12
    run): 2e-11 leaves a sixfold margin, while a wrong sign or factor in ψ̇ errs by O(1)."""
    model = RigidBody(inertia=jnp.diag(jnp.asarray(moments)))
    ts = [0.5, 7.0, 100.0]
    for R0, Pi0 in _states(1):
        R, Pi = fbe.free_body_exact(moments, R0, Pi0, ts)
        ref = rigid_body_reference(model, RigidBodyState(jnp.asarray(R0), jnp.asarray(Pi0)), ts)
        np.testing.assert_allclose(Pi, np.asarray(ref.Pi), rtol=0, atol=2e-11)
        np.testing.assert_allclose(R, np.asarray(ref.R), rtol=0, atol=2e-11)


def test_keeps_spatial_momentum_and_orthogonality():
    """RΠ = π and RᵀR = 1 hold by construction, to round-off (ψ ≈ 10⁴ costs ≈ 10⁴·eps in
    sin ψ, cos ψ; 1e-11 is 50× that)."""
    ts = np.linspace(0.0, 1e4, 7)
    for moments in MOMENTS:
        for R0, Pi0 in _states(2):
            R, Pi = fbe.free_body_exact(moments, R0, Pi0, ts)
            pi = np.einsum("tij,tj->ti", R, Pi)
            np.testing.assert_allclose(pi, np.broadcast_to(R0 @ Pi0, pi.shape), atol=1e-11)
            RtR = np.einsum("tki,tkj->tij", R, R)
            np.testing.assert_allclose(RtR, np.broadcast_to(np.eye(3), RtR.shape), atol=1e-13)


def _psi_and_momentum_mp(moments, Pi0, t, dps=30):
    """The module's formulas for ψ(t) and Π(t), evaluated in `dps`-digit arithmetic (mpmath's
    elliptic functions and adaptive quadrature)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = dps
    e = fbe._elliptic_solution(moments, Pi0)
    I = [mp.mpf(x) for x in moments]
    P = [mp.mpf(x) for x in Pi0]
    s, c, m = e.s, e.c, e.m
    L2, H2 = sum(x * x for x in P), sum(P[i] ** 2 / I[i] for i in range(3))
    ds, dc = 1 / I[s] - 1 / I[c], 1 / I[s] - 1 / I[m]
    Ac, Am = mp.sqrt((L2 / I[s] - H2) / ds), mp.sqrt((L2 / I[s] - H2) / dc)
    As = mp.sqrt((H2 - L2 / I[c]) / ds)
    k2 = (Am / As) ** 2 * (1 / I[m] - 1 / I[c]) / ds
    lam = Ac * As * abs(ds) / Am
    u0 = mp.ellipf(mp.atan2(e.eps_m * P[m] / Am, P[c] / Ac), k2)
    L = mp.sqrt(L2)

    def rate(u):
        dn = mp.ellipfun("dn", u, m=k2)
        return (H2 / L + As * dn / I[s]) / (1 + As * dn / L)

    period = 2 * mp.ellipk(k2)
    U = lam * mp.mpf(t)
    whole = mp.floor(U / period)
    rest = U - whole * period
    per_period = mp.quad(rate, mp.linspace(0, period, 5))
    psi = (whole * per_period + mp.quad(rate, mp.linspace(u0, u0 + rest, 9))) / lam
    u = U + u0
    Pi = [None] * 3
    Pi[c] = Ac * mp.ellipfun("cn", u, m=k2)
    Pi[m] = e.eps_m * Am * mp.ellipfun("sn", u, m=k2)
    Pi[s] = e.eps_s * As * mp.ellipfun("dn", u, m=k2)
    return float(psi), np.array([float(x) for x in Pi])


@pytest.mark.parametrize("moments", MOMENTS[:2])
def test_float64_evaluation_matches_30_digits_at_t_1e4(moments):
    """At t = 10⁴ the float64 evaluation loses only the rounding of λt (and of the whole-period
    sum): ψ ≈ 10⁴ and |π|⁻¹Π are within 10·eps·(1 + λt) ≈ 1e-11 of a 30-digit evaluation
    (measured: ψ off by 0–4 ulp, at most 7e-12; Π by ≤ 8e-13). An error of 1e-14 relative in
    the whole-period integral, or one period miscounted, would exceed it."""
    for _, Pi0 in _states(3, n=2):
        t = 1e4
        e = fbe._elliptic_solution(moments, Pi0)
        psi_mp, Pi_mp = _psi_and_momentum_mp(moments, Pi0, t)
        psi = fbe._precession_angle(e, moments, np.array([t]))[0]
        Pi = fbe._momentum(e, np.array([t]))[0]
        bound = fbe.float64_error_bound(moments, Pi0, t)
        assert abs(psi - psi_mp) <= bound
        assert np.max(np.abs(Pi - Pi_mp)) <= bound * e.L


def test_refusals():
    with pytest.raises(ValueError, match="rotation"):
        fbe.free_body_exact((1.0, 2.0, 3.0), np.diag([1.0, 1.0, 1.1]), [1.0, 0.5, 0.2], [1.0])
    with pytest.raises(ValueError, match="separatrix|fixed point"):
        fbe.free_body_exact((1.0, 2.0, 3.0), np.eye(3), [0.0, 1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="3 moments"):
        fbe.free_body_exact((1.0, 2.0), np.eye(3), [0.0, 1.0, 0.0], [1.0])
