"""The Lagrange–d'Alembert engine (`jaxrigid.models.nonholonomic`, (A.32)–(A.33)) against
closed forms: the Chaplygin sleigh of `docs/nonholonomic.md` (whose code block runs here), a
pendulum as a point on a circle (the multiplier's sign), a bead on a rod turned by a prescribed
angle (a time-dependent `A` and an affine term); singular saddle systems caught; `jit` = eager,
`vmap` = loop, `grad` = finite differences."""

import pathlib
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid import _checks
from jaxrigid.lie import quaternion
from jaxrigid.models.nonholonomic import (
    LagrangeDAlembertState,
    LagrangeDAlembertSystem,
    quaternion_angular_velocity,
    quaternion_rate,
)

DOC = pathlib.Path(__file__).parents[1] / "docs" / "nonholonomic.md"


def doc_namespace():
    """Run the worked example of the docs (its own asserts hold it against Bloch's
    equations) and return its names."""
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


def rk4(f, y0, t0, dt, n):
    """Classical RK4 on a pytree, `n` fixed steps; returns the final state. The four stages run
    as a `lax.scan` over the tableau's rows, so `f` is compiled once, not four times."""
    a = jnp.array([0.0, 0.5, 0.5, 1.0])  # stage i starts from y + a_i dt k_{i-1}, at t + a_i dt
    b = jnp.array([1.0, 2.0, 2.0, 1.0]) / 6
    axpy = lambda y, k, c: jax.tree_util.tree_map(lambda u, v: u + c * v, y, k)

    def step(carry, _):
        t, y = carry

        def stage(stage_carry, coeffs):
            k, acc = stage_carry
            a_i, b_i = coeffs
            k = f(t + a_i * dt, axpy(y, k, a_i * dt))
            return (k, axpy(acc, k, b_i * dt)), None

        zero = jax.tree_util.tree_map(jnp.zeros_like, y)
        (_, y_new), _ = jax.lax.scan(stage, (zero, y), (a, b))
        return (t + dt, y_new), None

    (_, y), _ = jax.lax.scan(step, (jnp.asarray(t0), y0), None, length=n)
    return y


@pytest.fixture(scope="module")
def sleigh():
    return doc_namespace()["sleigh"]


def sleigh_state(rng):
    phi, v, w = rng.uniform(-3, 3), rng.uniform(-2, 2), rng.uniform(-3, 3)
    q = jnp.array([rng.normal(), rng.normal(), phi])
    return q, jnp.array([v * np.cos(phi), v * np.sin(phi), w]), v, w


def test_sleigh_equals_its_reduced_equations_and_newton(sleigh):
    """At 20 random states: `v̇ = a ω²`, `ω̇ = −m a v ω/(I + m a²)` (Bloch), and Newton for
    the centre of mass `m c̈ = λ n` (the blade's force is the only horizontal force; `n` the
    blade's normal): `λ` carries the sign of (A.33). Tolerance 1e-13 absolute on O(1)..O(10)
    quantities: a 4×4 saddle solve of condition ≤ 5 here (measured 9e-16)."""
    p = sleigh.params
    m, I, a = (float(p[k]) for k in ("m", "I", "a"))
    acc = jax.jit(lambda s, q, qd: s.accelerations(0.0, q, qd))
    rng = np.random.default_rng(1)
    for _ in range(20):
        q, qdot, v, w = sleigh_state(rng)
        qddot, lam = acc(sleigh, q, qdot)
        phi = float(q[2])
        heading, normal = (
            np.array([np.cos(phi), np.sin(phi)]),
            np.array([-np.sin(phi), np.cos(phi)]),
        )
        v_dot = a * w**2
        w_dot = -m * a * v * w / (I + m * a**2)
        np.testing.assert_allclose(float(qddot[2]), w_dot, rtol=0, atol=1e-13)
        np.testing.assert_allclose(float(heading @ qddot[:2]), v_dot, rtol=0, atol=1e-13)
        # the centre c = (x, y) + a·heading: c̈ = ẍ + a(φ̈ n − φ̇² heading)
        c_ddot = np.asarray(qddot[:2]) + a * (float(qddot[2]) * normal - w**2 * heading)
        np.testing.assert_allclose(m * c_ddot, float(lam[0]) * normal, rtol=0, atol=1e-13)


