"""Compensated summation (`jaxrigid.compensated`): TwoSum is exact, a compensated step is the
plain step with its rounding error kept, and over long runs it removes the `√n·eps` random
walk of the rounded sums from the invariants IMIDM and fEM keep. A method compensates with its
setting `compensated=True` (the error in its solver state)."""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import method, problem

import jaxrigid as jr
from jaxrigid.compensated import Compensated, advance, two_sum, zero_error
from jaxrigid.integrators import triple_jump
from jaxrigid.models.rigid_body import RigidBodyState

COMPENSATED = ["IMIDM", "fEM"]


def _compensated(name):
    """The method `name` with its setting `compensated=True`."""
    return type(method(name))(compensated=True)


def _one_step(integrator, model, state, t, dt):
    """One step from a fresh solver state, jitted: `(state, solver_state, StepInfo)`."""

    def step(model, state, t, dt):
        return integrator.step(model, state, integrator.init(model, state, t, dt), t, dt)

    return jax.jit(step)(model, state, t, dt)


def _exact(x):
    return Fraction(float(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_two_sum_is_exact_for_any_magnitudes(dtype):
    # a + b = s + e in exact rational arithmetic, with |b| both below and above |a| (the case
    # where Fast2Sum would not be exact), under jit as in a step
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 8, 2000)).astype(dtype)
    b = (rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 8, 2000)).astype(dtype)
    s, e = jax.jit(two_sum)(jnp.asarray(a), jnp.asarray(b))
    s, e = np.asarray(s), np.asarray(e)
    assert s.dtype == dtype and np.array_equal(s, a + b)
    for ai, bi, si, ei in zip(a, b, s, e):
        assert _exact(ai) + _exact(bi) == _exact(si) + _exact(ei)


def test_advance_adds_linear_part_and_forcing_and_keeps_the_rounding():
    x = RigidBodyState(jnp.eye(3), jnp.array([1.0, 2.0, 3.0]))
    A = jnp.full((3, 3), 1e-3) + 1e-17

    def linear(s):
        return RigidBodyState(s.R @ A, 1e-3 * s.Pi)

    forcing = RigidBodyState(None, jnp.array([1e-5, 0.0, -1e-5]))
    plain = advance(x, linear, forcing)
    np.testing.assert_array_equal(plain.R, x.R + x.R @ A)
    np.testing.assert_array_equal(plain.Pi, x.Pi + (1e-3 * x.Pi + forcing.Pi))
    c = advance(Compensated(x, zero_error(x)), linear, forcing)
    # the value is the rounded sum, the error its exact rounding error
    np.testing.assert_array_equal(c.value.R, plain.R)
    for v, e, x0, d in zip(c.value.R.ravel(), c.error.R.ravel(), x.R.ravel(), (x.R @ A).ravel()):
        assert _exact(v) + _exact(e) == _exact(x0) + _exact(d)
    # the error joins the increment, and the linear part acts on it too: with value 1 and
    # error 2⁻⁵³ (half an ulp) the state 1 + 2⁻⁵³ doubled by linear = identity is exactly
    # 2 + 2⁻⁵²; every operation here is exact but the last sum, which TwoSum keeps. Leaving
    # out the error gives 2, leaving out linear(error) gives 2 too (1 + 2⁻⁵³ rounds to even)
    half_ulp = 2.0**-53
    doubled = advance(Compensated(jnp.array(1.0), jnp.array(half_ulp)), lambda s: s)
    assert _exact(doubled.value) + _exact(doubled.error) == 2 * (1 + _exact(half_ulp))


