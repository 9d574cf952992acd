"""Two rigid bodies coupled by a ball-and-socket joint, free in space (Dixon §8; Patrick 1989;
Grossman, Krishnaprasad & Marsden 1988), reduced by the joint and the fixed centre of mass.

Body `i` has mass `m_i`, inertia tensor `𝕀_i` about its own centre of mass and the joint at
`d_i` from its centre of mass (body-`i` frame). With the joint `x_1 + R_1d_1 = x_2 + R_2d_2`
and the system's centre of mass at rest at the origin, the centres of mass are
`x_1 = (m_2/m) r`, `x_2 = −(m_1/m) r` with `r = R_2d_2 − R_1d_1`, and the kinetic energy is

    T = Σ_i ½ Ω_iᵀ 𝕀̂_i Ω_i − ε a_1ᵀ Λ a_2,   a_i = d_i × Ω_i,  ε = m_1m_2/m,  Λ = R_1ᵀR_2,
    𝕀̂_i = 𝕀_i + ε(|d_i|² − d_id_iᵀ)   (the augmented inertia),

i.e. `T = ½ ΩᵀM(Λ)Ω` with the 6×6 mass matrix `M = [[𝕀̂_1, C], [Cᵀ, 𝕀̂_2]]`, `C = ε d̂_1Λd̂_2`.
(Dixon's modified inertia `Î_i = I_i − (m_i²/m)D_ii` is the Moser–Veselov mass matrix of
`𝕀̂_i` when `I_i` is the mass matrix `∫ℓℓᵀdm` about the *joint*: `J(𝕀̂_i) = J(𝕀_i) + εd_id_iᵀ`.)
The body momenta `Π_i = ∂T/∂Ω_i` obey the Euler–Poincaré equations

    Π̇_i = Π_i × Ω_i + τ_i,  τ_1 = −ε a_1 × Λa_2,  τ_2 = −ε a_2 × Λᵀa_1,
    Ṙ_1 = R_1Ω̂_1,  Λ̇ = ΛΩ̂_2 − Ω̂_1Λ,

(`τ_i` = ∂T/∂Λ paired with the variations `δΛ = −ξ̂_1Λ`, `δΛ = Λξ̂_2`; checked against
autodiff in tests/test_dmv_coupled.py). They keep the energy `T` and the total spatial angular
momentum `π = R_1Π_1 + R_2Π_2` (`R_2 = R_1Λ`), whose norm is Dixon's Casimir
`‖M_1 + ΛM_2Λᵀ‖` (Figure 12). Their discrete mechanics, DMV's: `models.coupled_moser_veselov`.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from .. import _checks, _linalg
from .._checks import is_concrete
from ..lie import so3
from .base import Check, event_ndims, finite, rotation_checks, spd3_checks
from .structures import AbstractCoupledBodies


class CoupledBodiesState(NamedTuple):
    """`R (..., 3, 3)` attitude of body 1; `Lambda (..., 3, 3)` the relative orientation
    `R_1ᵀR_2` (body 2's attitude in body 1's frame, advected); `Pi (..., 2, 3)` the body
    angular momenta `Π_1, Π_2`, each in its own body's frame."""

    R: jax.Array
    Lambda: jax.Array
    Pi: jax.Array


