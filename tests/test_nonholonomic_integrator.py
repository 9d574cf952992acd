"""The discrete Lagrange–d'Alembert integrator for the rolling ball
(`jaxrigid.integrators.nonholonomic_lie.NonholonomicDLA`).

- What it keeps exactly: the discrete rolling constraint (4) `x₁ − x₀ = r(Λ₀ξ) × e₃` to
  round-off, `x₃ = r` to the bit, `|q| = 1` to round-off.
- That it is the DLA method it claims: along a computed trajectory, `D₂L_d(g_{k−1}, g_k) +
  D₁L_d(g_k, g_{k+1})` vanishes on the rolling distribution, with `L_d` written here from the
  unreduced Lagrangian (hand-written attitude matrix, quaternion log, rails and control by
  their closed forms) and differentiated by `jax` — nothing taken from the integrator.
- Symmetric (`Φ_{−h} ∘ Φ_h = id`), reversible for fixed masses; order 2 and the state at
  t = 10 of `two_circles_ball()` against scipy's DOP853 (`rtol = atol = 1e-13`) of the model's
  `vector_field`.
- Energy of the passive ball over 2·10⁴ steps: bounded (last window ≤ 2× first), where an
  explicit method of the same order (Heun, `tests/helpers.py`) fails the same check.
- Newton's outcome in `simulate(...).outcome`, failures reported; `vmap` = loop; `jit` = eager
  and `jax.grad` of the final contact point w.r.t. a control amplitude = central differences; a
  float32 run.
"""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import Heun
from scipy.integrate import solve_ivp

from jaxrigid.integrators.nonholonomic_lie import (
    NonholonomicDLA,
    contact_momentum,
    discrete_rolling_defect,
)
from jaxrigid.lie import quaternion
from jaxrigid.models.rolling_ball import (
    TWO_CIRCLES_T_END,
    RollingBallState,
    rolling_ball_state,
    two_circles_ball,
)
from jaxrigid.models.rolling_ball.controls import ConstantControl
from jaxrigid.results import RESULTS
from jaxrigid.simulation import simulate

DLA = NonholonomicDLA()
EPS = float(np.finfo(np.float64).eps)
FULL_INERTIA = ((0.4, 0.03, -0.02), (0.03, 0.45, 0.05), (-0.02, 0.05, 0.5))
TOP_THETA = (-math.pi / 2 + 0.6, -math.pi / 2 - 0.4)


def passive_top(dtype=jnp.float64):
    """The passive ball of the energy study (`bench/rolling_ball_energy.py`, `top`): full
    non-diagonal inertia, offset χ₀, both masses fixed off the bottom, spinning."""
    model, _ = two_circles_ball(inertia=FULL_INERTIA, chi0=(0.05, -0.03, -0.1))
    model = eqx.tree_at(lambda m: m.control, model, ConstantControl(jnp.asarray(TOP_THETA)))
    model = jax.tree.map(lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, model)
    q0 = quaternion.from_rotation_vector(jnp.asarray([0.3, -0.2, 0.1], dtype))
    return model, rolling_ball_state(model, q=q0, Omega=[1.0, 2.0, 3.0])


def routh_sphere():
    """The energy study's `routh`: axisymmetric 𝕀 and both masses at the bottom."""
    model, _ = two_circles_ball(inertia=(0.4, 0.4, 0.5))
    model = eqx.tree_at(lambda m: m.control, model, ConstantControl(jnp.full((2,), -math.pi / 2)))
    q0 = quaternion.from_rotation_vector(jnp.asarray([0.3, -0.2, 0.1]))
    return model, rolling_ball_state(model, q=q0, Omega=[1.0, 2.0, 3.0])


CHUNK = 50  # every run here is chunks of 50 saved steps: one compiled program per model kind


def run(model, state0, h, t0=0.0, integrator=DLA):
    """`CHUNK` steps of `h` from `t0`, every state saved (the shared compiled program)."""
    return simulate(integrator, model, state0, h, CHUNK, t0=t0)


def integrate(model, state0, h, n):
    """The state after `n` steps (a multiple of `CHUNK`), as chunks of `run`."""
    assert n % CHUNK == 0
    state = state0
    for k in range(n // CHUNK):
        sol = run(model, state, h, t0=k * CHUNK * h)
        assert bool(sol.outcome.all_converged)
        state = sol.final_state
    return state


def tree_max_abs(a, b):
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(jax.tree.leaves(a), b))


