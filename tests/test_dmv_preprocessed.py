"""Preprocessed DMV (Hairer & Vilmart 2006, code DMV10): measured orders 4–10 of the momentum
and the attitude against independent references, conservation, body = spatial, frame
invariance of the modified inertia, vmap = loop, float32, refusal of torqued models.

The main problem is the authors' own example (driver of DMV10): principal moments
(0.6, 0.8, 1.0), Π(0) = (1.8, 0.4, −0.9), R(0) = 1, here to t = 10. References: the body
momentum from Jacobi elliptic functions (jaxrigid/reference/free_body.py; it agrees with DOP853 to
1e-14 here), the attitude from DOP853 at rtol = atol = 1e-13 (jaxrigid.reference; its error
is ~7e-13 at t = 10: the floor the converged order-10 attitude error settles on).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import integrate, one_step

import jaxrigid as jr
from jaxrigid.diagnostics import invariants_along, measured_order
from jaxrigid.integrators.dmv import (
    PREPROCESSED_DMV_METHODS,
    DMVBody,
    DMVSpatial,
    modified_inertia,
    preprocessed_dmv,
)
from jaxrigid.lie import so3
from jaxrigid.models.rigid_body import HeavyTopPotential, RigidBody, RigidBodyState
from jaxrigid.reference import rigid_body_reference
from jaxrigid.reference.free_body import free_body_momentum

MOMENTS = (0.6, 0.8, 1.0)
PI0 = (1.8, 0.4, -0.9)
T_END = 10.0
METHODS = list(PREPROCESSED_DMV_METHODS)


def _problem(dtype=jnp.float64):
    model = RigidBody(jnp.diag(jnp.asarray(MOMENTS, dtype)))
    return model, RigidBodyState(jnp.eye(3, dtype=dtype), jnp.asarray(PI0, dtype))


_REFERENCE = {}


def _reference():
    if not _REFERENCE:
        model, state0 = _problem()
        ref = rigid_body_reference(model, state0, [T_END])
        _REFERENCE["R"] = np.asarray(ref.R[0])
        _REFERENCE["Pi"] = free_body_momentum(MOMENTS, PI0, [T_END])[0]
    return _REFERENCE


# Steps per run to t = 10 (run in chunks of `gcd` steps: one compilation per method).
# Measured max-norm errors, momentum and attitude alike (both forms: the same to 1e-12), and
# the slopes between successive step sizes / least squares over the three:
#   order  4: n = 80, 160, 320   4.6e-3 … 1.7e-5 (Π), 6.5e-3 … 2.4e-5 (R)   4.07, 4.02 / 4.04
#   order  6: n = 80, 160, 320   2.2e-5 … 5.2e-9,     2.6e-5 … 5.9e-9       6.07, 6.02 / 6.04
#   order  8: n = 40, 80, 160    1.8e-5 … 2.2e-10,    2.0e-5 … 2.2e-10      8.28, 8.06 / 8.17
#   order 10: n = 48, 64, 80     1.7e-8 … 9.4e-11,    1.8e-8 … 9.3e-11     10.26, 10.15 / 10.21
# (R: 8.22 for order 8, 10.26 for order 10.) The excess over the order at the coarsest steps
# (Δt = 0.25, 0.21: |hΩ| ≈ 0.6–0.75) is the O(h²)-relative next term, shrinking as Δt halves;
# ±0.4 (the brief's window) leaves ≥ 0.14 beyond the worst least-squares slope, while a
# method of the next lower or higher even order misses by ≥ 1.6. The smallest error (9e-11)
# is 100× above the attitude reference's 7e-13.
STEPS = {4: (80, 160, 320), 6: (80, 160, 320), 8: (40, 80, 160), 10: (48, 64, 80)}


# Conservation: DMV on the modified inertia keeps |Π|, π = RΠ and ΠᵀJ̃²Π, hence K̃ and
# (σ ≠ 0) K, whatever the rotation W; the modified inertia is recomputed from the current Π
# each step, as in DMV10. Each step rounds them by a few ulp, a random walk: measured relative
# drifts ≤ 9e-15 over 2000 steps for every method; 1e-12 as in tests/test_dmv.py.
ROUND_OFF = 1e-12


def _drifts(model, states):
    """Largest relative drift from the first state of K, |Π|², π and the error of RᵀR."""
    inv = invariants_along(model, jnp.zeros(states.Pi.shape[0]), states)
    pi = jnp.stack([inv["pi1"], inv["pi2"], inv["pi3"]], axis=-1)
    L2 = jnp.sum(states.Pi**2, axis=-1)
    rel = lambda x: float(jnp.max(jnp.abs(x - x[0])) / jnp.abs(x[0]))  # noqa: E731
    return {
        "K": rel(inv["K"]),
        "|Pi|^2": rel(L2),
        "pi": float(jnp.max(jnp.linalg.norm(pi - pi[:1], axis=-1)) / jnp.linalg.norm(pi[0])),
        "RtR_error": float(jnp.max(inv["RtR_error"])),
    }


@pytest.mark.parametrize("name", METHODS)
def test_measured_order_momentum_and_attitude(name):
    """Order of Π and R at t = 10 (table above); the invariants kept at every chunk's end."""
    integrator = PREPROCESSED_DMV_METHODS[name]()
    model, state0 = _problem()
    ref = _reference()
    steps = STEPS[integrator.order]
    chunk = int(np.gcd.reduce(steps))
    dts, errors, stations = [], [], [state0]
    for n in steps:
        state = state0
        for k in range(n // chunk):
            sol = jr.simulate(integrator, model, state, T_END / n, chunk, save_every=chunk)
            assert bool(sol.outcome.all_converged) and int(sol.outcome.max_iterations) <= 4
            state = sol.final_state
            stations.append(state)
        errors.append(
            (
                float(np.max(np.abs(np.asarray(state.Pi) - ref["Pi"]))),
                float(np.max(np.abs(np.asarray(state.R) - ref["R"]))),
            )
        )
        dts.append(T_END / n)
    errors = np.array(errors)
    assert errors.max() < 1e-2 and errors.min() > 5e-11, errors
    for col, what in enumerate(("Pi", "R")):
        order = measured_order(dts, errors[:, col])
        assert abs(order - integrator.order) <= 0.4, (what, order, errors[:, col])
    states = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *stations)
    drifts = _drifts(model, states)
    assert max(drifts.values()) <= ROUND_OFF, drifts


