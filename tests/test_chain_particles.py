"""Rigid bodies of point particles and the chain potential (Chaurasia 2012, §3.1, §3.2.3,
§3.3.6, §3.5): inertia against closed forms, principal frames, the potential against direct
loops and under rigid motions, autodiff gradients against the thesis's hand-derived ones."""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.lie import quaternion, so3
from jaxrigid.models.particle_body import (
    ParticleBody,
    disc,
    inertia_tensor,
    regular_tetrahedron,
    tetrahedron,
)
from jaxrigid.models.particle_chain import LennardJones, ParticleChain, quaternion_matrix

EPS = np.finfo(np.float64).eps
LJ = LennardJones(jnp.asarray(5.0), jnp.asarray(1.0))  # §3.5: ε = 5, σ = 1


def lj_np(r, eps=5.0, sigma=1.0):
    return 4 * eps * ((sigma / r) ** 12 - (sigma / r) ** 6)


def lj_prime_np(r, eps=5.0, sigma=1.0):
    return -24 * eps / sigma * (2 * (sigma / r) ** 13 - (sigma / r) ** 7)  # §3.5.1


def random_chain(key, n_bodies, spacing=2.2, jitter=0.15, angle=np.pi):
    """Centres near `(spacing·j, 0, 0)`, attitudes `exp(ξ̂)` with `|ξ| ≤ angle·√3`."""
    k1, k2 = jax.random.split(key)
    r = jnp.stack([spacing * jnp.arange(n_bodies), jnp.zeros(n_bodies), jnp.zeros(n_bodies)], -1)
    r = r + jitter * jax.random.normal(k1, (n_bodies, 3))
    R = so3.exp(angle * jax.random.uniform(k2, (n_bodies, 3), minval=-1.0, maxval=1.0))
    return r, R


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


# --- bodies ---------------------------------------------------------------------------------


def test_regular_tetrahedron_inertia_closed_form():
    # Vertices at distance a√6/4 from the centroid: Σ m|r|² = 3ma²/2, and four vertices of a
    # regular tetrahedron have an isotropic second moment, J = (ma²/2) 1, so 𝕀 = tr(J)1 − J =
    # m a² 1. Tolerance: sums of four terms and one eigh, a few eps.
    a, m = 1.3, 0.7
    body = regular_tetrahedron(a, m)
    np.testing.assert_allclose(body.inertia, m * a**2 * np.eye(3), atol=10 * EPS * m * a**2)
    np.testing.assert_allclose(body.J, 0.5 * m * a**2 * np.eye(3), atol=10 * EPS * m * a**2)
    assert float(body.mass) == pytest.approx(4 * m, rel=1e-15)
    edges = [np.linalg.norm(body.r[i] - body.r[j]) for i, j in itertools.combinations(range(4), 2)]
    np.testing.assert_allclose(edges, a, rtol=10 * EPS)


def test_thesis_tetrahedron_kept_in_its_principal_frame():
    # §3.5's coordinates have their centre of mass at 0 and a diagonal inertia; by hand:
    # Σx² = a²/2, Σy² = 2a²/3, Σz² = 3a²/4, so m a² (17/12, 5/4, 7/6); the thesis prints
    # I₃₃ = 5a²/6 (a slip). The given frame is principal, so the axes stay the identity.
    a, m = 2.0, 3.0
    body = tetrahedron(a, m)
    printed = a * np.array(
        [[-1 / 2, -1 / 3, -1 / 4], [1 / 2, -1 / 3, -1 / 4], [0, 2 / 3, -1 / 4], [0, 0, 3 / 4]]
    )
    np.testing.assert_allclose(body.r, printed, atol=10 * EPS * a)
    np.testing.assert_allclose(body.axes, np.eye(3), atol=10 * EPS)
    np.testing.assert_allclose(
        body.principal_moments, m * a**2 * np.array([17 / 12, 5 / 4, 7 / 6]), rtol=10 * EPS
    )
    np.testing.assert_allclose(body.J, m * a**2 * np.diag([1 / 2, 2 / 3, 3 / 4]), atol=1e-14)