def state_error(state, ref):
    """Max-norm error of `(q up to sign, Ω, x)` against a flat reference `(10,)`."""
    q = np.asarray(state.q)
    dq = min(np.abs(q - ref[:4]).max(), np.abs(q + ref[:4]).max())
    dOmega = np.abs(np.asarray(state.Omega) - ref[4:7]).max()
    return max(dq, dOmega, np.abs(np.asarray(state.x) - ref[7:]).max())


def forced_two_circles(force):
    model, s0 = two_circles_ball()
    return eqx.tree_at(lambda m: m.external_force, model, jnp.asarray(force)), s0


@functools.cache
def two_circles_reference(force=(0.0, 0.0, 0.0)):
    """DOP853 (`rtol = atol = 1e-13`) of `RollingBall.vector_field` for `two_circles_ball()`
    (with an external force at the centre, if given), at t = 2 and t = 10:
    `{t: (10,) = (q, Ω, x)}`."""
    model, s0 = forced_two_circles(force)

    @jax.jit
    def f(t, y):
        dy = model.vector_field(t, RollingBallState(y[:4], y[4:7], y[7:]))
        return jnp.concatenate(list(dy))

    y0 = np.concatenate([np.asarray(a) for a in s0])
    sol = solve_ivp(
        lambda t, y: np.asarray(f(t, y)),
        (0.0, TWO_CIRCLES_T_END),
        y0,
        method="DOP853",
        t_eval=[2.0, TWO_CIRCLES_T_END],
        rtol=1e-13,
        atol=1e-13,
    )
    assert sol.success
    return {2.0: sol.y[:, 0], TWO_CIRCLES_T_END: sol.y[:, 1]}


# --- exactly kept ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["two_circles", "passive_top"])
def test_discrete_constraint_unit_quaternion_and_height_to_round_off(case):
    """Over 50 steps of 0.1: `discrete_rolling_defect` ≤ 10 ulp of the displacement scale,
    `||q| − 1| ≤ 2 eps`, `x₃ = r` exactly."""
    model, s0 = two_circles_ball() if case == "two_circles" else passive_top()
    states = run(model, s0._replace(Omega=jnp.array([1.0, 2.0, 3.0])), 0.1).states
    pairs = jax.tree.map(lambda a: a[:-1], states), jax.tree.map(lambda a: a[1:], states)
    defect = jax.vmap(functools.partial(discrete_rolling_defect, model))(*pairs)
    step = jnp.linalg.norm(pairs[1].x - pairs[0].x, axis=-1)
    assert float(jnp.max(step)) > 1e-3  # it rolls
    scale = float(model.radius) * float(jnp.max(jnp.abs(states.x))) + 1.0
    assert float(jnp.max(jnp.abs(defect))) <= 10 * EPS * scale
    assert float(jnp.max(jnp.abs(jnp.linalg.norm(states.q, axis=-1) - 1.0))) <= 2 * EPS
    assert bool(jnp.all(states.x[:, 2] == model.radius))


# --- it is the DLA method ----------------------------------------------------------------------


def _hand_matrix(q):
    w, a, b, c = q
    return jnp.array(
        [
            [1 - 2 * (b * b + c * c), 2 * (a * b - w * c), 2 * (a * c + w * b)],
            [2 * (a * b + w * c), 1 - 2 * (a * a + c * c), 2 * (b * c - w * a)],
            [2 * (a * c - w * b), 2 * (b * c + w * a), 1 - 2 * (a * a + b * b)],
        ]
    )


def _hand_multiply(p, q):
    pw, pv, qw, qv = p[0], p[1:], q[0], q[1:]
    return jnp.concatenate([jnp.stack([pw * qw - pv @ qv]), pw * qv + qw * pv + jnp.cross(pv, qv)])


def _hand_log(p):
    """Rotation vector of a unit quaternion with `w > 0` (angles < π; the steps here are small)."""
    v = p[1:]
    n = jnp.sqrt(v @ v)
    return 2.0 * jnp.arctan2(n, p[0]) * v / n


