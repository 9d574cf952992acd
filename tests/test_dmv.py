"""The DMV integrator for the free rigid body (Dixon §5, §9, Appendix B): accuracy against the
exact Jacobi-elliptic solution at the paper's step, conservation, body = spatial, vmap = loop.

The two §9 cases (`dmv-free-body-symmetric`, `-asymmetric`) are built here from their
parameters, so the file does not depend on the case registry.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import integrate

import jaxrigid as jr
from jaxrigid.cases.dmv import CASES
from jaxrigid.diagnostics import invariants_along
from jaxrigid.integrators.dmv import DMV_METHODS
from jaxrigid.models.rigid_body import AxialPowerPotential, RigidBody
from jaxrigid.reference import rigid_body_reference
from jaxrigid.reference.free_body import free_body_momentum

CASE = {case.name: case for case in CASES if case.torque_free}
CASE_NAMES = list(CASE)
METHODS = list(DMV_METHODS)


def _problem(name):
    case = CASE[name]
    params = case.resolve()
    moments = [params["I11"], params["I22"], params["I33"]]
    model, state0 = case.build(params)
    return model, state0, moments


@pytest.mark.parametrize("name", CASE_NAMES)
def test_exact_solution_matches_dop853(name):
    """The elliptic-function solution (jaxrigid/reference/free_body.py) against scipy's DOP853."""
    model, state0, moments = _problem(name)
    t = 37.3
    ref = rigid_body_reference(model, state0, [t])
    exact = free_body_momentum(moments, np.asarray(state0.Pi), [t])[0]
    np.testing.assert_allclose(exact, np.asarray(ref.Pi[0]), rtol=0, atol=1e-11)


T_END = 100.0


# DMV's second order on the free body (here measured 2.000 ± 0.005 between Δt = 0.1 … 0.0125 at
# t = 100, against the exact solution): test_order_registry's
# test_measured_order[DMVBody-krysl-torque-free] and [DMVSpatial-krysl-torque-free].
@pytest.mark.parametrize("name", CASE_NAMES)
@pytest.mark.parametrize("method", METHODS)
def test_agrees_with_exact_solution_after_the_papers_1000_steps(method, name):
    """Body momentum at t = 100 after the paper's 1000 steps of Δt = 0.1 (§9): within 2 % of
    |Π| of the exact solution (DMV keeps |Π| and the energy exactly, so its error is a phase
    error of order Δt²·t)."""
    model, state0, moments = _problem(name)
    exact = free_body_momentum(moments, np.asarray(state0.Pi), [T_END])[0]
    final = integrate(DMV_METHODS[method](), model, state0, 0.1, 1000, chunk=1000)
    error = float(np.linalg.norm(np.asarray(final.Pi) - exact))
    assert error < 0.02 * np.linalg.norm(exact), error  # "agrees" after 1000 steps


# Conservation. Each step rounds the conserved quantities by a few ulp (1e-16), and those
# roundings random-walk: √10⁴·1e-16 = 1e-14 (measured: ≤ 2e-14 for both forms and both
# cases; ≤ 6e-14 over 10⁵ steps). 1e-12 leaves a factor 50; a coherent drift of one ulp per
# step (as Π = R_{k+1}ᵀπ in the spatial form gives: 1e-10 in 10⁴ steps) fails it. None of
# these depends on the Newton tolerance: the updates keep them for any rotation W.
ROUND_OFF = 1e-12


def _drifts(method, name, n_steps):
    model, state0, _ = _problem(name)
    sol = jr.simulate(DMV_METHODS[method](), model, state0, 0.1, n_steps, save_every=100)
    assert bool(sol.outcome.all_converged)
    inv = invariants_along(model, sol.ts, sol.states)
    pi = jnp.stack([inv["pi1"], inv["pi2"], inv["pi3"]], axis=-1)
    L2 = jnp.sum(sol.states.Pi**2, axis=-1)
    K = inv["K"]
    half = K.shape[0] // 2
    rel = lambda x: np.asarray(jnp.abs(x - x[0]) / jnp.abs(x[0]))  # noqa: E731
    return {
        "|Pi|^2": float(np.max(rel(L2))),
        "pi": float(jnp.max(jnp.linalg.norm(pi - pi[:1], axis=-1)) / jnp.linalg.norm(pi[0])),
        "K": float(np.max(rel(K))),
        "K_first_half": float(np.max(rel(K)[:half])),
        "RtR_error": float(jnp.max(inv["RtR_error"])),
        "newton_iterations": int(sol.outcome.max_iterations),
    }


def _check_conservation(drifts):
    for key in ("|Pi|^2", "pi", "K", "RtR_error"):
        assert drifts[key] <= ROUND_OFF, drifts
    assert drifts["newton_iterations"] <= 4, drifts


