"""Validation of the free-body DMV integrators against the claims of Dixon §9 (issue 3).

What tests/test_dmv.py already covers is not repeated here (|Π|², π, K and RᵀR over 10⁴ and
10⁵ steps, body = spatial, a 100-member vmap), nor the order (tests/test_order_registry.py).
This file adds: the spatial Casimirs det(I) and ‖I‖ of the advected mass matrix (Figures
5–6), a 10⁴-member ensemble against the same runs unbatched, the exact time-step limit at a
relative equilibrium (a closed form), and the absence of the separatrix instability the
paper reports for Δt above ≈ 0.5.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.cases.dmv import CASES
from jaxrigid.integrators.dmv import DMV_METHODS, mass_matrix
from jaxrigid.models.rigid_body import RigidBody, RigidBodyState

FREE_BODY = ("dmv-free-body-symmetric", "dmv-free-body-asymmetric")  # Figures 5-8
CASE = {case.name: case for case in CASES if case.name in FREE_BODY}
METHODS = list(DMV_METHODS)
ASYMMETRIC = (3.5, 2.5, 2.0)  # Dixon §9, Figures 6 and 8


def _model(moments):
    return RigidBody(jnp.diag(jnp.asarray(moments, dtype=jnp.float64)))


def _ensemble(Pi0):
    Pi0 = jnp.asarray(Pi0)
    return RigidBodyState(jnp.broadcast_to(jnp.eye(3), Pi0.shape + (3,)), Pi0)


# --- Spatial Casimirs (Figures 5-6, bottom panel) -----------------------------------------


@pytest.mark.parametrize("name", list(CASE))
@pytest.mark.parametrize("method", METHODS)
def test_spatial_mass_matrix_casimirs_1e4_steps(method, name):
    """det(I_k) and ‖I_k‖₂ of the spatial mass matrix I_k = R_k J R_kᵀ (Appendix B (30)) over
    10⁴ steps of Δt = 0.1. DMVSpatial does not carry I_k as a separate state: it forms it from
    R_k each step, so these Casimirs are kept exactly as far as R_k stays orthogonal. Each
    step rounds R by a few ulp, a random walk: √10⁴·1e-16 = 1e-14 (measured ≤ 3e-14 in
    det, ≤ 1.2e-14 in ‖I‖, both forms, both cases); 1e-12 leaves a factor > 30, while a
    drift of one ulp per step in R (1e-12 over 10⁴ steps, times the entries of J ≈ 1) or
    any O(Δt³) error in the orthogonality of the step (1e-3) fails it."""
    case = CASE[name]
    model, state0 = case.build(case.resolve())
    sol = jr.simulate(DMV_METHODS[method](), model, state0, 0.1, 10_000, save_every=50)
    assert bool(sol.outcome.all_converged)
    J = mass_matrix(model.inertia)
    R = sol.states.R
    I_s = R @ J @ jnp.swapaxes(R, -1, -2)
    det = jnp.linalg.det(I_s)
    norm2 = jnp.linalg.norm(I_s, ord=2, axis=(-2, -1))
    det0, norm0 = float(jnp.linalg.det(J)), float(jnp.linalg.norm(J, ord=2))
    assert float(jnp.max(jnp.abs(det - det0))) / abs(det0) < 1e-12
    assert float(jnp.max(jnp.abs(norm2 - norm0))) / norm0 < 1e-12


# --- Ensemble: 10⁴ initial momenta, batched = unbatched ----------------------------------


def _random_momenta(n, seed):
    """`n` momenta, uniform directions, magnitudes in [0.5, 1.5]: every kind of orbit."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v * rng.uniform(0.5, 1.5, (n, 1))


@pytest.mark.parametrize("method", METHODS)
def test_vmap_over_1e4_momenta_equals_single_runs(method):
    """10⁴ members, 50 steps of Δt = 0.1: `simulate` on the batched state (vmap) against the
    unbatched `simulate` for every member (lax.map: the single-trajectory program run once
    per member), and against host-level single calls for a few members. Batching changes
    XLA's fusion, hence the last bits of individual operations, not the arithmetic: measured
    ≤ 8e-15 even after 100 steps; 1e-13 leaves a factor > 10, while a member mixed with another
    or a wrong axis differs by O(1)."""
    integrator = DMV_METHODS[method]()
    model = _model(ASYMMETRIC)
    ensemble = _ensemble(_random_momenta(10_000, seed=1))
    batched = jr.simulate(integrator, model, ensemble, 0.1, 50, save_every=50)
    assert bool(jnp.all(batched.outcome.all_converged))

    def single(state):
        sol = jr.simulate(integrator, model, state, 0.1, 50, save_every=50)
        return sol.final_state, sol.outcome.all_converged

    singles, converged = jax.jit(lambda s: jax.lax.map(single, s))(ensemble)
    assert bool(jnp.all(converged))
    for a, b in zip(batched.final_state, singles):
        assert a.shape == b.shape
        assert float(jnp.max(jnp.abs(a - b))) < 1e-13
    for i in (0, 4321, 9999):
        member = jax.tree_util.tree_map(lambda x: x[i], ensemble)
        one = jr.simulate(integrator, model, member, 0.1, 50, save_every=50).final_state
        for a, b in zip(one, batched.final_state):
            assert float(jnp.max(jnp.abs(a - b[i]))) < 1e-13