def test_sleigh_energy_and_constraint_along_rk4(sleigh):
    """Energy and the knife-edge constraint along RK4 (h = 1e-3, t = 10): both are invariants
    of the exact flow, so they drift only by RK4's error (measured 1.7e-13 relative and
    2.4e-13); bound 1e-10."""
    rng = np.random.default_rng(2)
    q, qdot, _, _ = sleigh_state(rng)
    f = lambda t, s: sleigh.vector_field(t, s)
    s0 = LagrangeDAlembertState(q, qdot)
    s1 = jax.jit(lambda s: rk4(f, s, 0.0, 1e-3, 10_000))(s0)
    e0, e1 = (float(sleigh.energy(0.0, *s)) for s in (s0, s1))
    assert abs(e1 - e0) <= 1e-10 * abs(e0)
    assert float(sleigh.invariants(10.0, s1)["constraint_residual"]) <= 1e-10


def pendulum(length):
    """A point of mass m on a circle of radius `length` about the origin (`|p|² = l²`
    differentiated: `p · ṗ = 0`), gravity along −e₂."""

    def lagrangian(p, pdot, t, prm):
        return 0.5 * prm["m"] * pdot @ pdot - prm["m"] * prm["g"] * p[1]

    rod = lambda p, pdot, t, prm: (p @ pdot)[None]
    return LagrangeDAlembertSystem(
        lagrangian, rod, params={"m": jnp.asarray(1.3), "g": jnp.asarray(9.81)}
    )


def test_pendulum_acceleration_and_rod_tension():
    """`θ̈ = −(g/l) sin θ` and the tension `T = m(g cos θ + l θ̇²)`: `Aᵀλ = λ p = −T p/l`, so
    `λ = −T/l` ((A.33): `Aᵀλ` is the constraint force). Tolerance 1e-12 absolute: a 3×3 saddle
    solve of condition ≈ 4 on O(10) entries (measured 4e-15)."""
    length = 0.8
    system = pendulum(length)
    m, g = 1.3, 9.81
    for theta, theta_dot in [(0.3, 1.2), (2.5, -0.4), (-1.0, 3.0)]:
        e = np.array([np.sin(theta), -np.cos(theta)])  # from the pivot to the mass
        e_t = np.array([np.cos(theta), np.sin(theta)])
        p, pdot = length * e, length * theta_dot * e_t
        pddot, lam = eqx.filter_jit(system.accelerations)(0.0, jnp.asarray(p), jnp.asarray(pdot))
        theta_ddot = -(g / length) * np.sin(theta)
        expected = length * theta_ddot * e_t - length * theta_dot**2 * e
        tension = m * (g * np.cos(theta) + length * theta_dot**2)
        np.testing.assert_allclose(np.asarray(pddot), expected, rtol=0, atol=1e-12)
        np.testing.assert_allclose(float(lam[0]), -tension / length, rtol=0, atol=1e-12)


def test_bead_on_a_prescribed_rotating_rod():
    """A rheonomic constraint with a time-dependent `A` and an affine term: a free bead on a rod
    through the origin turned to the angle `α(t)`; the rod's constraint `e⊥(t)·p = 0`
    differentiated is `e⊥·ṗ − α̇ e·p = 0`. On the rod `p = ρe`: `ρ̈ = ρα̇²` and the rod's
    force is `λ e⊥` with `λ = m(2ρ̇α̇ + ρα̈)`. Tolerance 1e-12 absolute: round-off of a 3×3
    solve of condition ≈ 3 on O(10) entries."""
    alpha = lambda t: 0.7 * t + 0.3 * jnp.sin(2 * t)
    frame = lambda t: (
        jnp.stack([jnp.cos(alpha(t)), jnp.sin(alpha(t))]),
        jnp.stack([-jnp.sin(alpha(t)), jnp.cos(alpha(t))]),
    )

    def rod(p, pdot, t, prm):
        e, e_perp = frame(t)
        alpha_dot = jax.jvp(alpha, (t,), (jnp.ones_like(t),))[1]
        return (e_perp @ pdot - alpha_dot * (e @ p))[None]

    lagrangian = lambda p, pdot, t, prm: 0.5 * prm * pdot @ pdot
    m = 0.6
    system = LagrangeDAlembertSystem(lagrangian, rod, params=jnp.asarray(m))
    for t, rho, rho_dot in [(0.0, 1.0, 0.0), (1.3, 0.4, -2.0), (4.1, 2.2, 0.7)]:
        a = float(alpha(t))
        a_dot = 0.7 + 0.6 * np.cos(2 * t)
        a_ddot = -1.2 * np.sin(2 * t)
        e, e_perp = np.array([np.cos(a), np.sin(a)]), np.array([-np.sin(a), np.cos(a)])
        p, pdot = rho * e, rho_dot * e + rho * a_dot * e_perp
        pddot, lam = eqx.filter_jit(system.accelerations)(t, jnp.asarray(p), jnp.asarray(pdot))
        # p̈ = (ρ̈ − ρα̇²) e + (2ρ̇α̇ + ρα̈) e⊥ with ρ̈ = ρα̇²
        transverse = 2 * rho_dot * a_dot + rho * a_ddot
        np.testing.assert_allclose(np.asarray(pddot), transverse * e_perp, rtol=0, atol=1e-12)
        np.testing.assert_allclose(float(lam[0]), m * transverse, rtol=0, atol=1e-12)


