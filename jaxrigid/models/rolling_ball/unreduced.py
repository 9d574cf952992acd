"""The rolling ball actuated by internal point masses, unreduced: a `LagrangeDAlembertSystem`
(`docs/rolling-ball-model.md`; Putkaradze & Rogers 2018, (A.32)–(A.33)), independent of
the reduced equation (B.8) of `jaxrigid.models.rolling_ball`.

Coordinates `(q, x)` — the attitude quaternion `q` (w, x, y, z), body → space, and the
geometric centre (GC) `x` — and, for dynamic masses, the rail coordinates `θ`. The Lagrangian
is written in spatial terms from the positions of the shell's centre of mass and of the masses,

    y₀ = x + Λ(q) χ₀,   yᵢ = x + Λ(q) ζᵢ(θᵢ),
    L = ½ Ω·𝕀Ω + Σ_{i=0..n} ½ mᵢ |ẏᵢ|² − g Σ_{i=0..n} mᵢ e₃·yᵢ,    Ω = 2 Im(q* q̇),

each `ẏᵢ` by differentiating `yᵢ` (a JVP along `(q̇, ẋ, θ̇, 1)`). Constraints: `q·q̇ = 0`
(`|q| = 1` differentiated) and rolling without slipping, `ẋ − r (ΛΩ) × e₃ = 0` (its third row
is `ẋ₃ = 0`). Generalised forces: the external force `F` on `x` (it acts at the GC) and, for
dynamic masses, the actuator forces `uᵢ(t)` on `θᵢ`. The multiplier of the rolling rows is
the contact force the plane exerts on the ball (spatial, its third component the normal force).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from ...lie import quaternion
from ..base import Check, event_ndims, finite, known_zero, spd3_checks
from ..nonholonomic import (
    LagrangeDAlembertSystem,
    callable_parameter,
    quaternion_angular_velocity,
    quaternion_rate,
)
from ..structures import AbstractAttitudeQuaternion, AbstractLagrangeDAlembert
from .rails import AbstractRail, rail_checks


class RollingBallUnreducedState(NamedTuple):
    """`q (..., 4)` attitude quaternion (w, x, y, z), body → space; `Omega (..., 3)` body
    angular velocity; `x (..., 3)` the GC (`x₃ = r`); for dynamic masses `theta (..., n)` and
    `theta_dot (..., n)` (`None` when the masses are prescribed)."""

    q: jax.Array
    Omega: jax.Array
    x: jax.Array
    theta: jax.Array | None = None
    theta_dot: jax.Array | None = None


def _lagrangian(Q, Qdot, t, ball):
    return ball.lagrangian(Q, Qdot, t)


def _constraint(Q, Qdot, t, ball):
    del t
    q, qdot, xdot = Q[:4], Qdot[:4], Qdot[4:7]
    omega = quaternion.to_matrix(q) @ quaternion_angular_velocity(q, qdot)
    e3 = jnp.zeros_like(omega).at[2].set(1.0)
    rolling = xdot - ball.radius * jnp.cross(omega, e3)
    return jnp.concatenate([jnp.dot(q, qdot)[None], rolling])


def _force(Q, Qdot, t, ball):
    del Qdot
    parts = [jnp.zeros_like(Q[:4]), jnp.broadcast_to(ball.external_force, (3,))]
    if ball.dynamic:
        u = jnp.zeros_like(Q[7:]) if ball.actuation is None else ball.actuation(t)
        parts.append(jnp.broadcast_to(u, Q[7:].shape))
    return jnp.concatenate(parts)


class RollingBallUnreduced(AbstractAttitudeQuaternion, AbstractLagrangeDAlembert):
    """The ball of the model note as a Lagrange–d'Alembert system (module docstring).

    **Fields** (the conventions of `jaxrigid.models.rolling_ball.RollingBall`): `radius` r;
    `mass` m₀ of the shell; `inertia (3, 3)` 𝕀 about the shell's centre of mass, body axes;
    `chi0 (3,)` χ₀, the shell's centre of mass from the GC (body); `masses (n,)` mᵢ;
    `rails`, n callables `ζᵢ(θ) -> (3,)` (body curves from the GC); `control`, a callable
    `θ(t) -> (n,)` (prescribed masses) or `None` (dynamic masses, whose coordinates are then
    part of the state); `actuation`, `u(t) -> (n,)` generalised forces on the rail coordinates
    (dynamic masses; `None` is passive, `u = 0`); `gravity` g (along −e₃); `external_force
    (3,)` F, spatial, at the GC. Callables that are `equinox.Module`s keep their arrays as
    traced parameters. Methods take one member (`jax.vmap` for an ensemble).
    """

    state_type: ClassVar[type] = RollingBallUnreducedState
    time_dependent: ClassVar[bool] = True  # the vector field takes `t`
    radius: jax.Array
    mass: jax.Array
    inertia: jax.Array
    chi0: jax.Array
    masses: jax.Array
    rails: tuple
    control: Callable | None
    actuation: Callable | None
    gravity: jax.Array
    external_force: jax.Array

    def __init__(
        self,
        radius,
        mass,
        inertia,
        chi0,
        masses=(),
        rails=(),
        control=None,
        gravity=9.81,
        external_force=(0.0, 0.0, 0.0),
        actuation=None,
    ):
        self.radius = jnp.asarray(radius)
        self.mass = jnp.asarray(mass)
        self.inertia = jnp.asarray(inertia)
        self.chi0 = jnp.asarray(chi0)
        self.masses = jnp.asarray(masses).reshape(-1)
        self.rails = tuple(callable_parameter(r) for r in rails)
        self.control = callable_parameter(control)
        self.actuation = callable_parameter(actuation)
        self.gravity = jnp.asarray(gravity)
        self.external_force = jnp.asarray(external_force)
        if self.masses.shape != (len(self.rails),):
            raise ValueError(
                f"one rail per mass: got {self.masses.shape[0]} masses and {len(self.rails)} rails"
            )
        if self.actuation is not None and self.control is not None:
            raise ValueError("actuation drives dynamic masses: pass control=None with it")
        if self.inertia.shape != (3, 3) or self.chi0.shape != (3,):
            raise ValueError(
                f"inertia must be (3, 3) and chi0 (3,), got {self.inertia.shape}, {self.chi0.shape}"
            )

    @classmethod
    def from_rolling_ball(cls, ball, dynamic: bool = False, actuation=None):
        """The unreduced form of a `jaxrigid.models.rolling_ball.RollingBall` (same parameters,
        rails and control; its arrays stay traced). `dynamic=True` drops the control: the rail
        coordinates become degrees of freedom driven by `actuation` `u(t)` (passive if `None`)."""
        return cls(
            ball.radius,
            ball.mass,
            ball.inertia,
            ball.chi0,
            ball.masses,
            ball.rails,
            None if dynamic else ball.control,
            ball.gravity,
            ball.external_force,
            actuation,
        )

    @property
    def dynamic(self) -> bool:
        """Whether the rail coordinates are degrees of freedom (no control given)."""
        return self.control is None and len(self.rails) > 0

    @property
    def input_field(self) -> str:
        """The field holding the time-dependent input, which control problems parametrise:
        `actuation` `u(t)` for dynamic masses, else `control` `θ(t)`."""
        return "actuation" if self.dynamic else "control"

    @property
    def system(self) -> LagrangeDAlembertSystem:
        """The engine: coordinates `(q, x[, θ])`, parameters this model."""
        return LagrangeDAlembertSystem(_lagrangian, _constraint, params=self, force=_force)

    # -- the Lagrangian, in spatial terms --

    def rail_coordinates(self, Q, t):
        """`θ (n,)`: from the coordinates (dynamic) or the control `θ(t)` (prescribed)."""
        if self.dynamic:
            return Q[7:]
        if not self.rails:
            return jnp.zeros((0,), Q.dtype)
        return jnp.reshape(self.control(t), (len(self.rails),))

    def positions(self, Q, t):
        """Spatial positions `(n + 1, 3)` of the shell's centre of mass and of the masses."""
        q, x = Q[:4], Q[4:7]
        theta = self.rail_coordinates(Q, t)
        chis = [self.chi0] + [rail(theta[i]) for i, rail in enumerate(self.rails)]
        return x[None, :] + jnp.stack(chis) @ quaternion.to_matrix(q).T

    def all_masses(self):
        """`(m₀, m₁, …, mₙ)`."""
        return jnp.concatenate([self.mass[None], self.masses])

    def kinetic_energy(self, Q, Qdot, t):
        """`½ Ω·𝕀Ω + Σ ½ mᵢ |ẏᵢ|²`, `ẏᵢ` by a JVP of the positions along `(Q̇, 1)`."""
        return self._energies(Q, Qdot, t)[0]

    def potential_energy(self, Q, t):
        """`g Σ mᵢ e₃·yᵢ`."""
        return self.gravity * (self.all_masses() @ self.positions(Q, t)[:, 2])

    def lagrangian(self, Q, Qdot, t):
        """`T − V`, the positions `yᵢ` and their velocities from one JVP: the engine
        differentiates `L` to second order, and `V` from a second trace of the positions
        (their rotation matrix the largest part) made the ball's DLA-midpoint program an
        eighth larger (design note 58)."""
        T, V = self._energies(Q, Qdot, t)
        return T - V

    def _energies(self, Q, Qdot, t):
        """`(T, V)` from one JVP of the positions along `(Q̇, 1)`."""
        Omega = quaternion_angular_velocity(Q[:4], Qdot[:4])
        t = jnp.asarray(t, jnp.result_type(t, Q))
        y, v = jax.jvp(self.positions, (Q, t), (Qdot, jnp.ones_like(t)))
        m = self.all_masses()
        T = 0.5 * Omega @ (self.inertia @ Omega) + 0.5 * m @ jnp.sum(v * v, -1)
        return T, self.gravity * (m @ y[:, 2])

    # -- the state ↔ the engine's coordinates --

    def coordinates(self, state: RollingBallUnreducedState):
        """`(Q, Q̇)` of a state: `q̇ = ½ q Ω♯` (D.21), `ẋ = r (ΛΩ) × e₃`."""
        q, Omega, x = state.q, state.Omega, state.x
        omega = quaternion.to_matrix(q) @ Omega
        e3 = jnp.zeros_like(omega).at[2].set(1.0)
        Q, Qdot = [q, x], [quaternion_rate(q, Omega), self.radius * jnp.cross(omega, e3)]
        if self.dynamic:
            assert state.theta is not None and state.theta_dot is not None  # check_state_shapes
            Q.append(state.theta)
            Qdot.append(state.theta_dot)
        return jnp.concatenate(Q), jnp.concatenate(Qdot)

    def from_coordinates(self, Q, Qdot) -> RollingBallUnreducedState:
        """The inverse of `coordinates` on the constraint: `q = Q[:4]`, `Ω = 2 Im(q* q̇)/|q|²`
        (exact for `q·q̇ = 0` and any `|q|`: `½ q Ω♯` gives `q̇` back), `x = Q[4:7]`, and for
        dynamic masses `θ = Q[7:]`, `θ̇ = Q̇[7:]`."""
        q = Q[:4]
        Omega = quaternion_angular_velocity(q, Qdot[:4]) / jnp.dot(q, q)
        theta = (Q[7:], Qdot[7:]) if self.dynamic else (None, None)
        return RollingBallUnreducedState(q, Omega, Q[4:7], *theta)

    def lagrange_dalembert_system(self) -> LagrangeDAlembertSystem:
        """The engine of this ball's equations (`system`)."""
        return self.system

    def _accelerations(self, t, state):
        Q, Qdot = self.coordinates(state)
        Qddot, lam = self.system.accelerations(t, Q, Qdot)
        return Q, Qdot, Qddot, lam

    def angular_velocity(self, state: RollingBallUnreducedState):
        """The body angular velocity `Ω` (`q̇ = ½ q Ω♯`): the Lie-group methods (`RKMK2/4/8`)
        advance `q` by the exponential of it."""
        return state.Omega

    def vector_field(self, t, state: RollingBallUnreducedState) -> RollingBallUnreducedState:
        """`(q̇, Ω̇, ẋ, θ̇, θ̈)` of one member; `Ω̇ = 2 Im(q* q̈)` (as `q̇* q̇` is real)."""
        Q, Qdot, Qddot, _ = self._accelerations(t, state)
        theta = (Qdot[7:], Qddot[7:]) if self.dynamic else (None, None)
        Omega_dot = quaternion_angular_velocity(Q[:4], Qddot[:4])
        return RollingBallUnreducedState(Qdot[:4], Omega_dot, Qdot[4:7], *theta)

    def omega_dot(self, t, state):
        """`Ω̇ (3,)`, to hold against (B.8)."""
        return self.vector_field(t, state).Omega

    def contact_force(self, t, state):
        """The force `(3,)` the plane exerts on the ball at the contact (spatial): the
        multiplier of the rolling constraint; its third component is the normal force."""
        return self._accelerations(t, state)[3][1:4]

    def energy(self, t, state):
        """Kinetic + potential energy (conserved for fixed or passive masses with `F = 0`)."""
        Q, Qdot = self.coordinates(state)
        return self.kinetic_energy(Q, Qdot, t) + self.potential_energy(Q, t)

    def invariants(self, t, state) -> dict[str, jax.Array]:
        """`energy`, `quaternion_norm_error` `||q| − 1|` and `height_error` `|x₃ − r|` of one
        member (the names of `RollingBall.invariants`)."""
        return {
            "energy": self.energy(t, state),
            "quaternion_norm_error": jnp.abs(jnp.linalg.norm(state.q) - 1.0),
            "height_error": jnp.abs(state.x[2] - self.radius),
        }

    def conserved_quantities(self) -> frozenset[str]:
        """`quaternion_norm_error`, `height_error`; `energy` only for passive masses (no
        rails, or dynamic ones with no `actuation`) and `F = 0` (concrete)."""
        passive = not self.rails or (self.control is None and self.actuation is None)
        energy = {"energy"} if passive and known_zero(self.external_force) else set()
        return frozenset({"quaternion_norm_error", "height_error", *energy})

    # -- the model contract --

    def state_event_ndims(self) -> RollingBallUnreducedState:
        rail = 1 if self.dynamic else None
        return event_ndims(RollingBallUnreducedState, q=1, Omega=1, x=1, theta=rail, theta_dot=rail)

    def check_state_shapes(self, state) -> None:
        shapes = [jnp.shape(state.q), jnp.shape(state.Omega), jnp.shape(state.x)]
        ok = shapes[0][-1:] == (4,) and shapes[1][-1:] == (3,) and shapes[2][-1:] == (3,)
        n = len(self.rails)
        if self.dynamic:
            shapes += [jnp.shape(state.theta), jnp.shape(state.theta_dot)]
            ok = ok and shapes[3][-1:] == (n,) and shapes[4][-1:] == (n,)
        elif state.theta is not None or state.theta_dot is not None:
            ok = False
        if not ok:
            rails = f", theta (..., {n}), theta_dot (..., {n})" if self.dynamic else ""
            raise ValueError(
                f"rolling-ball state needs q (..., 4), Omega (..., 3), x (..., 3){rails}"
                f"{'' if self.dynamic else ' and theta = theta_dot = None (prescribed masses)'}"
                f"; got shapes {shapes}"
            )

    def parameter_checks(self) -> list[Check]:
        """Radius and shell mass positive, masses non-negative (positive when dynamic),
        𝕀 a rigid body's, χ₀ inside the ball, the rails inside the ball and a prescribed
        control inside a segment's ends (`rails.rail_checks`, as the reduced ball), and the
        control's or actuation's own checks (e.g. NaN coefficients), where they have them."""
        masses_bad = self.masses <= 0 if self.dynamic else self.masses < 0
        own = [
            Check(c.bad, f"RollingBallUnreduced {name}: " + c.message, c.value)
            for name in ("control", "actuation")
            for c in getattr(getattr(self, name), "checks", lambda: [])()
        ]
        return own + [
            Check(~(self.radius > 0), "radius must be positive", self.radius),
            Check(~(self.mass > 0), "shell mass must be positive", self.mass),
            Check(
                jnp.any(masses_bad, axis=-1),
                "masses must be non-negative (positive for dynamic masses)",
            ),
            *spd3_checks(self.inertia),
            Check(
                ~(jnp.linalg.norm(self.chi0, axis=-1) < self.radius),
                "chi0 must lie inside the ball (|χ₀| < r)",
            ),
            Check(~jnp.isfinite(self.gravity), "gravity must be finite", self.gravity),
            *self._rail_checks(),
        ]

    def _rail_checks(self) -> list[Check]:
        """The rolling ball's `rails.rail_checks` where every rail is one of `rails`' (a plain
        function has no range to check): each inside the ball, a prescribed control's reach
        inside a segment's ends."""
        if not all(isinstance(rail, AbstractRail) for rail in self.rails):
            return []
        return [
            Check(c.bad, "RollingBallUnreduced: " + c.message, c.value)
            for c in rail_checks(self.rails, self.control, self.radius)
        ]

    def state_checks(self, state, t=None) -> list[Check]:
        """Finite; `|q| = 1` and `x₃ = r` to √eps; for dynamic masses an invertible saddle
        matrix at `t = 0` (a rail with `ζ′(θ) = 0` gives its mass no inertia along it)."""
        eps = float(jnp.finfo(state.q.dtype).eps)
        q_err = jnp.abs(jnp.linalg.norm(state.q, axis=-1) - 1.0)
        x_err = jnp.abs(state.x[..., 2] - self.radius)
        leaves = [state.q, state.Omega, state.x]
        if self.dynamic:
            leaves += [state.theta, state.theta_dot]
        ok = jnp.all(jnp.stack([finite(a, 1) for a in leaves]), axis=0)
        checks = [
            Check(~ok, "rolling-ball state contains NaN or inf"),
            Check(q_err > eps**0.5, "q must be a unit quaternion (to √eps)", q_err),
            Check(x_err > eps**0.5 * self.radius, "the GC must be at height r (x₃ = r)", x_err),
        ]
        if self.dynamic:
            n = len(self.rails)
            coordinates = jnp.vectorize(
                lambda *leaves: self.coordinates(RollingBallUnreducedState(*leaves)),
                signature=f"(4),(3),(3),({n}),({n})->(k),(k)",
            )
            Q, Qdot = coordinates(*state)
            checks += self.system.saddle_checks(jnp.zeros((), Q.dtype), Q, Qdot)
        return checks
