"""Dynamic-mode trajectory optimisation (issue 14, the model note's mode 2): the masses are
degrees of freedom of `RollingBallUnreduced`, driven by actuator forces `u(t) = ψ(t)ᵀc`.

- `BSplineActuation` = scipy's `BSpline` on the same knots and control points;
  `FourierActuation` = its series written out; the effort quadrature = scipy's adaptive
  `quad` / Parseval.
- The model's generalised force is the actuation: the energy balance `dE/dt = u·θ̇` at
  random states (exact), and `E(T) − E(0) = ∫u·θ̇ dt` along a simulated trajectory.
- `jax.grad` of a composite cost (effort `∫Σu²`, terminal miss, a disc obstacle, a rail
  barrier on the simulated `θ`) = central differences: RKMK4, and (slow) `MidpointDLA`.
- `jit`/`vmap` members = single runs; float32's gradient finite and within 1e-3 of float64.
- Bad input: wrong coefficient shape, NaN (eager and under `jit`), bad sizes, wrong mode.
- (slow) the dynamic `reach-point` is solved (miss ≤ 1e-3) and re-simulated with RKMK8 at
  dt/4 and `MidpointDLA` at dt/4 and dt/8 (order-2 convergence to the same motion).

Run: `pytest -p no:xdist tests/test_control_dynamic.py -s` (add `-m slow` for the rest).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import central_difference_error, quad_by_interval
from scipy import integrate
from scipy.interpolate import BSpline

from jaxrigid.control.costs import (
    DiscObstacles,
    Effort,
    FinalPosition,
    RailBarrier,
    Trajectory,
    rollout,
)
from jaxrigid.control.optimise import optimise
from jaxrigid.control.parametrisations import BSplineActuation, FourierActuation
from jaxrigid.control.presets import (
    ControlProblem,
    avoid_obstacles,
    default_settings,
    get_problem,
    parametrised_slot,
    reach_point,
    two_circles_start,
)
from jaxrigid.integrators.nonholonomic_midpoint import MidpointDLA
from jaxrigid.integrators.rkmk import RKMK4, RKMK8
from jaxrigid.models.rigid_body import RigidBody
from jaxrigid.models.rolling_ball.unreduced import RollingBallUnreduced
from jaxrigid.simulation import simulate

T = 5.0


def _guess(shape, seed=0, scale=0.5):
    return jnp.asarray(scale * np.random.default_rng(seed).normal(size=shape))


def _actuations():
    return [
        BSplineActuation.zeros(T, 6, 2, degree=3),
        BSplineActuation.zeros(T, 4, 2, degree=5),
        FourierActuation.zeros(T, 3, 2),
    ]


def _random(u, seed):
    return u.with_coefficients(_guess(u.coefficients.shape, seed, 1.0))


# --- the parametrisation ---------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 1], ids=["cubic", "quintic"])
def test_bspline_actuation_equals_scipy(k):
    """`u` = scipy's `BSpline(knots, c, p)` (its own de Boor evaluation; control points the
    coefficient rows) on `[0, T]` and 0.3 past each end (both extrapolate the end pieces), to
    1e-12 relative to the largest value: the same polynomials, round-off apart. The full
    clamped basis: `u(0) = c₀`, `u(T) = c_{M−1}`; and the basis sums to one (a partition of
    unity), so the constant coefficients give a constant force."""
    u = _random(_actuations()[k], k)
    c = np.asarray(u.coefficients)
    ref = BSpline(u.knots, c, u.degree, extrapolate=True)
    ts = np.linspace(-0.3, T + 0.3, 71)
    want = ref(ts)
    np.testing.assert_allclose(u.sample(ts), want, rtol=0, atol=1e-12 * np.max(np.abs(want)))
    np.testing.assert_allclose(u(0.0), c[0], rtol=0, atol=1e-14)
    np.testing.assert_allclose(u(T), c[-1], rtol=0, atol=1e-14)
    const = u.with_coefficients(jnp.tile(jnp.asarray([[2.0, -3.0]]), (u.n_basis, 1)))
    np.testing.assert_allclose(const.sample(ts), np.tile([2.0, -3.0], (71, 1)), atol=1e-13)


def test_fourier_actuation_is_the_series():
    """`u = a₀ + Σ aₖ cos ωₖt + bₖ sin ωₖt` (rows `a₀, a₁, b₁, …`) written out, to 1e-12
    relative (round-off)."""
    u = _random(_actuations()[2], 2)
    c = np.asarray(u.coefficients)
    ts = np.linspace(-0.5, T + 0.5, 53)
    w = 2 * np.pi * np.arange(1, 4) / T
    want = c[0] + np.cos(np.outer(ts, w)) @ c[1::2] + np.sin(np.outer(ts, w)) @ c[2::2]
    np.testing.assert_allclose(u.sample(ts), want, rtol=0, atol=1e-12 * np.max(np.abs(want)))


def test_effort_quadrature_is_exact():
    """`effort() = ∫₀ᵀ Σuᵢ²`: Fourier against Parseval `T(a₀² + ½Σ(aₖ² + bₖ²))`, B-splines
    against scipy's adaptive `quad` per knot interval (its tolerance 1e-13), both to 1e-12
    relative: the rules are exact for these integrands (Gauss–Legendre with `p + 1` points
    for the degree-`2p` `u²`, the periodic trapezoid on `2J + 1` points for degree `2J`)."""
    cubic, quintic, fourier = (_random(u, k) for k, u in enumerate(_actuations()))
    c = np.asarray(fourier.coefficients)
    parseval = T * np.sum(c[0] ** 2 + 0.5 * np.sum(c[1:] ** 2, axis=0))
    np.testing.assert_allclose(fourier.effort(), parseval, rtol=1e-12)
    for u in (cubic, quintic):
        ref = BSpline(u.knots, np.asarray(u.coefficients), u.degree)
        edges = np.linspace(0, T, u.n_intervals + 1)
        want = quad_by_interval(lambda t: np.sum(ref(t) ** 2), edges)
        np.testing.assert_allclose(u.effort(), want, rtol=1e-12)


def test_actuation_bad_input():
    """Wrong coefficient shape (constructor and `with_coefficients`), bad sizes, T ≤ 0,
    an unknown mode or basis: `ValueError` naming what is allowed; NaN coefficients: the
    actuation's own value check."""
    from jaxrigid import _checks

    with pytest.raises(ValueError, match=r"coefficients must have shape \(\.\.\., 9, n\)"):
        BSplineActuation(jnp.zeros((8, 2)), T, 6)
    with pytest.raises(ValueError, match=r"coefficients must have shape \(\.\.\., 7, n\)"):
        FourierActuation(jnp.zeros((2,)), T, 3)
    with pytest.raises(ValueError, match="n_intervals must be a positive integer"):
        BSplineActuation.zeros(T, 0, 2)
    with pytest.raises(ValueError, match="degree must be an integer ≥ 0"):
        BSplineActuation.zeros(T, 4, 2, degree=-1)
    with pytest.raises(ValueError, match="n_harmonics must be a non-negative integer"):
        FourierActuation.zeros(T, -1, 2)
    with pytest.raises(ValueError, match="t_end must be positive"):
        FourierActuation.zeros(0.0, 2, 2)
    with pytest.raises(ValueError, match="number of masses"):
        BSplineActuation.zeros(T, 4, 0)
    u = BSplineActuation.zeros(T, 6, 2)
    with pytest.raises(ValueError, match=r"coefficients must have shape \(9, 2\)"):
        u.with_coefficients(jnp.zeros((9, 3)))
    bad = u.with_coefficients(u.coefficients.at[3, 1].set(jnp.nan))
    with pytest.raises(ValueError, match="BSplineActuation: coefficients NaN or inf"):
        _checks.raise_now(bad.checks())
    with pytest.raises(ValueError, match="mode must be 'prescribed' or 'dynamic'"):
        reach_point(mode="kinematic")
    with pytest.raises(ValueError, match="basis must be 'bspline' or 'fourier'"):
        two_circles_start(T, "wavelet", mode="dynamic")