def _rheonomic_lagrangian(q, v, t, k):
    """A configuration-dependent mass matrix, a gyroscopic term and a time-dependent
    potential."""
    mass = jnp.diag(1.0 + q**2) + 0.3 * jnp.outer(jnp.sin(q), jnp.sin(q))
    gyro = jnp.cos(t) * jnp.array([q[1], -q[0], q[2] * q[0]])
    return 0.5 * v @ mass @ v + gyro @ v - k * jnp.sum(q**4) * (1 + 0.1 * t)


def _rheonomic_constraint(q, v, t, k):
    """Affine in `v`, with `q` and `t` in it."""
    return jnp.array([jnp.cos(q[2]) * v[0] + jnp.sin(q[2]) * v[1] - t * q[0], v[2] - q @ q])


def test_derivatives_equal_their_definitions():
    """`derivatives` (two passes over `L`, two over `c`) = each piece by its own definition
    through another autodiff route, on a rheonomic system with a configuration-dependent mass
    matrix, a gyroscopic term and a constraint with `q`, `q̇` and `t` in it: `∂L/∂q`, `p` by
    `jax.grad`, `M` by `jax.hessian`, `ṗ` as `d/ds p(q + s q̇, q̇, t + s)` and `Ȧq̇ + ȧ` as
    `d/ds c(q + s q̇, q̇, t + s)` by `jax.jacrev`, `A` by `jax.jacrev` of `c` in `q̇`, `c` its
    value; and `saddle_matrix` = `[[M, −Aᵀ], [A, 0]]`. Tolerance 1e-12 relative to each
    piece's largest entry: the same derivatives in another order of operations."""

    lagrangian, constraint = _rheonomic_lagrangian, _rheonomic_constraint
    system = LagrangeDAlembertSystem(lagrangian, constraint, params=jnp.asarray(0.7))
    q, v, t = jnp.array([0.3, -1.1, 0.8]), jnp.array([0.5, 0.2, -0.9]), jnp.asarray(0.4)
    d = eqx.filter_jit(system.derivatives)(t, q, v)
    L = lambda q, v, t: lagrangian(q, v, t, 0.7)  # noqa: E731
    c = lambda q, v, t: constraint(q, v, t, 0.7)  # noqa: E731
    along = lambda f: jax.jacrev(lambda s: f(q + s * v, v, t + s))(0.0)  # noqa: E731
    expected = {
        "dL_dq": jax.grad(L, 0)(q, v, t),
        "p": jax.grad(L, 1)(q, v, t),
        "M": jax.hessian(L, 1)(q, v, t),
        "pdot": along(jax.grad(L, 1)),
        "c": c(q, v, t),
        "A": jax.jacrev(c, 1)(q, v, t),
        "cdot": along(c),
    }
    for name, want in expected.items():
        got = getattr(d, name)
        scale = float(jnp.max(jnp.abs(want)))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * scale, err_msg=name)
    A, M = expected["A"], expected["M"]
    block = jnp.block([[M, -A.T], [A, jnp.zeros((2, 2))]])
    scale = float(jnp.max(jnp.abs(block)))
    np.testing.assert_allclose(system.saddle_matrix(t, q, v), block, rtol=0, atol=1e-12 * scale)


