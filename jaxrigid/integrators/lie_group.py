"""Krysl's Lie-group rotation integrators: the Euler steps (11), (12), (18), (19) and TRAP,
IMID, TRAPM, IMIDM (§3.3–3.6); the reference methods of §4 are in `reference_methods`.

P. Krysl, "Dynamically equivalent implicit algorithms for the integration of rigid body
rotations", Commun. Numer. Meth. Engng (2007). Equation numbers below are the paper's.

All act on `RigidBodyState(R, Pi)` of a `RigidBody`. Each implicit step is a 3×3 Newton solve
started from an explicit Lie predictor (`midpoint_predictor` for an end momentum,
`half_step_predictor` for IMID's and IMIDM's midpoint one), so the
root Newton lands on is the one continuous in Δt whenever the predictor is within Newton's
basin of it; `StepInfo` reports every step where the solve did not converge.

Where the paper leaves the arguments of a torque implicit, the midpoint torque is
`T(t + Δt/2, R_{n-1} exp(Ψ/2), Π̄)` with `Π̄` the method's own midpoint momentum (the paper
writes `t_n + Δt/2` for IMID and IMIDM; with its indexing that is a slip for `t_{n-1} + Δt/2`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from .. import results
from .._linalg import cross, matmul
from ..compensated import advance, attach, value_of, zero_error
from ..lie import so3
from ..models.rigid_body import RigidBodyState
from ..models.structures import AbstractLiePoissonBody
from ..newton import Newton
from ..results import RESULTS
from .base import AbstractImplicitIntegrator, AbstractIntegrator, explicit_info, solve_on_branch

INVARIANT_K, INVARIANT_PI, INVARIANT_RTR = "K", "pi", "RtR_error"

FAST_MAX_ANGLE = 0.25
"""The turn per step (rad) below which IMIDM's fast form uses the rotation series; larger
turns are redone with the full Rodrigues coefficients (`IMIDM.fast_variant`)."""


def torque_at(model, t, R, Pi):
    """Body torque, or exact zeros without tracing anything for a torque-free body. `R` is
    the attitude, or a function of no arguments giving it, called only when the body has a
    torque: an attitude the step forms for the torque alone (`R exp(Ψ̂)`, a Rodrigues
    product) is then neither traced nor differentiated for a torque-free body."""
    if not model.has_torque:
        return jnp.zeros_like(Pi)
    return model.body_torque(t, R() if callable(R) else R, Pi)


def _rhs(model, omega, t, R, Pi):
    """`Π̇ = Π × Ω + T`, `omega` the step's `model.angular_velocity_map()`; `R` the attitude
    or a function giving it, as for `torque_at`."""
    return cross(Pi, omega(Pi)) + torque_at(model, t, R, Pi)


def rotate_right(R, psi, max_angle=None):
    return so3.compose_exp(R, psi, max_angle)


def _rotation(psi, max_angle=None):
    """The linear part of the increment of `R → R exp(Ψ)`, `Π → exp(−Ψ)Π` (no rounding of
    `1 + …`), for `compensated.advance`; both use the same Rodrigues coefficients."""
    E1 = so3.expm1(psi, max_angle)
    return lambda s: RigidBodyState(matmul(s.R, E1), so3.rotate_expm1(-psi, s.Pi, max_angle))


def _promise_kept(info, max_angle, *psis):
    """`info` with `step_bound_broken` where a rotation of the step turned by more than
    `max_angle`, the bound its Rodrigues series were cut for (`so3._rodrigues_coefficients`)."""
    if max_angle is None:
        return info
    kept = functools.reduce(jnp.logical_and, [so3.angle_within(p, max_angle) for p in psis])
    return info._replace(result=results.where(~kept, RESULTS.step_bound_broken, info.result))


_MAX_ANGLE_DOC = """
    `max_angle` (None, or ≤ π rad): a promise that no rotation of a step turns by more than
    this, which cuts the Rodrigues series to the terms exact to round-off up to that angle and
    drops the reduction of larger angles (a large share of an ensemble step's time:
    bench/README.md, `imidm_cost_breakdown.py`); a step that breaks it is reported as
    `RESULTS.step_bound_broken`, never silently accepted."""


def _carry(integrator, state, solver_state):
    """`(state, solver_state)` after a step that may compensate: with `compensated=True`, the
    rounded state and its rounding error (the new solver state)."""
    if integrator.compensated:
        return state.value, state.error
    return state, solver_state


def half_step_predictor(model, omega, t, R, Pi, dt):
    """`Π(t + Δt/2)` by an explicit Euler half step (first order): the midpoint methods' guess."""
    return Pi + 0.5 * dt * _rhs(model, omega, t, R, Pi)


