"""The models' vector fields against the papers' formulas, written by hand in numpy
(`paper_vector_fields`, which imports nothing from jaxrigid): Krysl (2007) eq. (7) for the free
and torqued body, the heavy top (Krysl §5.2–5.3, Dixon §7), Krysl's Coulombic wall (§5.4, as
printed), and Dixon's two bodies with a ball-and-socket joint (§8, by Newton–Euler).

Tolerance: both sides evaluate the same closed-form expressions in float64 in a different
order (a cofactor inverse against LAPACK `solve`, autodiff of the potential against the printed
torque, the reduced Euler–Poincaré torques against Newton–Euler with the joint force), so they
differ by a few ulps times the condition numbers of the small linear systems (𝕀: ≤ 4 here;
the coupled bodies' 6×6 map `Ω ↦ Π`: ≤ 5 for these draws). Every difference is measured
against the size of the terms that make it up (`_scale`: products of absolute values, so that
a cancelling sum such as the wall's `−u⁻² + 0.01 u⁻¹¹` near its zero is judged by its terms).
Measured: ≤ 4e-16 relative for every case and seed. `RTOL = 1e-12` (~5000 ulps) leaves a wide
margin for other compilers and fused operations and is still ten orders of magnitude below
what a wrong sign or factor gives (relative mismatch 0.7–1.4, `test_wrong_*`).
"""

import jax.numpy as jnp
import numpy as np
import pytest
from paper_vector_fields import (
    E3,
    coupled_angular_velocity,
    coupled_kinetic_energy,
    coupled_spatial_momentum,
    dixon_coupled_bodies,
    dixon_heavy_top,
    krysl_coulomb_wall,
    krysl_heavy_top,
    krysl_rigid_body,
    krysl_top_spatial_torque,
)

from jaxrigid.models import CoupledBodies, RigidBody
from jaxrigid.models.coupled_bodies import CoupledBodiesState
from jaxrigid.models.rigid_body import AxialPowerPotential, HeavyTopPotential, RigidBodyState

RTOL = 1e-12
SEEDS = range(6)


def random_rotation(rng):
    Q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(r))
    return Q if np.linalg.det(Q) > 0 else -Q


def random_inertia(rng):
    """A physical inertia tensor with a non-diagonal part: `𝕀 = tr(J) − J` of a random SPD
    second moment `J = Q diag(j) Qᵀ` (so the triangle inequality holds), rotated by a random
    `Q`; principal moments in [1, 4], condition number ≤ 4."""
    j = rng.uniform(0.5, 2.0, 3)
    Q = random_rotation(rng)
    J = Q @ np.diag(j) @ Q.T
    return np.trace(J) * np.eye(3) - J


def rigid_state(rng, scale=3.0):
    return random_rotation(rng), scale * rng.standard_normal(3)


def _scale(*terms):
    """The size against which round-off is judged: the largest entry of any term."""
    return max(float(np.max(np.abs(np.asarray(t)))) for t in terms)


def mismatch(model_out, ref_out, scale):
    """`max |model − ref| / scale` over all components."""
    return (
        max(
            float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(model_out, ref_out)
        )
        / scale
    )


def rigid_scale(R, Pi, inertia, body_torque):
    Omega = np.linalg.solve(inertia, Pi)
    return _scale(np.abs(Pi)[:, None] * np.abs(Omega)[None, :], body_torque, Omega)


def rigid_field(model, R, Pi, t=0.3):
    out = model.vector_field(jnp.asarray(t), RigidBodyState(jnp.asarray(R), jnp.asarray(Pi)))
    return np.asarray(out.R), np.asarray(out.Pi)


# --- Krysl eq. (7): free and torqued body ------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_free_body_is_krysl_eq7(seed):
    rng = np.random.default_rng(seed)
    I = random_inertia(rng)
    R, Pi = rigid_state(rng)
    got = rigid_field(RigidBody(jnp.asarray(I)), R, Pi)
    ref = krysl_rigid_body(R, Pi, I)
    assert mismatch(got, ref, rigid_scale(R, Pi, I, 0.0)) < RTOL


def _user_torque(t, R, Pi):
    """Some body torque of `(t, R, Π)`, the model's `torque` hook."""
    return jnp.sin(t) * R[2, :] + 0.5 * jnp.cross(Pi, R[:, 0]) + jnp.array([0.1, -0.2, 0.3])


