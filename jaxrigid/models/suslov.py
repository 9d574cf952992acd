"""Suslov's problem (Putkaradze & Rogers 2018, App. A, (A.34)–(A.38)): a rigid body about a
fixed point whose body angular velocity is constrained by `⟨Ω, ξ⟩ = 0`, `ξ` a body vector,
constant (Suslov 1902) or time-varying `ξ(t)`:

    𝕀Ω̇ = (𝕀Ω) × Ω + λ ξ,                                                   (A.36)
    λ = −(⟨Ω, ξ̇⟩ + ⟨(𝕀Ω) × Ω, 𝕀⁻¹ξ⟩) / ⟨ξ, 𝕀⁻¹ξ⟩,                            (A.37)
    q̇ = ½ q Ω♯.                                                               (D.21)

The constraint force `λξ` does no work on an admissible `Ω` (`⟨λξ, Ω⟩ = 0`), so the energy
`½ Ω·𝕀Ω` is conserved for constant and time-varying `ξ` alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from .base import Check, event_ndims, finite, spd3_checks
from .nonholonomic import callable_parameter, quaternion_rate
from .structures import AbstractAttitudeQuaternion


class SuslovState(NamedTuple):
    """`q (..., 4)` attitude quaternion (w, x, y, z), body → space; `Omega (..., 3)` body
    angular velocity."""

    q: jax.Array
    Omega: jax.Array


class Suslov(AbstractAttitudeQuaternion):
    """Suslov's problem, (A.36)–(A.38).

    **Fields:** `inertia (3, 3)` SPD body inertia; `xi`, the constraint vector: an array `(3,)`
    (constant) or a callable `ξ(t) -> (3,)` (an `equinox.Module` keeps its arrays traced; `ξ̇`
    by autodiff). Methods take one member (`jax.vmap` for an ensemble).
    """

    state_type: ClassVar[type] = SuslovState
    time_dependent: ClassVar[bool] = True  # the vector field takes `t`
    inertia: jax.Array
    xi: jax.Array | Callable

    def __init__(self, inertia, xi):
        self.inertia = jnp.asarray(inertia)
        self.xi = callable_parameter(xi) if callable(xi) else jnp.asarray(xi)

    @property
    def time_varying(self) -> bool:
        return callable(self.xi)

    def constraint_vector(self, t):
        """`(ξ(t), ξ̇(t))`, each `(3,)`."""
        if not self.time_varying:
            return self.xi, jnp.zeros_like(self.xi)
        t = jnp.asarray(t)
        t = t if jnp.issubdtype(t.dtype, jnp.inexact) else t.astype(self.inertia.dtype)
        return jax.jvp(self.xi, (t,), (jnp.ones_like(t),))

    def multiplier(self, t, Omega):
        """`λ` of (A.37)."""
        xi, xi_dot = self.constraint_vector(t)
        Pi = self.inertia @ Omega
        Iinv_xi = jnp.linalg.solve(self.inertia, xi)
        return -(jnp.dot(Omega, xi_dot) + jnp.dot(jnp.cross(Pi, Omega), Iinv_xi)) / jnp.dot(
            xi, Iinv_xi
        )

    def omega_dot(self, t, Omega):
        """`Ω̇ = 𝕀⁻¹((𝕀Ω) × Ω + λξ)`, (A.38)."""
        xi, _ = self.constraint_vector(t)
        rhs = jnp.cross(self.inertia @ Omega, Omega) + self.multiplier(t, Omega) * xi
        return jnp.linalg.solve(self.inertia, rhs)

    def angular_velocity(self, state: SuslovState):
        """The body angular velocity `Ω` (`q̇ = ½ q Ω♯`): the Lie-group methods (`RKMK2/4/8`)
        advance `q` by the exponential of it."""
        return state.Omega

    def vector_field(self, t, state: SuslovState) -> SuslovState:
        """`(q̇, Ω̇)` of one member: (D.21) and (A.38)."""
        return SuslovState(quaternion_rate(state.q, state.Omega), self.omega_dot(t, state.Omega))

    def energy(self, Omega):
        """`½ Ω·𝕀Ω` (the Lagrangian: conserved)."""
        return 0.5 * jnp.dot(Omega, self.inertia @ Omega)

    def invariants(self, t, state: SuslovState) -> dict[str, jax.Array]:
        """`energy`, `constraint` (`⟨Ω, ξ(t)⟩`) and `quaternion_norm_error` (`||q| − 1|`) of one
        member."""
        xi, _ = self.constraint_vector(t)
        return {
            "energy": self.energy(state.Omega),
            "constraint": jnp.dot(state.Omega, xi),
            "quaternion_norm_error": jnp.abs(jnp.linalg.norm(state.q) - 1.0),
        }

    def state_event_ndims(self) -> SuslovState:
        return event_ndims(SuslovState, q=1, Omega=1)

    def check_state_shapes(self, state) -> None:
        q, Omega = state
        if jnp.shape(q)[-1:] != (4,) or jnp.shape(Omega)[-1:] != (3,):
            raise ValueError(
                f"Suslov state needs q (..., 4) and Omega (..., 3), got "
                f"{jnp.shape(q)}, {jnp.shape(Omega)}"
            )
        if jnp.shape(self.inertia)[-2:] != (3, 3):
            raise ValueError(f"inertia must have shape (3, 3), got {jnp.shape(self.inertia)}")
        if not callable(self.xi) and jnp.shape(self.xi)[-1:] != (3,):  # `not time_varying`
            raise ValueError(f"xi must have shape (3,), got {jnp.shape(self.xi)}")

    def parameter_checks(self) -> list[Check]:
        """𝕀 a rigid body's inertia; a constant `ξ` finite and nonzero."""
        checks = spd3_checks(self.inertia)
        if not self.time_varying:
            norm = jnp.linalg.norm(self.xi, axis=-1)
            checks.append(Check(~(norm > 0), "xi must be finite and nonzero", norm))
        return checks

    def constraint_checks(self, t, state) -> list[Check]:
        """`|⟨Ω, ξ(t)⟩| ≤ √eps |Ω| |ξ(t)|` (flags over leading axes)."""
        if self.time_varying:
            xi = jnp.vectorize(lambda t: self.constraint_vector(t)[0], signature="()->(k)")(t)
        else:
            xi = self.xi
        shape = jnp.broadcast_shapes(jnp.shape(state.Omega), jnp.shape(xi))
        Omega, xi = jnp.broadcast_to(state.Omega, shape), jnp.broadcast_to(xi, shape)
        eps = float(jnp.finfo(Omega.dtype).eps)
        scale = jnp.linalg.norm(Omega, axis=-1) * jnp.linalg.norm(xi, axis=-1)
        residual = jnp.abs(jnp.sum(Omega * xi, axis=-1))
        return [
            Check(
                residual > eps**0.5 * scale,
                "state is off the constraint: |⟨Ω, ξ⟩| > √eps |Ω| |ξ|",
                residual,
            )
        ]

    def state_checks(self, state, t=None) -> list[Check]:
        """Finite, `|q| = 1` to √eps, and `⟨Ω, ξ(t)⟩ = 0` to √eps `|Ω| |ξ|` (`simulate` passes
        the start time; without `t` a time-varying `ξ` is not checked)."""
        eps = float(jnp.finfo(state.q.dtype).eps)
        ok = finite(state.q, 1) & finite(state.Omega, 1)
        q_err = jnp.abs(jnp.linalg.norm(state.q, axis=-1) - 1.0)
        checks = [
            Check(~ok, "Suslov state contains NaN or inf"),
            Check(q_err > eps**0.5, "q must be a unit quaternion (to √eps)", q_err),
        ]
        if not self.time_varying:
            checks += self.constraint_checks(jnp.zeros((), state.Omega.dtype), state)
        elif t is not None:
            checks += self.constraint_checks(jnp.asarray(t, state.Omega.dtype), state)
        return checks