def test_order_on_a_non_diagonal_inertia_and_dixons_body():
    """The coefficients are written over trace invariants, so a non-diagonal inertia tensor
    (Dixon's asymmetric body (3.5, 2.5, 2), Π(0) = (−0.5, 0, 1), rotated by Q) gets the same
    method: DMV10 agrees with the rotated exact solution at order 10 (t = 20, Δt = 1, 2/3,
    1/2; measured errors 3.1e-10, 5.1e-12, 2.8e-13, least-squares slope 10.10; the smallest
    is 30× above the round-off of the exact solution and of 40 steps, ~1e-14). Larger steps
    are pre-asymptotic (Δt = 2 … 1.25: successive slopes 11.7, 10.8)."""
    Q = so3.exp(jnp.array([0.3, -0.5, 0.2]))
    moments, pi0 = (3.5, 2.5, 2.0), np.array([-0.5, 0.0, 1.0])
    model = RigidBody(Q @ jnp.diag(jnp.asarray(moments)) @ Q.T)
    state0 = RigidBodyState(Q.T, Q @ jnp.asarray(pi0))
    exact = np.asarray(Q) @ free_body_momentum(moments, pi0, [20.0])[0]
    integrator = preprocessed_dmv(10)
    dts, errors = [1.0, 2 / 3, 0.5], []
    for n in (20, 30, 40):
        final = integrate(integrator, model, state0, 20.0 / n, n, chunk=10)
        errors.append(float(np.max(np.abs(np.asarray(final.Pi) - exact))))
    assert abs(measured_order(dts, errors) - 10) <= 0.4, errors


def test_modified_inertia_is_frame_invariant_and_trivial_at_order_2():
    """`𝕀̃(Q𝕀Qᵀ, QΠ) = Q 𝕀̃(𝕀, Π) Qᵀ` to round-off; order 2 is plain DMV's inertia."""
    model, state0 = _problem()
    Q = so3.exp(jnp.array([0.7, 0.1, -1.2]))
    for order in (4, 6, 8, 10):
        a = modified_inertia(model.inertia, state0.Pi, 0.2, order)
        b = modified_inertia(Q @ model.inertia @ Q.T, Q @ state0.Pi, 0.2, order)
        np.testing.assert_allclose(np.asarray(Q @ a @ Q.T), np.asarray(b), rtol=0, atol=1e-14)
        assert float(jnp.max(jnp.abs(a - model.inertia))) > 1e-4  # it is modified
    assert modified_inertia(model.inertia, state0.Pi, 0.2, 2) is model.inertia
    assert isinstance(preprocessed_dmv(2), DMVBody)
    assert isinstance(preprocessed_dmv(2, spatial=True), DMVSpatial)
    with pytest.raises(ValueError, match="orders"):
        preprocessed_dmv(12)


