"""Suslov's problem ((A.36)–(A.38)), the unreduced rolling ball with internal masses, and the
rolling disk (App. C), each against an independent derivation: the Lagrange–d'Alembert engine
on quaternion coordinates, hand-written physics (the homogeneous ball, power balance, Newton's
second law for a pendulum on a wheel), and the reduced ball (B.8) of
`jaxrigid.models.rolling_ball`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_nonholonomic import rk4

from jaxrigid import _checks
from jaxrigid.lie import quaternion
from jaxrigid.models.nonholonomic import (
    LagrangeDAlembertSystem,
    quaternion_angular_velocity,
    quaternion_rate,
)
from jaxrigid.models.rolling_ball import RollingBall, RollingBallState, two_circles_ball
from jaxrigid.models.rolling_ball.controls import SinusoidControl
from jaxrigid.models.rolling_ball.rails import CircleRail, EllipseRail, SegmentRail
from jaxrigid.models.rolling_ball.unreduced import (
    RollingBallUnreduced,
    RollingBallUnreducedState,
)
from jaxrigid.models.rolling_disk import RollingDisk, RollingDiskState
from jaxrigid.models.suslov import Suslov, SuslovState

E3 = np.array([0.0, 0.0, 1.0])


def random_inertia(rng):
    """A rigid body's inertia: principal moments `(b + c, a + c, a + b)` from positive second
    moments `a, b, c` (so the triangle inequality holds), in random principal axes."""
    a, b, c = rng.uniform(0.05, 1.0, size=3)
    R = np.asarray(quaternion.to_matrix(quaternion.normalize(jnp.asarray(rng.normal(size=4)))))
    return R @ np.diag([b + c, a + c, a + b]) @ R.T


def random_quaternion(rng):
    return quaternion.normalize(jnp.asarray(rng.normal(size=4)))


# --- Suslov's problem ------------------------------------------------------------------------


def xi_of_t(t):
    """A time-varying constraint vector (body frame)."""
    return jnp.stack([jnp.cos(0.5 * t), 0.3 * jnp.sin(t), 1.0 + 0.2 * jnp.sin(0.7 * t)])


def suslov_engine(xi):
    """Suslov unreduced: `L = ½ Ω·𝕀Ω`, `Ω = 2 Im(q* q̇)`, constraints `q·q̇ = 0` and
    `⟨Ω, ξ(t)⟩ = 0`; `params` the inertia."""

    def lagrangian(q, qdot, t, inertia):
        Omega = quaternion_angular_velocity(q, qdot)
        return 0.5 * Omega @ (inertia @ Omega)

    def constraint(q, qdot, t, inertia):
        vector = xi(t) if callable(xi) else xi
        return jnp.stack([q @ qdot, quaternion_angular_velocity(q, qdot) @ vector])

    return lambda inertia: LagrangeDAlembertSystem(lagrangian, constraint, params=inertia)


def admissible_omega(rng, xi):
    Omega = rng.normal(size=3)
    return Omega - (Omega @ xi) / (xi @ xi) * xi


@pytest.mark.parametrize("varying", [False, True], ids=["constant-xi", "xi(t)"])
def test_suslov_reduced_equals_engine(varying):
    """(A.38) = the engine's `Ω̇ = 2 Im(q* q̈)` at 50 random states (random inertia, ξ, q, t, Ω
    with ⟨Ω, ξ⟩ = 0), and (A.37)'s `λ` = the engine's multiplier of the ⟨Ω, ξ⟩ row (the
    engine's constraint force on `q` is `Aᵀλ`, whose body torque is `λξ` because `∂Ω/∂q̇` is
    the row's coefficient). Tolerance 1e-13 relative to `1 + |Ω|²`: round-off of a 3×3 and a
    6×6 solve, a few eps times their conditions (≤ 20 for these inertias, whose moments lie in
    0.1..2); measured 3e-16."""
    rng = np.random.default_rng(10)
    n = 50
    inertias = np.stack([random_inertia(rng) for _ in range(n)])
    ts = rng.uniform(0, 10, size=n)
    if varying:
        xis = np.stack([np.asarray(xi_of_t(t)) for t in ts])
    else:
        xis = rng.normal(size=(n, 3))
    Omegas = np.stack([admissible_omega(rng, x) for x in xis])
    qs = jnp.stack([random_quaternion(rng) for _ in range(n)])

    def both(inertia, xi, t, q, Omega):
        model = Suslov(inertia, xi_of_t if varying else xi)
        engine = suslov_engine(xi_of_t if varying else xi)(inertia)
        qddot, lam = engine.accelerations(t, q, quaternion_rate(q, Omega))
        return (
            model.omega_dot(t, Omega),
            quaternion_angular_velocity(q, qddot),
            model.multiplier(t, Omega),
            lam[1],
        )

    reduced, engine, lam_reduced, lam_engine = jax.jit(jax.vmap(both))(
        inertias, xis, ts, qs, Omegas
    )
    scale = 1 + np.sum(Omegas**2, axis=-1)
    assert np.max(np.abs(reduced - engine).max(-1) / scale) <= 1e-13
    # the torque λξ of (A.36) vs the engine's λ·(∂Ω/∂q̇ row): Ω = 2Im(q*q̇) makes them one
    assert np.max(np.abs(lam_reduced - lam_engine) / scale) <= 1e-13


@pytest.mark.parametrize("varying", [False, True], ids=["constant-xi", "xi(t)"])
def test_suslov_keeps_constraint_and_energy(varying):
    """Along RK4 (h = 1e-3, t = 10): the energy ½Ω·𝕀Ω (conserved by the exact flow for constant
    and time-varying ξ, as ⟨λξ, Ω⟩ = 0) moves by RK4's error only (measured 8e-16 relative for
    constant ξ, 3.5e-13 for ξ(t); bound 1e-10); ⟨Ω, ξ⟩ is, for constant ξ, a linear invariant
    of the Ω equation, which every Runge–Kutta method keeps to round-off (measured 1.4e-15
    after 10⁴ steps on |Ω| ≈ 1; bound 1e-13); for ξ(t) it is kept to RK4's error (measured
    3.6e-13; bound 1e-10)."""
    rng = np.random.default_rng(11)
    inertia = jnp.asarray(random_inertia(rng))
    xi = xi_of_t if varying else jnp.asarray(rng.normal(size=3))
    xi0 = np.asarray(xi(0.0) if varying else xi)
    model = Suslov(inertia, xi)
    s0 = SuslovState(random_quaternion(rng), jnp.asarray(admissible_omega(rng, xi0)))
    _checks.apply(model.state_checks(s0) + model.constraint_checks(0.0, s0))
    s1 = eqx.filter_jit(lambda m, s: rk4(m.vector_field, s, 0.0, 1e-3, 10_000))(model, s0)
    e0, e1 = (float(model.energy(s.Omega)) for s in (s0, s1))
    assert abs(e1 - e0) <= 1e-10 * e0
    constraint = float(model.invariants(10.0, s1)["constraint"])
    assert abs(constraint) <= (1e-10 if varying else 1e-13)
    assert float(jnp.linalg.norm(s1.Omega)) > 0.1  # the body still turns: not a trivial pass


def test_suslov_through_simulate_with_the_lie_group_methods():
    """`simulate(RKMK4(), Suslov)`: the quaternion stays unit to round-off by construction
    (10⁴ steps: measured 4e-16, bound 1e-13), ⟨Ω, ξ⟩ (constant ξ: a linear invariant of the Ω
    equation, kept by every RK tableau) to round-off (bound 1e-13, as above), the energy to
    RK4's error (h = 1e-3 over t = 10: bound 1e-10 relative, as above). A time-varying ξ is
    checked at `t0`: a state on the constraint at t0 = 2 runs, the same state from t0 = 0 is
    refused."""
    import jaxrigid as jr
    from jaxrigid.integrators.rkmk import RKMK4

    rng = np.random.default_rng(12)
    model = Suslov(jnp.asarray(random_inertia(rng)), jnp.asarray(rng.normal(size=3)))
    s0 = SuslovState(random_quaternion(rng), jnp.asarray(admissible_omega(rng, model.xi)))
    sol = jr.simulate(RKMK4(), model, s0, 1e-3, 10_000, save_every=10_000)
    s1 = sol.final_state
    assert abs(float(jnp.linalg.norm(s1.q)) - 1.0) <= 1e-13
    assert abs(float(model.invariants(10.0, s1)["constraint"])) <= 1e-13
    e0, e1 = (float(model.energy(s.Omega)) for s in (s0, s1))
    assert abs(e1 - e0) <= 1e-10 * e0

    varying = Suslov(model.inertia, xi_of_t)
    xi2 = xi_of_t(jnp.asarray(2.0))
    on_at_2 = SuslovState(s0.q, jnp.cross(xi2, jnp.array([0.0, 1.0, 0.0])))
    jr.simulate(RKMK4(), varying, on_at_2, 1e-3, 10, t0=2.0)
    with pytest.raises(ValueError, match="off the constraint"):
        jr.simulate(RKMK4(), varying, on_at_2, 1e-3, 10, t0=0.0)


def test_suslov_bad_input_is_refused():
    """A non-SPD inertia, `ξ = 0`, and a state off the constraint each give their message."""
    xi = jnp.array([0.0, 0.0, 1.0])
    good = Suslov(jnp.diag(jnp.array([1.0, 2.0, 2.5])), xi)
    with pytest.raises(ValueError, match="positive definite"):
        _checks.apply(Suslov(jnp.diag(jnp.array([1.0, -2.0, 2.5])), xi).parameter_checks())
    with pytest.raises(ValueError, match="xi must be finite and nonzero"):
        _checks.apply(Suslov(good.inertia, jnp.zeros(3)).parameter_checks())
    on = SuslovState(jnp.array([1.0, 0, 0, 0]), jnp.array([0.3, -0.2, 0.0]))
    _checks.apply(good.parameter_checks() + good.state_checks(on))
    off = SuslovState(on.q, jnp.array([0.3, -0.2, 1e-3]))
    with pytest.raises(ValueError, match="off the constraint"):
        _checks.apply(good.state_checks(off))
    # a time-varying ξ is checked at the state's time (`simulate` passes t0): Ω ⟂ ξ(2) is
    # on the constraint at t = 2 and off it at t = 0
    varying = Suslov(good.inertia, xi_of_t)
    xi2 = xi_of_t(jnp.asarray(2.0))
    Omega2 = jnp.cross(xi2, jnp.array([0.0, 1.0, 0.0]))
    at2 = SuslovState(on.q, Omega2)
    _checks.apply(varying.state_checks(at2, 2.0))
    with pytest.raises(ValueError, match="off the constraint"):
        _checks.apply(varying.state_checks(at2, 0.0))


def test_suslov_vmap_and_grad():
    """`vmap` over the inertia = a loop (1e-14 relative: the same operations); `grad` of Ω̇₁
    with respect to 𝕀₁₁ = the central difference, h = 1e-5 (truncation h² ≈ 1e-10, round-off
    eps/h ≈ 1e-11: rel 1e-6 is safe)."""
    xi = jnp.array([0.2, -0.1, 1.0])
    Omega = jnp.asarray(admissible_omega(np.random.default_rng(12), np.asarray(xi)))
    base = jnp.diag(jnp.array([1.0, 2.0, 2.5]))
    one = jax.jit(lambda s: Suslov(base.at[0, 0].set(s), xi).omega_dot(0.0, Omega))
    scales = jnp.linspace(0.8, 1.6, 5)
    np.testing.assert_allclose(
        np.asarray(jax.vmap(one)(scales)), np.stack([one(s) for s in scales]), rtol=1e-14
    )
    grad = float(jax.grad(lambda s: one(s)[0])(1.0))
    h = 1e-5
    fd = (float(one(1.0 + h)[0]) - float(one(1.0 - h)[0])) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


# --- the rolling ball, unreduced ---------------------------------------------------------------


class Circle(eqx.Module):
    """A rail `ζ(θ) = c + ρ(cos θ u + sin θ v)` (body frame); a Module, so balls built from
    different circles share one compiled program."""

    centre: jax.Array
    radius: jax.Array
    u: jax.Array
    v: jax.Array

    def __call__(self, th):
        return self.centre + self.radius * (jnp.cos(th) * self.u + jnp.sin(th) * self.v)


class Harmonic(eqx.Module):
    """A control `θ(t) = offset + amplitude sin(rate t + phase)`, `(n,)`."""

    offset: jax.Array
    amplitude: jax.Array
    rate: jax.Array
    phase: jax.Array

    def __call__(self, t):
        return self.offset + self.amplitude * jnp.sin(self.rate * t + self.phase)


TWO_CIRCLES_CONTROL = Harmonic(
    jnp.full(2, -jnp.pi / 2), jnp.full(2, 0.8), jnp.full(2, 1.5), jnp.array([0.0, jnp.pi / 2])
)
FIXED_CONTROL = Harmonic(jnp.array([-1.0, 0.5]), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2))


def two_circles(masses=(0.25, 0.25), control=TWO_CIRCLES_CONTROL, **kw):
    """The `rolling-ball-two-circles` defaults of issue 13 (r = 1, m₀ = 1, 𝕀 = diag(0.4, 0.45,
    0.5), χ₀ = (0, 0, −0.1), two circles of radius 0.5 about the GC in the body x–z and y–z
    planes, θᵢ = −π/2 + 0.8 sin(1.5t + φᵢ)); `control=None` makes the masses dynamic."""
    e1, e2, e3 = jnp.eye(3)
    rails = (Circle(jnp.zeros(3), 0.5, e1, e3), Circle(jnp.zeros(3), 0.5, e2, e3))
    inertia = jnp.diag(jnp.array([0.4, 0.45, 0.5]))
    return RollingBallUnreduced(
        1.0, 1.0, inertia, jnp.array([0, 0, -0.1]), masses, rails, control, **kw
    )


def ball_state(rng, ball, dynamic=False):
    """A random state: unit q, Ω ~ N(0, 1), the GC at height r."""
    x = jnp.array([rng.normal(), rng.normal(), float(ball.radius)])
    theta = (jnp.asarray(rng.uniform(-3, 3, 2)), jnp.asarray(rng.normal(size=2))) if dynamic else ()
    return RollingBallUnreducedState(
        random_quaternion(rng), jnp.asarray(rng.normal(size=3)), x, *theta
    )


@eqx.filter_jit
def derivatives(model, t, state):
    """`(vector field, contact force, energy)` of one state (`t` an array: a Python float
    would be static to `filter_jit` and recompile per value)."""
    return model.vector_field(t, state), model.contact_force(t, state), model.energy(t, state)


@eqx.filter_jit
def integrate(model, state, dt, n):
    """RK4 from t = 0, `n` steps of `dt`."""
    return rk4(model.vector_field, state, 0.0, dt, n)


def test_homogeneous_ball_rolls_straight():
    """No masses, χ₀ = 0, 𝕀 = (2/5) m r²: at random states Ω̇ = 0 and the contact force is the
    weight `(0, 0, m g)` (1e-13 relative to `1 + |Ω|²`: an 11×11 saddle solve of condition
    ≈ 10, measured 3e-15); along RK4 (h = 2e-3, t = 10) the GC moves on the straight line
    `x₀ + v t`, `v = r ω × e₃`, and Ω stays: to RK4's error, measured 2e-11 (1.4e-8 at
    h = 1e-2: it falls as h⁴); bound 1e-9."""
    m, r, g = 2.0, 0.7, 9.81
    ball = RollingBallUnreduced(r, m, 0.4 * m * r**2 * jnp.eye(3), jnp.zeros(3), gravity=g)
    rng = np.random.default_rng(20)
    for _ in range(3):
        s = ball_state(rng, ball)
        d, force, _ = derivatives(ball, jnp.asarray(0.0), s)
        scale = 1 + float(jnp.sum(s.Omega**2))
        np.testing.assert_allclose(np.asarray(d.Omega), 0, rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(
            np.asarray(force), [0, 0, m * g], rtol=0, atol=1e-13 * m * g * scale
        )
    s1 = integrate(ball, s, jnp.asarray(2e-3), 5000)
    v = r * np.cross(np.asarray(quaternion.to_matrix(s.q) @ s.Omega), E3)
    np.testing.assert_allclose(np.asarray(s1.x), np.asarray(s.x) + 10.0 * v, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(s1.Omega), np.asarray(s.Omega), rtol=0, atol=1e-9)


@pytest.mark.parametrize("mode", ["fixed", "passive"])
def test_energy_is_conserved_for_fixed_and_passive_masses(mode):
    """Fixed masses (θ constant) and dynamic masses with u = 0: kinetic + potential energy is an
    invariant of the exact flow; along RK4 with h = 2e-3 over t = 10 it moves by RK4's error
    (measured 6.5e-15 fixed, 4.6e-11 passive, relative; 20× more at h = 4e-3); bound 1e-9
    relative. Also |q| − 1 (RK4 does not keep it: O(h⁴)) stays below 1e-11 (measured 3e-15
    fixed, 1.1e-12 passive)."""
    rng = np.random.default_rng(21)
    if mode == "fixed":
        ball = two_circles(control=FIXED_CONTROL)
    else:
        ball = two_circles(control=None)
    s0 = ball_state(rng, ball, dynamic=mode == "passive")
    s1 = integrate(ball, s0, jnp.asarray(2e-3), 5000)
    e0, e1 = (float(derivatives(ball, jnp.asarray(t), s)[2]) for t, s in ((0.0, s0), (10.0, s1)))
    assert abs(e1 - e0) <= 1e-9 * abs(e0)
    assert abs(float(jnp.linalg.norm(s1.q)) - 1) <= 1e-11


def test_power_balance_of_actuators_and_external_force():
    """Dynamic masses driven by `u(t)`, an external force F: `dE/dt = u·θ̇ + F·ẋ` at random
    states (the engine's forces enter only through `Q`; the rolling and unit-quaternion
    constraint forces do no work). `dE/dt` by a JVP of the energy along the vector field and
    time. Tolerance 1e-13 relative to E ≈ 15: round-off of a 13×13 saddle solve of condition
    ≲ 1e2 and the JVP (measured 7e-17)."""
    u = lambda t: jnp.stack([0.3 * jnp.sin(t), -0.2 + 0.1 * t])
    F = jnp.array([0.4, -0.3, 0.2])
    ball = two_circles(control=None, actuation=u, external_force=F)
    rng = np.random.default_rng(22)

    @eqx.filter_jit
    def balance(ball, t, s):
        d = ball.vector_field(t, s)
        _, dE = jax.jvp(ball.energy, (t, s), (jnp.ones_like(t), d))
        return dE, u(t) @ s.theta_dot + F @ d.x, ball.energy(t, s)

    for _ in range(5):
        t = jnp.asarray(rng.uniform(0, 10))
        dE, power, E = balance(ball, t, ball_state(rng, ball, dynamic=True))
        assert abs(float(dE - power)) <= 1e-13 * abs(float(E))
        assert abs(float(power)) > 1e-3  # the check is not vacuous


def test_ball_vmap_and_grad():
    """`vmap` over the mass m₁ = a loop (1e-13 relative, the same operations batched);
    `grad` of Ω̇₁ with respect to the radius = the central difference (h = 1e-5: truncation
    h² ≈ 1e-10, round-off eps/h ≈ 1e-11 on O(1) values; rel 1e-6 is safe)."""
    rng = np.random.default_rng(23)
    s = ball_state(rng, two_circles())
    t = jnp.asarray(0.4)

    def ball(m1, radius):
        ball = two_circles(masses=jnp.stack([m1, jnp.asarray(0.25)]))
        return eqx.tree_at(lambda b: b.radius, ball, radius)

    def omega_dot(m1, radius):
        return ball(m1, radius).omega_dot(t, s._replace(x=s.x.at[2].set(radius)))

    one = lambda m1, radius: (
        derivatives(
            ball(jnp.asarray(m1), jnp.asarray(radius)), t, s._replace(x=s.x.at[2].set(radius))
        )[0].Omega
    )
    m1s = jnp.linspace(0.1, 0.5, 3)
    batched = jax.jit(jax.vmap(omega_dot, in_axes=(0, None)))(m1s, 1.0)
    looped = np.stack([one(m, 1.0) for m in m1s])
    np.testing.assert_allclose(np.asarray(batched), looped, rtol=1e-13, atol=1e-14)
    grad = float(jax.jit(jax.grad(lambda r: omega_dot(0.25, r)[0]))(1.0))
    h = 1e-5
    fd = (float(one(0.25, 1.0 + h)[0]) - float(one(0.25, 1.0 - h)[0])) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_ball_bad_input_is_refused():
    """Negative radius or mass, a non-SPD inertia, χ₀ outside, a mass count that does not
    match the rails, a non-unit quaternion, and a dynamic mass on a rail of zero length (a
    singular saddle matrix) each give their message."""
    ball = two_circles()
    with pytest.raises(ValueError, match="radius must be positive"):
        _checks.apply(eqx.tree_at(lambda b: b.radius, ball, jnp.asarray(-1.0)).parameter_checks())
    with pytest.raises(ValueError, match="non-negative"):
        _checks.apply(two_circles(masses=(0.25, -0.1)).parameter_checks())
    with pytest.raises(ValueError, match="positive definite"):
        bad = eqx.tree_at(lambda b: b.inertia, ball, jnp.diag(jnp.array([0.4, -0.45, 0.5])))
        _checks.apply(bad.parameter_checks())
    with pytest.raises(ValueError, match="inside the ball"):
        _checks.apply(
            eqx.tree_at(lambda b: b.chi0, ball, jnp.array([0, 0, -1.5])).parameter_checks()
        )
    with pytest.raises(ValueError, match="one rail per mass"):
        two_circles(masses=(0.25,))
    s = ball_state(np.random.default_rng(24), ball)
    _checks.apply(ball.parameter_checks() + ball.state_checks(s))
    with pytest.raises(ValueError, match="unit quaternion"):
        _checks.apply(ball.state_checks(s._replace(q=1.01 * s.q)))
    # a dynamic mass on a rail of zero length has no inertia along it: a singular saddle matrix
    e1 = jnp.eye(3)[0]
    stuck = RollingBallUnreduced(
        1.0, 1.0, 0.4 * jnp.eye(3), jnp.zeros(3), (0.2,), (Circle(jnp.zeros(3), 0.0, e1, e1),)
    )
    theta = (jnp.zeros(1), jnp.zeros(1))
    with pytest.raises(ValueError, match="not positive definite on the constraints' null space"):
        _checks.apply(
            eqx.filter_jit(stuck.state_checks)(s._replace(theta=theta[0], theta_dot=theta[1]))
        )


# --- the rolling disk ------------------------------------------------------------------------


class PlanarRail(eqx.Module):
    """A closed curve in the body (e₁, e₃) plane: `c + ρ(cos(θ + α), 0.6 sin θ)`."""

    centre: jax.Array
    radius: jax.Array
    phase: jax.Array

    def __call__(self, th):
        return self.centre + self.radius * jnp.stack([jnp.cos(th + self.phase), 0.6 * jnp.sin(th)])


class Embedded(eqx.Module):
    """A planar (e₁, e₃) rail as a 3-D body curve in the plane e₂ = 0."""

    rail: eqx.Module

    def __call__(self, th):
        v = self.rail(th)
        return jnp.stack([v[0], jnp.zeros_like(v[0]), v[1]])


def test_disk_equals_the_ball_restricted_to_the_plane():
    """The disk's φ̈, ẋ, contact force and energy equal the unreduced 3-D ball's restricted to the
    plane (χ₀ and the rails in the body plane e₂ = 0, 𝕀₁₂ = 𝕀₂₃ = 0 but 𝕀₁₃ ≠ 0, q a rotation
    about e₂ by −φ, Ω = −φ̇ e₂) at 10 random states, with prescribed masses and an external
    force; the ball stays in the plane (Ω̇₁ = Ω̇₃ = 0). Tolerance 1e-13 relative to 1 + φ̇²
    (and to the weight for forces and energy): round-off of the ball's 11×11 saddle solve
    (condition ≲ 1e2); measured 6e-16."""
    rng = np.random.default_rng(30)
    planar = (
        PlanarRail(jnp.array([0.1, 0.2]), 0.4, 0.3),
        PlanarRail(jnp.array([-0.2, 0.0]), 0.5, -1.0),
    )
    control = Harmonic(
        jnp.zeros(2), jnp.array([0.9, 2.0]), jnp.array([1.3, 0.7]), jnp.array([0.0, 1.5])
    )
    masses, r, g = (0.3, 0.2), 1.1, 9.81
    chi0, F = jnp.array([0.15, -0.25]), jnp.array([0.4, -0.7])
    inertia = jnp.array([[0.5, 0.0, 0.07], [0.0, 0.45, 0.0], [0.07, 0.0, 0.4]])
    disk = RollingDisk(r, 1.0, inertia[1, 1], chi0, masses, planar, control, g, F)
    ball = RollingBallUnreduced(
        r,
        1.0,
        inertia,
        jnp.array([chi0[0], 0.0, chi0[1]]),
        masses,
        tuple(map(Embedded, planar)),
        control,
        g,
        jnp.array([F[0], 0.0, F[1]]),
    )

    weight = g * (1.0 + sum(masses))
    for _ in range(10):
        t, phi, phi_dot, x = rng.uniform(0, 10), rng.uniform(-4, 4), rng.normal(), rng.normal()
        t = jnp.asarray(t)
        disk_state = RollingDiskState(*map(jnp.asarray, (phi, phi_dot, x)))
        d_disk, f_disk, e_disk = derivatives(disk, t, disk_state)
        q = jnp.array([np.cos(-phi / 2), 0.0, np.sin(-phi / 2), 0.0])
        s = RollingBallUnreducedState(q, jnp.array([0.0, -phi_dot, 0.0]), jnp.array([x, 0.0, r]))
        d_ball, f_ball, e_ball = derivatives(ball, t, s)
        scale = 1 + phi_dot**2
        np.testing.assert_allclose(
            np.asarray(d_ball.Omega), [0, -float(d_disk.phi_dot), 0], rtol=0, atol=1e-13 * scale
        )
        np.testing.assert_allclose(
            np.asarray(d_ball.x), [float(d_disk.x), 0, 0], rtol=0, atol=1e-13 * scale
        )
        np.testing.assert_allclose(
            np.asarray(f_ball),
            [float(f_disk[0]), 0, float(f_disk[1])],
            rtol=0,
            atol=1e-13 * weight * scale,
        )
        np.testing.assert_allclose(
            float(e_ball), float(e_disk), rtol=0, atol=1e-13 * weight * scale
        )


def wheel_newton(r, m0, d2, m1, rho, beta, g, phi, phi_dot):
    """Newton's second law by hand for a pendulum on a rolling wheel: a wheel (mass m₀ at its
    centre, moment d₂) with a point mass m₁ fixed at body offset ρ(cos β, sin β) in the (e₁, e₃)
    plane, angle φ counterclockwise, rolling (centre acceleration −r φ̈ e₁). Unknowns: φ̈, the
    contact force (F₁, F₃), and the force f = (f₁, f₃) of the wheel on the mass; equations:
    the mass's Newton (2), the wheel's Newton (2) and the wheel's Euler about its centre (1),
    torques counterclockwise: τ = d₁F₃ − d₃F₁."""
    c, s = np.cos(beta + phi), np.sin(beta + phi)
    d = rho * np.array([c, s])  # from the centre to the mass
    # mass: m₁ P̈ = f − m₁ g e₃,  P̈ = −r φ̈ e₁ + ρ φ̈ (−s, c) − ρ φ̇² (c, s)
    # wheel: m₀ (−r φ̈ e₁) = F − f − m₀ g e₃;  d₂ φ̈ = r F₁ − (d₁ f₃ − d₃ f₁)
    # unknowns z = (φ̈, F₁, F₃, f₁, f₃)
    K = np.array(
        [
            [m1 * (-r - rho * s), 0, 0, -1, 0],
            [m1 * rho * c, 0, 0, 0, -1],
            [-m0 * r, -1, 0, 1, 0],
            [0, 0, -1, 0, 1],
            [d2, -r, 0, -d[1], d[0]],
        ]
    )
    rhs = np.array([m1 * rho * phi_dot**2 * c, m1 * rho * phi_dot**2 * s - m1 * g, 0, -m0 * g, 0])
    z = np.linalg.solve(K, rhs)
    return z[0], z[1:3]


def test_disk_is_newton_for_a_pendulum_on_a_wheel():
    """The disk model's φ̈ and contact force equal Newton–Euler written by hand
    (`wheel_newton`) at 6 states; 1e-13 relative to 1 + φ̇² (and the weight): round-off of
    a 5×5 solve of condition ≈ 1e2 by hand and a closed formula in the model; measured
    3e-16."""
    r, m0, d2, m1, rho, beta, g = 0.9, 1.5, 0.6, 0.4, 0.6, 0.8, 9.81
    offset = jnp.array([rho * np.cos(beta), rho * np.sin(beta)])
    disk = RollingDisk(
        r,
        m0,
        d2,
        masses=(m1,),
        rails=(lambda th: offset,),
        control=lambda t: jnp.zeros(1),
        gravity=g,
    )
    f = eqx.filter_jit(lambda d, s: (d.vector_field(0.0, s).phi_dot, d.contact_force(0.0, s)))
    for phi, phi_dot in [(0.0, 0.0), (0.5, 1.0), (2.0, -3.0), (-2.5, 0.3), (3.0, 5.0), (1.2, -0.7)]:
        phi_ddot, force = f(
            disk, RollingDiskState(jnp.asarray(phi), jnp.asarray(phi_dot), jnp.asarray(0.0))
        )
        expected_ddot, expected_force = wheel_newton(r, m0, d2, m1, rho, beta, g, phi, phi_dot)
        scale = 1 + phi_dot**2
        np.testing.assert_allclose(float(phi_ddot), expected_ddot, rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(
            np.asarray(force), expected_force, rtol=0, atol=1e-13 * g * scale
        )


# --- (a) = (b): the reduced ball (B.8) against the unreduced engine ---------------------------


def random_rolling_ball(p):
    """A `RollingBall` from the arrays of `p` (one member): three masses on a circle, an
    ellipse and a segment, a sinusoidal control, an external force."""
    rails = (
        CircleRail(p["c1"], p["rho"], p["axes"][:, 0], p["axes"][:, 1]),
        EllipseRail(p["c2"], p["a"], p["b"], p["axes"][:, 1], p["axes"][:, 2]),
        SegmentRail(p["start"], p["end"]),
    )
    control = SinusoidControl(p["offset"], p["amplitude"], p["frequency"], p["phase"])
    return RollingBall(
        p["r"], p["m0"], p["inertia"], p["chi0"], p["masses"], rails, control, p["g"], p["F"]
    )


def random_ball_parameters(rng, n):
    """`n` members' parameters: SPD rigid-body inertias in random axes, χ₀ and rails inside a
    ball of radius 1..1.5, masses 0.1..0.5, frequencies 0.5..2, F ~ N(0, 1)."""

    def axes():
        return np.asarray(quaternion.to_matrix(random_quaternion(rng)))

    def inside(scale):
        return rng.uniform(-scale, scale, size=3)

    members = [
        {
            "r": rng.uniform(1.0, 1.5),
            "m0": rng.uniform(0.5, 2.0),
            "inertia": random_inertia(rng),
            "chi0": inside(0.2),
            "masses": rng.uniform(0.1, 0.5, size=3),
            "c1": inside(0.2),
            "rho": rng.uniform(0.2, 0.5),
            "axes": axes(),
            "c2": inside(0.2),
            "a": rng.uniform(0.2, 0.5),
            "b": rng.uniform(0.1, 0.4),
            "start": inside(0.4),
            "end": inside(0.4),
            "offset": rng.uniform(-1, 1, size=3),
            "amplitude": rng.uniform(0, 1, size=3),
            "frequency": rng.uniform(0.5, 2.0, size=3),
            "phase": rng.uniform(0, 2 * np.pi, size=3),
            "g": 9.81,
            "F": rng.normal(size=3),
        }
        for _ in range(n)
    ]
    return jax.tree_util.tree_map(lambda *xs: jnp.asarray(np.stack(xs)), *members)


def test_reduced_equals_unreduced_at_random_states():
    """(a) = (b): `Ω̇` of (B.8) (`RollingBall.omega_dot`) and of the engine
    (`RollingBallUnreduced.from_rolling_ball`) at 100 random states — random q, Ω, t, inertia
    (SPD, random axes), χ₀, masses, rails (a circle, an ellipse, a segment), sinusoidal control
    and external force — and the contact forces (momentum balance in (a), the rolling
    constraint's multiplier in (b)). Tolerance 1e-12 relative to `1 + |Ω|²` (and to the
    weight for forces): round-off of a 3×3 SPD solve in (a) and an 11×11 saddle solve in (b),
    conditions ≲ 1e2 here; measured 1.5e-15 (Ω̇) and 2e-16 (force)."""
    rng = np.random.default_rng(40)
    n = 100
    params = random_ball_parameters(rng, n)
    qs = jnp.stack([random_quaternion(rng) for _ in range(n)])
    Omegas = jnp.asarray(rng.normal(size=(n, 3)))
    xs = jnp.concatenate([jnp.asarray(rng.normal(size=(n, 2))), params["r"][:, None]], axis=1)
    ts = jnp.asarray(rng.uniform(0, 10, size=n))

    def both(p, q, Omega, x, t):
        reduced = random_rolling_ball(p)
        unreduced = RollingBallUnreduced.from_rolling_ball(reduced)
        s = RollingBallState(q, Omega, x)
        u = RollingBallUnreducedState(q, Omega, x)
        return (
            reduced.omega_dot(t, s),
            unreduced.omega_dot(t, u),
            reduced.contact_force(t, s),
            unreduced.contact_force(t, u),
        )

    a, b, fa, fb = jax.jit(jax.vmap(both))(params, qs, Omegas, xs, ts)
    scale = 1 + jnp.sum(Omegas**2, axis=-1)
    weight = params["g"] * (params["m0"] + jnp.sum(params["masses"], axis=-1))
    err = jnp.max(jnp.abs(a - b), axis=-1) / scale
    err_force = jnp.max(jnp.abs(fa - fb), axis=-1) / (weight * scale)
    assert float(err.max()) <= 1e-12
    assert float(err_force.max()) <= 1e-12


def test_reduced_and_unreduced_trajectories_agree():
    """(a) = (b) along `rolling-ball-two-circles` (the issue's defaults) over t = 10, both by
    the same RK4 (h = 1e-3, 10⁴ steps: RK4's own error is the same for both, since the vector
    fields agree): the final q, Ω, x differ by the vector fields' round-off difference
    (≈ 1e-15) grown over the run, measured 7e-13 (q, Ω) and 2.7e-12 (x); bound 1e-10."""
    reduced, s0 = two_circles_ball()
    unreduced = RollingBallUnreduced.from_rolling_ball(reduced)
    u0 = RollingBallUnreducedState(s0.q, s0.Omega, s0.x)
    a = integrate(reduced, s0, jnp.asarray(1e-3), 10_000)
    b = integrate(unreduced, u0, jnp.asarray(1e-3), 10_000)
    for name in ("q", "Omega", "x"):
        diff = float(jnp.max(jnp.abs(getattr(a, name) - getattr(b, name))))
        assert diff <= 1e-10, name
    assert float(jnp.linalg.norm(a.x[:2] - s0.x[:2])) > 0.1  # the ball did roll
    assert isinstance(a, RollingBallState)
