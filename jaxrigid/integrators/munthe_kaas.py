"""Munthe-Kaas Runge–Kutta (RKMK) methods for the rigid body, Krysl §3.7, algorithm MKRK.

MKRK is a classical RK method, given by its tableau, applied to the incremental form (17) of
the equations of motion, a vector-space ODE for `y = (Ψ, μ)` on `[t, t + Δt]`:

    Ψ' = dexp⁻¹_{−Ψ} 𝕀⁻¹Π,   μ' = exp(Ψ) T(t + τ, R₀ exp Ψ, Π),   Π = exp(−Ψ) μ,

from `Ψ(0) = 0`, `μ(0) = Π₀`; then `R₁ = R₀ exp Ψ₁`, `Π₁ = exp(−Ψ₁) μ₁`. Written out stage by
stage this is the printed algorithm, with two typographical slips corrected:

1. the stage momentum reads `Π_(k) = exp[−Ψ_(k)](Π_{n−1} + Δt Σ_j a_kj exp[Ψ_(j)] T_(j))`:
   the paper prints `T_(k)` inside the sum over `j`; with `T_(k)` the trapezoidal tableau does
   not give BBTRAPWD (its last stage would weight `T_n` twice and `T_{n−1}` not at all);
2. the stray superscript `s` after the closing parentheses of the two momentum lines is the
   upper limit of the sums `Σ_{j=1}^{s}`, displaced.

With the tableau ½|1 the method is IMIDM; with the trapezoidal tableau it is BBTRAPWD. The
method has the order of its tableau (the ODE above lives in a vector space) and conserves
spatial momentum in torque-free motion (`μ` stays `Π₀`).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from ..lie import so3
from ..models.rigid_body import RigidBody, RigidBodyState
from ..newton import Newton
from .base import (
    AbstractImplicitIntegrator,
    AbstractTableauIntegrator,
    construct,
    tableau_method,
)
from .lie_group import _omega, _torque
from .runge_kutta import explicit_rk_step, implicit_rk_step, initial_slopes
from .tableau import GAUSS4, IMPLICIT_MIDPOINT, RK4, ButcherTableau


class AbstractMKRK(AbstractTableauIntegrator):
    """Munthe-Kaas Runge–Kutta method with the class's Butcher `tableau`.

    Order: the tableau's. Name: `MKRK` for the tableau ½|1 (IMIDM), else `MKRK-<tableau>`.
    Not claimed symmetric (an RKMK method centred at the step's start point is not
    self-adjoint in general, whatever its tableau).
    """

    preserves: ClassVar[frozenset[str]] = frozenset({"pi", "RtR_error"})
    model_types: ClassVar[tuple[type, ...]] = (RigidBody,)
    reference: ClassVar[str] = "Krysl (2007) §3.7, algorithm MKRK; Munthe-Kaas (1998)"

    @classmethod
    def tableau_facts(cls, tableau):
        name = "MKRK" if tableau.name == IMPLICIT_MIDPOINT.name else f"MKRK-{tableau.name}"
        return {**super().tableau_facts(tableau), "name": name}

    def _flat(self, model, state, t):
        """The incremental form (17) as `y' = F(τ, y)`, `y = (Ψ, μ)`, from `y(0) = (0, Π₀)`."""
        R, Pi = state

        def F(tau, y):
            psi, mu = y[:3], y[3:]
            Pi_tau = so3.rotate_exp(-psi, mu)
            dpsi = so3.dexpinv_apply(-psi, _omega(model, Pi_tau))
            if model.has_torque:
                T = _torque(model, t + tau, so3.compose_exp(R, psi), Pi_tau)
                dmu = so3.rotate_exp(psi, T)
            else:
                dmu = jnp.zeros_like(mu)
            return jnp.concatenate([dpsi, dmu])

        return F, jnp.concatenate([jnp.zeros_like(Pi), Pi])

    @staticmethod
    def _state(R, y1):
        psi, mu = y1[:3], y1[3:]
        return RigidBodyState(so3.compose_exp(R, psi), so3.rotate_exp(-psi, mu))


class AbstractExplicitMKRK(AbstractMKRK):
    """MKRK with an explicit tableau: stage by stage, no Newton settings."""

    def step(self, model, state, solver_state, t, dt):
        F, y0 = self._flat(model, state, t)
        y1, info = explicit_rk_step(F, y0, dt, self.tableau)
        return self._state(state.R, y1), solver_state, info


class AbstractImplicitMKRK(AbstractMKRK, AbstractImplicitIntegrator):
    """MKRK with an implicit tableau: all `6s` stage unknowns solved with `newton`, started
    from the previous step's stage derivatives extrapolated (the solver state, `(s, 6)`;
    `runge_kutta`)."""

    newton: Newton = eqx.field(default_factory=Newton)

    def init(self, model, state0, t0, dt):
        F, y0 = self._flat(model, state0, t0)
        return initial_slopes(F, y0, dt, self.tableau)

    def step(self, model, state, solver_state, t, dt):
        F, y0 = self._flat(model, state, t)
        y1, slopes, info = implicit_rk_step(F, y0, dt, self.tableau, self.newton, solver_state)
        return self._state(state.R, y1), slopes, info


class MKRKMidpoint(AbstractImplicitMKRK):
    """MKRK with the tableau ½|1: IMIDM (Krysl §3.7), the registry's `MKRK`."""

    tableau = IMPLICIT_MIDPOINT


class MKRKGauss4(AbstractImplicitMKRK):
    """MKRK with the two-stage Gauss tableau: order 4."""

    tableau = GAUSS4


class MKRKRK4(AbstractExplicitMKRK):
    """MKRK with the classical RK4 tableau: explicit, order 4 (Munthe-Kaas 1998)."""

    tableau = RK4


MKRK_CLASSES = (MKRKMidpoint, MKRKGauss4, MKRKRK4)
_CLASS_OF_TABLEAU: dict[ButcherTableau, type] = {cls.tableau: cls for cls in MKRK_CLASSES}


def mkrk_class(tableau: ButcherTableau) -> type[AbstractMKRK]:
    """The MKRK class of `tableau`: a named one (`MKRKGauss4` for `GAUSS4`), else one made
    once per table (explicit or implicit as the table is)."""
    return tableau_method(_CLASS_OF_TABLEAU, tableau, AbstractExplicitMKRK, AbstractImplicitMKRK)


def MKRK(tableau: ButcherTableau = IMPLICIT_MIDPOINT, newton: Newton | None = None):
    """The Munthe-Kaas RK method of `tableau` (default ½|1, i.e. IMIDM): an instance of
    `mkrk_class(tableau)` (the call form of the release when `MKRK` was one class with a
    `tableau` field). `newton` applies to implicit tables; given for an explicit one it is
    ignored with a `DeprecationWarning` (accepted for one release)."""
    return construct(mkrk_class(tableau), newton)
