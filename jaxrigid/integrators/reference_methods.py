"""The reference methods Krysl compares his integrators with (§4): SWC1, AKW, BBTRAP and
BBTRAPWD.

P. Krysl, "Dynamically equivalent implicit algorithms for the integration of rigid body
rotations", Commun. Numer. Meth. Engng (2007). Like Krysl's own methods (`lie_group`), each
implicit step is a Newton solve started from the explicit second-order Lie predictor.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from .._linalg import cross
from ..lie import so3
from ..models.rigid_body import RigidBodyState
from ..models.structures import AbstractLiePoissonBody
from ..newton import Newton
from .base import AbstractImplicitIntegrator, solve_on_branch
from .lie_group import (
    INVARIANT_K,
    INVARIANT_PI,
    INVARIANT_RTR,
    midpoint_predictor,
    rotate_right,
    torque_at,
)


class SWC1(AbstractImplicitIntegrator):
    """Simo–Wong ALGO_C1 (§4): `Ψ = Δt/2 (Ω_n + Ω_{n−1})`, `Π_n = exp(−Ψ)Π_{n−1} +
    Δt exp(−Ψ/2) T_{n−1/2}`. Second order, symmetric; conserves energy and spatial momentum
    in torque-free motion. The midpoint torque is taken at `R_{n−1} exp(Ψ/2)`, `(Π_{n−1}+Π_n)/2`.
    """

    name: ClassVar[str] = "SWC1"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_K, INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) §4, algorithm SWC1 (Simo & Wong 1991)"
    newton: Newton = eqx.field(default_factory=Newton)

    def _psi(self, omega, Pi, Pi1, dt):
        return 0.5 * dt * (omega(Pi1) + omega(Pi))

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state

        def residual(Pi1):
            psi = self._psi(omega, Pi, Pi1, dt)
            T = torque_at(model, t + 0.5 * dt, lambda: rotate_right(R, 0.5 * psi), 0.5 * (Pi + Pi1))
            return Pi1 - so3.rotate_exp(-psi, Pi) - dt * so3.rotate_exp(-0.5 * psi, T)

        Pi1, info = solve_on_branch(
            self.newton, residual, midpoint_predictor(model, omega, t, R, Pi, dt), Pi
        )
        return (
            RigidBodyState(rotate_right(R, self._psi(omega, Pi, Pi1, dt)), Pi1),
            solver_state,
            info,
        )


class AKW(AbstractImplicitIntegrator):
    """Austin–Krishnaprasad–Wang (§4): `Π_n = Π_{n−1} − Δt Ω̄×Π̄ + Δt/2 (T_{n−1} + T_n)`,
    `R_n = R_{n−1} cay(Δt Ω̄)`, with `Π̄ = (Π_{n−1} + Π_n)/2` and the Cayley map
    `cay(A) = (1 − A/2)⁻¹(1 + A/2)`. Second order, symmetric; conserves energy and spatial
    momentum in torque-free motion."""

    name: ClassVar[str] = "AKW"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_K, INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) §4, algorithm AKW (Austin et al. 1993)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state
        T0 = torque_at(model, t, R, Pi)

        def R_next(Pi1):
            return R @ so3.cayley(dt * omega(0.5 * (Pi + Pi1)))

        def residual(Pi1):
            Pi_bar = 0.5 * (Pi + Pi1)
            T1 = torque_at(model, t + dt, lambda: R_next(Pi1), Pi1)
            return Pi1 - Pi - dt * cross(Pi_bar, omega(Pi_bar)) - 0.5 * dt * (T0 + T1)

        Pi1, info = solve_on_branch(
            self.newton, residual, midpoint_predictor(model, omega, t, R, Pi, dt), Pi
        )
        return RigidBodyState(R_next(Pi1), Pi1), solver_state, info


class BBTRAP(AbstractImplicitIntegrator):
    """Bottasso–Borri with truncated `dexp⁻¹ ≈ 1` (§4): `Ψ = Δt/2 (Ω_n + Ω_{n−1})`,
    `Π_n = exp(−Ψ)(Π_{n−1} + Δt/2 T_{n−1}) + Δt/2 T_n`. Second order, symmetric; conserves
    energy and spatial momentum torque-free (where it coincides with SWC1)."""

    name: ClassVar[str] = "BBTRAP"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    symmetric: ClassVar[bool] = True
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_K, INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) §4, algorithm BBTRAP (Bottasso & Borri 1998)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state
        A = Pi + 0.5 * dt * torque_at(model, t, R, Pi)

        def psi_of(Pi1):
            return 0.5 * dt * (omega(Pi1) + omega(Pi))

        def residual(Pi1):
            psi = psi_of(Pi1)
            T1 = torque_at(model, t + dt, lambda: rotate_right(R, psi), Pi1)
            return Pi1 - so3.rotate_exp(-psi, A) - 0.5 * dt * T1

        Pi1, info = solve_on_branch(
            self.newton, residual, midpoint_predictor(model, omega, t, R, Pi, dt), Pi
        )
        return RigidBodyState(rotate_right(R, psi_of(Pi1)), Pi1), solver_state, info


class BBTRAPWD(AbstractImplicitIntegrator):
    """Bottasso–Borri with the full `dexp⁻¹` (§4): the Munthe-Kaas RK method with the
    trapezoidal tableau. `Ψ = Δt/2 (dexp⁻¹_{−Ψ} Ω_n + Ω_{n−1})`, `Π_n = exp(−Ψ)(Π_{n−1} +
    Δt/2 T_{n−1}) + Δt/2 T_n`. Second order; conserves spatial momentum torque-free.
    Unknowns `(Ψ, Π_n)`: a 6×6 Newton system."""

    name: ClassVar[str] = "BBTRAPWD"
    structures = (AbstractLiePoissonBody,)
    order: ClassVar[int] = 2
    preserves: ClassVar[frozenset[str]] = frozenset({INVARIANT_PI, INVARIANT_RTR})
    reference: ClassVar[str] = "Krysl (2007) §4, algorithm BBTRAPWD (Bottasso & Borri 1998)"
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        omega = model.angular_velocity_map()
        R, Pi = state
        Omega0 = omega(Pi)
        A = Pi + 0.5 * dt * torque_at(model, t, R, Pi)

        def residual(x):
            psi, Pi1 = x[:3], x[3:]
            r_psi = psi - 0.5 * dt * (so3.dexpinv_apply(-psi, omega(Pi1)) + Omega0)
            T1 = torque_at(model, t + dt, lambda: rotate_right(R, psi), Pi1)
            r_pi = Pi1 - so3.rotate_exp(-psi, A) - 0.5 * dt * T1
            return jnp.concatenate([r_psi, r_pi])

        Pi_pred = midpoint_predictor(model, omega, t, R, Pi, dt)
        guess = jnp.concatenate([0.5 * dt * (Omega0 + omega(Pi_pred)), Pi_pred])
        x, info = solve_on_branch(
            self.newton, residual, guess, jnp.concatenate([jnp.zeros_like(Pi), Pi])
        )
        return RigidBodyState(rotate_right(R, x[:3]), x[3:]), solver_state, info
