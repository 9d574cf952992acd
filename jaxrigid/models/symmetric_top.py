"""The heavy symmetric top in three representations (Chaurasia 2012, §2.5, §3.2, §3.3, App. B).

A top with a fixed point: principal moments `I₁ = I₂ = I`, `I₃` about that point, mass `m`,
centre of mass `χ = (0, 0, l)` on the symmetry axis (body frame), gravity `g` along `−e₃`:
`V = m g l (R χ̂)·e₃`. The attitude `R` maps body to space (DESIGN.md); the thesis's §2.5
matrix maps space to body, so ours is its transpose, `R = R_z(ψ) R_y(θ) R_z(φ)` with active
rotations: `θ` the tilt from the vertical (nutation), `ψ` precession, `φ` spin. The centre of
mass is `R χ = l (sin θ cos ψ, sin θ sin ψ, cos θ)`.

1. **Euler angles** (§2.5): canonical `q = (θ, ψ, φ)`, `p = (p_θ, p_ψ, p_φ)`,
   `H = p_θ²/2I + (p_ψ − p_φ cos θ)²/(2I sin²θ) + p_φ²/2I₃ + m g l cos θ`, singular at
   `sin θ = 0`. The thesis integrates the equivalent ODE (2.7)–(2.8) in the angle rates
   (`euler_angle_ode`); its printed form has slips, corrected here (the Hamiltonian form is derived
   afresh from `T = ½ ωᵀ𝕀ω`, and tested against `ω` from the attitude by autodiff):
   (2.1) first component is `θ̇ sin φ − ψ̇ sin θ cos φ` (printed `θ̇ cos φ …`); the (2,1)
   entry of §2.5's `R` is `−cos θ sin φ cos ψ − cos φ sin ψ`; (2.7), (2.8) and the ODE list
   miss a factor `ω_z` in the `(I₃/I − 1)` terms (`θ̈ = m g l sin θ/I + ψ̇² sin θ cos θ −
   (I₃/I) ω_z ψ̇ sin θ`, `ψ̈ = θ̇ (I₃ ω_z − 2I ψ̇ cos θ)/(I sin θ)`); `ṅ₃ = n₁n₂ sin θ` is
   wrong (`φ̈ = ψ̇θ̇ sin θ − ψ̈ cos θ`) but unused, since `φ̇ = ω_z − ψ̇ cos θ`.
2. **Unit quaternion with the multiplier of §3.3.8**: `q ∈ ℝ⁴`, conjugate `g`,
   `H = ½ gᵀμ⁻¹(q)g + V(q) + λ(q)(qᵀq − 1)`, `μ⁻¹ = ¼ Ĝᵀ Ĵ⁻¹ Ĝ` (3.16)–(3.19),
   `λ(q) = −½ qᵀ∂V/∂q` (3.32), `V` through the Euler map (3.14). With `λ` a function of `q`
   this is an ordinary Hamiltonian on ℝ⁸ (what §3.4 differentiates, with its `dλ` term), so
   every canonical method applies and the symplectic ones stay symplectic; the manifold
   `|q| = 1, qᵀg = 0` is invariant under its exact flow. Appendix A's (A.17) prints all four
   quaternion components with `(φ + ψ)/2`; the i- and j-components need `(ψ − φ)/2`: the
   initial quaternion is taken from the attitude matrix instead.
3. **Rotation matrix** (§3.2, App. B; Leimkuhler & Reich 2004 §8.2): `R ∈ ℝ³ˣ³` with the six
   constraints `RᵀR = 1`, `P = Ṙ J`, `H = ½ tr(P J⁻¹ Pᵀ) + V(R)`, momentum constraint (3.7)
   `RᵀPJ⁻¹ + J⁻¹PᵀR = 0`. The "mass matrix" `J` of `T = ½ tr(Ṙ J Ṙᵀ)` is the body's second
   moment `Σ m X Xᵀ = ½ tr(𝕀) 1 − 𝕀` (so `𝕀₁ = J₂ + J₃`, …): §3.2 calls it the principal moment
   of inertia matrix, which used literally gives the wrong dynamics. The model is
   `jaxrigid.models.constrained_rigid_body.ConstrainedRigidBody`, integrated by
   `jaxrigid.integrators.RATTLE`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._checks import is_concrete
from ..lie import quaternion, so3
from .constrained_rigid_body import ConstrainedRigidBody, check_constrained_state
from .hamiltonian import CanonicalState, HamiltonianSystem
from .rigid_body import HeavyTopPotential, RigidBody, RigidBodyState


class TopParams(NamedTuple):
    """Mass `m`, gravity `g`, centre-of-mass distance `l`, moments `I = I₁ = I₂` and `I3`
    about the fixed point (scalars)."""

    m: jax.Array
    g: jax.Array
    l: jax.Array
    I: jax.Array
    I3: jax.Array


def top_params(m=1.5, g=9.81, l=1.33, I=5.0, I3=1.0) -> TopParams:
    """§2.5 prints `m = 1.5 kg`, `l = 1.33 m`; it prints neither `g` nor the moments: ours are
    `g = 9.81` and Simo–Wong's / Krysl's top `I = 5, I₃ = 1` (kg m²)."""
    return TopParams(*(jnp.asarray(x, dtype=float) for x in (m, g, l, I, I3)))


def _e3_like(x):
    return jnp.zeros((3,), x.dtype).at[2].set(1.0)


def inertia_tensor(params: TopParams):
    """`𝕀 = diag(I, I, I₃)` about the fixed point, `(3, 3)`."""
    return jnp.diag(jnp.stack([params.I, params.I, params.I3]))


# --- attitude and initial values ----------------------------------------------------------


def _rot_z(a):
    c, s, z, o = jnp.cos(a), jnp.sin(a), jnp.zeros_like(a), jnp.ones_like(a)
    return jnp.stack([jnp.stack([c, -s, z]), jnp.stack([s, c, z]), jnp.stack([z, z, o])])


def _rot_y(a):
    c, s, z, o = jnp.cos(a), jnp.sin(a), jnp.zeros_like(a), jnp.ones_like(a)
    return jnp.stack([jnp.stack([c, z, s]), jnp.stack([z, o, z]), jnp.stack([-s, z, c])])


def attitude_from_euler_angles(angles):
    """`R = R_z(ψ) R_y(θ) R_z(φ)` (body → space) for `angles = (θ, ψ, φ)`: the transpose of
    §2.5's ZYZ frame rotation. `(3,) -> (3, 3)`."""
    theta, psi, phi = angles[0], angles[1], angles[2]
    return _rot_z(psi) @ _rot_y(theta) @ _rot_z(phi)