def _user_torque_np(t, R, Pi):
    return np.sin(t) * R[2, :] + 0.5 * np.cross(Pi, R[:, 0]) + np.array([0.1, -0.2, 0.3])


@pytest.mark.parametrize("seed", SEEDS)
def test_torqued_body_is_krysl_eq7(seed):
    rng = np.random.default_rng(seed)
    I = random_inertia(rng)
    R, Pi = rigid_state(rng)
    T = _user_torque_np(0.3, R, Pi)
    got = rigid_field(RigidBody(jnp.asarray(I), torque=_user_torque), R, Pi, t=0.3)
    ref = krysl_rigid_body(R, Pi, I, T)
    assert mismatch(got, ref, rigid_scale(R, Pi, I, T)) < RTOL


# --- the heavy top: Krysl §5.2–5.3, Dixon §7 ---------------------------------------------------


def heavy_top_model(I, c, up):
    return RigidBody(jnp.asarray(I), HeavyTopPotential(jnp.asarray(c), jnp.asarray(up)))


def test_krysl_top_as_printed():
    """The case's data: `diag 𝕀 = (5, 5, 1)`, `t = −20 R(:,3) × e₃`."""
    rng = np.random.default_rng(10)
    I = np.diag([5.0, 5.0, 1.0])
    model = heavy_top_model(I, [0.0, 0.0, 20.0], [0.0, 0.0, 1.0])
    for _ in range(4):
        R, Pi = rigid_state(rng)
        t = -20.0 * np.cross(R[:, 2], E3)  # the printed formula, literally
        ref = krysl_rigid_body(R, Pi, I, R.T @ t)
        np.testing.assert_allclose(krysl_top_spatial_torque(R), t, rtol=0, atol=1e-14 * 20)
        assert mismatch(rigid_field(model, R, Pi), ref, rigid_scale(R, Pi, I, 20.0)) < RTOL


@pytest.mark.parametrize("seed", SEEDS)
def test_heavy_top_is_krysl_and_dixon(seed):
    """A general top: random `c = m g χ` (off the symmetry axis), random `up` (any length: a
    uniform field), random SPD inertia. Krysl's spatial form and Dixon's body form agree with
    each other and with the model."""
    rng = np.random.default_rng(seed)
    I = random_inertia(rng)
    c, up = 5.0 * rng.standard_normal(3), rng.standard_normal(3)
    R, Pi = rigid_state(rng)
    got = rigid_field(heavy_top_model(I, c, up), R, Pi)
    scale = rigid_scale(R, Pi, I, np.linalg.norm(c) * np.linalg.norm(up))
    krysl = krysl_heavy_top(R, Pi, I, c, up)
    Rdot, Mdot, Gammadot = dixon_heavy_top(R, Pi, I, c, up)
    assert mismatch(krysl, (Rdot, Mdot), scale) < RTOL
    assert mismatch(got, krysl, scale) < RTOL
    # Γ = Rᵀ up is advected: its rate from Ṙ is Dixon's Γ × Ω
    np.testing.assert_allclose(Rdot.T @ up, Gammadot, rtol=0, atol=RTOL * scale)


@pytest.mark.parametrize("factor", [-1.0, 2.0])
def test_wrong_heavy_top_is_caught(factor):
    """A top whose gravity torque is sign-flipped or doubled is far from the reference."""
    rng = np.random.default_rng(3)
    I = random_inertia(rng)
    c, up = 5.0 * rng.standard_normal(3), rng.standard_normal(3)
    R, Pi = rigid_state(rng)
    wrong = rigid_field(heavy_top_model(I, factor * c, up), R, Pi)
    scale = rigid_scale(R, Pi, I, np.linalg.norm(c) * np.linalg.norm(up))
    assert mismatch(wrong, krysl_heavy_top(R, Pi, I, c, up), scale) > 1e-2


# --- Krysl §5.4: the Coulombic wall as printed -------------------------------------------------


def coulomb_model(I, coulomb=1.0, wall=-0.001, offset=1.1):
    potential = AxialPowerPotential(*(jnp.asarray(x) for x in (coulomb, wall, offset)))
    return RigidBody(jnp.asarray(I), potential)


