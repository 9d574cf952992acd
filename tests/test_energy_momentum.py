"""The director energy–momentum scheme for the standard rigid body (Gebhardt & Romero §3.5,
§5.1): director model, AVF constraint Jacobians, Theorem 5.1, agreement with IMIDM and with an
independent DOP853 reference at second order, input errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.diagnostics import measured_order
from jaxrigid.integrators import energy_momentum as em
from jaxrigid.models import director as D
from jaxrigid.reference import rigid_body_reference

EPS = np.finfo(np.float64).eps
CHUNK = 100
# a generic body: full inertia (no principal axis along D3), tumbling
J_GENERIC = jnp.array([[3.0, 0.3, -0.2], [0.3, 4.0, 0.25], [-0.2, 0.25, 5.5]])
OMEGA0 = jnp.array([1.2, -0.7, 2.1])
R0 = jr.lie.so3.exp(jnp.array([0.3, -0.2, 0.5]))


def _run(model, state0, dt, n_steps, integrator=None):
    """Saved states every step, run in chunks of CHUNK steps (one compilation for all dt)."""
    integrator = integrator or em.EnergyMomentumAVF()
    states, s, t = [state0], state0, 0.0
    for _ in range(n_steps // CHUNK):
        sol = jr.simulate(integrator, model, s, dt, CHUNK, t0=t)
        assert bool(sol.outcome.all_converged)
        states.append(jax.tree_util.tree_map(lambda x: x[1:], sol.states))
        s, t = sol.final_state, t + CHUNK * dt
    return jax.tree_util.tree_map(
        lambda *xs: jnp.concatenate([xs[0][None]] + list(xs[1:])), *states
    )


@pytest.fixture(scope="module")
def standard():
    model = D.DirectorRigidBody.from_convected(J_GENERIC)
    state0 = D.from_rotation(R0, OMEGA0)
    return model, state0


def test_inertia_conversion_matches_eq111_and_inverts():
    J = jnp.array([[3.0, -1 / 7, 0.0], [-1 / 7, 4.0, 0.0], [0.0, 0.0, 5.0]])
    E = D.euler_coefficients(J)
    # (111) prints 𝒥 = [[3, 1/7, 0], [1/7, 2, 0], [0, 0, 1]] exactly (round-off only)
    np.testing.assert_allclose(E, [[3, 1 / 7, 0], [1 / 7, 2, 0], [0, 0, 1]], atol=4 * EPS)
    np.testing.assert_allclose(D.convected_inertia(E), J, atol=4 * EPS)
    np.testing.assert_allclose(D.convected_inertia(D.euler_coefficients(J_GENERIC)), J_GENERIC)


def test_director_energy_and_momentum_equal_the_rotation_forms(standard):
    """K = ½ qᵀMq̇ = ½ W·JW and π = Σ dᵢ × πⁱ = R J W for ḋᵢ = ω × dᵢ (eqs. 33, 38, 61, 65)."""
    model, state0 = standard
    W = R0.T @ OMEGA0
    K = 0.5 * state0.v @ D.mass_matrix(model.euler_inertia) @ state0.v
    np.testing.assert_allclose(K, 0.5 * W @ J_GENERIC @ W, rtol=1e-14)
    np.testing.assert_allclose(D.kinetic_energy(model.euler_inertia, state0.v), K, rtol=1e-14)
    np.testing.assert_allclose(
        D.spatial_momentum(model.euler_inertia, state0), R0 @ J_GENERIC @ W, rtol=1e-14
    )
    np.testing.assert_allclose(
        D.material_momentum(model.euler_inertia, state0), J_GENERIC @ W, rtol=1e-13
    )
    np.testing.assert_allclose(D.angular_velocity(state0), OMEGA0, rtol=1e-14)


def test_moment_virtual_work_is_the_moment_power():
    """(68): Σ ½(dᵢ × δdᵢ)·m = δθ·m for δdᵢ = δθ × dᵢ: the generalised forces carry m."""

    class Constant(D.AbstractMoment):
        m: jax.Array

        def __call__(self, t, d1, d2, d3):
            return self.m

    m = jnp.array([0.4, -1.3, 2.2])
    model = D.DirectorRigidBody(D.euler_coefficients(J_GENERIC), Constant(m))
    state = D.from_rotation(R0, OMEGA0)
    dtheta = jnp.array([0.7, 0.1, -0.5])
    dq = jnp.cross(dtheta[None, :], state.q.reshape(3, 3)).reshape(9)
    np.testing.assert_allclose(model.generalized_forces(0.0, state.q) @ dq, dtheta @ m, rtol=1e-14)


def test_avf_quadrature_is_exact_for_the_constraints():
    """(89), (93): two-point Gauss equals a 6-point rule and the midpoint Jacobian (linear
    integrands), and gives H_d(q1 − q0) = h(q1) − h(q0) exactly (90)."""
    rng = np.random.default_rng(0)
    q0, q1 = jnp.asarray(rng.standard_normal(9)), jnp.asarray(rng.standard_normal(9))
    x, w = np.polynomial.legendre.leggauss(6)
    for jac in (D.constraint_jacobian, D.nontwisting_matrix):
        six = sum(0.5 * wi * jac(0.5 * (1 - xi) * q0 + 0.5 * (1 + xi) * q1) for xi, wi in zip(x, w))
        avf = em.average_vector_field(jac, q0, q1)
        np.testing.assert_allclose(avf, six, atol=1e-14)  # round-off of O(1) entries
        np.testing.assert_allclose(avf, jac(0.5 * (q0 + q1)), atol=1e-14)
    Hd = em.discrete_constraint_jacobian(q0, q1)
    np.testing.assert_allclose(Hd @ (q1 - q0), D.constraints(q1) - D.constraints(q0), atol=1e-13)
    # the parameter a of (80) only adds a multiple of the d1·d2 row of H_d to G_d: the force
    # G_dᵀμ changes by a constraint force that λ absorbs, so the scheme does not depend on a
    for a in (0.5, 1.0):
        Ga = em.average_vector_field(lambda q, a=a: D.nontwisting_matrix(q, a), q0, q1)
        G0 = em.discrete_nontwisting_matrix(q0, q1)
        np.testing.assert_allclose(Ga - G0, -a * Hd[5:6], atol=1e-14)


@pytest.mark.xla_defaults
def test_theorem_5_1_energy_and_spatial_momentum_to_round_off(standard):
    model, state0 = standard
    states = _run(model, state0, 0.05, 1000)
    inv = jax.vmap(model.invariants, in_axes=(None, 0))(0.0, states)
    K0 = float(inv["K"][0])
    # Each step conserves K and π up to its own rounding, which does not favour a sign: the
    # drift is a random walk (K's step changes: std 1.2 eps, mean −0.05 eps, measured), about
    # 40 eps after 1000 steps (measured 48 for K and 24 for π with XLA's defaults). 10√n eps
    # = 316 eps is 8 of its standard deviations. A step biased by half an eps, one sign,
    # fails it: the velocity through a rounded 2/h drifted K by 962 eps (design note 51).
    bound = 10 * np.sqrt(1000) * EPS
    assert float(jnp.max(jnp.abs(inv["K"] - K0))) / K0 < bound
    pi = jnp.stack([inv[f"pi{i}"] for i in (1, 2, 3)], axis=-1)
    scale = float(jnp.linalg.norm(pi[0]))
    assert float(jnp.max(jnp.abs(pi - pi[:1]))) / scale < bound
    # the body tumbles (Π moves a lot in the body), so the conservation is not trivial
    Pi = jnp.stack([inv[f"Pi{i}"] for i in (1, 2, 3)], axis=-1)
    assert float(jnp.max(jnp.abs(Pi - Pi[:1]))) > 0.1 * scale


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_velocity_is_one_rounded_quotient_under_jit_and_vmap(dtype):
    """`q̇ₙ₊₁ = 2Δq/h − q̇ₙ` equals NumPy's `(2Δq)/h − q̇ₙ` to the bit (IEEE division and
    subtraction, each correctly rounded; the doubling is exact) under `jit` with `h` a
    constant and under `vmap` with `h` an argument. XLA rewrites a division by a broadcast
    scalar as a product with its rounded reciprocal, which differs in about a sixth of the
    entries at h = 0.05 and biased every step alike (design note 51)."""
    rng = np.random.default_rng(0)
    dq, v0 = (rng.uniform(-0.1, 0.1, (1000, 9)).astype(dtype) for _ in range(2))
    h = dtype(0.05)
    expected = (2 * dq) / h - v0
    constant = jax.jit(lambda a, b: em.velocity(a, b, h))(dq, v0)
    mapped = jax.jit(jax.vmap(em.velocity, in_axes=(0, 0, None)))(dq, v0, h)
    for got in (constant, mapped):
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got), expected)


def test_discrete_constraints_hold_every_step_and_the_full_system_is_solved(standard):
    """h(q_{n+1}) = 0 to round-off (the step moves the directors by a Cayley rotation), the
    hidden constraint H_d Δq = 0 (90), and the 15-unknown system (86) has zero residual at
    the multipliers recovered from the reduced solve."""
    model, state0 = standard
    states = _run(model, state0, 0.05, 200)
    q = states.q
    h = jax.vmap(D.constraints)(q)
    assert float(jnp.max(jnp.abs(h))) < 200 * EPS  # random-walk round-off over 200 steps
    Hd_dq = jax.vmap(lambda a, b: em.discrete_constraint_jacobian(a, b) @ (b - a))(q[:-1], q[1:])
    assert float(jnp.max(jnp.abs(Hd_dq))) < 200 * EPS
    res = jax.jit(lambda s, x: em.residual(model, s, 0.0, 0.05, x))
    for n in (0, 57, 199):
        s = jax.tree_util.tree_map(lambda x: x[n], states)
        x = em.multipliers(model, s, 0.0, 0.05, states.q[n + 1] - states.q[n])
        # residual entries are O(|Δq|) ≈ 0.1 · 𝒥: Newton tolerance 1.8e-12 relative, plus round-off
        assert float(jnp.max(jnp.abs(res(s, x)))) < 1e-13


def test_second_order_agreement_with_imidm_and_dop853(standard):
    model, state0 = standard
    T = 2.0
    ref = rigid_body_reference(
        jr.RigidBody(J_GENERIC), jr.RigidBodyState(R0, J_GENERIC @ (R0.T @ OMEGA0)), [T]
    )
    errs_ref, errs_imidm = [], []
    dts = [0.02, 0.01, 0.005]
    for dt in dts:
        n = int(round(T / dt))
        states = _run(model, state0, dt, n)
        R_em = D.rotation(states.q[-1])
        rb_state0 = jr.RigidBodyState(R0, J_GENERIC @ (R0.T @ OMEGA0))
        imidm = _run(jr.RigidBody(J_GENERIC), rb_state0, dt, n, jr.IMIDM())
        errs_ref.append(float(jnp.linalg.norm(R_em - ref.R[0], ord=2)))
        errs_imidm.append(float(jnp.linalg.norm(R_em - imidm.R[-1], ord=2)))
    # second order: slopes within 0.1 of 2 (the error constants are smooth at these dt)
    assert abs(measured_order(dts, errs_ref) - 2) < 0.1
    assert abs(measured_order(dts, errs_imidm) - 2) < 0.1


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda s: D.DirectorState(s.q.at[0].add(0.01), s.v), "not orthonormal"),
        (lambda s: D.DirectorState(s.q.at[3].set(jnp.nan), s.v), "NaN"),
        (lambda s: D.DirectorState(s.q[:8], s.v), "shape"),
        (lambda s: D.DirectorState(s.q, s.v.at[0].add(0.5)), "not admissible"),
        (lambda s: D.DirectorState(s.q.at[6:9].multiply(-1), s.v), "left-handed"),
    ],
)
def test_bad_director_states_are_rejected(standard, bad, message):
    _, state0 = standard
    with pytest.raises(ValueError, match=message):
        D.check_director_state(bad(state0))


def test_bad_bodies_and_models_are_rejected():
    with pytest.raises(ValueError, match="positive definite"):
        D.check_director_body(D.DirectorRigidBody(jnp.diag(jnp.array([1.0, 1.0, -1.0]))))
    with pytest.raises(ValueError, match="principal"):
        D.check_director_body(
            D.DirectorRigidBody(D.euler_coefficients(J_GENERIC), nontwisting=True)
        )
    with pytest.raises(jr.IncompatibleModelError, match="DirectorRigidBody"):
        jr.simulate(
            em.EnergyMomentumAVF(),
            jr.RigidBody(J_GENERIC),
            jr.RigidBodyState(jnp.eye(3), jnp.ones(3)),
            0.1,
            1,
        )