@pytest.mark.parametrize("name", COMPENSATED)
@pytest.mark.parametrize("case_name", ["krysl-torque-free", "krysl-fast-top"])
def test_a_compensated_step_is_the_plain_step_plus_its_rounding(name, case_name):
    # value + error of one step from a state with zero error is the plain step's exact sum;
    # the plain step rounds it, so they agree to an ulp of the state (2 eps for the two
    # roundings of the plain sum's two terms), and |error| is at most half an ulp of value
    model, s0 = problem(case_name)
    dt = 0.01
    plain, _, _ = _one_step(method(name), model, s0, 0.0, dt)
    value, error, info = _one_step(_compensated(name), model, s0, 0.0, dt)
    assert isinstance(value, RigidBodyState) and bool(info.converged)
    eps = np.finfo(np.float64).eps
    kept = False
    for p, v, e in zip(plain, value, error):
        p, v, e = (np.asarray(a) for a in (p, v, e))
        scale = np.max(np.abs(p))
        np.testing.assert_allclose(v + e, p, rtol=0, atol=2 * eps * scale)
        assert np.all(np.abs(e) <= 0.5 * np.spacing(np.abs(v)))
        kept = kept or bool(np.any(e != 0.0))
    assert kept  # something was rounded, and kept


def _drifts(sol):
    R, Pi = np.asarray(sol.states.R, np.float64), np.asarray(sol.states.Pi, np.float64)
    orth = np.linalg.norm(np.swapaxes(R, -1, -2) @ R - np.eye(3), axis=(-2, -1)).max(-1)
    pi = np.einsum("...ij,...j->...i", R, Pi)
    dpi = np.linalg.norm(pi - pi[:, :1], axis=-1).max(-1)
    rms = lambda x: float(np.sqrt(np.mean(x**2)))  # noqa: E731
    return rms(orth), rms(dpi)


@pytest.mark.parametrize("name", COMPENSATED)
def test_compensation_removes_the_random_walk_of_the_rounded_sums(name):
    # 16 torque-free members, 10⁴ steps of Δt = 0.1 in float32 (where the walk is large and
    # cheap to see). The plain sums round by eps·|x| per step; compensated, what is left is the
    # rounding of the increments, |Ψ| ≈ 0.094 times smaller. Measured ratios of the RMS over
    # members of the max spatial-momentum drift (`python bench/compensated_drift.py`, this
    # setting, seeds 0–3): IMIDM 0.09–0.11, fEM 0.04. The bound 0.25 leaves room for the
    # statistics of 16 walks and fails if the rounding error is dropped (ratio ≈ 1).
    # Orthogonality improves less: the computed exp(Ψ) is itself orthogonal only to
    # eps·|Ψ|², a per-step defect that compensation cannot remove (IMIDM 0.22–0.31, fEM
    # 0.71–0.94), so only IMIDM's is bounded (by 0.5).
    model, s0 = problem("krysl-torque-free")
    case = jr.cases.get_case("krysl-torque-free")
    ens = case.perturb(s0, np.random.default_rng(0), 0.1, 16)
    ens = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float32), ens)
    model32 = jr.RigidBody(jnp.asarray(model.inertia, jnp.float32))
    n = 10_000
    plain = jr.simulate(method(name), model32, ens, 0.1, n, save_every=100)
    comp = jr.simulate(_compensated(name), model32, ens, 0.1, n, save_every=100)
    assert comp.states.R.dtype == jnp.float32
    assert isinstance(comp.final_state, RigidBodyState)  # the driver sees plain states
    (orth_p, pi_p), (orth_c, pi_c) = _drifts(plain), _drifts(comp)
    assert pi_c <= 0.25 * pi_p, (pi_c, pi_p)
    if name == "IMIDM":
        assert orth_c <= 0.5 * orth_p, (orth_c, orth_p)


def test_composition_of_compensated_methods_is_compensated():
    model, s0 = problem("krysl-torque-free")
    tj, tj_compensated = triple_jump(jr.IMIDM()), triple_jump(jr.IMIDM(compensated=True))
    assert tj.compensated_summation and tj_compensated.compensated and not tj.compensated
    plain = jr.simulate(tj, model, s0, 0.1, 20)
    comp = jr.simulate(tj_compensated, model, s0, 0.1, 20)
    assert isinstance(comp.final_state, RigidBodyState)
    # the plain run rounds each of its 60 substeps by at most an ulp of entries ≤ 1 in size
    # (measured: 4.7e-16 apart)
    for p, v in zip(plain.final_state, comp.final_state):
        np.testing.assert_allclose(v, p, rtol=0, atol=60 * np.finfo(np.float64).eps)