def coulomb_state(rng, offset):
    """A random state with `u = offset + R₃₃ ≥ 0.3` (the paper's runs keep u in [0.67, 2.1])."""
    while True:
        R, Pi = rigid_state(rng)
        if offset + R[2, 2] >= 0.3:
            return R, Pi


def coulomb_scale(R, Pi, I, offset, a, b):
    """Terms of the printed torque by absolute value (its two terms cancel near u⁹ = b/a)."""
    u = offset + R[2, 2]
    return rigid_scale(R, Pi, I, (abs(a) * u**-2 + abs(b) * u**-11) * np.abs(R[:2, 2]).max())


@pytest.mark.parametrize("seed", SEEDS)
def test_coulomb_wall_as_printed(seed):
    """The default parameters (`coulomb = 1`, `wall = −0.001`) give Krysl's printed torque
    `(−u⁻² + 0.01 u⁻¹¹)(−R₂₃, R₁₃, 0)`, `u = 1.1 + R₃₃`; the case's inertia and random ones."""
    rng = np.random.default_rng(seed)
    I = np.diag([2.0, 3.0, 4.5]) if seed == 0 else random_inertia(rng)
    R, Pi = coulomb_state(rng, 1.1)
    got = rigid_field(coulomb_model(I), R, Pi)
    ref = krysl_coulomb_wall(R, Pi, I)  # the printed numbers are its defaults
    assert mismatch(got, ref, coulomb_scale(R, Pi, I, 1.1, 1.0, 0.01)) < RTOL


@pytest.mark.parametrize("seed", SEEDS)
def test_coulomb_wall_other_parameters(seed):
    """`V = C/u + W/u¹⁰` has `dV/dR₃₃ = −C u⁻² − 10 W u⁻¹¹`; a body rotation `δR = R ŵ` changes
    `R₃₃` by `e₃ᵀRŵe₃ = w · (e₃ × Rᵀe₃)`, so the body torque is
    `T = −dV/dR₃₃ (e₃ × Rᵀe₃)` and the spatial one `t = RT = dV/dR₃₃ (−R₂₃, R₁₃, 0)`: the
    printed form with `coulomb = C`, `wall = −10 W` (derived by hand)."""
    rng = np.random.default_rng(100 + seed)
    I = random_inertia(rng)
    C, W, offset = rng.uniform(-2, 2), rng.uniform(-0.01, 0.01), rng.uniform(1.05, 2.0)
    R, Pi = coulomb_state(rng, offset)
    got = rigid_field(coulomb_model(I, C, W, offset), R, Pi)
    ref = krysl_coulomb_wall(R, Pi, I, offset, coulomb=C, wall=-10 * W)
    assert mismatch(got, ref, coulomb_scale(R, Pi, I, offset, C, 10 * W)) < RTOL


@pytest.mark.parametrize("coulomb, wall", [(-1.0, 0.001), (2.0, -0.002)])
def test_wrong_coulomb_wall_is_caught(coulomb, wall):
    """The torque sign-flipped (the paper's words' potential) or doubled is far off."""
    rng = np.random.default_rng(7)
    I = random_inertia(rng)
    R, Pi = coulomb_state(rng, 1.1)
    wrong = rigid_field(coulomb_model(I, coulomb, wall), R, Pi)
    ref = krysl_coulomb_wall(R, Pi, I)
    assert mismatch(wrong, ref, coulomb_scale(R, Pi, I, 1.1, 1.0, 0.01)) > 1e-2


# --- Dixon §8: coupled bodies ------------------------------------------------------------------


def coupled_problem(seed):
    rng = np.random.default_rng(seed)
    inertia = np.stack([random_inertia(rng), random_inertia(rng)])
    mass = rng.uniform(0.5, 2.0, 2)
    joint = rng.standard_normal((2, 3))
    R1, Lam = random_rotation(rng), random_rotation(rng)
    Pi = 2.0 * rng.standard_normal((2, 3))
    model = CoupledBodies(*(jnp.asarray(x) for x in (inertia, mass, joint)))
    return model, (inertia, mass, joint), (R1, Lam, Pi)


def coupled_field(model, R1, Lam, Pi):
    out = model.vector_field(
        jnp.asarray(0.0), CoupledBodiesState(*(jnp.asarray(x) for x in (R1, Lam, Pi)))
    )
    return np.asarray(out.R), np.asarray(out.Lambda), np.asarray(out.Pi)


