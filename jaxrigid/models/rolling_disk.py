"""The rolling disk (Putkaradze & Rogers 2018, App. C): the ball of the model note with the
shell's centre of mass and every mass in the body plane (e₁, e₃), rolling about body e₂ in the
spatial plane (e₁, e₃). One scalar equation for the rolling angle `φ`.

Conventions of Appendix C: `Γ = Λᵀe₃ = (sin φ, 0, cos φ)`, so that
`sᵢ = (r sin φ + ζᵢ,₁, 0, r cos φ + ζᵢ,₃)` as in (C.4); i.e. `Λ` is the rotation by `φ`
counterclockwise in the (e₁, e₃) picture (e₁ to the right, e₃ up; about −e₂),
`Ω = −φ̇ e₂`, and rolling moves the centre by `ẋ = −r φ̇` (a counterclockwise roll goes left).
Planar vectors are stored as their (e₁, e₃) components.

With `𝕀₁₂ = 𝕀₂₃ = 0` the matrix of (B.8) splits ((C.2)), `A⁻¹e₂ = e₂/a₂₂` ((C.5)), and the e₂
row of (B.8) with `ω = Ω₂ = −φ̇` reads

    (d₂ + Σ mᵢ|sᵢ|²) φ̈ = Σ_{i=0..n} mᵢ [g sᵢ ∧ Γ − φ̇² r Γ ∧ χᵢ − 2φ̇ sᵢ·χ̇ᵢ + sᵢ ∧ χ̈ᵢ]
                          + r Γ̃ ∧ Γ,

`a ∧ b = a₃b₁ − a₁b₃ = (a × b)·e₂`, `−a₂₂ = d₂ + Σ mᵢ|sᵢ|²` ((C.4)), `Γ̃ = ΛᵀF` the body form of
the external force at the centre, `χ₀` fixed and `χᵢ(t) = ζᵢ(θᵢ(t))`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from .base import AbstractModel, Check, event_ndims, finite, known_zero
from .nonholonomic import callable_parameter


class RollingDiskState(NamedTuple):
    """Rolling angle `phi (...)`, its rate `phi_dot (...)`, and the centre's horizontal
    position `x (...)` (along e₁; the centre is at height r)."""

    phi: jax.Array
    phi_dot: jax.Array
    x: jax.Array


def wedge(a, b):
    """`a ∧ b = a₃b₁ − a₁b₃ = (a × b)·e₂` of planar vectors stored as (e₁, e₃) components."""
    return a[..., 1] * b[..., 0] - a[..., 0] * b[..., 1]


def rotation(phi):
    """`Λ` restricted to the plane: counterclockwise by `φ`, `(2, 2)` on (e₁, e₃) components."""
    c, s = jnp.cos(phi), jnp.sin(phi)
    return jnp.stack([jnp.stack([c, -s]), jnp.stack([s, c])])


class RollingDisk(AbstractModel):
    """The planar rolling disk of Appendix C (module docstring).

    **Fields:** `radius` r; `mass` m₀; `inertia` d₂, the moment about the rolling axis through
    the shell's centre of mass; `chi0 (2,)` χ₀ in body (e₁, e₃) components; `masses (n,)`;
    `rails`, n callables `ζᵢ(θ) -> (2,)` in the body plane; `control`, `θ(t) -> (n,)` (the masses
    are prescribed, as in the paper); `gravity` g along −e₃; `external_force (2,)` F at the
    centre, spatial (e₁, e₃). Methods take one member (`jax.vmap` for an ensemble).
    """

    state_type: ClassVar[type] = RollingDiskState
    time_dependent: ClassVar[bool] = True  # the vector field takes `t`
    radius: jax.Array
    mass: jax.Array
    inertia: jax.Array
    chi0: jax.Array
    masses: jax.Array
    rails: tuple
    control: Callable | None
    gravity: jax.Array
    external_force: jax.Array

    def __init__(
        self,
        radius,
        mass,
        inertia,
        chi0=(0.0, 0.0),
        masses=(),
        rails=(),
        control=None,
        gravity=9.81,
        external_force=(0.0, 0.0),
    ):
        self.radius = jnp.asarray(radius)
        self.mass = jnp.asarray(mass)
        self.inertia = jnp.asarray(inertia)
        self.chi0 = jnp.asarray(chi0)
        self.masses = jnp.asarray(masses).reshape(-1)
        self.rails = tuple(callable_parameter(r) for r in rails)
        self.control = callable_parameter(control)
        self.gravity = jnp.asarray(gravity)
        self.external_force = jnp.asarray(external_force)
        if self.masses.shape != (len(self.rails),):
            raise ValueError(
                f"one rail per mass: got {self.masses.shape[0]} masses and {len(self.rails)} rails"
            )
        if self.rails and self.control is None:
            raise ValueError("masses on rails need a control θ(t) -> (n,)")
        if self.chi0.shape != (2,) or self.external_force.shape != (2,):
            raise ValueError(
                "chi0 and external_force are planar (e₁, e₃) vectors of shape (2,), got "
                f"{self.chi0.shape}, {self.external_force.shape}"
            )

    def all_masses(self):
        return jnp.concatenate([self.mass[None], self.masses])

    def body_positions(self, t):
        """`χᵢ(t)`, `(n + 1, 2)`: χ₀ and `ζᵢ(θᵢ(t))`."""
        chis = [self.chi0]
        if self.rails:
            theta = jnp.reshape(self.control(t), (len(self.rails),))
            chis += [rail(theta[i]) for i, rail in enumerate(self.rails)]
        return jnp.stack(chis)

    def _body_jet(self, t):
        """`(χ, χ̇, χ̈)`, each `(n + 1, 2)`, by nested JVPs in time."""
        t = jnp.asarray(t)
        t = t if jnp.issubdtype(t.dtype, jnp.inexact) else t.astype(self.chi0.dtype)
        one = jnp.ones_like(t)
        first = lambda t: jax.jvp(self.body_positions, (t,), (one,))
        (chi, chi_dot), (_, chi_ddot) = jax.jvp(first, (t,), (one,))
        return chi, chi_dot, chi_ddot

    def phi_ddot(self, t, phi, phi_dot):
        """`φ̈`: the e₂ row of (B.8) divided by `a₂₂` of (C.4)–(C.5) (module docstring)."""
        chi, chi_dot, chi_ddot = self._body_jet(t)
        m = self.all_masses()
        Gamma = jnp.stack([jnp.sin(phi), jnp.cos(phi)])
        s = self.radius * Gamma[None, :] + chi
        Gamma_ext = rotation(phi).T @ self.external_force
        terms = (
            self.gravity * wedge(s, Gamma[None, :])
            - phi_dot**2 * self.radius * wedge(Gamma[None, :], chi)
            - 2.0 * phi_dot * jnp.sum(s * chi_dot, axis=-1)
            + wedge(s, chi_ddot)
        )
        numerator = m @ terms + self.radius * wedge(Gamma_ext, Gamma)
        return numerator / (self.inertia + m @ jnp.sum(s * s, axis=-1))

    def vector_field(self, t, state: RollingDiskState) -> RollingDiskState:
        """`(φ̇, φ̈, ẋ = −r φ̇)` of one member."""
        phi_ddot = self.phi_ddot(t, state.phi, state.phi_dot)
        return RollingDiskState(state.phi_dot, phi_ddot, -self.radius * state.phi_dot)

    def positions(self, t, phi, x):
        """Spatial (e₁, e₃) positions `(n + 1, 2)` of the shell's centre of mass and the
        masses: `(x, r) + Λ χᵢ`."""
        centre = jnp.stack([x, self.radius * jnp.ones_like(x)])
        return centre[None, :] + self.body_positions(t) @ rotation(phi).T

    def _path(self, t, state, phi_ddot):
        """Positions along the motion through `state` with angular acceleration `phi_ddot`,
        as a function of the time offset (second order in it: enough for two derivatives)."""
        r = self.radius

        def at(tau):
            phi = state.phi + state.phi_dot * tau + 0.5 * phi_ddot * tau**2
            return self.positions(t + tau, phi, state.x - r * (phi - state.phi))

        return at

    def energy(self, t, state: RollingDiskState):
        """`½ d₂ φ̇² + Σ ½ mᵢ|ẏᵢ|² + g Σ mᵢ yᵢ,₃` (conserved for fixed masses and `F = 0`)."""
        at = self._path(t, state, jnp.zeros_like(state.phi_dot))
        y, v = jax.jvp(at, (jnp.zeros_like(state.phi),), (jnp.ones_like(state.phi),))
        m = self.all_masses()
        kinetic = 0.5 * self.inertia * state.phi_dot**2 + 0.5 * m @ jnp.sum(v * v, axis=-1)
        return kinetic + self.gravity * (m @ y[:, 1])

    def contact_force(self, t, state: RollingDiskState):
        """The force `(2,)` (e₁, e₃: friction and normal force) the plane exerts on the disk:
        from the momentum balance `Σ mᵢ ÿᵢ = F_contact + F − g Σ mᵢ e₃`."""
        at = self._path(t, state, self.phi_ddot(t, state.phi, state.phi_dot))
        zero = jnp.zeros_like(state.phi)
        accel = jax.jacfwd(jax.jacfwd(at))(zero)
        m = self.all_masses()
        weight = jnp.stack([jnp.zeros_like(self.gravity), self.gravity]) * jnp.sum(m)
        return m @ accel - self.external_force + weight

    def invariants(self, t, state) -> dict[str, jax.Array]:
        return {"energy": self.energy(t, state)}

    def conserved_quantities(self) -> frozenset[str]:
        """`energy` with no masses on rails (they are prescribed: a control moves them) and
        `F = 0` (concrete); else nothing."""
        still = not self.rails and known_zero(self.external_force)
        return frozenset({"energy"} if still else ())

    def state_event_ndims(self) -> RollingDiskState:
        return event_ndims(RollingDiskState, phi=0, phi_dot=0, x=0)

    def check_state_shapes(self, state) -> None:
        shapes = {jnp.shape(a) for a in state}
        if len(shapes) != 1:
            raise ValueError(f"rolling-disk state needs phi, phi_dot, x of one shape, got {shapes}")

    def parameter_checks(self) -> list[Check]:
        """Radius, shell mass and moment positive, masses non-negative, χ₀ inside the disk."""
        return [
            Check(~(self.radius > 0), "radius must be positive", self.radius),
            Check(~(self.mass > 0), "shell mass must be positive", self.mass),
            Check(~(self.inertia > 0), "inertia (moment about the axis) must be positive"),
            Check(jnp.any(self.masses < 0, axis=-1), "masses must be non-negative"),
            Check(
                ~(jnp.linalg.norm(self.chi0, axis=-1) < self.radius),
                "chi0 must lie inside the disk (|χ₀| < r)",
            ),
        ]

    def state_checks(self, state, t=None) -> list[Check]:
        ok = finite(state.phi, 0) & finite(state.phi_dot, 0) & finite(state.x, 0)
        return [Check(~ok, "rolling-disk state contains NaN or inf")]
