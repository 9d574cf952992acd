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

`dexp⁻¹` may be replaced by its Bernoulli series truncated after the terms of degree `q − 2` in
`Ψ` for a tableau of order `q` (Munthe-Kaas 1999, "High order Runge–Kutta methods on
manifolds"; Krysl §3.7 uses the exact map): the method keeps order `q` (`dexpinv_series`,
`AbstractMKRK.dexpinv_degree`, `MKRKRK4Truncated`).
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
from .base import (
    AbstractImplicitIntegrator,
    AbstractTableauIntegrator,
    construct,
    tableau_method,
)
from .lie_group import torque_at
from .runge_kutta import explicit_rk_step, implicit_rk_step, initial_slopes
from .tableau import GAUSS4, GAUSS6, IMPLICIT_MIDPOINT, RK4, ButcherTableau

# B_k / k! for k = 0..8 (Bernoulli numbers with B₁ = −½; the odd ones past B₁ vanish)
_BERNOULLI_OVER_FACTORIAL = (1.0, -1 / 2, 1 / 12, 0.0, -1 / 720, 0.0, 1 / 30240, 0.0, -1 / 1209600)


def dexpinv_series(w, v, degree: int):
    """`dexp⁻¹_w(v)` by its Bernoulli series `Σ_{k ≤ degree} B_k/k! ad_w^k v`, `ad_w = w×`
    (Munthe-Kaas 1999): `v − ½ w×v + (1/12) w×(w×v) − (1/720) (w×)⁴v + …`, the Taylor
    expansion of `so3.dexpinv_apply` in `w`. `w`, `v`: `(..., 3)`; `degree` from 0 to 8."""
    if not 0 <= degree < len(_BERNOULLI_OVER_FACTORIAL):
        raise ValueError(f"dexpinv_series: degree must be 0..{len(_BERNOULLI_OVER_FACTORIAL) - 1}")
    out, term = v, v
    for k in range(1, degree + 1):
        term = cross(w, term)
        if _BERNOULLI_OVER_FACTORIAL[k] != 0.0:
            out = out + _BERNOULLI_OVER_FACTORIAL[k] * term
    return out


class AbstractMKRK(AbstractTableauIntegrator):
    """Munthe-Kaas Runge–Kutta method with the class's Butcher `tableau`.

    Order: the tableau's. Name: `MKRK` for the tableau ½|1 (IMIDM), else `MKRK-<tableau>`,
    with `-truncated` where `dexp⁻¹` is a truncated series. Not claimed symmetric (an RKMK
    method centred at the step's start point is not self-adjoint in general, whatever its
    tableau).

    `dexpinv_degree`: `None` for the exact `dexp⁻¹` (`so3.dexpinv_apply`), else the highest
    power of `Ψ` kept of its series (`dexpinv_series`); at least `order − 2`, which keeps the
    tableau's order (Munthe-Kaas 1999; `MKRKRK4Truncated`).
    """

    preserves: ClassVar[frozenset[str]] = frozenset({"pi", "RtR_error"})
    structures = (AbstractLiePoissonBody,)
    reference: ClassVar[str] = "Krysl (2007) §3.7, algorithm MKRK; Munthe-Kaas (1998)"
    dexpinv_degree: ClassVar[int | None] = None

    @classmethod
    def tableau_facts(cls, tableau):
        name = "MKRK" if tableau.name == IMPLICIT_MIDPOINT.name else f"MKRK-{tableau.name}"
        if cls.dexpinv_degree is not None:
            if cls.dexpinv_degree < tableau.order - 2:
                raise ValueError(
                    f"{cls.__name__}: dexpinv_degree {cls.dexpinv_degree} lowers the order of "
                    f"tableau {tableau.name}; an order-{tableau.order} method keeps the terms "
                    f"up to degree {tableau.order - 2} (Munthe-Kaas 1999)"
                )
            name += "-truncated"
        return {**super().tableau_facts(tableau), "name": name}

    def _dexpinv(self, w, v):
        """`dexp⁻¹_w(v)`: exact, or its series to `dexpinv_degree`."""
        if self.dexpinv_degree is None:
            return so3.dexpinv_apply(w, v)
        return dexpinv_series(w, v, self.dexpinv_degree)

    def _flat(self, model, state, t):
        """The incremental form (17) as `y' = F(τ, y)`, `y = (Ψ, μ)`, from `y(0) = (0, Π₀)`."""
        R, Pi = state
        omega = model.angular_velocity_map()  # 𝕀⁻¹ once per step, not once per stage

        def F(tau, y):
            psi, mu = y[:3], y[3:]
            Pi_tau = so3.rotate_exp(-psi, mu)
            dpsi = self._dexpinv(-psi, omega(Pi_tau))
            if model.has_torque:
                T = torque_at(model, t + tau, so3.compose_exp(R, psi), Pi_tau)
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


class MKRKGauss6(AbstractImplicitMKRK):
    """MKRK with the three-stage Gauss tableau: order 6, all 18 stage unknowns by Newton."""

    tableau = GAUSS6


class MKRKRK4(AbstractExplicitMKRK):
    """MKRK with the classical RK4 tableau: explicit, order 4 (Munthe-Kaas 1998)."""

    tableau = RK4


class MKRKRK4Truncated(AbstractExplicitMKRK):
    """MKRK with the RK4 tableau and `dexp⁻¹_{−Ψ}(v) ≈ v + ½ Ψ×v + (1/12) Ψ×(Ψ×v)`, its series
    truncated after degree `q − 2 = 2` (Munthe-Kaas 1999, "High order Runge–Kutta methods on
    manifolds"; Krysl §3.7 for the incremental form (17)): explicit, order 4.

    Why the order is kept: the degree-3 term vanishes (B₃ = 0), and the first dropped one,
    `−(1/720) (Ψ×)⁴ v`, is O(Δt⁴)·|v| at every stage, since `Ψ = O(Δt)` over the step; it
    enters `Ψ₁` through the Δt-weighted sum `Δt Σ b_i K_i`, so the local error it adds is
    O(Δt⁵), that of RK4 itself (Munthe-Kaas's argument is sharper: along the flow
    `Ψ(τ) = τ v(0) + O(τ²)`, so `Ψ×v = O(Δt²)` and every dropped term of degree ≥ q − 1 is
    O(Δt^q)). It differs from `MKRKRK4` only in `dexpinv_degree`."""

    tableau = RK4
    dexpinv_degree = 2


MKRK_CLASSES = (MKRKMidpoint, MKRKGauss4, MKRKGauss6, MKRKRK4, MKRKRK4Truncated)
# the call form `MKRK(tableau)` builds the exact-`dexp⁻¹` method of a table
_CLASS_OF_TABLEAU: dict[ButcherTableau, type] = {
    cls.tableau: cls for cls in MKRK_CLASSES if cls.dexpinv_degree is None
}


def mkrk_class(tableau: ButcherTableau) -> type[AbstractMKRK]:
    """The MKRK class of `tableau`: a named one (`MKRKGauss4` for `GAUSS4`), else one made
    once per table (explicit or implicit as the table is)."""
    return tableau_method(_CLASS_OF_TABLEAU, tableau, AbstractExplicitMKRK, AbstractImplicitMKRK)


def MKRK(tableau: ButcherTableau = IMPLICIT_MIDPOINT, newton: Newton | None = None):
    """The Munthe-Kaas RK method of `tableau` (default ½|1, i.e. IMIDM): an instance of
    `mkrk_class(tableau)`. `newton` applies to implicit tables; given for an explicit one it
    is a `TypeError`."""
    return construct(mkrk_class(tableau), newton)
