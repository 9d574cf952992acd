"""A rigid body about a fixed point as a constrained system in ℝ³ˣ³ (Chaurasia 2012, §3.2,
eqs. 3.5–3.10, App. B; Leimkuhler & Reich 2004 §8.2).

The attitude `R` with the six constraints `RᵀR = 1` and its conjugate momentum `P = Ṙ J`,
`H = ½ tr(P J⁻¹ Pᵀ) + V(R)`, tangency (3.7) `RᵀPJ⁻¹ + J⁻¹PᵀR = 0`. The "mass matrix" `J` of
`T = ½ tr(Ṙ J Ṙᵀ)` is the body's second moment `Σ m X Xᵀ = ½ tr(𝕀) 1 − 𝕀`
(`ConstrainedRigidBody.from_inertia`). Integrated by `jaxrigid.integrators.RATTLE`; the heavy
symmetric top in this form is `jaxrigid.models.symmetric_top.rotation_matrix_top`.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from .._checks import is_concrete
from ..lie import so3
from .base import Check, event_ndims, finite, rotation_checks
from .rigid_body import AbstractPotential, potential_conserves
from .structures import AbstractConstrainedBodies


class ConstrainedRigidBodyState(NamedTuple):
    """Attitude `R (..., 3, 3)` (body → space, `RᵀR = 1`) and its conjugate momentum
    `P = Ṙ J (..., 3, 3)` (tangent: `RᵀPJ⁻¹ + J⁻¹PᵀR = 0`)."""

    R: jax.Array
    P: jax.Array


class ConstrainedRigidBody(AbstractConstrainedBodies):
    """A rigid body about a fixed point as a constrained system in ℝ³ˣ³ (§3.2, eq. 3.5–3.10).

    **Fields:** `J (3,)` the principal second moments (the diagonal "mass matrix" of
    `T = ½ tr(Ṙ J Ṙᵀ)`, positive); `potential` an `AbstractPotential` `V(t, R)` or `None`.
    Build it from principal moments of inertia with `from_inertia`.
    """

    state_type: ClassVar[type] = ConstrainedRigidBodyState
    J: jax.Array
    potential: AbstractPotential | None = None

    @classmethod
    def from_inertia(cls, moments, potential=None) -> ConstrainedRigidBody:
        """From principal moments `(𝕀₁, 𝕀₂, 𝕀₃)`: `J = ½ tr(𝕀) − 𝕀`. `ValueError` unless
        `J > 0`, i.e. the strict triangle inequalities `𝕀ᵢ < 𝕀ⱼ + 𝕀ₖ` (a body, not a rod)."""
        moments = jnp.asarray(moments)
        if moments.shape[-1:] != (3,):
            raise ValueError(f"principal moments must have shape (..., 3), got {moments.shape}")
        J = 0.5 * jnp.sum(moments, axis=-1, keepdims=True) - moments
        if is_concrete(J) and not np.all(np.asarray(J) > 0):
            raise ValueError(
                f"principal moments {np.asarray(moments)} need 𝕀ᵢ < 𝕀ⱼ + 𝕀ₖ (J = ½ tr 𝕀 − 𝕀 > 0)"
            )
        return cls(J, potential)

    def _columns(self, M):
        """`J` laid along the columns of `M (..., 3, 3)` (explicitly broadcast)."""
        J = self.J[..., None, :]
        shape = jnp.broadcast_shapes(J.shape, M.shape)
        return jnp.broadcast_to(J, shape)

    @property
    def moments(self):
        """Principal moments of inertia `𝕀ᵢ = Jⱼ + Jₖ`, `(3,)`."""
        return jnp.sum(self.J, axis=-1, keepdims=True) - self.J

    def kinetic_energy(self, P):
        """`½ tr(P J⁻¹ Pᵀ)` (3.5)."""
        return 0.5 * jnp.sum(P * P / self._columns(P), axis=(-2, -1))

    def potential_energy(self, t, R):
        if self.potential is None:
            return jnp.zeros(R.shape[:-2], R.dtype)
        return self.potential(t, R)

    def potential_gradient(self, t, R):
        """`∂V/∂R (3, 3)` by autodiff (zero without a potential)."""
        if self.potential is None:
            return jnp.zeros_like(R)
        return jax.grad(self.potential, argnums=1)(t, R)

    # --- RATTLE's bodies (`AbstractConstrainedBodies`): one, turning about a fixed point ---

    def bodies(self, state: ConstrainedRigidBodyState):
        """`(r, p, R, P)` of the one body: `R[None]`, `P[None]`, and a centre at rest at 0."""
        zero = jnp.zeros((1, 3), state.R.dtype)
        return zero, zero, state.R[None], state.P[None]

    def with_bodies(self, state, r, p, R, P) -> ConstrainedRigidBodyState:
        del state, r, p
        return ConstrainedRigidBodyState(R[0], P[0])

    @property
    def mass(self):
        """`1` (the centre is held: its mass enters nothing)."""
        return jnp.ones((), jnp.result_type(self.J))

    @property
    def inverse_mass_diagonal(self):
        """`diag J⁻¹ (3,)`."""
        return 1.0 / self.J

    def masks(self, n_bodies: int, dtype):
        """The centre held, the attitude free: `(0, 1)`."""
        return jnp.zeros((n_bodies,), dtype), jnp.ones((n_bodies,), dtype)

    def potential_gradients(self, t, r, R):
        """`(0, ∂V/∂R)` of the one body, `((1, 3), (1, 3, 3))`."""
        return jnp.zeros_like(r), self.potential_gradient(t, R[0])[None]

    def body_angular_velocity(self, state: ConstrainedRigidBodyState):
        """`Ω = vee(RᵀṘ)`, `Ṙ = PJ⁻¹` (3.10d)."""
        return so3.vee(jnp.swapaxes(state.R, -1, -2) @ (state.P / self._columns(state.P)))

    def body_momentum(self, state: ConstrainedRigidBodyState):
        """`Π = 𝕀 Ω`."""
        Omega = self.body_angular_velocity(state)
        return jnp.broadcast_to(self.moments, Omega.shape) * Omega

    def state_from_body_momentum(self, R, Pi) -> ConstrainedRigidBodyState:
        """The tangent state `P = R Ω̂ J` with `Ω = 𝕀⁻¹Π`."""
        Omega = Pi / jnp.broadcast_to(self.moments, Pi.shape)
        return ConstrainedRigidBodyState(R, (R @ so3.hat(Omega)) * self._columns(R))

    def constraint_errors(self, state: ConstrainedRigidBodyState):
        """`(‖RᵀR − 1‖_F, ‖RᵀPJ⁻¹ + J⁻¹PᵀR‖_F)`: orthogonality and tangency (3.7)."""
        A = jnp.swapaxes(state.R, -1, -2) @ (state.P / self._columns(state.P))
        S = A + jnp.swapaxes(A, -1, -2)
        return so3.orthogonality_error(state.R), jnp.sqrt(jnp.sum(S * S, axis=(-2, -1)))

    def invariants(self, t, state: ConstrainedRigidBodyState) -> dict[str, jax.Array]:
        """`K`, `H = K + V`, spatial momentum `π = RΠ` (`pi1..3`), the constraint errors
        `RtR_error` and `tangency_error`."""
        K = self.kinetic_energy(state.P)
        pi = state.R @ self.body_momentum(state)
        RtR, tangency = self.constraint_errors(state)
        return {
            "K": K,
            "H": K + self.potential_energy(t, state.R),
            "pi1": pi[0],
            "pi2": pi[1],
            "pi3": pi[2],
            "RtR_error": RtR,
            "tangency_error": tangency,
        }

    def conserved_quantities(self) -> frozenset[str]:
        """Without a potential all of `invariants`; in one what `potential_conserves` says
        (`H`, the spatial momentum along its symmetry axis), not `K`. The constraint errors
        always."""
        kept = {"RtR_error", "tangency_error"} | potential_conserves(self.potential)
        if self.potential is None:
            kept |= {"K", "pi1", "pi2", "pi3"}
        return frozenset(kept)

    def state_event_ndims(self) -> ConstrainedRigidBodyState:
        return event_ndims(ConstrainedRigidBodyState, R=2, P=2)

    def check_state_shapes(self, state: ConstrainedRigidBodyState) -> None:
        R, P = state
        if R.shape[-2:] != (3, 3) or P.shape != R.shape:
            raise ValueError(
                f"state needs R and P of equal shape (..., 3, 3), got {R.shape}, {P.shape}"
            )

    def parameter_checks(self) -> list[Check]:
        """`J > 0` and finite (the strict triangle inequalities of the moments)."""
        return [
            Check(
                ~jnp.all(jnp.isfinite(self.J) & (self.J > 0), axis=-1),
                "ConstrainedRigidBody needs J = ½ tr 𝕀 − 𝕀 > 0 and finite (𝕀ᵢ < 𝕀ⱼ + 𝕀ₖ)",
            )
        ]

    def state_checks(self, state: ConstrainedRigidBodyState, t=None) -> list[Check]:
        """`R` a rotation and `P` tangent, each to `√eps` (relative to `1 + |Ω|` for the
        tangency)."""
        tol = float(jnp.finfo(state.R.dtype).eps) ** 0.5
        _, tangency = self.constraint_errors(state)
        scale = jnp.linalg.norm(self.body_angular_velocity(state), axis=-1) + 1.0
        return [
            *rotation_checks(state.R, "R0"),
            Check(~finite(state.P, 2), "P0 contains NaN or inf"),
            Check(
                tangency > tol * scale,
                f"P0 is not tangent: ‖RᵀPJ⁻¹ + J⁻¹PᵀR‖ > {tol:.2g}(1 + |Ω|)",
                tangency,
            ),
        ]


def check_constrained_state(model: ConstrainedRigidBody, state: ConstrainedRigidBodyState):
    """`ValueError` unless `R` is a rotation and `P` tangent, each to `√eps` (relative to
    `|Ω|` for the tangency), naming the first failing ensemble member (concrete states)."""
    model.check_state_shapes(state)
    _checks.raise_at_once(_checks.model_state_checks, model, state)