def test_mass_matrix_of_a_lagrangian_not_quadratic_in_the_velocity():
    """`mass_matrix` is `∂²L/∂q̇²` at the given velocity for any `L`, not only a quadratic one
    (it is formed forward over forward, design note 59): for the relativistic particle with
    a configuration- and time-dependent rest energy, `L = −a(q, t) √(1 − |q̇|²)`, it is
    `a (γ I + γ³ q̇ q̇ᵀ)`, `γ = 1/√(1 − |q̇|²)`, in closed form, under `jit` and for a traced
    `t`. Tolerance 1e-13 relative to the largest entry: a few roundings of O(γ³) terms."""

    def lagrangian(q, v, t, k):
        return -(1.0 + q[0] ** 2 + k * jnp.sin(t)) * jnp.sqrt(1.0 - v @ v)

    system = LagrangeDAlembertSystem(lagrangian, None, params=jnp.asarray(0.5))
    q, t = jnp.array([0.3, -1.1, 0.8]), jnp.asarray(0.4)
    for v in (jnp.array([0.5, 0.2, -0.6]), jnp.zeros(3)):
        a = 1.0 + q[0] ** 2 + 0.5 * jnp.sin(t)
        gamma = 1.0 / jnp.sqrt(1.0 - v @ v)
        want = a * (gamma * jnp.eye(3) + gamma**3 * jnp.outer(v, v))
        got = eqx.filter_jit(system.mass_matrix)(t, q, v)
        scale = float(jnp.max(jnp.abs(want)))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * scale)


def test_velocity_from_momentum_inverts_the_momentum_on_the_constraint():
    """`velocity_from_momentum` is the constrained inverse Legendre map: on the rheonomic system
    of `test_derivatives_equal_their_definitions` (a configuration-dependent mass matrix, a
    gyroscopic term `∂L/∂q̇(q, 0, t) ≠ 0`, an affine constraint with `t` in it), a velocity `v`
    on the constraint is recovered from its momentum `∂L/∂q̇(q, v, t)` plus any `Aᵀμ` (the
    map sees the momentum modulo `range Aᵀ`); `constraint_matrix` is `(∂c/∂q̇, c(q, 0, t))`.
    Tolerances: `A`, `a` to 1e-15 absolute (O(1) entries of an affine map, the same
    derivative by another autodiff route: a few ulps); the projected `v` on the constraint to
    1e-14 (the pseudo-inverse's round-off on O(1) entries); the recovered velocity to 1e-12
    relative (a 5×5 saddle solve of O(1) entries)."""

    lagrangian, constraint = _rheonomic_lagrangian, _rheonomic_constraint
    system = LagrangeDAlembertSystem(lagrangian, constraint, params=jnp.asarray(0.7))
    q, t = jnp.array([0.3, -1.1, 0.8]), jnp.asarray(0.4)
    A, a = system.constraint_matrix(t, q)
    c = lambda v: constraint(q, v, t, 0.7)  # noqa: E731
    np.testing.assert_allclose(A, jax.jacrev(c)(jnp.zeros(3)), rtol=0, atol=1e-15)
    np.testing.assert_allclose(a, c(jnp.zeros(3)), rtol=0, atol=1e-15)
    v0 = jnp.array([0.5, 0.2, -0.9])
    v = v0 - jnp.linalg.pinv(A) @ (A @ v0 + a)  # onto the constraint
    np.testing.assert_allclose(c(v), 0.0, rtol=0, atol=1e-14)
    p = system.momentum(t, q, v) + A.T @ jnp.array([1.7, -0.4])
    got = eqx.filter_jit(system.velocity_from_momentum)(t, q, p)
    np.testing.assert_allclose(got, v, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(v))))


def free_body(constrained: bool):
    """A free rigid body in quaternion coordinates, `L = ½ Ω·𝕀Ω`, `Ω = 2 Im(q* q̇)`, with or
    without the row `q · q̇ = 0` of `|q| = 1`."""
    lagrangian = lambda q, qd, t, I: (
        0.5 * quaternion_angular_velocity(q, qd) @ (I @ quaternion_angular_velocity(q, qd))
    )
    unit = (lambda q, qd, t, I: (q @ qd)[None]) if constrained else None
    return LagrangeDAlembertSystem(lagrangian, unit, params=jnp.diag(jnp.array([1.0, 2.0, 3.0])))


def test_free_body_in_quaternions_is_euler():
    """The free body: the engine's `Ω̇ = 2 Im(q* q̈)` equals Euler's `𝕀⁻¹(𝕀Ω × Ω)`; 1e-13
    absolute: a 5×5 saddle solve of condition 12 on O(1) entries (measured 8e-16)."""
    system = free_body(True)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = quaternion.normalize(jnp.asarray(rng.normal(size=4)))
        Omega = jnp.asarray(rng.normal(size=3))
        qddot, _ = eqx.filter_jit(system.accelerations)(0.0, q, quaternion_rate(q, Omega))
        I = system.params
        euler = jnp.linalg.solve(I, jnp.cross(I @ Omega, Omega))
        np.testing.assert_allclose(
            np.asarray(quaternion_angular_velocity(q, qddot)), np.asarray(euler), rtol=0, atol=1e-13
        )