# --- The time-step limit ------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 2])
@pytest.mark.parametrize("method", METHODS)
def test_time_step_limit_at_relative_equilibrium(method, axis):
    """Steady rotation about principal axis i, Π = L eᵢ: the Moser–Veselov equation
    W J − J Wᵀ = h L êᵢ has W = rotation about eᵢ by φ with (J_j + J_k) sin φ = h L, and
    J_j + J_k = 𝕀ᵢ (the other two entries of J = ½ tr 𝕀 − 𝕀). So a real step exists iff
    h L ≤ 𝕀ᵢ, and the continuous branch rotates by φ = asin(hL/𝕀ᵢ) per step — a closed form
    independent of the Newton solve. Below the limit, 50 steps rotate by 50φ (rounding only:
    1e-12 is 10⁴ ulp; an error in φ of O(h³), e.g. the exact rotation hL/𝕀ᵢ instead, is
    ≥ 1e-3); just above it every solve must be reported as failed."""
    moments = ASYMMETRIC
    L = 1.2
    limit = moments[axis] / L
    model = _model(moments)
    state0 = RigidBodyState(jnp.eye(3), L * jnp.eye(3)[axis])
    integrator = DMV_METHODS[method]()
    for fraction in (0.3, 0.9):
        h = fraction * limit
        sol = jr.simulate(integrator, model, state0, h, 50, save_every=50)
        assert bool(sol.outcome.all_converged)
        phi = 50 * np.arcsin(h * L / moments[axis])
        e = np.eye(3)[axis]
        K = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
        R_exact = np.eye(3) + np.sin(phi) * K + (1 - np.cos(phi)) * (K @ K)
        np.testing.assert_allclose(np.asarray(sol.final_state.R), R_exact, rtol=0, atol=1e-12)
    over = jr.simulate(integrator, model, state0, 1.02 * limit, 50, save_every=50)
    assert not bool(over.outcome.all_converged)
    assert int(over.outcome.first_failure) == 0


def _separatrix_family(moments, L, offsets):
    """Momenta in the (e₁, e₃) plane at angle θ_sep ± offset from e₃, where θ_sep is the
    separatrix through the saddle at the middle axis: sin²θ/I₁ + cos²θ/I₃ = 1/I₂."""
    I1, I2, I3 = moments
    theta_sep = np.arcsin(np.sqrt((1 / I2 - 1 / I3) / (1 / I1 - 1 / I3)))
    theta = np.concatenate([theta_sep - offsets[::-1], theta_sep + offsets])
    Pi0 = L * np.stack([np.sin(theta), np.zeros_like(theta), np.cos(theta)], axis=-1)
    keeps_sign = np.where(theta < theta_sep, 2, 0)  # e₃ inside, e₁ outside the separatrix
    return Pi0, keeps_sign


@pytest.mark.parametrize("dt", [0.5, 1.0])
def test_no_instability_near_the_separatrix(dt):
    """Dixon §9 reports instability near the separatrix for Δt above ≈ 0.5. Here 40 orbits
    within 1e-10 … 1e-1 (in angle) on both sides of the separatrix of the Figure 6 body,
    |M| = |M(0)|, 2000 steps of Δt = 0.5 and 1.0: every Newton solve converges, the
    component that keeps its sign on the exact orbit (Π₃ inside, Π₁ outside) never changes
    it at the saved states (every 10th; a jump across the saddle onto the other half of the
    orbit would persist), and |Π|², K stay at round-off (1e-12: see test_dmv.py).
    The first failure in this family is at Δt ≈ 1.8 (the relative-equilibrium limit above
    for the e₃ axis, 𝕀₃/|Π| = 1.79): bench/dmv_stability_sweep.py maps it."""
    L = float(np.hypot(0.5, 1.0))
    Pi0, keeps_sign = _separatrix_family(ASYMMETRIC, L, np.logspace(-10, -1, 20))
    model = _model(ASYMMETRIC)
    for method in METHODS:
        sol = jr.simulate(DMV_METHODS[method](), model, _ensemble(Pi0), dt, 2000, save_every=10)
        assert bool(jnp.all(sol.outcome.all_converged)), method
        P = np.asarray(sol.states.Pi)
        s = P[np.arange(len(Pi0)), :, keeps_sign]
        assert np.all(np.sign(s) == np.sign(s[:, :1])), method
        L2 = np.sum(P**2, axis=-1)
        K = 0.5 * np.sum(P**2 / np.asarray(ASYMMETRIC), axis=-1)
        assert np.max(np.abs(L2 / L2[:, :1] - 1)) < 1e-12, method
        assert np.max(np.abs(K / K[:, :1] - 1)) < 1e-12, method


# DMV's second order on a Krysl top (the slow top, measured ‖ΔΠ‖ 7.6e-3, 1.9e-3, 4.7e-4 at t = 2
# for Δt = 0.004 … 0.001): test_order_registry's test_measured_order[DMVBody-krysl-fast-top] and
# [DMVSpatial-krysl-fast-top]