def _two_circles_masses(t, amplitude=0.8, theta_fixed=None):
    """`(m (3,), χ (3, 3), χ̇ (3, 3))` of the two-circles ball at `t` by hand: shell at χ₀,
    `ζ₁ = ½(cos θ, 0, sin θ)`, `ζ₂ = ½(0, cos θ, sin θ)`, `θᵢ = −π/2 + a sin(1.5t + φᵢ)` or
    fixed."""
    if theta_fixed is None:
        phase = jnp.array([0.0, math.pi / 2])
        th = -math.pi / 2 + amplitude * jnp.sin(1.5 * t + phase)
        thd = amplitude * 1.5 * jnp.cos(1.5 * t + phase)
    else:
        th, thd = jnp.asarray(theta_fixed), jnp.zeros(2)
    c, s = jnp.cos(th), jnp.sin(th)
    z1 = 0.5 * jnp.array([c[0], 0.0, s[0]])
    z2 = 0.5 * jnp.array([0.0, c[1], s[1]])
    dz1 = 0.5 * jnp.array([-s[0], 0.0, c[0]]) * thd[0]
    dz2 = 0.5 * jnp.array([0.0, -s[1], c[1]]) * thd[1]
    return z1, z2, dz1, dz2


def _hand_lagrangian(inertia, chi0, theta_fixed):
    """`L(q, Ω, u, t)` of (2), shell mass 1, point masses 0.25, g = 9.81, r = 1."""

    def lagrangian(q, Omega, u, t):
        Lam = _hand_matrix(q)
        z1, z2, dz1, dz2 = _two_circles_masses(t, theta_fixed=theta_fixed)
        U = Lam.T @ u
        total = 0.5 * Omega @ (inertia @ Omega)
        for m, chi, chid in ((1.0, chi0, jnp.zeros(3)), (0.25, z1, dz1), (0.25, z2, dz2)):
            V = U + jnp.cross(Omega, chi) + chid
            total = total + 0.5 * m * V @ V - 9.81 * m * (Lam @ chi)[2]
        return total

    return lagrangian


def _hand_dla_residual(lagrangian, h, t, g_prev, g, g_next):
    """`(D₂L_d(g_prev, g) + D₁L_d(g, g_next))` paired with the rolling variations
    `δΛ = ΛΣ̂`, `δx = rΛΣ × e₃` at `g`, as a body vector `(3,)`; `L_d` is (5) of the module."""

    def L_d(g0, g1, t0):
        (q0, x0), (q1, x1) = g0, g1
        xi = _hand_log(_hand_multiply(q0 * jnp.array([1, -1, -1, -1]), q1))
        u = (x1 - x0) / h
        return 0.5 * h * (lagrangian(q0, xi / h, u, t0) + lagrangian(q1, xi / h, u, t0 + h))

    def varied(sigma):
        q, x = g
        dq = jnp.concatenate([jnp.ones(1), 0.5 * sigma])  # exp(Σ) to first order
        return _hand_multiply(q, dq), x + jnp.cross(_hand_matrix(q) @ sigma, jnp.array([0, 0, 1.0]))

    def both(sigma):
        gs = varied(sigma)
        return L_d(g_prev, gs, t - h) + L_d(gs, g_next, t)

    return jax.jacfwd(both)(jnp.zeros(3))


@pytest.mark.parametrize("case", ["two_circles", "passive_top"])
def test_trajectory_satisfies_the_discrete_lagrange_dalembert_equations(case):
    """(1) of the module at every interior node of 50 steps, to 1e-11 of `|K|`: the method is
    the DLA of `L_d` (5) with the discrete constraint (4), written independently here."""
    if case == "two_circles":
        model, s0 = two_circles_ball()
        lag = _hand_lagrangian(jnp.diag(jnp.array([0.4, 0.45, 0.5])), jnp.array([0, 0, -0.1]), None)
    else:
        model, s0 = passive_top()
        chi0 = jnp.array([0.05, -0.03, -0.1])
        lag = _hand_lagrangian(jnp.array(FULL_INERTIA), chi0, TOP_THETA)
    h = 0.05
    states = run(model, s0, h).states
    res = jax.jit(jax.vmap(functools.partial(_hand_dla_residual, lag, h)))(
        jnp.arange(1, CHUNK) * h,
        (states.q[:-2], states.x[:-2]),
        (states.q[1:-1], states.x[1:-1]),
        (states.q[2:], states.x[2:]),
    )
    K = jax.vmap(functools.partial(contact_momentum, model))(jnp.arange(CHUNK + 1) * h, states)
    assert float(jnp.max(jnp.abs(K))) > 0.5
    assert float(jnp.max(jnp.abs(res))) <= 1e-11 * float(jnp.max(jnp.abs(K)))