@pytest.mark.parametrize("n_p", [6, 8, 12])
def test_disc_inertia_closed_form(n_p):
    # n_p/2 particles evenly on each circle of radius a: Σx² = Σy² = n_p a²/2, Σz² = n_p t²/4,
    # so 𝕀 = m (n_p a²/2 + n_p t²/4, same, n_p a²).
    a, t, m = 0.05, 0.005, 1.0
    body = disc(n_p)
    expected = m * np.array([n_p * a**2 / 2 + n_p * t**2 / 4] * 2 + [n_p * a**2])
    np.testing.assert_allclose(body.principal_moments, expected, rtol=100 * EPS)
    np.testing.assert_allclose(np.linalg.norm(body.r[:, :2], axis=-1), a, rtol=100 * EPS)
    np.testing.assert_allclose(np.abs(body.r[:, 2]), t / 2, rtol=1e-12)


@pytest.mark.parametrize("n_p", [4, 7, 8.0])
def test_disc_rejects_bad_particle_counts(n_p):
    with pytest.raises(ValueError, match="even number of particles n_p ≥ 6"):
        disc(n_p)


def literal_inertia(m, x):
    """§3.1's I₁₁ … I₂₃, written out component by component."""
    c = (m[:, None] * x).sum(0) / m.sum()
    y = x - c
    I = np.zeros((3, 3))
    for k in range(len(m)):
        for i in range(3):
            o1, o2 = [j for j in range(3) if j != i]
            I[i, i] += m[k] * (y[k, o1] ** 2 + y[k, o2] ** 2)
        for i, j in [(0, 1), (0, 2), (1, 2)]:
            I[i, j] -= m[k] * y[k, i] * y[k, j]
            I[j, i] = I[i, j]
    return I


def test_random_body_principal_frame():
    rng = np.random.default_rng(0)
    m = rng.uniform(0.5, 2.0, 7)
    x = rng.normal(size=(7, 3)) * np.array([1.0, 2.0, 3.0]) + np.array([5.0, -1.0, 2.0])
    body = ParticleBody.from_particles(jnp.asarray(m), jnp.asarray(x))
    I = literal_inertia(m, x)
    np.testing.assert_allclose(inertia_tensor(jnp.asarray(m), jnp.asarray(x)), I, rtol=1e-13)
    A = np.asarray(body.axes)
    # eigh: orthonormal to a few eps, diagonalising to a few eps of the largest moment
    np.testing.assert_allclose(A.T @ A, np.eye(3), atol=20 * EPS)
    assert np.linalg.det(A) == pytest.approx(1.0, abs=20 * EPS)
    scale = np.max(np.abs(I))
    np.testing.assert_allclose(A.T @ I @ A, np.diag(body.principal_moments), atol=50 * EPS * scale)
    np.testing.assert_allclose(body.inertia, np.diag(body.principal_moments), atol=50 * EPS * scale)
    # xᵏ = com + A rᵏ; body-frame centre of mass at 0; [J] diagonal with 𝕀 = tr(J)1 − J
    np.testing.assert_allclose(
        np.asarray(body.com) + np.asarray(body.r) @ A.T, x, atol=50 * EPS * np.max(np.abs(x))
    )
    np.testing.assert_allclose((m[:, None] * body.r).sum(0), 0.0, atol=100 * EPS * scale)
    J = np.asarray(body.J)
    np.testing.assert_allclose(np.trace(J) * np.eye(3) - J, body.inertia, atol=50 * EPS * scale)
    # a rigid motion of the particles moves the frame, not the moments
    Q = np.asarray(so3.exp(jnp.array([0.3, -1.2, 0.8])))
    moved = ParticleBody.from_particles(jnp.asarray(m), jnp.asarray(x @ Q.T + 1.0))
    np.testing.assert_allclose(
        np.sort(moved.principal_moments), np.sort(body.principal_moments), rtol=1e-13
    )
    np.testing.assert_allclose(moved.com, Q @ body.com + 1.0, rtol=1e-13)