def body_angular_velocity(angles, rates):
    """`Ω = vee(Rᵀ Ṙ)` for Euler angles and their rates, by autodiff of the attitude (§2.5,
    eq. 2.1 corrected). `(3,), (3,) -> (3,)`."""
    R, dR = jax.jvp(attitude_from_euler_angles, (angles,), (rates,))
    return so3.vee(R.T @ dR)


def euler_angle_momenta(angles, rates, params: TopParams):
    """Canonical momenta `(p_θ, p_ψ, p_φ)` of the angle rates `(θ̇, ψ̇, φ̇)`."""
    theta = angles[0]
    omega_z = rates[2] + rates[1] * jnp.cos(theta)
    p_phi = params.I3 * omega_z
    p_psi = params.I * rates[1] * jnp.sin(theta) ** 2 + p_phi * jnp.cos(theta)
    return jnp.stack([params.I * rates[0], p_psi, p_phi])


# --- 1. Euler angles ----------------------------------------------------------------------


def euler_angle_hamiltonian(q, p, params: TopParams):
    """`H(θ, ψ, φ; p_θ, p_ψ, p_φ)` of the heavy symmetric top (module docstring, item 1)."""
    theta = q[0]
    c, s = jnp.cos(theta), jnp.sin(theta)
    kinetic = (
        p[0] ** 2 / (2 * params.I)
        + (p[1] - p[2] * c) ** 2 / (2 * params.I * s**2)
        + p[2] ** 2 / (2 * params.I3)
    )
    return kinetic + params.m * params.g * params.l * c


def euler_angle_ode(y, params: TopParams):
    """§2.5's first-order system in `y = (θ, ψ, φ, θ̇, ψ̇, φ̇)`, slips corrected (module docstring):
    `θ̈ = m g l sin θ/I + ψ̇² sin θ cos θ − (I₃/I) ω_z ψ̇ sin θ`,
    `ψ̈ = θ̇ (I₃ ω_z − 2I ψ̇ cos θ)/(I sin θ)`, `φ̈ = ψ̇ θ̇ sin θ − ψ̈ cos θ`, `ω_z = φ̇ + ψ̇ cos θ`.
    The same flow as `euler_angle_hamiltonian`, in the angle rates. `(6,) -> (6,)`."""
    theta, dtheta, dpsi, dphi = y[0], y[3], y[4], y[5]
    c, s = jnp.cos(theta), jnp.sin(theta)
    omega_z = dphi + dpsi * c
    ratio = params.I3 / params.I
    ddtheta = params.m * params.g * params.l * s / params.I + dpsi**2 * s * c
    ddtheta = ddtheta - ratio * omega_z * dpsi * s
    ddpsi = dtheta * (ratio * omega_z - 2 * dpsi * c) / s
    ddphi = dpsi * dtheta * s - ddpsi * c
    return jnp.stack([dtheta, dpsi, dphi, ddtheta, ddpsi, ddphi])