# --- symmetry, order, reference -------------------------------------------------------------


def test_symmetric_forward_then_backward_returns_to_round_off():
    """50 steps of h, then 50 of −h from the end (t running back): the initial state to
    1e-12 (an actuated, time-dependent case)."""
    model, s0 = two_circles_ball()
    h = 0.04
    fwd = run(model, s0._replace(Omega=jnp.array([0.3, -0.5, 1.0])), h)
    back = run(model, fwd.final_state, -h, t0=CHUNK * h)
    assert bool(fwd.outcome.all_converged) and bool(back.outcome.all_converged)
    start = jax.tree.map(lambda a: a[0], fwd.states)
    assert tree_max_abs(back.final_state, jax.tree.leaves(start)) <= 1e-12


def test_reversible_with_fixed_masses():
    """`R Φ_h R Φ_h = id` for `R(q, Ω, x) = (q, −Ω, x)` (passive ball): to 1e-12."""
    model, s0 = passive_top()
    h = 0.05
    s1 = run(model, s0, h).final_state
    flip = lambda s: s._replace(Omega=-s.Omega)  # noqa: E731
    back = run(model, flip(s1), h).final_state
    assert tree_max_abs(flip(back), jax.tree.leaves(s0)) <= 1e-12


def test_agrees_with_reference_at_t_10():
    """`two_circles_ball()` at t = 10 with h = 0.005: within 3e-5 of DOP853 (measured 7.6e-6,
    the method's second-order error; the bound leaves 4× for a changed round-off order)."""
    model, s0 = two_circles_ball()
    final = integrate(model, s0, 0.005, 2000)
    assert state_error(final, two_circles_reference()[TWO_CIRCLES_T_END]) <= 3e-5


def test_external_force_against_dop853():
    """With a horizontal force `F = (3, −2, 0)` at the centre (a torque `rΓ × ΛᵀF` about the
    contact point in (6)): the state at t = 2, h = 0.01, within 6e-5 of DOP853 of the model
    (measured 1.9e-5, and 7.6e-5, 4.8e-6 at h = 0.02, 0.005: the second-order error; the force
    moves the contact point by ~2, so a sign error in its term would be off by ~1)."""
    force = (3.0, -2.0, 0.0)
    model, s0 = forced_two_circles(force)
    final = integrate(model, s0, 0.01, 200)
    unforced = integrate(*two_circles_ball(), 0.01, 200)
    assert float(jnp.max(jnp.abs(final.x[:2] - unforced.x[:2]))) > 1  # the force matters
    assert state_error(final, two_circles_reference(force)[2.0]) <= 6e-5


# --- energy -------------------------------------------------------------------------------------


def _window_errors(model, sol, window):
    E = jax.jit(jax.vmap(lambda s: model.energy(0.0, s)))(sol.states)
    dE = np.abs(np.asarray(E - E[0]))
    return dE[: window + 1].max(), dE[-window:].max()


@pytest.mark.parametrize("case", ["routh_sphere", "passive_top"])
def test_passive_energy_error_bounded_where_heun_drifts(case):
    """2·10⁴ steps of h = 0.01 (t = 200): `max|E − E₀|` over the last 10³ steps ≤ 2× that over
    the first 10³. An oscillating, bounded error has its full amplitude in the first window
    (its oscillation, a few time units, is shorter than the window's 10) and the last equals it
    to a few per cent (measured: ratio 1.00 for the Routh sphere, 1.06 for the top); a drift
    linear in t would make the ratio about 20 (t = 200 against t = 10): Heun's measured ratios
    are 16 and 17. 2× leaves room for slow modulation, none for a drift."""
    model, s0 = routh_sphere() if case == "routh_sphere" else passive_top()
    first, last = _window_errors(model, simulate(DLA, model, s0, 0.01, 20_000), 1000)
    assert last <= 2.0 * first, (first, last)
    first_h, last_h = _window_errors(model, simulate(Heun(), model, s0, 0.01, 20_000), 1000)
    assert last_h > 10.0 * first_h, (first_h, last_h)