class CoupledBodies(AbstractCoupledBodies):
    """Two rigid bodies and a ball-and-socket joint.

    **Fields:** `inertia (2, 3, 3)` inertia tensors about each body's centre of mass (body
    frames); `mass (2,)`; `joint (2, 3)`, `d_i`: the joint seen from body `i`'s centre of
    mass, in body `i`'s frame.
    """

    state_type: ClassVar[type] = CoupledBodiesState
    inertia: jax.Array
    mass: jax.Array
    joint: jax.Array

    def __check_init__(self):
        shapes = (jnp.shape(self.inertia), jnp.shape(self.mass), jnp.shape(self.joint))
        if shapes[0][-3:] != (2, 3, 3) or shapes[1][-1:] != (2,) or shapes[2][-2:] != (2, 3):
            raise ValueError(
                "CoupledBodies needs inertia (..., 2, 3, 3), mass (..., 2), joint (..., 2, 3); "
                "got " + ", ".join(map(str, shapes))
            )
        if is_concrete(self.inertia, self.mass, self.joint):  # at once, not only at simulate
            _checks.raise_at_once(_checks.model_parameter_checks, self)

    def parameter_checks(self) -> list[Check]:
        """Each body's inertia is a rigid body's (SPD, triangle inequality); masses positive
        and finite; joint vectors finite."""
        I, m, d = self.inertia, self.mass, self.joint
        flags = lambda c: jnp.any(c.bad, axis=-1)  # noqa: E731  (either body fails)
        per_body = [
            Check(flags(c), "CoupledBodies: " + c.message) for c in spd3_checks(I, "inertia")
        ]
        return [
            *per_body,
            Check(
                ~jnp.all(jnp.isfinite(m) & (m > 0), axis=-1),
                "CoupledBodies: masses must be positive and finite",
            ),
            Check(~finite(d, 2), "CoupledBodies: joint contains NaN or inf"),
        ]

    @property
    def reduced_mass(self):
        """`ε = m_1m_2/(m_1 + m_2)`."""
        return self.mass[0] * self.mass[1] / (self.mass[0] + self.mass[1])

    def augmented_inertia(self):
        """`𝕀̂_i = 𝕀_i + ε(|d_i|² − d_id_iᵀ)`, `(2, 3, 3)`."""
        d = self.joint
        eye = jnp.broadcast_to(jnp.eye(3, dtype=d.dtype), (2, 3, 3))
        dd = d[:, :, None] * d[:, None, :]
        return self.inertia + self.reduced_mass * (
            jnp.sum(d * d, axis=-1)[:, None, None] * eye - dd
        )

    def coupling(self, Lambda):
        """`C = ε d̂_1 Λ d̂_2`, the off-diagonal block of the mass matrix."""
        return self.reduced_mass * so3.hat(self.joint[0]) @ Lambda @ so3.hat(self.joint[1])

    def mass_matrix(self, Lambda):
        """The 6×6 `M(Λ)` with `T = ½ ΩᵀMΩ`, `Ω = (Ω_1, Ω_2)`."""
        Ih, C = self.augmented_inertia(), self.coupling(Lambda)
        return jnp.block([[Ih[0], C], [C.T, Ih[1]]])

    def angular_velocity(self, Lambda, Pi):
        """`(Ω_1, Ω_2) = M(Λ)⁻¹(Π_1, Π_2)`, `(2, 3)`."""
        return _linalg.solve(self.mass_matrix(Lambda), Pi.reshape(6)).reshape(2, 3)

    def kinetic_energy(self, Lambda, Pi):
        return 0.5 * jnp.sum(Pi * self.angular_velocity(Lambda, Pi))

    def joint_torques(self, Lambda, Omega):
        """`(τ_1, τ_2)`: `τ_1 = −ε a_1 × Λa_2`, `τ_2 = −ε a_2 × Λᵀa_1`, `a_i = d_i × Ω_i`."""
        a1, a2 = jnp.cross(self.joint[0], Omega[0]), jnp.cross(self.joint[1], Omega[1])
        eps = self.reduced_mass
        return -eps * jnp.stack([jnp.cross(a1, Lambda @ a2), jnp.cross(a2, Lambda.T @ a1)])

    def vector_field(self, t, state: CoupledBodiesState) -> CoupledBodiesState:
        """`(Ṙ_1, Λ̇, Π̇)` of the continuous equations (module docstring), for references."""
        del t
        R, Lam, Pi = state
        Om = self.angular_velocity(Lam, Pi)
        dPi = jnp.cross(Pi, Om) + self.joint_torques(Lam, Om)
        dLam = Lam @ so3.hat(Om[1]) - so3.hat(Om[0]) @ Lam
        return CoupledBodiesState(R @ so3.hat(Om[0]), dLam, dPi)

    def spatial_momentum(self, state: CoupledBodiesState):
        """Total spatial angular momentum `π = R_1(Π_1 + ΛΠ_2)`."""
        R, Lam, Pi = state
        return R @ (Pi[0] + Lam @ Pi[1])

    def invariants(self, t, state: CoupledBodiesState) -> dict[str, jax.Array]:
        """Energy `K` (= `H`, no potential), total spatial momentum `pi1..3` and its norm
        `pi_norm` (Dixon's Casimir `‖M_1 + ΛM_2Λᵀ‖`), and `RtR_error`, the larger distance of
        `R_1` and `Λ` from SO(3)."""
        del t
        K = self.kinetic_energy(state.Lambda, state.Pi)
        pi = self.spatial_momentum(state)
        err = jnp.maximum(so3.orthogonality_error(state.R), so3.orthogonality_error(state.Lambda))
        return {
            "K": K,
            "H": K,
            "pi1": pi[0],
            "pi2": pi[1],
            "pi3": pi[2],
            "pi_norm": jnp.linalg.norm(pi),
            "RtR_error": err,
        }

    def check_state_shapes(self, state: CoupledBodiesState) -> None:
        check_coupled_state_shapes(state)

    def state_checks(self, state: CoupledBodiesState, t=None) -> list[Check]:
        return coupled_state_checks(state)

    def state_event_ndims(self) -> CoupledBodiesState:
        return event_ndims(CoupledBodiesState, R=2, Lambda=2, Pi=2)


def check_coupled_state_shapes(state: CoupledBodiesState) -> None:
    """`ValueError` unless `R`, `Lambda` are `(..., 3, 3)` and `Pi` `(..., 2, 3)`, with the
    same leading (ensemble) axes."""
    R, Lam, Pi = state
    if R.shape[-2:] != (3, 3) or Lam.shape != R.shape or Pi.shape != R.shape[:-2] + (2, 3):
        raise ValueError(
            "coupled-bodies state needs R (..., 3, 3), Lambda (..., 3, 3), Pi (..., 2, 3); "
            f"got {R.shape}, {Lam.shape}, {Pi.shape}"
        )


def coupled_state_checks(state: CoupledBodiesState) -> list[Check]:
    """`R`, `Lambda` rotations (to √eps), `Pi` finite."""
    return [
        *rotation_checks(state.R, "R"),
        *rotation_checks(state.Lambda, "Lambda"),
        Check(~finite(state.Pi, 2), "coupled-bodies Pi contains NaN or inf"),
    ]


def check_coupled_state(state: CoupledBodiesState):
    """`ValueError` unless the (concrete) state passes the shape and value checks above."""
    check_coupled_state_shapes(state)
    _checks.raise_at_once(coupled_state_checks, state)
