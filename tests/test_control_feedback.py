"""Feedback control of the rolling ball: disturbed scenarios (`control.scenarios`: seeded,
the stated distributions, σ = 0 the nominal model) and receding-horizon control
(`control.mpc`: warm start against cold, σ = 0 reproducing the open loop, disturbed scenarios
far better than the open loop). float64 (`conftest`). The MPC tests share one small problem
(reach-point at dt = 0.25: 20 steps, re-plans every 1.0 = 4 steps) and `K = 4` scenarios, so
that the re-plan, start and segment programs are built once for the module."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from jaxrigid.control import get_problem
from jaxrigid.control.scenarios import draw_scenarios, plant

# --- scenarios --------------------------------------------------------------------------


def test_scenarios_reproducible_from_the_seed():
    """The same seed draws the same scenarios, bit for bit; another seed others."""
    a = draw_scenarios(3, 8, 0.1, 2, 5.0)
    b = draw_scenarios(3, 8, 0.1, 2, 5.0)
    c = draw_scenarios(4, 8, 0.1, 2, 5.0)
    for name in ("mass_scale", "inertia_scale", "kicks", "kick_times"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name in ("mass_scale", "inertia_scale", "kicks"):  # the kick times are the same
        assert not np.any(np.asarray(getattr(a, name)) == np.asarray(getattr(c, name)))
    assert a.count == 8 and a.mass_scale.shape == (8, 2) and a.kicks.shape == (8, 2, 3)


def test_scenario_distributions():
    """(S1): `(scale − 1)/σ` are N(0, 1): over 4·10⁴ draws their mean is within 5 standard
    errors (`1/√N`) of 0 and their standard deviation within 5 of 1 (`1/√(2N)`); (S2): every
    kick has norm σ to float64 rounding, at T/4 and T/2, and the directions are isotropic:
    their mean within 5 standard errors (`√(1/3N)`) of 0 and `E[eeᵀ]` within 5 (`√(4/45N)`,
    the variance of `eᵢ²` on the sphere being `1/5 − 1/9`) of `I/3`. Five standard errors:
    a correct generator fails with probability below 10⁻⁵ per statistic (seeded, so never)."""
    sigma, n = 0.1, 20_000
    s = draw_scenarios(0, n, sigma, 2, 5.0)
    for scales in (s.mass_scale, s.inertia_scale):
        z = np.ravel((np.asarray(scales) - 1) / sigma)
        assert abs(z.mean()) < 5 / np.sqrt(z.size)
        assert abs(z.std() - 1) < 5 / np.sqrt(2 * z.size)
    kicks = np.asarray(s.kicks).reshape(-1, 3)
    np.testing.assert_allclose(np.linalg.norm(kicks, axis=-1), sigma, rtol=1e-14)
    np.testing.assert_array_equal(s.kick_times, np.broadcast_to([1.25, 2.5], (n, 2)))
    e = kicks / sigma
    N = e.shape[0]
    assert np.all(np.abs(e.mean(axis=0)) < 5 * np.sqrt(1 / (3 * N)))
    second = e.T @ e / N
    assert np.all(np.abs(second - np.eye(3) / 3) < 5 * np.sqrt(4 / (45 * N)))


def test_sigma_zero_is_the_nominal_model():
    """σ = 0: the plant is the model bit for bit (scales exactly 1, the inertia's update
    exactly 0), the kicks are zero."""
    model = get_problem("reach-point").model
    s = draw_scenarios(1, 3, 0.0, 2, 5.0)
    np.testing.assert_array_equal(s.kicks, 0.0)
    for i in range(3):
        p = plant(model, s.member(i))
        np.testing.assert_array_equal(p.masses, model.masses)
        np.testing.assert_array_equal(p.inertia, model.inertia)


def test_plant_scales_the_principal_moments():
    """The plant's inertia has the model's principal axes and moments `λⱼ s'ⱼ`, to
    rounding, also for an inertia that is not diagonal in the body axes."""
    model = get_problem("reach-point").model
    R = jnp.asarray(np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0])
    model = eqx.tree_at(lambda m: m.inertia, model, R @ model.inertia @ R.T)
    s = draw_scenarios(2, 1, 0.2, 2, 5.0).member(0)
    p = plant(model, s)
    lam, V = np.linalg.eigh(np.asarray(model.inertia))
    np.testing.assert_allclose(V.T @ np.asarray(p.inertia) @ V, np.diag(lam * s.inertia_scale),
                               atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(p.masses, model.masses * s.mass_scale, rtol=1e-15)