GOOD_X = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])


@pytest.mark.parametrize(
    ("m", "x", "message"),
    [
        ([1.0, 0.0, 1, 1], GOOD_X, "every particle mass must be positive"),
        ([1.0, -2.0, 1, 1], GOOD_X, "every particle mass must be positive"),
        ([1.0, 1, 1, 1], GOOD_X[[0, 1, 1, 2]], "two particles coincide"),
        ([1.0, 1, 1, 1], np.outer(np.arange(4.0), [1.0, 2.0, -1.0]), "lie on one line"),
        ([1.0, np.nan, 1, 1], GOOD_X, "must be finite"),
        ([1.0, 1, 1, 1], np.where(GOOD_X == 1, np.inf, 0.0), "must be finite"),
    ],
)
def test_bad_bodies_rejected(m, x, message):
    with pytest.raises(ValueError, match=message):
        ParticleBody.from_particles(jnp.asarray(m), jnp.asarray(x))


def test_bad_body_shapes_and_traced_check():
    with pytest.raises(ValueError, match=r"at least 3 particles"):
        ParticleBody.from_particles(jnp.ones(2), jnp.eye(3)[:2])
    with pytest.raises(ValueError, match=r"m \(n_p,\) and positions x \(n_p, 3\)"):
        ParticleBody.from_particles(jnp.ones(4), jnp.eye(3))
    line = jnp.asarray(np.outer(np.arange(4.0), [1.0, 0.0, 0.0]))
    with pytest.raises(Exception, match="lie on one line"):  # raised in the graph under jit
        jax.block_until_ready(jax.jit(ParticleBody.from_particles)(jnp.ones(4), line))


# --- the chain potential --------------------------------------------------------------------


def test_two_bodies_against_double_loop():
    body = disc(6, a=0.6, t=0.2)
    chain = ParticleChain(body, LennardJones(jnp.asarray(0.3), jnp.asarray(0.8)))
    r, R = random_chain(jax.random.PRNGKey(1), 2, spacing=1.5, jitter=0.1)
    x = np.asarray(r)[:, None, :] + np.einsum("jab,kb->jka", np.asarray(R), np.asarray(body.r))
    V = sum(lj_np(np.linalg.norm(x[0, k] - x[1, l]), 0.3, 0.8) for k in range(6) for l in range(6))
    # same 36 terms summed in another order: a few eps of the largest term
    assert float(chain.potential(r, R)) == pytest.approx(V, rel=1e-13)


def test_neighbours_only_against_loop_and_repeated_pairs():
    chain = ParticleChain(tetrahedron(), LJ)
    r, R = random_chain(jax.random.PRNGKey(2), 4, spacing=1.8)
    x = np.asarray(chain.positions(r, R))
    V = sum(
        lj_np(np.linalg.norm(x[j - 1, k] - x[j, l]))
        for j in range(1, 4)
        for k in range(4)
        for l in range(4)
    )
    assert float(chain.potential(r, R)) == pytest.approx(V, rel=1e-13)
    # 1002 identical, evenly spaced bodies: V = 1001 V₀₁ (no pair beyond neighbours counts)
    n = 1002
    r = jnp.stack([1.9 * jnp.arange(n), jnp.zeros(n), jnp.zeros(n)], -1)
    R = jnp.broadcast_to(so3.exp(jnp.array([0.2, 0.1, -0.3])), (n, 3, 3))
    V01 = chain.potential(r[:2], R[:2])
    assert float(chain.potential(r, R)) == pytest.approx(1001 * float(V01), rel=1e-12)
    # interior forces cancel; positions near |r| ≈ 1.9·10³ carry ~|r|·eps ≈ 4e-13 absolute
    # error into distances ~1, which LJ's force (∝ r⁻¹³) turns into ~1e-11 relative: 1e-10
    F = chain.forces(r, R)
    np.testing.assert_allclose(F[1:-1], 0.0, atol=1e-10 * float(jnp.max(jnp.abs(F))))