# --- outcome, batching, jit, grad, float32 ----------------------------------------------------


def test_newton_convergence_reported_in_outcome():
    """Converged runs report their iterations and residual; a step far too large is reported
    (not converged), not silently accepted."""
    model, s0 = two_circles_ball()
    out = run(model, s0, 0.02).outcome
    assert bool(out.all_converged) and int(out.first_failure) == -1
    assert 1 <= int(out.max_iterations) <= 5
    assert float(out.max_residual) < 1e-8
    model, s0 = passive_top()
    bad = run(model, s0, 1.5).outcome  # turns by |Ω|h ≈ 5.6 rad a step
    assert int(bad.result) != RESULTS.successful
    assert int(bad.first_failure) == 0


def test_batched_equals_unbatched():
    """An ensemble of three initial spins = three single runs."""
    model, s0 = two_circles_ball()
    spins = jnp.array([[0.0, 0.0, 0.0], [0.5, -0.2, 1.0], [-1.0, 0.3, 0.2]])
    batch = s0._replace(
        q=jnp.broadcast_to(s0.q, (3, 4)), Omega=spins, x=jnp.broadcast_to(s0.x, (3, 3))
    )
    h = 0.025
    together = run(model, batch, h).final_state
    for i in range(3):
        one = run(model, s0._replace(Omega=spins[i]), h).final_state
        assert tree_max_abs(one, [a[i] for a in together]) <= 1e-14


def test_jit_and_grad_of_final_contact_point_wrt_control_amplitude():
    """`jax.jit` of a function running `simulate` = the same without it (1e-14); for the
    two-circles amplitude `a` (both rails), `jax.grad` of `(x₁ + 2x₂)(t = 1)` (through Newton by
    the implicit function theorem) = central differences (step 1e-5, truncation ~1e-10
    relative, round-off ~1e-11) to 1e-6."""
    h = 0.02

    def final_contact(a):
        model, s0 = two_circles_ball()
        model = eqx.tree_at(lambda m: m.control.amplitude, model, jnp.stack([a, a]))
        x = run(model, s0, h).final_state.x
        return x[0] + 2.0 * x[1]

    a0, eps = jnp.asarray(0.8), 1e-5
    value, grad = jax.jit(jax.value_and_grad(final_contact))(a0)
    eager = final_contact(a0)  # simulate's own compiled run, no outer jit
    assert abs(float(eager)) > 1e-3  # it moved
    assert abs(float(value) - float(eager)) <= 1e-14  # jit = eager
    fd = (final_contact(a0 + eps) - final_contact(a0 - eps)) / (2 * eps)
    np.testing.assert_allclose(float(grad), float(fd), rtol=1e-6)


def test_float32_run():
    """The passive top in float32 (the state's dtype throughout): 50 steps of 0.04 converge;
    `|q| − 1` and the discrete constraint at float32 round-off; within 1e-3 of float64."""
    model32, s32 = passive_top(jnp.float32)
    sol = run(model32, s32, 0.04)
    fs, states = sol.final_state, sol.states
    assert fs.q.dtype == jnp.float32 and fs.Omega.dtype == jnp.float32
    assert bool(sol.outcome.all_converged)
    eps32 = float(np.finfo(np.float32).eps)
    assert float(jnp.max(jnp.abs(jnp.linalg.norm(states.q, axis=-1) - 1.0))) <= 2 * eps32
    assert bool(jnp.all(states.x[:, 2] == 1.0))
    pairs = jax.tree.map(lambda a: a[:-1], states), jax.tree.map(lambda a: a[1:], states)
    defect = jax.vmap(functools.partial(discrete_rolling_defect, model32))(*pairs)
    assert float(jnp.max(jnp.abs(defect))) <= 10 * eps32 * (1.0 + float(jnp.max(jnp.abs(states.x))))
    model, s0 = passive_top()
    ref = run(model, s0, 0.04).final_state
    assert tree_max_abs(fs, [np.asarray(a, np.float32) for a in jax.tree.leaves(ref)]) <= 1e-3