def midpoint_predictor(model, omega, t, R, Pi, dt):
    """`Π(t + Δt)` by the explicit midpoint Lie step (second order). (Separate from
    `half_step_predictor` so that a method guessing `Π(t + Δt/2)` does not trace this.)"""
    Pi_half = half_step_predictor(model, omega, t, R, Pi, dt)
    R_half = rotate_right(R, 0.5 * dt * omega(Pi)) if model.has_torque else R
    return Pi + dt * _rhs(model, omega, t + 0.5 * dt, R_half, Pi_half)


# ----------------------------------------------------------------------------------------
# First-order Euler steps on the incremental form: (11), (12) and momentum forms (18), (19).


class ForwardEuler(AbstractIntegrator):
    """Forward Euler on the incremental form, Krysl eq. (11). Explicit, first order."""

    name: ClassVar[str] = "fE"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 1
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) eq. (11)"

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state
        Pi1 = Pi + dt * _rhs(model, omega, t, R, Pi)
        return (
            RigidBodyState(rotate_right(R, dt * omega(Pi)), Pi1),
            solver_state,
            explicit_info(Pi.dtype),
        )


class BackwardEuler(AbstractImplicitIntegrator):
    """Backward Euler on the incremental form, Krysl eq. (12). Implicit, first order."""

    name: ClassVar[str] = "bE"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 1
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) eq. (12)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state

        def residual(Pi1):
            R1 = lambda: rotate_right(R, dt * omega(Pi1))  # noqa: E731 (for a torque only)
            return Pi1 - Pi - dt * _rhs(model, omega, t + dt, R1, Pi1)

        Pi1, info = solve_on_branch(
            self.newton, residual, midpoint_predictor(model, omega, t, R, Pi, dt), Pi
        )
        return RigidBodyState(rotate_right(R, dt * omega(Pi1)), Pi1), solver_state, info


class ForwardEulerMomentum(AbstractIntegrator):
    """Momentum-conserving forward Euler, Krysl eq. (18): `Π₁ = exp(−Ψ)(Π₀ + hT₀)`, `Ψ = hΩ₀`.
    `compensated=True`: compensated summation, the rounding error in the solver state
    (`jaxrigid.compensated`)."""

    name: ClassVar[str] = "fEM"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 1
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) eq. (18)"
    compensated: bool = eqx.field(default=False, static=True)

    compensated_summation: ClassVar[bool] = True

    def init(self, model, state0, t0, dt):
        return zero_error(state0) if self.compensated else None

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        if self.compensated:
            state = attach(state, solver_state)
        R, Pi = value_of(state)
        psi = dt * omega(Pi)
        forcing = None  # exp(−Ψ)(Π₀ + hT₀) = Π₀ + (exp(−Ψ) − 1)Π₀ + h exp(−Ψ)T₀
        if model.has_torque:
            forcing = RigidBodyState(None, dt * so3.rotate_exp(-psi, torque_at(model, t, R, Pi)))
        new, solver_state = _carry(self, advance(state, _rotation(psi), forcing), solver_state)
        return new, solver_state, explicit_info(Pi.dtype)


class BackwardEulerMomentum(AbstractImplicitIntegrator):
    """Momentum-conserving backward Euler, Krysl eq. (19): `Π₁ = exp(−Ψ)Π₀ + hT₁`, `Ψ = hΩ₁`."""

    name: ClassVar[str] = "bEM"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 1
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) eq. (19)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state

        def residual(Pi1):
            psi = dt * omega(Pi1)
            return (
                Pi1
                - so3.rotate_exp(-psi, Pi)
                - dt * torque_at(model, t + dt, lambda: rotate_right(R, psi), Pi1)
            )

        Pi1, info = solve_on_branch(
            self.newton, residual, midpoint_predictor(model, omega, t, R, Pi, dt), Pi
        )
        return RigidBodyState(rotate_right(R, dt * omega(Pi1)), Pi1), solver_state, info