# --- the model and the problem -----------------------------------------------------------------


def _dynamic_ball(u):
    model, state0 = two_circles_start(T, mode="dynamic")
    return model.__class__.from_rolling_ball(model, dynamic=True, actuation=u), state0


def test_energy_balance():
    """The actuation enters as the generalised force on `θ`: along the flow
    `dE/dt = u(t)·θ̇` (the rolling constraint is ideal and time-independent, `F = 0`, the
    rail coordinates enter the energy without `t`). Pointwise at random states (Ω, θ, θ̇
    random, q random unit) to 1e-11·(1 + |u·θ̇|) (a JVP of the energy along the model's vector
    field; only the saddle solve's round-off remains).
    Integrated along an RKMK4 trajectory (dt = 0.01, T = 5) `E(T) − E(0)` = Simpson's
    `∫u·θ̇ dt` on the saved steps to 1e-6 relative to `∫|u·θ̇|` (≈ 6): the difference is the
    O(dt⁴) discretisation (RKMK4's and Simpson's), measured 2.1e-7, falling 21× at dt/2."""
    u = _random(BSplineActuation.zeros(T, 6, 2), 7)
    model, state0 = _dynamic_ball(u)

    # one program for the three states (eagerly, each op of the jvp and the saddle solve
    # compiled a program of its own)
    @jax.jit
    def rate_and_power(t, state):
        vf = model.vector_field(t, state)
        _, dE = jax.jvp(lambda s: model.energy(t, s), (state,), (vf,))
        return dE, u(t) @ state.theta_dot

    rng = np.random.default_rng(1)
    for k in range(3):
        q = rng.normal(size=4)
        state = state0._replace(
            q=jnp.asarray(q / np.linalg.norm(q)),
            Omega=jnp.asarray(rng.normal(size=3)),
            theta=jnp.asarray(rng.uniform(-np.pi, np.pi, size=2)),
            theta_dot=jnp.asarray(rng.normal(size=2)),
        )
        dE, power = (float(x) for x in rate_and_power(jnp.asarray(0.7 + k), state))
        scale = 1.0 + abs(power)
        assert abs(dE - power) <= 1e-11 * scale, (k, dE, power)

    dt, n = 0.01, 500
    traj = rollout(RKMK4(), model, state0, dt, n)
    assert traj.theta.shape == (n + 1, 2) and traj.theta_dot.shape == (n + 1, 2)
    states = type(state0)(traj.q, traj.Omega, traj.x, traj.theta, traj.theta_dot)

    @jax.jit
    def energy_and_power(ts, states):
        power = jnp.sum(jax.vmap(u)(ts) * states.theta_dot, axis=-1)
        return jax.vmap(model.energy)(ts, states), power

    E, power = (np.asarray(x) for x in energy_and_power(traj.ts, states))
    work = integrate.simpson(power, x=np.asarray(traj.ts))
    scale = integrate.simpson(np.abs(power), x=np.asarray(traj.ts))
    rel = abs(float(E[-1] - E[0]) - work) / scale
    print(f"E(T) − E(0) = {float(E[-1] - E[0]):.10f}, ∫u·θ̇ = {work:.10f}, rel {rel:.1e}")
    assert abs(float(E[-1] - E[0]) - work) <= 1e-6 * scale