def test_long_run_conservation_and_body_spatial_agreement():
    """2000 steps of Δt = 0.1 (|hΩ| ≈ 0.3) with DMV10 in both forms: the invariants to
    round-off, and the two forms (the same Moser–Veselov equation, conjugated by R in the
    spatial one: dmv.py) the same map up to round-off: they part by phase roundings that
    add up along the orbit, measured 1.1e-12 at step 2000 (plain DMV's two forms: 5e-13),
    asserted ≤ 1e-11; a different map (an O(h³) difference) would part by ≥ 1e-4."""
    model, state0 = _problem()
    runs = []
    for spatial in (False, True):
        sol = jr.simulate(preprocessed_dmv(10, spatial), model, state0, 0.1, 2000, save_every=50)
        assert bool(sol.outcome.all_converged) and int(sol.outcome.max_iterations) <= 4
        drifts = _drifts(model, sol.states)
        assert max(drifts.values()) <= ROUND_OFF, (spatial, drifts)
        runs.append(sol.states)
    for a, b in zip(runs[0], runs[1]):
        assert float(jnp.max(jnp.abs(a - b))) < 1e-11


def test_symmetric_retraces_its_steps():
    """The coefficients are even in h and the invariants they use are kept, so stepping back
    with −Δt from the end returns to the start."""
    model, state0 = _problem()
    step = jax.jit(lambda s, dt: one_step(preprocessed_dmv(8), model, s, 0.0, dt)[0])
    state = state0
    for dt in (0.2, 0.2, 0.2, -0.2, -0.2, -0.2):
        state = step(state, dt)
    for a, b in zip(state, state0):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-13)


def test_vmap_over_states_and_inertias_equals_single_steps():
    """jit(vmap(step)) over members with different inertias, attitudes and momenta (so
    different modified inertias) equals the jitted step member by member."""
    integrator = preprocessed_dmv(10)
    rng = np.random.default_rng(0)
    n = 6
    moments = jnp.asarray(rng.uniform(0.5, 1.5, (n, 3)))
    models = RigidBody(jax.vmap(jnp.diag)(moments))
    states = RigidBodyState(
        jax.vmap(so3.exp)(jnp.asarray(rng.normal(size=(n, 3)))),
        jnp.asarray(rng.normal(size=(n, 3))),
    )
    step = lambda m, s: one_step(integrator, m, s, 0.0, 0.1)[0]  # noqa: E731
    batched = jax.jit(jax.vmap(step))(models, states)
    single_step = jax.jit(step)
    for i in range(n):
        single = single_step(*jax.tree_util.tree_map(lambda x: x[i], (models, states)))
        for a, b in zip(single, batched):
            np.testing.assert_allclose(np.asarray(b[i]), np.asarray(a), rtol=0, atol=1e-14)


def test_float32():
    """float32 end to end: DMV10 at Δt = 0.125 to t = 10 reaches the float32 floor (float64
    error 9e-11; measured float32 errors 1.4e-6 in Π, 3.6e-6 in R), and keeps K and |Π|² to
    float32 round-off (measured relative drift of K 3.7e-7)."""
    model, state0 = _problem(jnp.float32)
    sol = jr.simulate(preprocessed_dmv(10), model, state0, jnp.float32(0.125), 80, save_every=8)
    final = sol.final_state
    assert final.Pi.dtype == jnp.float32 and final.R.dtype == jnp.float32
    assert bool(sol.outcome.all_converged)
    ref = _reference()
    assert np.max(np.abs(np.asarray(final.Pi, np.float64) - ref["Pi"])) < 2e-5
    assert np.max(np.abs(np.asarray(final.R, np.float64) - ref["R"])) < 2e-5
    K, L2 = model.kinetic_energy(sol.states.Pi), jnp.sum(sol.states.Pi**2, axis=-1)
    for x in (K, L2):
        assert float(jnp.max(jnp.abs(x - x[0])) / x[0]) < 2e-6


def test_refuses_torqued_models_and_declares_its_facts():
    model, state0 = _problem()
    top = HeavyTopPotential(jnp.array([0.0, 0.0, 1.0]), jnp.array([0.0, 0.0, 1.0]))
    others = [
        RigidBody(model.inertia, top),
        RigidBody(model.inertia, torque=lambda t, R, Pi: jnp.zeros(3)),
    ]
    for cls in PREPROCESSED_DMV_METHODS.values():
        integrator = cls()
        assert integrator.integrates(model)
        assert integrator.symmetric and integrator.implicit
        assert integrator.preserves == {"K", "pi", "RtR_error"}
        assert cls.name == f"DMV{cls.order}-{'spatial' if cls.base is DMVSpatial else 'body'}"
        for body in others:
            assert not integrator.integrates(body)
            with pytest.raises(jr.IncompatibleModelError, match="free rigid body"):
                jr.simulate(integrator, body, state0, 0.1, 2)
            with pytest.raises(ValueError, match="free rigid body only"):
                one_step(integrator, body, state0, 0.0, 0.1)