def euler_angle_invariants(q, p, params=None):
    """`p_ψ` (vertical angular momentum) and `p_φ` (spin momentum `I₃ω_z`, eq. 2.4)."""
    del q, params
    return {"p_psi": p[1], "p_phi": p[2]}


def com_from_euler_angles(q, params: TopParams):
    """Centre of mass `l (sin θ cos ψ, sin θ sin ψ, cos θ)`, `(..., 3) -> (..., 3)`."""
    theta, psi = q[..., 0], q[..., 1]
    s = jnp.sin(theta)
    return params.l * jnp.stack([s * jnp.cos(psi), s * jnp.sin(psi), jnp.cos(theta)], axis=-1)


# --- 2. quaternion with the multiplier of §3.3.8 ------------------------------------------


def G_hat(q):
    """`Ĝ(q)` of (3.16), `(4,) -> (4, 4)`: `Ĝ q̇ = (qᵀq̇, ω/2)` with `ω` the body angular
    velocity (A.12); orthogonal for `|q| = 1`."""
    q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
    return jnp.stack(
        [
            jnp.stack([q0, q1, q2, q3]),
            jnp.stack([-q1, q0, q3, -q2]),
            jnp.stack([-q2, -q3, q0, q1]),
            jnp.stack([-q3, q2, -q1, q0]),
        ]
    )


def quaternion_rotation(q):
    """The Euler map (3.14) `R(q)` (body → space for `|q| = 1`), in the thesis's form
    `2q₀² + 2q₁² − 1, …` (which fixes the potential's extension off `|q| = 1`)."""
    q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
    return 2 * jnp.stack(
        [
            jnp.stack([q0**2 + q1**2 - 0.5, q1 * q2 - q0 * q3, q1 * q3 + q0 * q2]),
            jnp.stack([q1 * q2 + q0 * q3, q0**2 + q2**2 - 0.5, q2 * q3 - q0 * q1]),
            jnp.stack([q3 * q1 - q0 * q2, q3 * q2 + q0 * q1, q0**2 + q3**2 - 0.5]),
        ]
    )


def inverse_mass_matrix(q, params: TopParams):
    """`μ⁻¹(q) = ¼ Ĝ(q)ᵀ Ĵ⁻¹ Ĝ(q)`, `Ĵ = diag(1, I, I, I₃)` (3.17), (3.19)."""
    G = G_hat(q)
    return 0.25 * G.T @ (_J_hat_inverse(params)[:, None] * G)


def _J_hat_inverse(params: TopParams):
    return 1.0 / jnp.stack([jnp.ones_like(params.I), params.I, params.I, params.I3])


def _G_hat_apply(q, g):
    """`Ĝ(q) g` without forming `Ĝ` (the integrators differentiate it twice)."""
    q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
    g0, g1, g2, g3 = g[0], g[1], g[2], g[3]
    return jnp.stack(
        [
            q0 * g0 + q1 * g1 + q2 * g2 + q3 * g3,
            -q1 * g0 + q0 * g1 + q3 * g2 - q2 * g3,
            -q2 * g0 - q3 * g1 + q0 * g2 + q1 * g3,
            -q3 * g0 + q2 * g1 - q1 * g2 + q0 * g3,
        ]
    )


def quaternion_kinetic_energy(q, g, params: TopParams):
    """`T = ½ gᵀμ⁻¹(q)g = ⅛ Σₖ (Ĝ(q)g)ₖ² / Ĵₖ` (§3.3.2)."""
    v = _G_hat_apply(q, g)
    return 0.125 * jnp.sum(_J_hat_inverse(params) * v * v)


def quaternion_potential(q, params: TopParams):
    """`V(q) = m g l R(q)₃₃` (gravity on the centre of mass `R(q) χ`)."""
    return params.m * params.g * params.l * quaternion_rotation(q)[2, 2]


def quaternion_potential_gradient(q, params: TopParams):
    """`∂V/∂q = 4 m g l (q₀, 0, 0, q₃)` (§3.3.6 for the top: `R₃₃ = 2q₀² + 2q₃² − 1`)."""
    mgl = params.m * params.g * params.l
    zero = jnp.zeros_like(q[0])
    return 4 * mgl * jnp.stack([q[0], zero, zero, q[3]])