def test_rigid_motion_invariance():
    chain = ParticleChain(tetrahedron(), LJ)
    r, R = random_chain(jax.random.PRNGKey(3), 5)
    Q = so3.exp(jnp.array([1.1, -0.4, 2.0]))
    b = jnp.array([3.0, -7.0, 0.5])
    r2, R2 = r @ Q.T + b[None, :], Q[None] @ R
    V, V2 = float(chain.potential(r, R)), float(chain.potential(r2, R2))
    assert V2 == pytest.approx(V, rel=1e-12)  # distances to ~eps·|r|, LJ magnifies them by ≤ 13
    np.testing.assert_allclose(chain.forces(r2, R2), chain.forces(r, R) @ Q.T, atol=1e-11)
    np.testing.assert_allclose(chain.torques(r2, R2), chain.torques(r, R), atol=1e-11)
    # the test has teeth: particles placed at r + Rᵀ rᵏ (R and Rᵀ mixed) are not invariant
    RT = lambda R: jnp.swapaxes(R, -1, -2)  # noqa: E731
    Vt, Vt2 = float(chain.potential(r, RT(R))), float(chain.potential(r2, RT(R2)))
    assert abs(Vt2 - Vt) > 1e-3 * abs(Vt)


def test_torque_is_minus_the_rotation_derivative():
    # T_j · e = −d/dθ V(R_j exp(θ ê)) at θ = 0, by forward-mode autodiff (exact)
    chain = ParticleChain(tetrahedron(), LJ)
    r, R = random_chain(jax.random.PRNGKey(4), 4)
    T = chain.torques(r, R)
    for j in range(4):
        for e in np.eye(3):
            f = lambda th: chain.potential(r, R.at[j].set(R[j] @ so3.exp(th * jnp.asarray(e))))  # noqa: B023, E731
            _, dV = jax.jvp(f, (jnp.asarray(0.0),), (jnp.asarray(1.0),))
            assert float(T[j] @ e) == pytest.approx(-float(dV), rel=1e-12, abs=1e-12)


# --- autodiff against the thesis's hand-derived gradients -----------------------------------
# The thesis places particle k of body j at r_j + R_jᵀ r_jᵏ (3.11): its R_j is our R_jᵀ, and its
# quaternion our conjugate. Each reference below is written in the thesis's variables and
# mapped once to ours. Tolerance 1e-12 of the largest entry: both sides are sums of ≤ 32 terms
# A·(difference of positions) evaluated in float64 in different orders (a few hundred eps).


def thesis_3_13(r, R, rk):
    """Right sides of (3.13a) and of (3.13c) without −2RΛ, loop by loop, bodies 0 … N+1
    (an end body has one neighbour, as in §3.2.4); `R` is the thesis's (space → body)."""
    n, n_p = r.shape[0], rk.shape[0]
    dp, dP, S = np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros((n, 3, 3))
    x = lambda j, k: r[j] + R[j].T @ rk[k]  # noqa: E731
    for j in range(n):
        for k in range(n_p):
            for l in range(n_p):
                if j > 0:  # pair (j−1, j): k on body j−1, l on body j
                    d = x(j, l) - x(j - 1, k)
                    A = lj_prime_np(np.linalg.norm(d)) / np.linalg.norm(d)
                    dp[j] -= A * d
                    dP[j] -= A * np.outer(rk[l], r[j] - r[j - 1] - R[j - 1].T @ rk[k])
                    S[j] += A * np.outer(rk[l], rk[l])
                if j < n - 1:  # pair (j, j+1): k on body j, l on body j+1
                    d = x(j, k) - x(j + 1, l)
                    A = lj_prime_np(np.linalg.norm(d)) / np.linalg.norm(d)
                    dp[j] -= A * d
                    dP[j] -= A * np.outer(rk[k], r[j] - r[j + 1] - R[j + 1].T @ rk[l])
                    S[j] += A * np.outer(rk[k], rk[k])
    return dp, dP, S


