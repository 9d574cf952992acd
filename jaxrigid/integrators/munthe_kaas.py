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
from .base import AbstractTableauIntegrator
from .lie_group import _omega, _torque
from .runge_kutta import rk_step
from .tableau import IMPLICIT_MIDPOINT, ButcherTableau


class MKRK(AbstractTableauIntegrator):
    """Munthe-Kaas Runge–Kutta method with a Butcher tableau (default ½|1, i.e. IMIDM).

    Order: the tableau's. Implicit tableaux solve all `6s` stage unknowns with `newton`;
    explicit ones are evaluated stage by stage.
    """

    preserves: ClassVar[frozenset[str]] = frozenset({"pi", "RtR_error"})
    model_types: ClassVar[tuple[type, ...]] = (RigidBody,)
    reference: ClassVar[str] = "Krysl (2007) §3.7, algorithm MKRK; Munthe-Kaas (1998)"
    tableau: ButcherTableau = eqx.field(default=IMPLICIT_MIDPOINT, static=True)
    newton: Newton = eqx.field(default_factory=Newton)

    @property
    def name(self) -> str:  # type: ignore[override]
        if self.tableau.name == IMPLICIT_MIDPOINT.name:
            return "MKRK"
        return f"MKRK-{self.tableau.name}"

    def step(self, model, state, solver_state, t, dt):
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

        y0 = jnp.concatenate([jnp.zeros_like(Pi), Pi])
        y1, info = rk_step(F, y0, dt, self.tableau, self.newton)
        psi, mu = y1[:3], y1[3:]
        return RigidBodyState(so3.compose_exp(R, psi), so3.rotate_exp(-psi, mu)), solver_state, info