@pytest.mark.parametrize("name", CASE_NAMES)
@pytest.mark.parametrize("method", METHODS)
def test_conservation_1e4_steps(method, name):
    """Figures 7–8: 10⁴ steps of Δt = 0.1. |Π|² (the Casimir ‖M‖²), the spatial momentum, the
    energy (Moser–Veselov's integral ΠᵀJ²Π is a combination of |Π|² and K) and RᵀR = 1."""
    _check_conservation(_drifts(method, name, 10_000))


@pytest.mark.slow
@pytest.mark.parametrize("name", CASE_NAMES)
@pytest.mark.parametrize("method", METHODS)
def test_conservation_1e5_steps(method, name):
    """10⁵ steps: still round-off, and the energy error does not drift (its maximum over the
    second half is not a multiple of that over the first)."""
    drifts = _drifts(method, name, 100_000)
    _check_conservation(drifts)
    assert drifts["K"] <= 10 * max(drifts["K_first_half"], 1e-15), drifts


def test_declared_facts():
    for cls in DMV_METHODS.values():
        integrator = cls()
        assert integrator.order == 2 and integrator.symmetric and integrator.implicit
        assert integrator.preserves == {"K", "pi", "RtR_error"}
        assert cls.name in DMV_METHODS


@pytest.mark.parametrize("name", CASE_NAMES)
def test_body_and_spatial_forms_agree(name):
    """Appendix B's spatial algorithm is the body algorithm conjugated by R_k (ω_k = R_k W_k
    R_kᵀ, I_k = R_k J R_kᵀ, m = R_kΠ_k): the same map in exact arithmetic. Over 1000 steps
    only their roundings differ: measured ≤ 5e-14 in Π and R (a few hundred ulp; phase
    roundings add up along the orbit), asserted ≤ 1e-12. A different map (another root, a
    different J, an O(h³) difference) would differ by ≥ 1e-4."""
    model, state0, _ = _problem(name)
    runs = [
        jr.simulate(DMV_METHODS[m](), model, state0, 0.1, 1000, save_every=10).states
        for m in METHODS
    ]
    for a, b in zip(jax.tree_util.tree_leaves(runs[0]), jax.tree_util.tree_leaves(runs[1])):
        assert float(jnp.max(jnp.abs(a - b))) < 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_vmap_ensemble_equals_single_runs(method):
    model, state0, _ = _problem("dmv-free-body-asymmetric")
    ensemble = CASE["dmv-free-body-asymmetric"].perturb(state0, np.random.default_rng(0), 0.2, 100)
    integrator = DMV_METHODS[method]()
    batched = jr.simulate(integrator, model, ensemble, 0.1, 200, save_every=200).final_state
    for i in range(0, 100, 9):
        member = jax.tree_util.tree_map(lambda x: x[i], ensemble)
        single = jr.simulate(integrator, model, member, 0.1, 200, save_every=200).final_state
        for a, b in zip(jax.tree_util.tree_leaves(single), jax.tree_util.tree_leaves(batched)):
            np.testing.assert_allclose(np.asarray(b[i]), np.asarray(a), rtol=0, atol=1e-13)


def test_dmv_rejects_a_torque_other_than_gravity():
    """DMV takes the free body and the heavy top (tests/test_dmv_heavy_top.py) only."""
    model, state0, _ = _problem("dmv-free-body-symmetric")
    wall = AxialPowerPotential(jnp.asarray(1.0), jnp.asarray(-0.001), jnp.asarray(1.1))
    others = [
        RigidBody(model.inertia, wall),
        RigidBody(model.inertia, torque=lambda t, R, Pi: jnp.zeros(3)),
    ]
    for cls in DMV_METHODS.values():
        for body in others:
            with pytest.raises(
                jr.IncompatibleModelError, match="free rigid body and the heavy top"
            ):
                jr.simulate(cls(), body, state0, 0.1, 10)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_cases_defaults(name):
    case = CASE[name]
    assert case.family == "rigid_body" and case.default_method == "DMV-body"
    assert case.default_dt == 0.1 and round(case.default_t_end / case.default_dt) == 1000
    model, state0 = case.build(case.resolve({"M2": 0.25}))
    assert float(state0.Pi[1]) == 0.25 and np.allclose(np.asarray(state0.R), np.eye(3))


def test_gradient_through_the_implicit_step():
    """d Π₂(t = 5)/d I₁₁ by the implicit-function VJP of Newton equals central differences."""
    model, state0, _ = _problem("dmv-free-body-asymmetric")

    def f(I11):
        body = RigidBody(model.inertia.at[0, 0].set(I11))
        sol = jr.simulate(DMV_METHODS["DMV-body"](), body, state0, 0.1, 50, save_every=50)
        return sol.final_state.Pi[1]

    eps = 1e-6
    fd = (f(3.5 + eps) - f(3.5 - eps)) / (2 * eps)
    np.testing.assert_allclose(float(jax.grad(f)(3.5)), float(fd), rtol=1e-7)