def test_gradients_match_thesis_3_13():
    chain = ParticleChain(tetrahedron(), LJ)
    r, R = random_chain(jax.random.PRNGKey(5), 4)
    dp, dP, S = thesis_3_13(
        np.asarray(r), np.swapaxes(np.asarray(R), -1, -2), np.asarray(chain.body.r)
    )
    dVdr, dVdR = chain.gradients(r, R)
    assert rel(-dVdr, dp) < 1e-12  # (3.13a)
    # (3.13c) leaves out A rᵏ rᵏᵀ R_j (the body's own particle), a term S R of the constraint
    # direction, absorbed by −2RΛ; with it restored the gradients agree entry by entry ...
    full = np.swapaxes(-dP + S @ np.swapaxes(np.asarray(R), -1, -2), -1, -2)
    assert rel(dVdR, full) < 1e-12
    # ... and without it the torques (the part the multiplier cannot absorb) already agree
    thesis_torque = -2 * so3.vee(jnp.swapaxes(R, -1, -2) @ jnp.swapaxes(-jnp.asarray(dP), -1, -2))
    assert rel(chain.torques(r, R), thesis_torque) < 1e-12
    assert rel(np.swapaxes(-dP, -1, -2), dVdR) > 1e-3  # the left-out term is not negligible


def thesis_dRt_dq(q):
    """The four matrices printed after (3.29) as `∂R(q)ᵀ/∂q_s`."""
    q0, q1, q2, q3 = q
    return np.array(
        [
            [[q0, q3, -q2], [-q3, q0, q1], [q2, -q1, q0]],
            [[q1, q2, q3], [q2, -q1, q0], [q3, -q0, -q1]],
            [[-q2, q1, -q0], [q1, q2, q3], [q0, q3, -q2]],
            [[-q3, q0, q1], [-q0, -q3, q2], [q1, q2, q3]],
        ]
    )


def test_printed_quaternion_derivatives_are_half_of_the_quadratic_form():
    q = np.array([0.3, -0.5, 0.7, 0.2])  # not unit: the extension off the sphere matters
    jac = jax.jacfwd(lambda q: quaternion_matrix(q).T)(jnp.asarray(q))  # (3, 3, 4)
    np.testing.assert_allclose(
        np.moveaxis(np.asarray(jac), -1, 0), 2 * thesis_dRt_dq(q), atol=1e-15
    )
    u = q / np.linalg.norm(q)
    np.testing.assert_allclose(quaternion_matrix(u), quaternion.to_matrix(u), atol=10 * EPS)


def thesis_3_29(r, q, rk):
    """`(∂V/∂r_j, ∂V/∂q_j)` from (3.29)–(3.30), loop by loop, in the thesis's variables
    (particle at `r + R(q)ᵀ rᵏ`), with its printed `∂R(q)ᵀ/∂q_s` doubled."""
    n, n_p = r.shape[0], rk.shape[0]
    Rt = [np.asarray(quaternion_matrix(jnp.asarray(qj))).T for qj in q]
    x = lambda j, k: r[j] + Rt[j] @ rk[k]  # noqa: E731
    dr, dq = np.zeros((n, 3)), np.zeros((n, 4))
    for i in range(n):
        dM = 2 * thesis_dRt_dq(q[i])
        for j in (i - 1, i + 1):
            if not 0 <= j < n:
                continue
            for k in range(n_p):  # V_ij = V_ji: k on body i, l on body j
                for l in range(n_p):
                    d = x(i, k) - x(j, l)
                    A = lj_prime_np(np.linalg.norm(d)) / np.linalg.norm(d)
                    dr[i] += A * d
                    dq[i] += A * np.einsum("a,sab,b->s", d, dM, rk[k])
    return dr, dq


