"""A ball rolling without slipping on a horizontal plane, actuated by internal point masses
moving on body-fixed rails along prescribed `θᵢ(t)` (Putkaradze & Rogers 2018, eq. (B.8);
the model note `docs/rolling-ball-model.md`, mode 1 "prescribed actuation").

Notation (the paper's): `Λ` body → space, as the unit quaternion `q` (`Λ = Λ(q)`, (D.15));
body angular velocity `Ω`; `Γ = Λᵀe₃` the vertical seen from the body; `x` the geometric
centre (GC), `x₃ = r`; the shell has mass `m₀`, centre of mass `χ₀` from the GC, inertia `𝕀`
about its own centre of mass; point mass `i = 1..n` has mass `mᵢ` at `χᵢ = ζᵢ(θᵢ(t))`;
`sᵢ = rΓ + χᵢ` (`i = 0..n`) runs from the contact point to mass `i`. Rolling: `Λᵀẋ = rΩ × Γ`.

    𝕀Ω̇ + Ω × 𝕀Ω + rΓ̃ × Γ + Σᵢ₌₀ⁿ mᵢ sᵢ × {gΓ + Ω̇ × sᵢ + Ω × (Ω × χᵢ + 2χ̇ᵢ) + χ̈ᵢ} = 0   (B.8)
    q̇ = ½ q Ω♯,   ẋ = r Λ(Ω × Γ),   χ̇₀ = χ̈₀ = 0.

(B.8) is the balance of angular momentum about the contact point, in body axes: the brace
is `Λᵀ(aᵢ + g e₃)`, `aᵢ` mass `i`'s spatial acceleration; the shell's inertia about the
contact point is `𝕀 − m₀ŝ₀²` (parallel axes), which is why `𝕀` is about the shell's own centre
of mass. `Γ̃ = ΛᵀF` is the body form of an external force `F` at the GC: its torque about the
contact point is `rΓ × Γ̃`, which moved to the left side is the printed `+rΓ̃ × Γ`.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from ... import _checks, _linalg
from ..._checks import is_concrete
from ..._linalg import Vec3
from ...lie import quaternion
from ..base import Check, event_ndims, known_zero
from ..structures import AbstractAttitudeQuaternion, AbstractRollingBall
from . import checks
from .controls import AbstractControl, ZeroControl

__all__ = ["RollingBall", "RollingBallState", "rolling_ball_state", "vertical"]


class RollingBallState(NamedTuple):
    """`q (..., 4)` unit quaternion body → space; `Omega (..., 3)` body angular velocity;
    `x (..., 3)` the geometric centre (`x₃ = r`; `x₁, x₂` are the contact point's)."""

    q: jax.Array
    Omega: jax.Array
    x: jax.Array


def vertical(q):
    """`Γ = Λᵀe₃ = q* e₃ q` (the third row of (D.15)), `(..., 4) -> (..., 3)`.

    Written homogeneously (`Γ₃ = w² − x² − y² + z²`, not `1 − 2(x² + y²)`), so that
    `|Γ| = |q|²` exactly: `|Γ| = 1` follows from `|q| = 1`."""
    w, a, b, c = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack(
        [2 * (a * c - w * b), 2 * (b * c + w * a), w * w - a * a - b * b + c * c], axis=-1
    )


def _rows(v, k):
    """`v (3,)` repeated as `k` rows (explicit: rank promotion may be disabled)."""
    return jnp.broadcast_to(v, (k,) + v.shape)


class RollingBall(AbstractAttitudeQuaternion, AbstractRollingBall):
    """The rolling ball with `n ≥ 0` point masses on rails driven by a prescribed control.

    **Fields** (arrays are traceable, differentiable, sweepable parameters): `radius ()`;
    `mass ()` the shell's mass `m₀`; `inertia (3, 3)` SPD, about the shell's centre of mass,
    body axes; `chi0 (3,)` the shell's centre of mass from the GC; `masses (n,)`; `rails` a
    tuple of `n` `AbstractRail`s; `control` an `AbstractControl` giving `θ(t) (n,)`;
    `gravity ()` `g` (default 9.81); `external_force (3,)` spatial `F` at the GC (default 0).

    Construction raises `ValueError` when the sizes of `masses`, `rails` and `control` differ
    and, for concrete parameters, `InvalidValueError` (a `ValueError`) for bad values (see
    `parameter_checks`).
    """

    state_type: ClassVar[type] = RollingBallState
    time_dependent: ClassVar[bool] = True
    # the field holding the time-dependent input, which control problems parametrise
    input_field: ClassVar[str] = "control"
    radius: jax.Array
    mass: jax.Array
    inertia: jax.Array
    chi0: jax.Array
    masses: jax.Array
    rails: tuple
    control: AbstractControl
    gravity: jax.Array
    external_force: jax.Array

    def __init__(
        self,
        radius,
        mass,
        inertia,
        chi0,
        masses=None,
        rails=(),
        control=None,
        gravity=9.81,
        external_force=None,
    ):
        self.inertia = jnp.asarray(inertia)
        dtype = self.inertia.dtype
        self.radius = jnp.asarray(radius)
        self.mass = jnp.asarray(mass)
        self.chi0 = jnp.asarray(chi0)
        self.rails = tuple(rails)
        self.masses = jnp.zeros((0,), dtype) if masses is None else jnp.asarray(masses)
        self.control = ZeroControl(len(self.rails)) if control is None else control
        self.gravity = jnp.asarray(gravity)
        self.external_force = (
            jnp.zeros((3,), dtype) if external_force is None else jnp.asarray(external_force)
        )

    def __check_init__(self):
        checks.check_model_shapes(self)
        if is_concrete(self):  # bad values at once, not only at `simulate`
            _checks.raise_at_once(_checks.model_parameter_checks, self)

    # --- kinematics -------------------------------------------------------------------

    @property
    def n_masses(self) -> int:
        return len(self.rails)

    @property
    def total_mass(self):
        """`Σᵢ₌₀ⁿ mᵢ`, shell included."""
        return self.mass + jnp.sum(self.masses, axis=-1)

    def weights(self):
        """`(m₀, m₁, …, mₙ)`, `(n+1,)`."""
        return jnp.concatenate([jnp.reshape(self.mass, (1,)), self.masses])

    def _mass_list(self):
        """`[m₀, m₁, …, mₙ]`, scalars."""
        return [self.mass] + [self.masses[i] for i in range(self.n_masses)]

    def mass_jets(self, t):
        """`[(χᵢ, χ̇ᵢ, χ̈ᵢ)]` for `i = 0..n`, each a body vector `(3,)`: `i = 0` the shell's
        centre of mass (`χ̇₀ = χ̈₀ = 0`), then the point masses, `χᵢ = ζᵢ(θᵢ)`,
        `χ̇ᵢ = ζᵢ′θ̇ᵢ`, `χ̈ᵢ = ζᵢ″θ̇ᵢ² + ζᵢ′θ̈ᵢ` (`ζ′, ζ″, θ̇, θ̈` by autodiff)."""
        zero = jnp.zeros_like(self.chi0)
        jets = [(self.chi0, zero, zero)]
        if self.rails:
            theta, dtheta, ddtheta = self.control.derivatives(t)
            for i, rail in enumerate(self.rails):
                z, dz, ddz = rail.derivatives(theta[i])
                jets.append((z, dz * dtheta[i], ddz * dtheta[i] ** 2 + dz * ddtheta[i]))
        return jets

    def mass_kinematics(self, t):
        """Body positions `χᵢ`, velocities `χ̇ᵢ`, accelerations `χ̈ᵢ`, each `(n+1, 3)`, row 0 the
        shell's centre of mass: `mass_jets` stacked."""
        return tuple(jnp.stack(column) for column in zip(*self.mass_jets(t)))

    def attitude(self, state):
        """`Λ (3, 3)` from `q`, (D.15)."""
        return quaternion.to_matrix(state.q)

    def angular_velocity(self, state):
        """The body angular velocity `Ω` (the Lie-group integrators update `q` by it)."""
        return state.Omega

    # --- dynamics ---------------------------------------------------------------------

    def omega_dot(self, t, state):
        """`Ω̇ (3,)` from (B.8), with `s × (Ω̇ × s) = −ŝ²Ω̇` moved to the left ((B.9), (B.10)):

            A Ω̇ = −[Ω × 𝕀Ω + rΓ̃ × Γ + Σᵢ₌₀ⁿ mᵢ sᵢ × wᵢ],   wᵢ = gΓ + Ω × (Ω × χᵢ + 2χ̇ᵢ) + χ̈ᵢ,
            A = 𝕀 − Σᵢ₌₀ⁿ mᵢŝᵢ² = 𝕀 + Σᵢ₌₀ⁿ mᵢ(|sᵢ|²𝟙 − sᵢsᵢᵀ),   sᵢ = rΓ + χᵢ,

        `A` SPD (`𝕀` SPD, `mᵢ ≥ 0`), solved by cofactors (`_linalg.solve`).

        Written on the vectors' components (`_linalg.Vec3`) and `A`'s entries, mass by mass, not
        on `(n+1, 3)` arrays with `einsum`, `jnp.cross` and reductions: under an ensemble
        `vmap`, XLA:CPU makes each of those small ops a pass over the ensemble in a
        component-minor layout, while scalar arithmetic on each component fuses into
        elementwise loops over the members (bench/README.md, rolling-ball throughput)."""
        Om = Vec3.of(state.Omega)
        Gamma = Vec3.of(vertical(state.q))
        Gamma_tilde = Vec3.of(_linalg.matvec(self.attitude(state).T, self.external_force))
        r, g = self.radius, self.gravity
        torque = Om.cross(Vec3.of(_linalg.matvec(self.inertia, state.Omega)))
        torque = torque + r * Gamma_tilde.cross(Gamma)
        trace, second = 0.0, [[0.0] * 3 for _ in range(3)]  # Σ mᵢ|sᵢ|², Σ mᵢ sᵢsᵢᵀ
        for m, jets in zip(self._mass_list(), self.mass_jets(t)):
            chi, chid, chidd = map(Vec3.of, jets)
            s = r * Gamma + chi
            w = g * Gamma + Om.cross(Om.cross(chi) + 2.0 * chid) + chidd
            torque = torque + m * s.cross(w)
            trace = trace + m * s.dot(s)
            for i in range(3):
                for j in range(3):
                    second[i][j] = second[i][j] + m * s[i] * s[j]
        A = jnp.stack(
            [
                jnp.stack(
                    [
                        self.inertia[i, j] + (trace if i == j else 0.0) - second[i][j]
                        for j in range(3)
                    ],
                    axis=-1,
                )
                for i in range(3)
            ],
            axis=-2,
        )
        return _linalg.solve(A, -torque.stack())

    def vector_field(self, t, state: RollingBallState) -> RollingBallState:
        """`(q̇, Ω̇, ẋ) = (½ q Ω♯, (B.8), r Λ(Ω × Γ))` (Appendix D; rolling constraint).

        `ẋ` is formed as `r ω × e₃ = r(ω₂, −ω₁, 0)`, `ω = ΛΩ` (equal to `rΛ(Ω × Γ)` for a
        rotation `Λ`): its third component is exactly zero, so `x₃ = r` is kept to the bit by
        any integrator that adds increments of `ẋ`, even while `|q|` drifts."""
        Om = state.Omega
        qdot = 0.5 * quaternion.multiply(state.q, jnp.concatenate([jnp.zeros_like(Om[:1]), Om]))
        omega = _linalg.matvec(self.attitude(state), Om)
        xdot = self.radius * jnp.stack([omega[1], -omega[0], jnp.zeros_like(omega[0])])
        return RollingBallState(qdot, self.omega_dot(t, state), xdot)

    # --- energy, positions, contact -----------------------------------------------------

    def mass_positions(self, t, state):
        """Spatial positions `x + Λχᵢ`, `(n+1, 3)`: row 0 the shell's centre of mass, then the
        point masses."""
        chi, _, _ = self.mass_kinematics(t)
        k = chi.shape[0]
        return _rows(state.x, k) + chi @ self.attitude(state).T

    def _along_flow(self, fn, t, state):
        """`(fn, d/dt fn)` along the exact flow of `vector_field`, by `jax.jvp`."""
        t = jnp.asarray(t)
        t = t if jnp.issubdtype(t.dtype, jnp.inexact) else t * 1.0
        return jax.jvp(fn, (t, state), (jnp.ones_like(t), self.vector_field(t, state)))

    def mass_velocities(self, t, state):
        """Spatial velocities `(n+1, 3)`: `d/dt mass_positions` along the flow (autodiff)."""
        return self._along_flow(self.mass_positions, t, state)[1]

    def mass_accelerations(self, t, state):
        """Spatial accelerations `aᵢ (n+1, 3)`: `d²/dt² mass_positions` along the flow."""
        return self._along_flow(self.mass_velocities, t, state)[1]

    def energy(self, t, state):
        """Kinetic plus potential energy, with rolling:
        `½Ω·𝕀Ω + Σᵢ₌₀ⁿ ½mᵢ|Ω × sᵢ + χ̇ᵢ|² + g Σᵢ₌₀ⁿ mᵢ e₃·(x + Λχᵢ)` (the note's `l` with the sign
        of the potential flipped; `e₃·(x + Λχᵢ) = x₃ + Γ·χᵢ`)."""
        m = self.weights()
        chi, chid, _ = self.mass_kinematics(t)
        k = m.shape[0]
        Om = state.Omega
        Gamma = vertical(state.q)
        s = self.radius * _rows(Gamma, k) + chi
        v = _linalg.cross(_rows(Om, k), s) + chid
        kinetic = 0.5 * jnp.dot(Om, self.inertia @ Om) + 0.5 * jnp.sum(m * jnp.sum(v * v, -1))
        height = state.x[2] + chi @ Gamma
        return kinetic + self.gravity * jnp.sum(m * height)

    def actuator_power(self, t, state):
        """The power the prescribed mass motion injects:
        `Σᵢ₌₁ⁿ mᵢ(aᵢ + g e₃)·Λχ̇ᵢ`. The rail pushes mass `i` with `fᵢ = mᵢ(aᵢ + g e₃)` and
        the shell with `−fᵢ` at the same point; the pair's power is `fᵢ·(vᵢ − v_shell) =
        fᵢ·Λχ̇ᵢ`. The contact force does no work (the contact point is at rest), so
        `dE/dt = actuator_power + external_power` (zero with masses fixed and `F = 0`)."""
        a = self.mass_accelerations(t, state)
        _, chid, _ = self.mass_kinematics(t)
        k = a.shape[0]
        f = self.weights()[:, None] * (a + self.gravity * _rows(_e3(a.dtype), k))
        return jnp.sum(f * (chid @ self.attitude(state).T))

    def external_power(self, t, state):
        """`F·ẋ`: the power of the external force at the geometric centre."""
        return jnp.dot(self.external_force, self.vector_field(t, state).x)

    def contact_force(self, t, state):
        """The spatial force `(3,)` of the plane on the ball, from the total momentum balance:
        `Σᵢ₌₀ⁿ mᵢaᵢ + (Σᵢ mᵢ) g e₃ − F`, with the accelerations `aᵢ` by autodiff along the flow
        (it is the multiplier of the rolling constraint)."""
        a = self.mass_accelerations(t, state)
        return (
            jnp.sum(self.weights()[:, None] * a, axis=0)
            + self.total_mass * self.gravity * _e3(a.dtype)
            - self.external_force
        )

    def normal_force(self, t, state):
        """`N = e₃·F_contact`; rolling needs `N > 0`."""
        return self.contact_force(t, state)[2]

    def friction_needed(self, t, state):
        """`|F_t|/N`, the friction coefficient the contact needs to roll without slipping;
        `inf` where `N ≤ 0` (the ball would lift off)."""
        return _friction_needed(self.contact_force(t, state))

    def contact_observables(self, t, state, friction_coefficient=jnp.inf):
        """`normal_force`, `friction_needed`, and the flags `lifts_off` (`N < 0`: the ball
        would jump) and `slips` (more friction needed than `friction_coefficient`): the model
        holds only where neither is set."""
        F = self.contact_force(t, state)
        mu = _friction_needed(F)
        return {
            "normal_force": F[2],
            "friction_needed": mu,
            "lifts_off": F[2] < 0,
            "slips": mu > friction_coefficient,
        }

    def invariants(self, t, state) -> dict[str, jax.Array]:
        """`energy` (conserved with masses fixed and `F = 0`), `quaternion_norm_error`
        `||q| − 1|` (also `||Γ| − 1|`, since `|Γ| = |q|²`), `height_error` `|x₃ − r|`."""
        return {
            "energy": self.energy(t, state),
            "quaternion_norm_error": jnp.abs(jnp.linalg.norm(state.q) - 1.0),
            "height_error": jnp.abs(state.x[2] - self.radius),
        }

    def conserved_quantities(self) -> frozenset[str]:
        """`quaternion_norm_error`, `height_error`; `energy` only with the masses held still
        (no rails, or a control that `holds_still`) and `F = 0` (concrete): otherwise the
        actuators or the force work on the ball (`actuator_power`, `external_power`)."""
        still = not self.rails or self.control.holds_still
        energy = {"energy"} if still and known_zero(self.external_force) else set()
        return frozenset({"quaternion_norm_error", "height_error", *energy})

    # --- the model contract -----------------------------------------------------------------

    def state_event_ndims(self) -> RollingBallState:
        return event_ndims(RollingBallState, q=1, Omega=1, x=1)

    def check_state_shapes(self, state) -> None:
        checks.check_state_shapes(self, state)

    def parameter_checks(self) -> list[Check]:
        """`radius > 0`, `m₀ > 0`, `mᵢ ≥ 0`, `𝕀` SPD (and a rigid body's), `|χ₀| < r`, every
        rail inside the ball (`max_radius(rail) < r`), the control's reach inside a segment's
        ends (`rails.rail_checks`), finite `g`, `F`, the control's own checks
        (`checks.parameter_checks`)."""
        return checks.parameter_checks(self)

    def state_checks(self, state, t=None) -> list[Check]:
        """`q`, `Ω`, `x` finite; `||q| − 1| ≤ √eps`; the rolling constraint's height
        `|x₃ − r| ≤ √eps r` (`checks.state_checks`)."""
        return checks.state_checks(self, state)


def _e3(dtype):
    return jnp.asarray([0.0, 0.0, 1.0], dtype)


def _friction_needed(F):
    """`|F_t|/N` for `N > 0`, else `inf`; NaN-free gradients at `F_t = 0` and `N ≤ 0`."""
    ft2 = F[0] ** 2 + F[1] ** 2
    pos = ft2 > 0
    ft = jnp.where(pos, jnp.sqrt(jnp.where(pos, ft2, 1.0)), 0.0)
    N = F[2]
    up = N > 0
    return jnp.where(up, ft / jnp.where(up, N, 1.0), jnp.inf)


def rolling_ball_state(model: RollingBall, q=None, Omega=None, contact=(0.0, 0.0)):
    """A state on the constraint: attitude `q` (default identity), `Omega` (default rest),
    the contact point `(x₁, x₂)` on the plane; `x₃ = r`. Arrays in the inertia's dtype."""
    dtype = model.inertia.dtype
    q = jnp.asarray([1.0, 0.0, 0.0, 0.0] if q is None else q, dtype)
    Omega = jnp.zeros((3,), dtype) if Omega is None else jnp.asarray(Omega, dtype)
    c = jnp.asarray(contact, dtype)
    x = jnp.stack([c[0], c[1], jnp.asarray(model.radius, dtype)])
    return RollingBallState(q, Omega, x)