def test_singular_saddle_systems_are_named(sleigh):
    """A repeated constraint row (rank-deficient `A`), a quaternion body without its `q·q̇ = 0`
    row (`q̇ ∥ q` has no kinetic energy), and a coordinate with no inertia are each caught by
    the check that names the cause; the healthy systems pass."""
    rng = np.random.default_rng(4)
    q, qdot, _, _ = sleigh_state(rng)
    twice = LagrangeDAlembertSystem(
        sleigh.lagrangian,
        lambda q, qd, t, p: jnp.concatenate([sleigh.constraint(q, qd, t, p)] * 2),
        params=sleigh.params,
    )
    with pytest.raises(ValueError, match="rank-deficient"):
        _checks.apply(eqx.filter_jit(twice.saddle_checks)(0.0, q, qdot))

    qb = quaternion.normalize(jnp.asarray(rng.normal(size=4)))
    qbdot = quaternion_rate(qb, jnp.array([0.1, -0.2, 0.3]))
    with pytest.raises(ValueError, match="not positive definite"):
        _checks.apply(eqx.filter_jit(free_body(False).saddle_checks)(0.0, qb, qbdot))

    massless = LagrangeDAlembertSystem(lambda q, qd, t, p: 0.5 * qd[0] ** 2, None)
    with pytest.raises(ValueError, match="not positive definite"):
        _checks.apply(eqx.filter_jit(massless.saddle_checks)(0.0, jnp.zeros(2), jnp.zeros(2)))

    for system, state in [(sleigh, (q, qdot)), (free_body(True), (qb, qbdot))]:
        _checks.apply(eqx.filter_jit(system.state_checks)(LagrangeDAlembertState(*state)))


def test_state_off_the_constraint_is_refused(sleigh):
    """A sideways velocity of the blade (residual 0.1 against terms of size 1) is refused;
    flags come per ensemble member."""
    q = jnp.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    qdot = jnp.array([[1.0, 0.0, 0.5], [1.0, 0.1, 0.5]])
    with pytest.raises(ValueError, match=r"off the velocity constraint.*member 1"):
        _checks.apply(eqx.filter_jit(sleigh.state_checks)(LagrangeDAlembertState(q, qdot)))


def test_jit_vmap_grad(sleigh):
    """`jit` = eager (to 1e-14 relative: the same operations, fused differently); `vmap` over the
    parameter `a` = a loop (1e-14); `grad` of `φ̈` with respect to `a` = the central difference
    with step 1e-5 (truncation h² ≈ 1e-10, round-off eps/h ≈ 1e-11: rel 1e-6 is safe) and = the
    closed form's derivative."""
    rng = np.random.default_rng(5)
    q, qdot, v, w = sleigh_state(rng)
    fn = lambda s: s.accelerations(0.3, q, qdot)[0]
    np.testing.assert_allclose(np.asarray(jax.jit(fn)(sleigh)), np.asarray(fn(sleigh)), rtol=1e-14)

    with_a = lambda a: LagrangeDAlembertSystem(
        sleigh.lagrangian, sleigh.constraint, params={**sleigh.params, "a": a}
    )
    a_values = jnp.linspace(0.1, 1.0, 4)
    one = jax.jit(lambda a: fn(with_a(a)))
    batched = jax.vmap(one)(a_values)
    looped = jnp.stack([one(a) for a in a_values])
    np.testing.assert_allclose(np.asarray(batched), np.asarray(looped), rtol=1e-14, atol=1e-15)

    phi_ddot = lambda a: fn(with_a(a))[2]
    a0, h = 0.5, 1e-5
    grad = float(jax.jit(jax.grad(phi_ddot))(a0))
    fd = (float(one(a0 + h)[2]) - float(one(a0 - h)[2])) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)
    m, I = float(sleigh.params["m"]), float(sleigh.params["I"])
    exact = -m * v * w * (I + m * a0**2 - 2 * m * a0**2) / (I + m * a0**2) ** 2
    np.testing.assert_allclose(grad, exact, rtol=1e-12)
