"""The longdouble GBS reference (`jaxrigid.reference.extended`): against the exact free body,
DOP853 on Krysl's Coulomb wall (which also checks the hand-derived torque against the model's
autodiff torque), against DOP853 and the exact Lagrange top, its order and invariants, its
refusals. Tolerances quote measurements on x86-64 (80-bit longdouble)."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.cases import get_case
from jaxrigid.lie import so3
from jaxrigid.models.rigid_body import HeavyTopPotential, RigidBody, RigidBodyState
from jaxrigid.reference import extended as er
from jaxrigid.reference import rigid_body_reference
from jaxrigid.reference.free_body import float64_error_bound, free_body_exact

LD = np.longdouble
pytestmark = pytest.mark.skipif(
    np.finfo(LD).eps >= 1e-18, reason="np.longdouble is not extended precision here"
)


def _coulomb_wall(n, seed):
    """Krysl's Coulomb wall: the case's model, float64 parameters, and `n` members with Π₀
    perturbed componentwise by `1 + 0.01·N(0, 1)` (member 0 unperturbed)."""
    case = get_case("krysl-coulomb-wall")
    p = case.resolve()
    model, s0 = case.build(p)
    noise = np.random.default_rng(seed).standard_normal((n, 3))
    noise[0] = 0.0
    Pi0 = np.asarray(s0.Pi) * (1 + 0.01 * noise)
    R0 = np.broadcast_to(np.asarray(s0.R), (n, 3, 3))
    dfdu = er.coulomb_wall_dfdu(p["coulomb"], p["wall"], p["offset"])
    return model, np.diag(np.asarray(model.inertia)), dfdu, R0, Pi0, p


def _rotations(rng, n):
    q, r = np.linalg.qr(rng.normal(size=(n, 3, 3)))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]
    return q * np.sign(np.linalg.det(q))[:, None, None]


def test_free_body_matches_exact_solution():
    """dfdu = 0 against `free_body_exact` at t = 10, 100 (Krysl's torque-free body and two random
    states, |Π| = 1). The reference's own error estimate is ≈ 2e-16; the exact solution's float64
    error is at most `3·float64_error_bound` (≈ 1.8e-13 at t = 100; measured agreement ≤ 1.5e-14),
    so 3× the bound plus 1e-15 is the tolerance, while a wrong Ṙ (RΩ̂ vs Ω̂R) or Euler sign errs
    by O(1)."""
    moments = (0.9144, 1.098, 1.66)
    rng = np.random.default_rng(3)
    Pi_random = rng.normal(size=(2, 3))
    Pi_random /= np.linalg.norm(Pi_random, axis=1, keepdims=True)  # |Π| = 1, like Krysl's 0.92
    Pi0 = np.vstack([np.multiply(moments, (0.45549, 0.82623, 0.03476)), Pi_random])
    R0 = np.concatenate([np.eye(3)[None], _rotations(rng, 2)])
    ts = [10.0, 100.0]
    out = er.axial_potential_reference(moments, 0, R0, Pi0, ts, macro_step=0.25)
    assert out.error_R.max() < 1e-15 and out.error_Pi.max() < 1e-15
    for m in range(3):
        R, Pi = free_body_exact(moments, R0[m], Pi0[m], ts)
        tol = 3 * float64_error_bound(moments, Pi0[m], ts[-1]) + 1e-15
        np.testing.assert_allclose(out.R[:, m].astype(float), R, rtol=0, atol=tol)
        np.testing.assert_allclose(out.Pi[:, m].astype(float), Pi, rtol=0, atol=tol)


def test_coulomb_wall_matches_dop853():
    """Against `rigid_body_reference` (DOP853, float64, rtol = atol = 1e-13, the model's autodiff
    torque) at t = 5, 20 for three members. Measured: DOP853's own error is ≤ 2.6e-13 (its 1e-12
    run errs ≤ 3.5e-12 against this reference), the reference's estimate ≤ 5e-17; 1e-12 leaves
    ≈ 4×, while a wrong sign or factor of the torque (or of 10·wall) errs by ≥ 1e-6."""
    model, moments, dfdu, R0, Pi0, _ = _coulomb_wall(3, seed=1)
    ts = [5.0, 20.0]
    out = er.axial_potential_reference(moments, dfdu, R0, Pi0, ts, macro_step=0.125)
    assert out.error_R.max() < 1e-15 and out.error_Pi.max() < 1e-15
    for m in range(3):
        s0 = RigidBodyState(jnp.asarray(R0[m]), jnp.asarray(Pi0[m]))
        ref = rigid_body_reference(model, s0, ts, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(out.R[:, m].astype(float), ref.R, rtol=0, atol=1e-12)
        np.testing.assert_allclose(out.Pi[:, m].astype(float), ref.Pi, rtol=0, atol=1e-12)


def test_coulomb_wall_parameters_are_the_float64_values():
    """`coulomb_wall_dfdu` converts the float64 parameters exactly: f′(0) equals the formula in
    longdouble of `np.float64(1.1)` etc. to a few ulp, and differs (by ≈ 1e-17 relative) from the
    one with the decimals parsed into longdouble, a different problem."""
    f = er.coulomb_wall_dfdu(1.0, -0.001, 1.1)(LD(0))

    def formula(off, wall):
        return -1 / off**2 - 10 * wall / off**11

    exact = formula(LD(np.float64(1.1)), LD(np.float64(-0.001)))
    parsed = formula(LD("1.1"), LD("-0.001"))
    assert f.dtype == LD
    assert abs(f - exact) <= 8 * np.finfo(LD).eps * abs(exact)
    assert abs(f - parsed) > 1e-3 * abs(exact - parsed) > 0
    assert abs(exact - parsed) > 100 * np.finfo(LD).eps * abs(exact)


def test_heavy_top_matches_dop853_and_exact_top():
    """Krysl's fast top (f′ = 20, moments (5, 5, 1), R0 = exp(0.3 e₁), Π0 = (0, 0, 50)) at
    H = 0.01 (Ω₃ = 50: 0.5 rad per macro step). Against DOP853 at t = 1, 2: measured 2.1e-12
    (DOP853's error; its 1e-12 run errs 2.1e-11), tolerance 1e-11. Against `lagrange_top_exact`
    at t = 20 (when present): measured ≈ 1e-15, tolerance its `float64_error_bound` (≈ 1e-13)
    plus 1e-14 for this reference (its estimate at t = 100 is 3.6e-13; at 20 it is ≈ 1e-14)."""
    moments, Pi0 = (5.0, 5.0, 1.0), np.array([0.0, 0.0, 50.0])
    R0 = np.asarray(so3.exp(jnp.array([0.3, 0.0, 0.0])))
    ts = [1.0, 2.0, 20.0]
    out = er.axial_potential_reference(moments, 20.0, R0[None], Pi0[None], ts, macro_step=0.01)
    potential = HeavyTopPotential(jnp.array([0.0, 0.0, 20.0]), jnp.array([0.0, 0.0, 1.0]))
    model = RigidBody(jnp.diag(jnp.asarray(moments)), potential)
    s0 = RigidBodyState(jnp.asarray(R0), jnp.asarray(Pi0))
    ref = rigid_body_reference(model, s0, ts[:2], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out.R[:2, 0].astype(float), ref.R, rtol=0, atol=1e-11)
    np.testing.assert_allclose(out.Pi[:2, 0].astype(float), ref.Pi, rtol=0, atol=1e-11)
    lte = pytest.importorskip("jaxrigid.reference.lagrange_top")
    R, Pi = lte.lagrange_top_exact(moments, 20.0, R0, Pi0, ts[2:])
    tol = lte.float64_error_bound(moments, 20.0, R0, Pi0, ts[2]) + 1e-14 + out.error_R[2, 0]
    np.testing.assert_allclose(out.R[2, 0].astype(float), R[0], rtol=0, atol=tol)
    np.testing.assert_allclose(out.Pi[2, 0].astype(float) / 50, Pi[0] / 50, rtol=0, atol=tol)


def test_order_and_error_estimate():
    """Coulomb wall to t = 10 with 6 columns (order 12) at H = 0.5, 0.25 against H = 1/16 with
    8 columns (estimate ≈ 3e-17): measured errors 2.9e-8, 1.1e-11 (order 11.4–12), far above
    round-off; order ≥ 10 fails for a wrong tableau (extrapolation in h instead of h², wrong
    coefficients: order ≤ 4). The one-column-fewer estimate must bound the true error (measured
    6e-7 and 2.3e-10, ≈ 20× the errors)."""
    _, moments, dfdu, R0, Pi0, _ = _coulomb_wall(3, seed=2)
    ref = er.axial_potential_reference(moments, dfdu, R0, Pi0, [10.0], macro_step=1 / 16)
    assert ref.error_R.max() < 1e-15
    errs = []
    for H in (0.5, 0.25):
        out = er.axial_potential_reference(moments, dfdu, R0, Pi0, [10.0], macro_step=H, columns=6)
        err = np.abs(out.R - ref.R).max(axis=(2, 3)).astype(float)
        assert np.all(out.error_R >= err)
        errs.append(err.max())
    assert np.log2(errs[0] / errs[1]) >= 10
    assert errs[1] > 1e-13  # in the truncation regime


def test_invariants_hold_to_longdouble_roundoff():
    """Coulomb wall over t = 10 at H = 1/8, 8 columns: energy `½Π·𝕀⁻¹Π + f(u)` (≈ 2.6), the
    vertical spatial momentum π₃ = (RΠ)₃ and RᵀR = 1 hold to 3e-17 (measured ≤ 5.4e-18, 5.6e-18,
    9.2e-18; float64 would give ≈ 1e-15). |Π| (not conserved under a torque) for the free body."""
    _, moments, dfdu, R0, Pi0, p = _coulomb_wall(3, seed=2)
    out = er.axial_potential_reference(moments, dfdu, R0, Pi0, [5.0, 10.0], macro_step=0.125)
    I, off = moments.astype(LD), LD(p["offset"])

    def energy(R, Pi):
        v = off + R[..., 2, 2]
        return (Pi * Pi / I).sum(-1) / 2 + LD(p["coulomb"]) / v + LD(p["wall"]) / v**10

    R0l, Pi0l = R0.astype(LD), Pi0.astype(LD)
    assert np.abs(energy(out.R, out.Pi) - energy(R0l, Pi0l)).max() < 3e-17
    pi3 = np.einsum("tmj,tmj->tm", out.R[:, :, 2], out.Pi)
    assert np.abs(pi3 - Pi0l[:, 2]).max() < 3e-17
    RtR = np.einsum("tmki,tmkj->tmij", out.R, out.R) - np.eye(3, dtype=LD)
    assert np.abs(RtR).max() < 3e-17
    free = er.axial_potential_reference(moments, 0, R0, Pi0, [10.0], macro_step=0.25)
    L2 = (free.Pi * free.Pi).sum(-1)
    assert np.abs(L2 - (Pi0l * Pi0l).sum(-1)).max() < 3e-17 * (Pi0l * Pi0l).sum(-1).max()


def test_refusals(monkeypatch):
    _, moments, dfdu, R0, Pi0, _ = _coulomb_wall(2, seed=0)
    good = dict(moments=moments, dfdu=dfdu, R0=R0, Pi0=Pi0, ts=[1.0])

    def call(**kw):
        args = {**good, **kw}
        er.axial_potential_reference(
            args.pop("moments"), args.pop("dfdu"), args.pop("R0"), args.pop("Pi0"),
            args.pop("ts"), macro_step=args.pop("macro_step", 0.5), **args,
        )  # fmt: skip

    bad = [
        ({"moments": np.diag([2.0, 3.0, 4.5]) + 0.1}, "diagonal"),
        ({"moments": (2.0, -3.0, 4.5)}, "positive"),
        ({"moments": (2.0, 3.0)}, "moments"),
        ({"R0": R0[0]}, "R0"),
        ({"Pi0": Pi0[:1]}, "Pi0"),
        ({"R0": R0 * (1 + 1e-10)}, "rotation"),
        ({"R0": -R0}, "rotation"),
        ({"Pi0": Pi0 * np.array([1, np.nan, 1])}, "finite"),
        ({"ts": [0.75]}, "whole number"),
        ({"ts": [1.0, 0.5]}, "increasing"),
        ({"ts": [np.inf]}, "finite"),
        ({"macro_step": 0.0}, "macro_step"),
        ({"columns": 2}, "columns"),
        ({"dfdu": lambda u: np.asarray(u, float)}, "longdouble"),
        ({"dfdu": "20"}, "dfdu"),
    ]
    for kw, match in bad:
        with pytest.raises(ValueError, match=match):
            call(**kw)
    with pytest.raises(ValueError, match="scalars"):
        er.coulomb_wall_dfdu(1.0, [0.1, 0.2], 1.1)
    monkeypatch.setattr(er, "_EPS_LD", float(np.finfo(float).eps))
    with pytest.raises(ValueError, match="not below 1e-18"):
        call()
