"""A rigid body with a fixed point (Krysl §3, eq. 7): body momentum `Π`, attitude `R`.

    Π̇ = Π × Ω + T(t, R, Π),   Ṙ = R Ω̂,   Ω = 𝕀⁻¹Π.

The inertia `𝕀` is a full symmetric positive-definite `(3, 3)` body tensor. The body torque `T`
is the sum of the torque of a potential `V(t, R)` (by autodiff, `T = −2 vee(Rᵀ ∂V/∂R)`) and an
optional user torque `T(t, R, Π)`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _linalg
from ..lie import so3
from .base import (
    Check,
    axis_index,
    event_ndims,
    finite,
    rotation_checks,
    spd3_checks,
)
from .structures import AbstractLiePoissonBody


class RigidBodyState(NamedTuple):
    """Attitude `R (..., 3, 3)` (body → space) and body angular momentum `Pi (..., 3)`."""

    R: jax.Array
    Pi: jax.Array


class AbstractPotential(eqx.Module):
    """A potential energy `V(t, R)` of the attitude; array fields are sweepable parameters.

    What the flow in it conserves (`RigidBody.conserved_quantities`): `autonomous`, whether
    `V` does not depend on `t` (then `H` is conserved; the default, `False`, claims nothing);
    `symmetry_axis()`, a spatial axis about which turning the body leaves `V` unchanged
    (then the spatial momentum along it is conserved), or `None`; `uniform_gravity`, whether
    `V = up · (R c)` with fields `up` and `weighted_com` (`c`), which DMV integrates."""

    autonomous: ClassVar[bool] = False
    # `V = up · (R c)`, uniform gravity, with the fields `up (3,)` and `weighted_com (3,)` (`c`):
    # what DMV's kicks and the heavy top's Casimirs need (`HeavyTopPotential`)
    uniform_gravity: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, t, R):
        """Scalar potential energy at time `t` and attitude `R (3, 3)`."""

    def symmetry_axis(self) -> jax.Array | None:
        """A spatial axis `a (3,)` with `V(t, exp(θâ) R) = V(t, R)` for every `θ`, or `None`."""
        return None


class HeavyTopPotential(AbstractPotential):
    """Uniform gravity: `V = up · (R c)`, with `c = m g χ` the weighted centre of mass (body).

    Krysl §5.2–5.3 (spatial torque `t = −20 R(:,3) × e3`) is `c = (0, 0, 20)`, `up = e3`.
    """

    autonomous: ClassVar[bool] = True
    uniform_gravity: ClassVar[bool] = True
    weighted_com: jax.Array
    up: jax.Array

    def __call__(self, t, R):
        del t
        return jnp.dot(self.up, R @ self.weighted_com)

    def symmetry_axis(self) -> jax.Array:
        """`up`: gravity does not change under turns about the vertical."""
        return self.up


class AxialPowerPotential(AbstractPotential):
    """`V = coulomb/u + wall/u¹⁰` with `u = offset + R₃₃` (Krysl §5.4, Holder et al.).

    The spatial torque of this potential is
    `t = (−coulomb u⁻² − 10 wall u⁻¹¹)·(−R₂₃, R₁₃, 0)`; Krysl prints
    `(−u⁻² + 0.01 u⁻¹¹)(−R₂₃, R₁₃, 0)`, i.e. `coulomb = 1, wall = −0.001`. See
    `jaxrigid.cases.krysl` for the sign of the printed torque against the paper's words.
    """

    autonomous: ClassVar[bool] = True
    coulomb: jax.Array
    wall: jax.Array
    offset: jax.Array

    def symmetry_axis(self) -> jax.Array:
        """`e3`: `R₃₃ = e3·R e3` does not change under turns about the spatial e3."""
        return jnp.array([0.0, 0.0, 1.0])

    def __call__(self, t, R):
        del t
        u = self.offset + R[2, 2]
        return self.coulomb / u + self.wall / u**10


def potential_conserves(potential: AbstractPotential | None) -> frozenset[str]:
    """What a body's flow keeps of `H` and the spatial momentum `pi1..3` in `potential`
    alone (no other torque): `H` if it is autonomous (or absent), and the component along
    its symmetry axis where that is a coordinate axis `e_k` (`pik`)."""
    if potential is None:
        return frozenset({"H"})
    kept = {"H"} if potential.autonomous else set()
    k = axis_index(potential.symmetry_axis())
    if k is not None:
        kept.add(f"pi{k + 1}")
    return frozenset(kept)


class RigidBody(AbstractLiePoissonBody):
    """A rigid body about a fixed point.

    **Fields:** `inertia (3, 3)` symmetric positive-definite body inertia; `potential` an
    `AbstractPotential` or `None`; `torque` a function `T(t, R, Pi) -> (3,)` (body frame) or
    `None`. The torque function is static configuration: sweep its parameters through a
    potential's array fields instead.
    """

    state_type: ClassVar[type] = RigidBodyState
    inertia: jax.Array
    potential: AbstractPotential | None = None
    torque: Callable | None = eqx.field(default=None, static=True)

    @property
    def has_torque(self) -> bool:
        return self.potential is not None or self.torque is not None

    @property
    def gravity(self) -> Any:
        potential = self.potential
        return potential if potential is not None and potential.uniform_gravity else None

    def angular_velocity(self, Pi):
        """`Ω = 𝕀⁻¹Π`, component by component (`_linalg.matvec`)."""
        return self.angular_velocity_map()(Pi)

    def angular_velocity_map(self):
        """The map `Π ↦ 𝕀⁻¹Π` with `𝕀⁻¹` formed once: a step that evaluates `Ω` several times
        (a Newton residual, its Jacobian, the update) takes it once, and its program holds
        one inverse, not one per evaluation."""
        inverse = _linalg.inv3(self.inertia)
        return lambda Pi: _linalg.matvec(inverse, Pi)

    def body_torque(self, t, R, Pi):
        """Total body torque `T(t, R, Π)` (zero for a torque-free body)."""
        T = jnp.zeros_like(Pi)
        if self.potential is not None:
            G = jax.grad(self.potential, argnums=1)(t, R)
            T = T - 2.0 * so3.vee(R.T @ G)
        if self.torque is not None:
            T = T + self.torque(t, R, Pi)
        return T

    def euler_rhs(self, t, R, Pi):
        """Right side of Euler's equation, `Π̇ = Π × Ω + T`."""
        return _linalg.cross(Pi, self.angular_velocity(Pi)) + self.body_torque(t, R, Pi)

    def kinetic_energy(self, Pi):
        return 0.5 * _linalg.dot(Pi, self.angular_velocity(Pi))

    def potential_energy(self, t, R):
        if self.potential is None:
            return jnp.zeros(R.shape[:-2], R.dtype)
        return self.potential(t, R)

    def invariants(self, t, state: RigidBodyState) -> dict[str, jax.Array]:
        """Scalars to monitor for one state: kinetic energy `K`, Hamiltonian `H = K + V`,
        spatial momentum `π = RΠ` (components `pi1..3`, norm `pi_norm`), and `RtR_error`;
        for a heavy top also the Casimirs `Pi_dot_Gamma` = ⟨Π, Γ⟩ and `Gamma_norm` = ‖Γ‖ of
        the direction of gravity in the body, `Γ = Rᵀ up/‖up‖` (Dixon §7, Figure 9)."""
        pi = state.R @ state.Pi
        K = self.kinetic_energy(state.Pi)
        extra = {}
        if self.gravity is not None:
            Gamma = state.R.T @ (self.gravity.up / jnp.linalg.norm(self.gravity.up))
            extra = {"Pi_dot_Gamma": jnp.dot(state.Pi, Gamma), "Gamma_norm": jnp.linalg.norm(Gamma)}
        return {
            "K": K,
            "H": K + self.potential_energy(t, state.R),
            "pi1": pi[0],
            "pi2": pi[1],
            "pi3": pi[2],
            "pi_norm": jnp.linalg.norm(pi),
            "RtR_error": so3.orthogonality_error(state.R),
            **extra,
        }

    def conserved_quantities(self) -> frozenset[str]:
        """Torque-free: all of `invariants`. In a potential (`potential_conserves`): `H` if
        it is autonomous, the spatial momentum `pik` along its symmetry axis where that is
        `e_k`, and for a heavy top `Pi_dot_Gamma` (`⟨Π, Γ⟩ = π·up/|up|`, the vertical
        spatial momentum); not `K`, `pi_norm` nor the other components. Under a user's
        `torque`, none of these. Always `RtR_error`, and `Gamma_norm` (`|Rᵀ up|/|up|`: one
        for a rotation)."""
        kept = {"RtR_error"}
        if self.gravity is not None:
            kept.add("Gamma_norm")
        if self.torque is None:
            kept |= potential_conserves(self.potential)
            if self.potential is None:
                kept |= {"K", "pi1", "pi2", "pi3", "pi_norm"}
            elif self.gravity is not None:
                kept.add("Pi_dot_Gamma")
        return frozenset(kept)

    def vector_field(self, t, state: RigidBodyState) -> RigidBodyState:
        """`(Ṙ, Π̇)` of eq. (7), for reference integrators that work in the embedding space."""
        Omega = self.angular_velocity(state.Pi)
        return RigidBodyState(state.R @ so3.hat(Omega), self.euler_rhs(t, state.R, state.Pi))

    def state_event_ndims(self) -> RigidBodyState:
        return event_ndims(RigidBodyState, R=2, Pi=1)

    def check_state_shapes(self, state) -> None:
        R, Pi = state
        if R.shape[-2:] != (3, 3) or Pi.shape[-1:] != (3,) or R.shape[:-2] != Pi.shape[:-1]:
            raise ValueError(
                f"rigid-body state needs R (..., 3, 3) and Pi (..., 3), got {R.shape}, {Pi.shape}"
            )
        if jnp.shape(self.inertia)[-2:] != (3, 3):
            raise ValueError(f"inertia must have shape (..., 3, 3), got {jnp.shape(self.inertia)}")
        if self.torque is not None:  # a user's function: its shape, not a broadcasting error
            one = jax.ShapeDtypeStruct((), R.dtype), jax.ShapeDtypeStruct((3, 3), R.dtype)
            out = jax.eval_shape(self.torque, *one, jax.ShapeDtypeStruct((3,), Pi.dtype))
            if getattr(out, "shape", None) != (3,):
                shown = getattr(out, "shape", type(out).__name__)
                raise ValueError(
                    f"RigidBody's torque T(t, R, Pi) must return a body vector of shape (3,) "
                    f"for one member, got {shown}"
                )

    def parameter_checks(self) -> list[Check]:
        """The inertia is a rigid body's: SPD and obeying the triangle inequality."""
        return spd3_checks(self.inertia)

    def state_checks(self, state, t=None) -> list[Check]:
        """`R` a rotation to √eps, `Π` finite."""
        return [
            *rotation_checks(state.R, "R0"),
            Check(~finite(state.Pi, 1), "Pi0 contains NaN or inf"),
        ]