def quaternion_multiplier(q, params: TopParams):
    """`λ = −½ qᵀ ∂V/∂q` (3.32): keeps `qᵀg = 0` under the flow. (The gradient is written out,
    not autodiffed: the integrators differentiate `H` twice more.)"""
    return -0.5 * jnp.dot(q, quaternion_potential_gradient(q, params))


def quaternion_hamiltonian(q, g, params: TopParams):
    """`H = ½ gᵀμ⁻¹(q)g + V(q) + λ(q)(qᵀq − 1)` (3.26) with `λ(q)` of (3.32)."""
    kinetic = quaternion_kinetic_energy(q, g, params)
    constraint = quaternion_multiplier(q, params) * (q @ q - 1.0)
    return kinetic + quaternion_potential(q, params) + constraint


def quaternion_invariants(q, g, params=None):
    """`q_norm = |q|` and `qTg = qᵀg`: the constraints of (3.25), kept by the exact flow."""
    del params
    return {"q_norm": jnp.sqrt(q @ q), "qTg": q @ g}


def quaternion_momentum(q, Pi):
    """`g = μ(q) q̇ = 2 Ĝ(q)ᵀ (0, Π)` for body angular momentum `Π` (§3.3.2), `qᵀg = 0`."""
    return 2.0 * G_hat(q).T @ jnp.concatenate([jnp.zeros_like(Pi[:1]), Pi])


def com_from_quaternion(q, params: TopParams):
    """Centre of mass `R(q) χ = l R(q)[:, 3]` (3.14), `(..., 4) -> (..., 3)`."""
    q0, q1, q2, q3 = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    col = jnp.stack([q1 * q3 + q0 * q2, q2 * q3 - q0 * q1, q0**2 + q3**2 - 0.5], axis=-1)
    return 2 * params.l * col


# --- 3. rotation matrix, constrained in R^{3x3} (RATTLE): models.constrained_rigid_body --


def com_from_rotation_matrix(R, params: TopParams):
    """Centre of mass `R χ = l R[:, 3]`, `(..., 3, 3) -> (..., 3)`."""
    return params.l * R[..., :, 2]


# --- the top in each representation, from Euler angles and rates --------------------------


def _initial(angles, rates, params):
    angles, rates = jnp.asarray(angles, dtype=float), jnp.asarray(rates, dtype=float)
    R0 = attitude_from_euler_angles(angles)
    Pi0 = inertia_tensor(params) @ body_angular_velocity(angles, rates)
    return angles, rates, R0, Pi0


def heavy_top_potential(params: TopParams) -> HeavyTopPotential:
    """`V(R) = e₃ · R (m g χ)`: the same potential for `RigidBody` and `ConstrainedRigidBody`."""
    c = params.m * params.g * params.l * _e3_like(params.l)
    return HeavyTopPotential(c, _e3_like(params.l))


def euler_angle_top(angles, rates, params: TopParams):
    """`(HamiltonianSystem, CanonicalState)` in Euler angles `(θ, ψ, φ)` (radians) with rates
    `(θ̇, ψ̇, φ̇)`."""
    angles, rates, _, _ = _initial(angles, rates, params)
    model = HamiltonianSystem(euler_angle_hamiltonian, params, euler_angle_invariants)
    return model, CanonicalState(angles, euler_angle_momenta(angles, rates, params))


def quaternion_top(angles, rates, params: TopParams):
    """`(HamiltonianSystem, CanonicalState)` in `(q, g)`, `q` from the attitude matrix."""
    _, _, R0, Pi0 = _initial(angles, rates, params)
    q0 = quaternion.from_matrix(R0)
    model = HamiltonianSystem(quaternion_hamiltonian, params, quaternion_invariants)
    return model, CanonicalState(q0, quaternion_momentum(q0, Pi0))


def rotation_matrix_top(angles, rates, params: TopParams):
    """`(ConstrainedRigidBody, ConstrainedRigidBodyState)`, for `RATTLE`."""
    _, _, R0, Pi0 = _initial(angles, rates, params)
    moments = jnp.stack([params.I, params.I, params.I3])
    model = ConstrainedRigidBody.from_inertia(moments, heavy_top_potential(params))
    state = model.state_from_body_momentum(R0, Pi0)
    if is_concrete(state):  # traced: simulate's state checks, the same ones
        check_constrained_state(model, state)
    return model, state


def rigid_body_top(angles, rates, params: TopParams):
    """`(RigidBody, RigidBodyState)`: the same top in Krysl's `(R, Π)` form, e.g. for the
    independent reference `jaxrigid.reference.rigid_body_reference`."""
    _, _, R0, Pi0 = _initial(angles, rates, params)
    return RigidBody(inertia_tensor(params), heavy_top_potential(params)), RigidBodyState(R0, Pi0)