def test_dynamic_problem_structure():
    """`mode="dynamic"` builds a `RollingBallUnreduced` with passive-at-rest masses at
    `θ = −π/2`, the coefficients in its `actuation` (`parametrised_slot`), `Trajectory` with
    `θ`, `θ̇` (`None` in prescribed mode); zero coefficients keep everything at rest to
    round-off (the masses hang at the bottom: an equilibrium), with the contact force the
    total weight `(0, 0, (m₀ + m₁ + m₂)g)` (`RollingBallUnreduced.contact_force`) to 1e-12
    relative. A model whose actuation is not parametrised is refused (`TypeError`)."""
    problem = reach_point(dt=0.1, mode="dynamic")
    assert problem.mode == "dynamic" and parametrised_slot(problem.model).mode == "dynamic"
    assert isinstance(problem.model, RollingBallUnreduced) and problem.model.dynamic
    assert isinstance(problem.control, BSplineActuation)
    assert problem.coefficient_shape == (11, 2)
    assert "∫Σuᵢ²" in problem.description
    np.testing.assert_array_equal(problem.state0.theta, [-np.pi / 2] * 2)
    p0 = problem.initial_coefficients()
    np.testing.assert_array_equal(p0, 0.0)
    traj = problem.trajectory(p0, contact=True)
    assert isinstance(traj, Trajectory) and traj.theta.shape == (2, 2)
    np.testing.assert_allclose(traj.x[-1], [0.0, 0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(traj.theta, -np.pi / 2, atol=1e-12)
    weight = 1.5 * 9.81
    np.testing.assert_allclose(traj.contact_force, [[0.0, 0.0, weight]] * 2, atol=1e-12 * weight)
    f, c, g = problem(p0)
    assert float(f) == 0.0 and g.shape == (0,)
    np.testing.assert_allclose(c, [-1.0, -0.5], atol=1e-12)

    prescribed = reach_point(dt=0.1)
    assert prescribed.mode == "prescribed"
    assert prescribed.trajectory(prescribed.initial_coefficients()).theta is None

    obstacles = avoid_obstacles(dt=0.1, mode="dynamic", basis="fourier", n_basis=4)
    assert isinstance(obstacles.control, FourierActuation)
    assert obstacles.coefficient_shape == (9, 2)
    assert get_problem("figure-eight", mode="dynamic").mode == "dynamic"
    settings = default_settings("reach-point", mode="dynamic")
    assert (settings.n_outer, settings.n_inner) == (6, 100)
    assert default_settings("reach-point") == default_settings("reach-point", "prescribed")

    passive = problem.model.__class__.from_rolling_ball(problem.model, dynamic=True)
    with pytest.raises(TypeError, match="actuation must be an AbstractParametrisedActuation"):
        ControlProblem(passive, problem.state0, RKMK4(), Effort(), (), "x", 0.1, 50)
    # the slot is the model's declared input, not its class: a prescribed unreduced ball
    # optimises its `control`, and a model with no input is refused by name
    unreduced = RollingBallUnreduced.from_rolling_ball(prescribed.model)
    assert parametrised_slot(unreduced).field == "control"
    with pytest.raises(TypeError, match="a RigidBody has no input to optimise"):
        ControlProblem(RigidBody(jnp.ones(3)), None, RKMK4(), Effort(), (), "x", 0.1, 50)


def _composite(integrator, dt=0.1, dtype=None):
    """Effort `∫Σu²` + terminal miss + a disc the path crosses + a rail bound the masses
    cross (on the simulated `θ`), every term active at `_guess`'s coefficients (asserted)."""
    base = reach_point(dt=dt, integrator=integrator, mode="dynamic", dtype=dtype)
    dtype = base.model.inertia.dtype
    f = lambda v: jnp.asarray(v, dtype)  # noqa: E731
    cost = (
        Effort()
        + 3.0 * FinalPosition(f([1.0, 0.5]))
        + 10.0 * DiscObstacles(f([[-0.4, -0.2]]), f([0.3]))
        + RailBarrier(f([-2.0, -2.0]), f([-1.3, -1.3]))
    )
    return ControlProblem(
        base.model, base.state0, integrator, cost, (), "composite", dt, base.n_steps, 1
    )


_GRADIENTS = {}


def _value_and_grad(dtype=jnp.float64):
    """`(problem, p, f(p), ∇f(p), parts)` for the RKMK4 composite, compiled once per dtype
    (the gradient and float32 tests share it). `f` is `problem(p)[0]` written out as
    `problem.__call__` computes it, `evaluate(trajectory(p), p)`, so that the cost's `parts`
    on the same trajectory come out of the gradient's program: an eager trajectory and its
    parts were a program and some 70 eager operations more to build (issue 31)."""
    if dtype not in _GRADIENTS:
        problem = _composite(RKMK4(), dtype=dtype)
        p = _guess(problem.coefficient_shape).astype(dtype)

        def loss(p):
            trajectory = problem.trajectory(p)
            parts = problem.cost.parts(trajectory, problem.control.with_coefficients(p))
            return problem.evaluate(trajectory, p)[0], parts

        (value, parts), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(p)
        _GRADIENTS[dtype] = problem, p, value, grad, parts
    return _GRADIENTS[dtype]


def _check_gradient(problem, p, value, grad, label, parts=None):
    """Every cost term active at `p` (`parts`, else computed eagerly) and `grad` = the central
    differences of `problem(p)[0]` to 1e-6 relative to its largest entry."""
    if parts is None:
        parts = problem.cost.parts(problem.trajectory(p), problem.control.with_coefficients(p))
    assert all(v > 0 for v in parts.values()), parts  # every term contributes
    rel = central_difference_error(lambda p: problem(p)[0], p, grad, h=1e-5)
    print(f"{label}: f = {float(value):.6g}, max|grad − FD|/max|grad| = {rel:.2e}")
    assert rel <= 1e-6


def test_gradient_equals_central_differences_rkmk4():
    """`jax.grad` (reverse mode through `simulate`'s checkpointed scan and the unreduced
    model's saddle solves) = central differences `(f(p + heᵢ) − f(p − heᵢ))/2h` for every
    coefficient, to 1e-6 relative to the largest entry. h = 1e-5: truncation
    `h²|f'''|/6 ≈ 1e-10·|f'''|` and round-off `eps·|f|/h ≈ 1e-10` (|f| ≈ 5) are far below
    1e-6; the squared hinges are C¹ with Lipschitz gradients, so a difference across a
    kink errs by O(h²) times the jump of the second derivative. T = 5 at dt = 0.1.
    Measured 1.9e-10."""
    problem, p, value, grad, parts = _value_and_grad()
    _check_gradient(problem, p, value, grad, "RKMK4", parts)


@pytest.mark.slow
def test_gradient_equals_central_differences_midpoint_dla():
    """As for RKMK4, with the implicit `MidpointDLA` (Newton per step, the gradient by the
    implicit function theorem), measured 3.8e-10: slow, its gradient compiles for ~70 s on
    the shared 2-core machine."""
    problem = _composite(MidpointDLA())
    p = _guess(problem.coefficient_shape)
    value, grad = jax.jit(jax.value_and_grad(lambda p: problem(p)[0]))(p)
    _check_gradient(problem, p, value, grad, "DLA-midpoint")


def test_float32_gradient_matches_float64():
    """The composite in float32 (model, state, coefficients cast): the gradient is finite,
    float32, and within 1e-3 of float64's (relative, max norm). Expected error: round-off
    accumulated over 50 RKMK4 steps, the saddle solves and the reverse pass (measured
    9.1e-7); 1e-3 is the issue's bound."""
    _, _, _, g64, _ = _value_and_grad(jnp.float64)
    _, _, v32, g32, _ = _value_and_grad(jnp.float32)
    assert g32.dtype == jnp.float32 and v32.dtype == jnp.float32
    g32, g64 = np.asarray(g32), np.asarray(g64)  # numpy on the host: no eager programs
    assert np.all(np.isfinite(g32))
    rel = float(np.max(np.abs(g32.astype(np.float64) - g64)) / np.max(np.abs(g64)))
    print(f"float32 vs float64 gradient: {rel:.2e}")
    assert rel <= 1e-3


def test_jit_vmap_members_equal_single_runs():
    """`vmap` of the problem over 3 coefficient sets, under `jit`, = each set run alone under
    `jit` and eagerly: the same operations batched, so equal to round-off (1e-12 relative;
    XLA may fuse and order reductions differently in the batched program)."""
    problem = reach_point(dt=0.1, mode="dynamic")
    ps = jnp.stack([_guess(problem.coefficient_shape, seed) for seed in (3, 4, 5)])
    f_b, c_b, _ = jax.jit(jax.vmap(lambda p: problem(p)))(ps)
    f_b, c_b = np.asarray(f_b), np.asarray(c_b)  # indexed on the host: no eager slices
    single = jax.jit(lambda p: problem(p))
    for k in range(3):
        f, c, _ = single(ps[k])
        np.testing.assert_allclose(f_b[k], f, rtol=1e-12)
        np.testing.assert_allclose(c_b[k], c, rtol=1e-12, atol=1e-12)
    f, c, _ = problem(ps[0])  # eager (the checks raised on the host)
    np.testing.assert_allclose(c_b[0], c, rtol=1e-12, atol=1e-12)


def test_problem_bad_coefficients():
    """Through the problem: a wrong coefficient shape is a `ValueError` naming the expected
    shape; NaN coefficients are refused by the actuation's value check, which
    `RollingBallUnreduced.parameter_checks` includes: eagerly (`ValueError`), under `jit` (a
    runtime error carrying the same message), and by `simulate` on the model itself."""
    problem = reach_point(dt=0.1, mode="dynamic")
    with pytest.raises(ValueError, match=r"coefficients must have shape \(11, 2\)"):
        problem(jnp.zeros((8, 2)))
    bad = problem.initial_coefficients().at[2, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="coefficients NaN or inf"):
        problem(bad)
    with pytest.raises(Exception, match="coefficients NaN or inf"):
        jax.block_until_ready(jax.jit(lambda p: problem(p)[0])(bad))
    model = problem.with_coefficients(bad)
    with pytest.raises(ValueError, match="RollingBallUnreduced actuation: .*NaN or inf"):
        simulate(problem.integrator, model, problem.state0, problem.dt, 2)


# --- solved (slow) -------------------------------------------------------------------------------

REACH_DYNAMIC = default_settings("reach-point", mode="dynamic")


@pytest.mark.slow
def test_dynamic_reach_point_is_solved_and_resimulated():
    """Dynamic reach-point (RKMK4 at its default dt = 0.025, cubic B-spline forces on 8
    intervals, `default_settings(..., mode="dynamic")`: 6×100 AL/L-BFGS): the miss
    `|x(T)[:2] − (1, 0.5)|` ≤ 1e-3 with an effort `∫Σu²` well above zero (rest misses by
    1.1). Re-simulated with the same forces:

    - RKMK8 at dt/4 (a higher order, so its error is negligible): the final contact point
      moves by RKMK4's O(dt⁴) error (measured 1.4e-4), bound 3e-4; the re-simulated miss
      is ≤ 1e-3 + 3e-4.
    - `MidpointDLA` (implicit, order 2, a different discretisation of the same
      Lagrange–d'Alembert equations) at dt/4 and dt/8: within 6e-3 and 1.5e-3 of RKMK8
      (its O(h²) error, measured 4.0e-3 and 1.0e-3), the difference falling 3–5× when the
      step halves (order 2: 4×), so DLA converges to the same motion.
    - The energy balance `E(T) − E(0) = ∫u·θ̇ dt` on the RKMK8 run (saved every step,
      Simpson) to 1e-6 relative to `∫|u·θ̇|` (the two O(h⁴) errors at h = 0.00625;
      measured 4e-9)."""
    problem = reach_point(mode="dynamic")
    assert (problem.dt, problem.n_steps) == (0.025, 200)
    res = optimise(problem, problem.initial_coefficients(), REACH_DYNAMIC)
    miss = float(res.residual_norm)
    target = jnp.asarray([1.0, 0.5])

    def final(integrator, refine):
        traj = problem.trajectory(res.coefficients, integrator=integrator, refine=refine)
        return traj.x[-1, :2]

    x4 = final(None, 1)
    x8 = final(RKMK8(), 4)
    xd4, xd8 = final(MidpointDLA(), 4), final(MidpointDLA(), 8)
    resim = float(jnp.linalg.norm(x8 - target))
    e4, ed4, ed8 = (float(jnp.linalg.norm(x - x8)) for x in (x4, xd4, xd8))
    print(
        f"effort {float(res.cost):.6f}, miss {miss:.2e}, RKMK8 dt/4 miss {resim:.2e}, "
        f"|x_RKMK4 − x_RKMK8| {e4:.2e}, |x_DLA(dt/4) − x_RKMK8| {ed4:.2e}, "
        f"|x_DLA(dt/8) − x_RKMK8| {ed8:.2e}"
    )
    print("residual per outer iteration:", np.asarray(res.history["residual_norm"]))
    assert miss <= 1e-3
    assert 0.1 < float(res.cost) < 10.0
    assert e4 <= 3e-4
    assert resim <= 1e-3 + 3e-4
    assert ed4 <= 6e-3 and ed8 <= 1.5e-3 and 3.0 <= ed4 / ed8 <= 5.0

    model = problem.with_coefficients(res.coefficients)
    traj = rollout(RKMK8(), model, problem.state0, problem.dt / 4, problem.n_steps * 4)
    states = type(problem.state0)(traj.q, traj.Omega, traj.x, traj.theta, traj.theta_dot)
    E = jax.vmap(model.energy)(traj.ts, states)
    power = np.asarray(jnp.sum(jax.vmap(model.actuation)(traj.ts) * traj.theta_dot, axis=-1))
    ts = np.asarray(traj.ts)
    work = integrate.simpson(power, x=ts)
    scale = integrate.simpson(np.abs(power), x=ts)
    rel = abs(float(E[-1] - E[0]) - work) / scale
    print(f"E(T) − E(0) = {float(E[-1] - E[0]):.8f}, ∫u·θ̇ = {work:.8f}, rel {rel:.1e}")
    assert rel <= 1e-6