def coupled_scale(params, R1, Lam, Pi):
    """`|Π||Ω|` bounds every term of `Π̇` (`Π × Ω` and the joint torques, which are `T`'s
    derivatives in `Λ` and `T = ½ Π·Ω`) and `|Ω|` those of `Ṙ`, `Λ̇`."""
    Omega = coupled_angular_velocity(R1, Lam, Pi, *params)
    return _scale(np.abs(Pi).max() * np.abs(Omega), Omega)


@pytest.mark.parametrize("seed", SEEDS)
def test_reference_coupled_bodies_conserve_energy_and_momentum(seed):
    """The hand-written reference itself: `dT/dt = 0` and `d(R₁Π₁ + R₂Π₂)/dt = 0` (Dixon Lemma
    8.1.1), by a central difference along its own field (error O(h²) ≈ 1e-10)."""
    _, params, (R1, Lam, Pi) = coupled_problem(seed)
    R1dot, Lamdot, Pidot = dixon_coupled_bodies(R1, Lam, Pi, *params)
    h = 1e-5

    def along(s):
        R1s, Lams, Pis = R1 + s * R1dot, Lam + s * Lamdot, Pi + s * Pidot
        Omega = coupled_angular_velocity(R1s, Lams, Pis, *params)
        return coupled_kinetic_energy(R1s, Lams, Omega, *params), coupled_spatial_momentum(
            R1s, Lams, Pis
        )

    (T1, m1), (T0, m0) = along(h), along(-h)
    scale = coupled_scale(params, R1, Lam, Pi)
    assert abs(T1 - T0) / (2 * h) < 1e-8 * scale
    assert np.max(np.abs(m1 - m0)) / (2 * h) < 1e-8 * scale
    Omega = coupled_angular_velocity(R1, Lam, Pi, *params)  # T = ½ Π·Ω
    T = coupled_kinetic_energy(R1, Lam, Omega, *params)
    assert abs(T - 0.5 * np.sum(Pi * Omega)) < 1e-13 * abs(T)


@pytest.mark.parametrize("seed", SEEDS)
def test_coupled_bodies_are_dixon_section8(seed):
    model, params, (R1, Lam, Pi) = coupled_problem(seed)
    got = coupled_field(model, R1, Lam, Pi)
    ref = dixon_coupled_bodies(R1, Lam, Pi, *params)
    assert mismatch(got, ref, coupled_scale(params, R1, Lam, Pi)) < RTOL


def test_coupled_case_is_dixon_section8():
    """The case's configuration (`d₁ = e₃`, `d₂ = −e₃`, `Λ = exp(θe₁)`, θ = π/2)."""
    inertia = np.stack([np.diag([2.0, 2.0, 1.0])] * 2)
    mass, joint = np.ones(2), np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    Lam = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    R1, Pi = np.eye(3), np.array([[0.5, 0.0, 1.0], [0.5, 0.0, 1.0]])
    params = (inertia, mass, joint)
    model = CoupledBodies(*(jnp.asarray(x) for x in params))
    got = coupled_field(model, R1, Lam, Pi)
    ref = dixon_coupled_bodies(R1, Lam, Pi, *params)
    assert mismatch(got, ref, coupled_scale(params, R1, Lam, Pi)) < RTOL


@pytest.mark.parametrize("factor", [-1.0, 2.0])
def test_wrong_coupled_torques_are_caught(factor):
    """The model's joint torques `τ = Π̇ − Π × Ω`, sign-flipped or doubled, are far off."""
    model, params, (R1, Lam, Pi) = coupled_problem(4)
    R1dot, Lamdot, Pidot = coupled_field(model, R1, Lam, Pi)
    Omega = coupled_angular_velocity(R1, Lam, Pi, *params)
    free = np.cross(Pi, Omega)
    wrong = (R1dot, Lamdot, free + factor * (Pidot - free))
    ref = dixon_coupled_bodies(R1, Lam, Pi, *params)
    assert mismatch(wrong, ref, coupled_scale(params, R1, Lam, Pi)) > 1e-2


def test_reference_imports_nothing_from_jaxrigid():
    import paper_vector_fields

    with open(paper_vector_fields.__file__) as f:
        imports = [line for line in f if line.startswith(("import ", "from "))]
    assert not any("jax" in line for line in imports), imports