# ----------------------------------------------------------------------------------------
# The two conjugate midpoint–trapezoid pairs (§3.3–3.6).


class TRAP(AbstractImplicitIntegrator):
    """Algorithm TRAP (§3.3, eq. 14): fE(Δt/2) then bE(Δt/2). Second order, symmetric;
    conserves the 'midpoint' kinetic energy (§3.5), not spatial momentum."""

    name: ClassVar[str] = "TRAP"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_RTR, "K_midpoint"})
    reference: ClassVar[str] = "Krysl (2007) §3.3, algorithm TRAP, eq. (14)"
    newton: Newton = eqx.field(default_factory=Newton)
    max_angle: float | None = eqx.field(default=None, static=True, converter=so3.check_max_angle)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state
        h, m = 0.5 * dt, self.max_angle
        A = Pi + h * _rhs(model, omega, t, R, Pi)
        psi0 = h * omega(Pi)
        R_half = rotate_right(R, psi0, m)

        def residual(Pi1):
            R1 = lambda: rotate_right(R_half, h * omega(Pi1), m)  # noqa: E731 (for a torque only)
            return Pi1 - A - h * _rhs(model, omega, t + dt, R1, Pi1)

        Pi1, info = solve_on_branch(
            self.newton, residual, midpoint_predictor(model, omega, t, R, Pi, dt), Pi
        )
        psi1 = h * omega(Pi1)
        return (
            RigidBodyState(rotate_right(R_half, psi1, m), Pi1),
            solver_state,
            _promise_kept(info, m, psi0, psi1),
        )


class IMID(AbstractImplicitIntegrator):
    """Algorithm IMID (§3.4): bE(Δt/2) then fE(Δt/2). Second order, symmetric; conserves
    kinetic energy exactly in torque-free motion (eqs. 15–16), not spatial momentum."""

    name: ClassVar[str] = "IMID"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_K, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) §3.4, algorithm IMID"
    newton: Newton = eqx.field(default_factory=Newton)
    max_angle: float | None = eqx.field(default=None, static=True, converter=so3.check_max_angle)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state
        h, m = 0.5 * dt, self.max_angle

        def residual(Pi_bar):
            R_bar = lambda: rotate_right(R, h * omega(Pi_bar), m)  # noqa: E731 (for a torque only)
            return Pi_bar - Pi - h * _rhs(model, omega, t + h, R_bar, Pi_bar)

        Pi_bar, info = solve_on_branch(
            self.newton, residual, half_step_predictor(model, omega, t, R, Pi, dt), Pi
        )
        psi = dt * omega(Pi_bar)
        # Π_n = Π_{n−1} − Δt Ω̄×Π̄ + Δt T_{n−1/2} = 2Π̄ − Π_{n−1} by (15).
        return (
            RigidBodyState(rotate_right(R, psi, m), 2.0 * Pi_bar - Pi),
            solver_state,
            _promise_kept(info, m, psi),
        )


class TRAPM(AbstractImplicitIntegrator):
    """Algorithm TRAPM (§3.6, eq. 20): fEM(Δt/2) then bEM(Δt/2). Second order, symmetric;
    conserves spatial momentum in torque-free motion."""

    name: ClassVar[str] = "TRAPM"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) §3.6, algorithm TRAPM, eq. (20)"
    newton: Newton = eqx.field(default_factory=Newton)
    max_angle: float | None = eqx.field(default=None, static=True, converter=so3.check_max_angle)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state
        h, m = 0.5 * dt, self.max_angle
        psi0 = h * omega(Pi)
        R_half = rotate_right(R, psi0, m)
        A = so3.rotate_exp(-psi0, Pi + h * torque_at(model, t, R, Pi), m)

        def residual(Pi1):
            psi1 = h * omega(Pi1)
            T1 = torque_at(model, t + dt, lambda: rotate_right(R_half, psi1, m), Pi1)
            return Pi1 - so3.rotate_exp(-psi1, A, m) - h * T1

        Pi1, info = solve_on_branch(
            self.newton, residual, midpoint_predictor(model, omega, t, R, Pi, dt), Pi
        )
        psi1 = h * omega(Pi1)
        return (
            RigidBodyState(rotate_right(R_half, psi1, m), Pi1),
            solver_state,
            _promise_kept(info, m, psi0, psi1),
        )


