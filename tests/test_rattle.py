"""RATTLE on rotation matrices (Chaurasia 2012, App. B) on the heavy symmetric top of §2.5:
the constraints to solver tolerance, bounded energy error, symmetry, ensembles, and errors for
bad input (its measured order: tests/test_order_registry.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import one_step

import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.cases.symmetric_top import initial_values
from jaxrigid.diagnostics import invariants_along
from jaxrigid.integrators import RATTLE
from jaxrigid.models import constrained_rigid_body as crb
from jaxrigid.models import symmetric_top as st

CASE = get_case("symmetric-top-rattle")


def top():
    return CASE.build(CASE.resolve())


def run(model, state0, dt, n_steps, save_every):
    sol = jr.simulate(RATTLE(), model, state0, dt, n_steps, save_every=save_every)
    assert bool(np.all(sol.outcome.all_converged)), sol.outcome
    return sol


@pytest.fixture(scope="module")
def long_runs():
    """10 s (~30 nutation periods) at the thesis's Δt = 0.005 and at Δt/2, every 10th state."""
    model, state0 = top()
    out = {}
    for dt in (0.005, 0.0025):
        state, chunks = state0, []
        for _ in range(round(10.0 / dt) // 1000):  # chunks of 1000 steps: one compilation
            sol = run(model, state, dt, 1000, 10)
            inv = invariants_along(model, sol.ts, sol.states)
            chunks.append({k: np.asarray(v)[1 if chunks else 0 :] for k, v in inv.items()})
            state = sol.final_state
        out[dt] = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    return out


def test_constraints_kept_to_solver_tolerance(long_runs):
    """‖RᵀR − 1‖ stays at round-off (Newton's last update is below eps^(3/4), so the error left is
    its square) and the momentum constraint (3.7) at round-off relative to |Ω| ≈ 100."""
    model, state0 = top()
    omega = float(jnp.linalg.norm(model.body_angular_velocity(state0)))
    eps = np.finfo(np.float64).eps
    for inv in long_runs.values():
        # 10 eps: a few roundings of the 3×3 products per step, not accumulated (measured 7e-16)
        assert inv["RtR_error"].max() < 10 * eps
        # 10 eps |Ω|: the closed-form projection (B.28) leaves rounding of P J⁻¹ (6.5e-14 measured)
        assert inv["tangency_error"].max() < 10 * eps * omega


def test_energy_error_bounded_and_second_order(long_runs):
    """|H − H₀| does not drift (its maximum over the second half of the run is that of the first
    half, to 5%) and scales as Δt² (ratio 4.2 measured for 0.005 → 0.0025)."""
    drifts = {}
    for dt, inv in long_runs.items():
        dH = np.abs(inv["H"] - inv["H"][0])
        half = dH.size // 2
        # 5%: the maxima of an oscillating, non-drifting error over 15 nutation periods each
        assert dH[half:].max() <= 1.05 * dH[:half].max(), dt
        drifts[dt] = dH.max()
    ratio = np.log2(drifts[0.005] / drifts[0.0025])
    # ±0.2: two step sizes only, and the maxima are sampled every 10th step
    assert abs(ratio - 2.0) <= 0.2, ratio


def test_vertical_angular_momentum_conserved(long_runs):
    """RATTLE is symplectic and equivariant under turns about the vertical, so it keeps the
    spatial momentum π₃ (Noether): to round-off over 2000–4000 steps (1e-11 of π₃ ≈ 74)."""
    for inv in long_runs.values():
        assert np.max(np.abs(inv["pi3"] - inv["pi3"][0])) < 1e-11 * abs(inv["pi3"][0])


def test_symmetric_step_is_reversible():
    """Step forward by h, back by −h: the start again, to round-off (RATTLE is symmetric)."""
    model, state0 = top()
    integrator = RATTLE()
    s1, info1 = one_step(integrator, model, state0, 0.0, 0.005)
    s2, info2 = one_step(integrator, model, s1, 0.005, -0.005)
    assert bool(info1.converged) and bool(info2.converged)
    # 1e-13 relative: two Newton solves at eps^(3/4) tolerance (squared) and rounding of |P| ~ 500
    assert np.max(np.abs(s2.R - state0.R)) < 1e-13
    assert np.max(np.abs(s2.P - state0.P)) < 1e-13 * np.max(np.abs(state0.P))


def test_ensemble_equals_members():
    """Three perturbed members, batched, equal the three unbatched runs member by member."""
    model, state0 = top()
    batch = CASE.perturb(state0, np.random.default_rng(0), 0.05, 3)
    batched = run(model, batch, 0.002, 50, 50).final_state
    for i in range(3):
        member = jax.tree_util.tree_map(lambda x: x[i], batch)
        alone = run(model, member, 0.002, 50, 50).final_state
        # 1e-13 relative: vmap may fuse and reorder the same floating-point operations
        np.testing.assert_allclose(batched.R[i], alone.R, rtol=0, atol=1e-13)
        np.testing.assert_allclose(batched.P[i], alone.P, rtol=0, atol=1e-13 * 500)


def test_perturbed_members_stay_on_the_constraint_manifold():
    model, state0 = top()
    batch = CASE.perturb(state0, np.random.default_rng(1), 0.05, 4)
    RtR, tangency = model.constraint_errors(batch)
    assert np.max(RtR) < 1e-14 and np.max(tangency) < 1e-12  # round-off of E R, E P (|P| ~ 500)


def test_newton_failure_is_reported():
    """At Δt = 0.02 (hΩ = 2) Newton does not converge: reported, and `throw=True` raises."""
    model, state0 = top()
    sol = jr.simulate(RATTLE(), model, state0, 0.02, 5, save_every=5)
    assert not bool(sol.outcome.all_converged) and int(sol.outcome.first_failure) == 0
    with pytest.raises(jr.StepFailedError, match="step 0"):
        jr.simulate(RATTLE(), model, state0, 0.02, 5, save_every=5, throw=True)


def test_bad_inputs_raise_clear_errors():
    model, state0 = top()
    with pytest.raises(ValueError, match="not orthonormal"):
        crb.check_constrained_state(model, state0._replace(R=1.01 * state0.R))
    with pytest.raises(ValueError, match="not tangent"):
        crb.check_constrained_state(model, state0._replace(P=state0.P + state0.R))
    with pytest.raises(ValueError, match="shape"):
        crb.check_constrained_state(model, state0._replace(P=state0.P[:2]))
    with pytest.raises(ValueError, match="J = ½ tr 𝕀 − 𝕀 > 0"):
        crb.ConstrainedRigidBody.from_inertia(jnp.array([1.0, 1.0, 3.0]))
    body, body_state = st.rigid_body_top(*initial_values(CASE.resolve()))
    with pytest.raises(TypeError, match="ConstrainedRigidBody"):
        jr.simulate(RATTLE(), body, body_state, 0.001, 1)


def test_one_class_for_a_body_and_a_chain():
    """`rattle` is one class, listed in the constrained family (one body) and the chain
    family (a chain of bodies): it integrates both models (constrained bodies along a body
    axis) and refuses the other forms of the same systems (the Lie–Poisson body, the
    quaternion chain), naming its structure."""
    from jaxrigid.cases import get_case
    from jaxrigid.integrators import METHODS_BY_FAMILY, Gauss6

    families = [f for f, methods in METHODS_BY_FAMILY.items() if "rattle" in methods]
    assert families == ["constrained", "chain"]
    assert CASE.family == "constrained"
    assert METHODS_BY_FAMILY["constrained"]["rattle"] is METHODS_BY_FAMILY["chain"]["rattle"]
    chain_case = get_case("chain-tetrahedra-c1c1")
    matrices = chain_case.build_for(RATTLE())(chain_case.resolve())[0]
    quaternions = chain_case.build_for(Gauss6())(chain_case.resolve())[0]
    body = top()[0]
    assert RATTLE().integrates(body) and RATTLE().integrates(matrices)
    assert not RATTLE().integrates(quaternions)
    refusal = RATTLE().refusal(quaternions)
    assert "(RATTLE's form) (ConstrainedRigidBody, RigidBodyChain)" in refusal


def test_gradient_through_the_steps_matches_finite_differences():
    """d(height of the centre of mass after 20 steps)/d(momentum scale s), P0 → s P0 (tangent for
    every s): forward and reverse mode through Newton's implicit-function derivative = central
    differences."""
    model, state0 = top()
    params = initial_values(CASE.resolve())[2]

    def height(s):
        state = state0._replace(P=s * state0.P)
        final = jr.simulate(RATTLE(), model, state, 0.002, 20, save_every=20).final_state
        return st.com_from_rotation_matrix(final.R, params)[2]

    eps = 1e-6
    fd = float((height(1.0 + eps) - height(1.0 - eps)) / (2 * eps))
    # 1e-7 relative: central differences err by O(eps²) plus rounding ~1e-16/eps
    for grad in (float(jax.jacfwd(height)(1.0)), float(jax.grad(height)(1.0))):
        assert abs(grad - fd) <= 1e-7 * abs(fd), (grad, fd)


@pytest.mark.parametrize("looped", [True, False], ids=["looped", "stage-by-stage"])
def test_a_composition_passes_the_gradient_from_stage_to_stage(looped):
    """RATTLE carries the potential gradient at the end of a step to the next (first same as
    last). In a composition the next stage starts from the previous stage's end, so the
    gradient must pass from stage to stage, not stay with its stage (a stage's own would be
    its previous step's, at another state). A body in a potential whose gradient depends on
    `R` (Krysl's Coulomb wall in `R₃₃`; the heavy top's is constant), against the sub-steps
    taken one by one, each from a gradient evaluated afresh at its start (`init`): equal to
    the Newton tolerance (1e-11: each sub-step's solve stops within 1.8e-12, and the two
    runs round `γΔt` differently; a stale gradient differs by 1e-3 here), whether the stages
    run as one loop (equal members) or one by one (members with different settings)."""
    from jaxrigid.integrators import Composition, compose
    from jaxrigid.lie import so3
    from jaxrigid.models.rigid_body import AxialPowerPotential
    from jaxrigid.newton import Newton

    wall = AxialPowerPotential(jnp.asarray(1.0), jnp.asarray(-0.001), jnp.asarray(1.5))
    model = crb.ConstrainedRigidBody.from_inertia(jnp.array([1.0, 1.5, 2.0]), wall)
    R0 = so3.exp(jnp.array([0.4, -0.3, 0.2]))
    P0 = R0 @ so3.hat(jnp.array([0.3, -0.5, 0.8])) * model.J[None, :]  # Ṙ J, Ṙ = R Ω̂
    state0 = crb.ConstrainedRigidBodyState(R0, P0)
    if looped:
        composed = compose(RATTLE(), "yoshida6")
    else:
        fractions = compose(RATTLE(), "triple-jump").fractions
        members = (RATTLE(), RATTLE(newton=Newton(max_steps=49)), RATTLE())
        composed = Composition(members, fractions)
    assert composed._looped is looped
    dt, n = 0.05, 20
    got = jr.simulate(composed, model, state0, dt, n, save_every=n).final_state

    def one_step(_, state):
        for gamma in composed.fractions:
            h = gamma * dt
            state = RATTLE().step(model, state, RATTLE().init(model, state, 0.0, h), 0.0, h)[0]
        return state

    by_hand = jax.jit(lambda state: jax.lax.fori_loop(0, n, one_step, state))

    expected = by_hand(state0)
    scale = float(jnp.max(jnp.abs(expected.P)))
    np.testing.assert_allclose(got.R, expected.R, rtol=0, atol=1e-11)
    np.testing.assert_allclose(got.P, expected.P, rtol=0, atol=1e-11 * scale)