def _scan_steps(integrator, model, state0, dt, n):
    """`n` steps of `integrator` in one `lax.scan` (jitted): the final `(state, solver_state)`.
    The setting and the pair compile to the same kind of program here, so equal arithmetic
    gives equal bits."""

    @jax.jit
    def run(state0):
        def one(carry, k):
            state, ss = carry
            state, ss, _ = integrator.step(model, state, ss, k * dt, dt)
            return (state, ss), None

        init = (state0, integrator.init(model, state0, 0.0, dt))
        return jax.lax.scan(one, init, jnp.arange(n))[0]

    return run(state0)


@pytest.mark.parametrize(
    # the fast top (a torque) in the slow suite
    "case_name",
    ["krysl-torque-free", pytest.param("krysl-fast-top", marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("name", COMPENSATED + ["triple-jump IMIDM"])
def test_the_setting_carries_the_compensated_sum_bit_for_bit(name, case_name):
    """The setting's steps are the compensated sum's: its states and rounding errors (its
    solver state) over 60 steps equal, bit for bit, a `Compensated(state, error)` pair
    advanced by the plain method's step (`compensated.advance`) (IMIDM, fEM, a triple jump of
    IMIDM: one error through its members)."""
    model, s0 = problem(case_name)
    if name == "triple-jump IMIDM":
        plain, setting = triple_jump(jr.IMIDM()), triple_jump(jr.IMIDM(compensated=True))
    else:
        plain, setting = method(name), _compensated(name)
    assert setting.compensated and not plain.compensated
    pair, _ = _scan_steps(plain, model, Compensated(s0, zero_error(s0)), 0.01, 60)
    state, error = _scan_steps(setting, model, s0, 0.01, 60)
    assert any(np.any(np.asarray(e) != 0.0) for e in error)  # something was kept
    for x, y in zip((*pair.value, *pair.error), (*state, *error)):
        np.testing.assert_array_equal(x, y)


def test_the_setting_differentiates_like_the_plain_run():
    """Derivatives flow through the value (the error carries none): the gradient of a final
    state function equals the plain run's to the rounding of 40 steps (1e-12 relative)."""
    model, s0 = problem("krysl-torque-free")

    def loss(Pi0, compensated):
        s = RigidBodyState(s0.R, Pi0)
        # no fast path: the subject is the compensated sums (the fast path's fallback solve
        # would double the compile time of both gradients)
        method = jr.IMIDM(compensated=compensated, fast_path=False)
        sol = jr.simulate(method, model, s, 0.1, 40)
        return jnp.sum(sol.final_state.R[:, 0] ** 2 * jnp.arange(1.0, 4.0))

    g_c = jax.jit(jax.grad(loss), static_argnums=1)(s0.Pi, True)
    g_p = jax.jit(jax.grad(loss), static_argnums=1)(s0.Pi, False)
    np.testing.assert_allclose(g_c, g_p, rtol=1e-12)


def test_a_compensated_state0_is_refused_and_compositions_compensate_all_or_none():
    model, s0 = problem("krysl-torque-free")
    # the error rides in the solver state: a `Compensated` pair is no state of the model
    for integrator in (jr.IMIDM(), jr.IMIDM(compensated=True)):
        with pytest.raises(TypeError, match="state0 must be a RigidBodyState"):
            jr.simulate(integrator, model, Compensated(s0, zero_error(s0)), 0.1, 2)
    with pytest.raises(TypeError, match="pass the plain state"):
        jr.IMIDM(compensated=True).step(model, Compensated(s0, zero_error(s0)), s0, 0.0, 0.1)
    with pytest.raises(ValueError, match="only with compensated members"):
        jr.integrators.Composition((jr.IMIDM(compensated=True), jr.IMIDM()), (0.5, 0.5), 2)