def test_quaternion_gradients_match_thesis_3_29():
    chain = ParticleChain(tetrahedron(), LJ)
    r, R = random_chain(jax.random.PRNGKey(6), 4)
    q = quaternion.from_matrix(R)
    D = np.diag([1.0, -1.0, -1.0, -1.0])  # our q ↔ the thesis's q̄
    dr, dq = thesis_3_29(np.asarray(r), np.asarray(q) @ D, np.asarray(chain.body.r))
    dVdr, dVdq = chain.quaternion_gradients(r, q)
    assert rel(dVdr, dr) < 1e-12
    assert rel(dVdq, dq @ D) < 1e-12
    # same potential as the matrix form at unit q
    assert float(chain.quaternion_potential(r, q)) == pytest.approx(
        float(chain.potential(r, R)), rel=1e-13
    )


# --- bad chains -----------------------------------------------------------------------------


def test_overlapping_chain_rejected_naming_the_bodies():
    chain = ParticleChain(tetrahedron(), LJ)
    r, R = random_chain(jax.random.PRNGKey(7), 6, angle=0.0, jitter=0.0)
    chain.check_configuration(r, R)  # spacing 2.2: closest particles ≈ 1.2 σ
    with pytest.raises(ValueError, match=r"bodies 3 and 4 of the chain overlap: particle \d"):
        chain.check_configuration(r.at[4].set(r[3] + jnp.array([0.3, 0.0, 0.0])), R)
    with pytest.raises(ValueError, match="NaN or inf"):
        chain.check_configuration(r.at[2, 1].set(jnp.nan), R)
    with pytest.raises(ValueError, match="not orthonormal"):
        chain.check_configuration(r, R.at[1].set(2 * R[1]))
    # a generic V(r): only coincident particles are rejected unless min_distance is given
    soft = ParticleChain(tetrahedron(), lambda d: jnp.exp(-d))
    near = r.at[4].set(r[3] + jnp.array([0.3, 0.0, 0.0]))
    soft.check_configuration(near, R)
    with pytest.raises(ValueError, match="bodies 3 and 4"):
        soft.check_configuration(r.at[4].set(r[3]), R)
    with pytest.raises(ValueError, match=r"min_distance = 0.5\b"):
        ParticleChain(tetrahedron(), lambda d: jnp.exp(-d), min_distance=0.5).check_configuration(
            near, R
        )

    class Soft(eqx.Module):  # a potential of one's own that declares its core, as LJ does
        def __call__(self, d):
            return jnp.exp(-d)

        def core_distance(self):
            return 0.5

    with pytest.raises(ValueError, match=r"min_distance = 0.5\b"):
        ParticleChain(tetrahedron(), Soft()).check_configuration(near, R)
    with pytest.raises(Exception, match="overlap"):  # traced: raised in the graph
        jax.block_until_ready(
            jax.jit(lambda r, R: (chain.check_configuration(r, R), chain.potential(r, R))[1])(
                near, R
            )
        )
    with pytest.raises(ValueError, match=r"r \(N\+2, 3\) and R \(N\+2, 3, 3\)"):
        chain.potential(r, R[:-1])


# --- transformations and precision ----------------------------------------------------------


def test_vmap_equals_loop_and_jit_equals_eager():
    chain = ParticleChain(disc(8, a=0.5, t=0.1), LennardJones(jnp.asarray(1e-2), jnp.asarray(0.6)))
    keys = jax.random.split(jax.random.PRNGKey(8), 3)
    rs, Rs = jax.vmap(lambda k: random_chain(k, 5, spacing=1.4, jitter=0.05))(keys)
    batched = jax.vmap(chain.gradients)(rs, Rs)
    V = jax.vmap(chain.potential)(rs, Rs)
    jitted = jax.jit(ParticleChain.gradients)
    # same arithmetic; XLA may order a batched reduction differently: a few eps
    for i in range(3):
        assert float(V[i]) == pytest.approx(float(chain.potential(rs[i], Rs[i])), rel=1e-13)
        for b, e, j in zip(batched, chain.gradients(rs[i], Rs[i]), jitted(chain, rs[i], Rs[i])):
            assert rel(b[i], e) < 1e-13
            assert rel(j, e) < 1e-13


