"""The heavy symmetric top of Chaurasia (2012) §2.5 in its three representations, one case each.

One case per representation, not one case with a representation parameter: the state (Euler
angles, a quaternion pair, a pair of 3×3 matrices) and the method family differ —
`symmetric-top-euler-angles` and `symmetric-top-quaternion` are canonical Hamiltonian systems
(family `"hamiltonian"`: gauss6 and the other tableau methods), `symmetric-top-rattle` is a
constrained system (family `"constrained"`: `rattle` only), so `--method` is checked against
the right registry and `--set` stays numeric.

Values of §2.5: m = 1.5 kg, l = 1.33 m, θ = 45°, ψ = φ = 1°, θ̇ = ψ̇ = 1 s⁻¹, φ̇ = 100 s⁻¹,
h = 0.005 (Gauss6). Not printed, chosen here: g = 9.81 m s⁻², I = 5, I₃ = 1 kg m² (the top
of Simo & Wong / Krysl §5.2), horizons, and RATTLE's step (0.001: second order at a spin of
100 s⁻¹). The quaternion form's constraint manifold is unstable (|q| − 1 grows like
e^{σt}, σ = 2√(m g l (q₀² + q₃²)) ≈ 8 s⁻¹ here; see `tests/test_symmetric_top.py`), so its
default horizon is short.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import is_concrete
from ..lie import quaternion, so3
from ..models import symmetric_top as st
from ..models.constrained_rigid_body import ConstrainedRigidBody, ConstrainedRigidBodyState
from ..models.hamiltonian import CanonicalState, HamiltonianSystem
from ..models.rigid_body import HeavyTopPotential
from .base import Case, Parameter, builds, member_noise
from .hamiltonian import perturb_canonical

_REF = "Chaurasia, M.Tech. thesis, IIT Kanpur (2012)"

PARAMETERS = {
    "m": Parameter(1.5, "mass (kg)"),
    "g": Parameter(9.81, "gravity (m/s², not printed in §2.5)"),
    "l": Parameter(1.33, "fixed point to centre of mass (m)"),
    "I": Parameter(5.0, "moment of inertia I1 = I2 about the fixed point (not printed)"),
    "I3": Parameter(1.0, "moment of inertia about the symmetry axis (not printed)"),
    "theta0": Parameter(45.0, "initial tilt θ from the vertical (degrees)"),
    "psi0": Parameter(1.0, "initial precession angle ψ (degrees)"),
    "phi0": Parameter(1.0, "initial spin angle φ (degrees)"),
    "theta_dot0": Parameter(1.0, "initial θ̇ (1/s)"),
    "psi_dot0": Parameter(1.0, "initial ψ̇ (1/s)"),
    "phi_dot0": Parameter(100.0, "initial φ̇ (1/s)"),
}


def initial_values(p):
    """`(angles (rad), rates, TopParams)` from a resolved parameter dict."""
    angles = jnp.deg2rad(jnp.array([p["theta0"], p["psi0"], p["phi0"]]))
    rates = jnp.array([p["theta_dot0"], p["psi_dot0"], p["phi_dot0"]])
    return angles, rates, st.top_params(p["m"], p["g"], p["l"], p["I"], p["I3"])


@builds(HamiltonianSystem)
def _build_euler(p):
    """Concrete `theta0` outside (0°, 180°): `ValueError`. Traced (a sweep): such a member's
    angles `q0` are NaN (the Euler-angle chart is singular there), which `simulate`'s state
    check refuses ("q0 or p0 contains NaN or inf")."""
    angles, rates, params = initial_values(p)
    inside = (0.0 < angles[0]) & (angles[0] < np.pi)
    if is_concrete(inside) and not bool(inside):
        raise ValueError("theta0 must lie strictly between 0 and 180 degrees (Euler angles)")
    model, state = st.euler_angle_top(angles, rates, params)
    return model, state._replace(q=jnp.where(inside, state.q, jnp.nan))


@builds(HamiltonianSystem)
def _build_quaternion(p):
    return st.quaternion_top(*initial_values(p))


@builds(ConstrainedRigidBody, potential=HeavyTopPotential)
def _build_rattle(p):
    return st.rotation_matrix_top(*initial_values(p))


def _rotations(rng, spread, n):
    """`n` rotation vectors `spread·N(0, 1)`, the first zero (member 0 unperturbed)."""
    w = spread * member_noise(rng, n, 3)
    return jnp.asarray(w), jnp.asarray(1.0 + spread * member_noise(rng, n))


def perturb_quaternion(state: CanonicalState, rng, spread, n):
    """Members on the constraint manifold: the attitude turned in space by `exp(spread·N)`,
    the body momentum `Π = ½ (Ĝ(q)g)₁..₃` scaled by `1 + spread·N`."""
    w, scale = _rotations(rng, spread, n)
    q = quaternion.multiply(quaternion.from_rotation_vector(w), state.q[None, :])
    Pi = 0.5 * (st.G_hat(state.q) @ state.p)[1:]
    g = jax.vmap(st.quaternion_momentum)(q, scale[:, None] * Pi[None, :])
    return CanonicalState(q, g)


def perturb_rattle(state: ConstrainedRigidBodyState, rng, spread, n):
    """Members on the constraint manifold: `(E R, s E P)` with `E = exp(spread·N)` a turn in
    space and `s = 1 + spread·N` (both keep `RᵀR = 1` and the tangency of `P`)."""
    w, scale = _rotations(rng, spread, n)
    E = so3.exp(w)
    return ConstrainedRigidBodyState(E @ state.R, scale[:, None, None] * (E @ state.P))


def _com_observables(com):
    def observables(model, ts, states, params, values):
        c = np.asarray(com(states, st.top_params(*(params[k] for k in ("m", "g", "l", "I", "I3")))))
        return {
            "com_final": c[..., -1, :],
            "com_z_min": c[..., 2].min(-1),
            "com_z_max": c[..., 2].max(-1),
        }

    return observables


_DESCRIPTION = (
    "Heavy symmetric top about a fixed point, §2.5's values (m = 1.5, l = 1.33, θ = 45°, "
    "ψ = φ = 1°, θ̇ = ψ̇ = 1, φ̇ = 100; g = 9.81, I = 5, I3 = 1 chosen, the thesis omits them). "
    "Observables: the centre of mass at the end (com_final) and the range of its height. "
)

CASES = [
    Case(
        name="symmetric-top-euler-angles",
        title="Symmetric top in Euler angles (Chaurasia §2.5, Figures 2.13–2.14)",
        reference=_REF + ", §2.5",
        description=_DESCRIPTION + "Canonical (θ, ψ, φ; p_θ, p_ψ, p_φ); p_ψ, p_φ conserved.",
        family="hamiltonian",
        default_method="gauss6",
        default_dt=0.005,
        default_t_end=10.0,
        parameters=PARAMETERS,
        si_units=True,
        build=_build_euler,
        perturb=perturb_canonical,
        observables=_com_observables(lambda s, p: st.com_from_euler_angles(s.q, p)),
    ),
    Case(
        name="symmetric-top-quaternion",
        title="Symmetric top, unit quaternion with multiplier (Chaurasia §3.3.8, Figure 3.3)",
        reference=_REF + ", §3.3, §3.4.1",
        description=_DESCRIPTION + "State (q, g) in R⁴ × R⁴ with λ = −½ qᵀ∂V/∂q (3.32); "
        "invariants q_norm = |q| and qTg. The manifold is unstable (|q| − 1 grows ~e^{8t}).",
        family="hamiltonian",
        default_method="gauss6",
        default_dt=0.005,
        default_t_end=1.0,
        parameters=PARAMETERS,
        si_units=True,
        build=_build_quaternion,
        perturb=perturb_quaternion,
        observables=_com_observables(lambda s, p: st.com_from_quaternion(s.q, p)),
    ),
    Case(
        name="symmetric-top-rattle",
        title="Symmetric top in rotation matrices, RATTLE (Chaurasia App. B, Figures 2.18–2.19)",
        reference=_REF + ", §3.2, App. B; Leimkuhler & Reich (2004) §8.2",
        description=_DESCRIPTION + "State (R, P = Ṙ J) in R³ˣ³ × R³ˣ³ with RᵀR = 1 and "
        "RᵀPJ⁻¹ + J⁻¹PᵀR = 0 (invariants RtR_error, tangency_error).",
        family="constrained",
        default_method="rattle",
        default_dt=0.001,
        default_t_end=10.0,
        parameters=PARAMETERS,
        si_units=True,
        build=_build_rattle,
        perturb=perturb_rattle,
        observables=_com_observables(lambda s, p: st.com_from_rotation_matrix(s.R, p)),
    ),
]