class IMIDM(AbstractImplicitIntegrator):
    """Algorithm IMIDM (§3.6): bEM(Δt/2) then fEM(Δt/2); the Munthe-Kaas RK method with
    tableau ½|1. Second order, symmetric; conserves spatial momentum in torque-free motion.

    The paper's unknown is `Ψ̃ = Δt 𝕀⁻¹Π̄`; we solve for `Π̄` itself, a linear change of
    unknown under which Newton's iterates are the same (Newton is affine invariant) and which
    lets the midpoint torque depend on the momentum.

    `compensated=True`: compensated summation, the rounding error in the solver state
    (`jaxrigid.compensated`).

    `fast_path=True` (default): `simulate` first runs every member with two chord updates
    and the small-angle rotation series (`fast_variant`), and redoes with these settings the
    members of which a step needed more (a third update, or a turn past `FAST_MAX_ANGLE`).
    """

    name: ClassVar[str] = "IMIDM"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) §3.6, algorithm IMIDM"
    newton: Newton = eqx.field(default_factory=Newton)
    max_angle: float | None = eqx.field(default=None, static=True, converter=so3.check_max_angle)
    compensated: bool = eqx.field(default=False, static=True)
    fast_path: bool = eqx.field(default=True, static=True)

    compensated_summation: ClassVar[bool] = True

    def init(self, model, state0, t0, dt):
        return zero_error(state0) if self.compensated else None

    def fast_variant(self):
        """Two chord updates, no loop, and the rotation series for turns ≤ `FAST_MAX_ANGLE`
        (faster than the default settings on large ensembles: bench/README.md,
        `imidm_cost_breakdown.py`); a step needing more is reported failed
        (`max_steps_reached`, `step_bound_broken`), never accepted."""
        if not self.fast_path:
            return None
        bound = FAST_MAX_ANGLE if self.max_angle is None else min(self.max_angle, FAST_MAX_ANGLE)
        newton = dataclasses.replace(self.newton, chord=True, max_steps=2, peel=2)
        return dataclasses.replace(self, newton=newton, max_angle=bound, fast_path=False)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        if self.compensated:
            state = attach(state, solver_state)
        R, Pi = value_of(state)
        h, m = 0.5 * dt, self.max_angle

        def residual(Pi_bar):
            half_psi = h * omega(Pi_bar)
            T = torque_at(model, t + h, lambda: rotate_right(R, half_psi, m), Pi_bar)
            return Pi_bar - so3.rotate_exp(-half_psi, Pi, m) - h * T

        Pi_bar, info = solve_on_branch(
            self.newton, residual, half_step_predictor(model, omega, t, R, Pi, dt), Pi
        )
        half_psi = h * omega(Pi_bar)
        psi = 2.0 * half_psi
        # R_n = R_{n−1} exp(Ψ̃), Π_n = exp(−Ψ̃)Π_{n−1} + Δt exp(−Ψ̃/2) T_{n−1/2}, as increments
        forcing = None
        if model.has_torque:
            T = torque_at(model, t + h, rotate_right(R, half_psi, m), Pi_bar)
            forcing = RigidBodyState(None, dt * so3.rotate_exp(-half_psi, T, m))
        new, solver_state = _carry(self, advance(state, _rotation(psi, m), forcing), solver_state)
        return new, solver_state, _promise_kept(info, m, psi)


for _method in (TRAP, IMID, TRAPM, IMIDM):
    assert _method.__doc__ is not None  # None only under `python -OO`, which drops this assert
    _method.__doc__ += _MAX_ANGLE_DOC