def test_float32_close_to_float64():
    body64 = tetrahedron()
    r, R = random_chain(jax.random.PRNGKey(9), 6)
    body32 = ParticleBody.from_particles(body64.m.astype(jnp.float32), body64.r.astype(jnp.float32))
    lj32 = LennardJones(jnp.asarray(5.0, jnp.float32), jnp.asarray(1.0, jnp.float32))
    chain32, chain64 = ParticleChain(body32, lj32), ParticleChain(body64, LJ)
    r32, R32 = r.astype(jnp.float32), R.astype(jnp.float32)
    # one program per dtype (eagerly, one per op)
    both = eqx.filter_jit(lambda chain, r, R: (chain.potential(r, R), chain.gradients(r, R)))
    V32, (g32r, g32R) = both(chain32, r32, R32)
    assert V32.dtype == g32r.dtype == g32R.dtype == jnp.float32
    assert np.isfinite(V32) and np.all(np.isfinite(g32r)) and np.all(np.isfinite(g32R))
    V64, (g64r, g64R) = both(chain64, r, R)
    # positions carry ~eps32 = 1.2e-7 relative error; LJ's steepest term (σ/r)¹³ magnifies
    # it ~13×, over 80 pair terms of both signs: 1e-4 leaves a margin of a few tens
    assert float(V32) == pytest.approx(float(V64), rel=1e-4)
    assert rel(g32r, g64r) < 1e-4
    assert rel(g32R, g64R) < 1e-4


def test_blocked_sum_equals_one_shot():
    """A chain long enough for the blocked potential (CPU; `bodies_per_block`, 700 tetrahedra:
    699 × 16 = 11 184 ≥ `MIN_BLOCKED_PAIR_TERMS` pair terms, blocks of 80 with a remainder):
    potential, gradients and a JVP equal the one-shot program's (`bodies_per_block=0`) to
    round-off of the sum (a different summation order: 1e-13 relative), vmapped too."""
    blocked = ParticleChain(tetrahedron(), LJ)
    one_shot = ParticleChain(tetrahedron(), LJ, bodies_per_block=0)
    assert blocked.resolved_bodies_per_block(700) == 80
    assert one_shot.resolved_bodies_per_block(700) == 0
    r, R = random_chain(jax.random.PRNGKey(11), 700)
    dr = jax.random.normal(jax.random.PRNGKey(12), r.shape)
    rs, Rs = jnp.stack([r, r + 0.01]), jnp.stack([R, R])

    # each chain's four results in one program (eagerly, every op of the blocked scan and
    # its derivatives compiled a program of its own)
    @eqx.filter_jit
    def everything(chain, r, R, dr, rs, Rs):
        _, tangent = jax.jvp(lambda x: chain.potential(x, R), (r,), (dr,))
        V, vmapped = chain.potential(r, R), jax.vmap(chain.potential)(rs, Rs)
        return V, chain.gradients(r, R), tangent, vmapped

    V_b, g_b, jb, vmapped_b = everything(blocked, r, R, dr, rs, Rs)
    V_o, g_o, jo, vmapped_o = everything(one_shot, r, R, dr, rs, Rs)
    assert float(V_b) == pytest.approx(float(V_o), rel=1e-13)
    for b, o in zip(g_b, g_o):
        assert rel(b, o) < 1e-13
    assert float(jb) == pytest.approx(float(jo), rel=1e-12)
    np.testing.assert_allclose(vmapped_b, vmapped_o, rtol=1e-13)
