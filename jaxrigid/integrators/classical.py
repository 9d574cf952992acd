"""Classical Runge–Kutta methods for `dy/dt = f(t, y)` on pytrees, given by their tableau.

The state pytree is flattened with `jax.flatten_util.ravel_pytree` and stepped by the shared
engine `runge_kutta`: explicit tables stage by stage, implicit ones by solving for all stage
increments with full `Newton` (Jacobian by `jax.jacfwd`, re-formed every iteration), started
from the previous step's stages extrapolated (the solver state). Its
default stopping rule, `max|Δz| ≤ eps^(3/4)(1 + max|z|)`, leaves an error of order
`(eps^(3/4))²` after a quadratically convergent iteration: round-off, so the symplecticity of
the Gauss and Sun Geng tables is not spoiled by the solver (Chaurasia 2012, ch. 2, used a
fixed tolerance 10⁻¹⁰ instead). The model supplies `vector_field(t, state) -> state`.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
from jax.flatten_util import ravel_pytree

from ..models.structures import AbstractCanonicalSystem
from ..newton import Newton
from . import tableau as tb
from .base import (
    AbstractImplicitIntegrator,
    AbstractTableauIntegrator,
    construct,
    tableau_method,
)
from .runge_kutta import explicit_rk_step, implicit_rk_step, initial_slopes


class AbstractHamiltonianTableauIntegrator(AbstractTableauIntegrator):
    """A tableau method for Hamiltonian systems: symmetric and symplectic as its tableau is,
    and then keeping Kepler's angular momentum `L` (a quadratic, resp. bilinear `qᵀBp`,
    invariant) to round-off (GNI Thms. IV.2.2–2.3). These are class facts, from the table."""

    structures = (AbstractCanonicalSystem,)
    symplectic: ClassVar[bool] = False

    @classmethod
    def tableau_facts(cls, tableau):
        symplectic = bool(tableau.symplectic)
        return {
            **super().tableau_facts(tableau),
            "symmetric": bool(tableau.symmetric),
            "symplectic": symplectic,
            "preserves": frozenset({"L"}) if symplectic else frozenset(),
        }


class AbstractRungeKutta(AbstractHamiltonianTableauIntegrator):
    """The Runge–Kutta method of the class's `tableau` applied to `model.vector_field`.

    Facts from the tableau: `name`, `order`, `implicit` (any nonzero `a_ij`, `j ≥ i`),
    `symplectic` (`b_i a_ij + b_j a_ji = b_i b_j`), and then `preserves = {"L"}`: symplectic RK
    methods keep every quadratic invariant (Kepler's angular momentum) to round-off (GNI
    Thm. IV.2.2).
    """

    reference: ClassVar[str] = "Chaurasia (2012) ch. 2; Hairer, Lubich & Wanner, GNI §II.1, §VI.4"

    def _flat(self, model, state, t):
        y0, unravel = ravel_pytree(state)

        def F(tau, y):
            return ravel_pytree(model.vector_field(t + tau, unravel(y)))[0]

        return F, y0, unravel


class AbstractExplicitRungeKutta(AbstractRungeKutta):
    """An explicit Runge–Kutta method: stage by stage, no solve, no Newton settings."""

    def step(self, model, state, solver_state, t, dt):
        F, y0, unravel = self._flat(model, state, t)
        y1, info = explicit_rk_step(F, y0, dt, self.tableau)
        return unravel(y1), solver_state, info


class AbstractImplicitRungeKutta(AbstractRungeKutta, AbstractImplicitIntegrator):
    """An implicit Runge–Kutta method: all stage increments solved at once with `newton`.

    Solver state: the guess `(s, n)` of the next step's stage derivatives, from which Newton
    starts (`runge_kutta`: `f(y0)` for the first step, then the previous step's stage
    derivatives extrapolated, Hairer & Wanner IV.8)."""

    newton: Newton = eqx.field(default_factory=Newton)

    def init(self, model, state0, t0, dt):
        F, y0, _ = self._flat(model, state0, t0)
        return initial_slopes(F, y0, dt, self.tableau)

    def step(self, model, state, solver_state, t, dt):
        F, y0, unravel = self._flat(model, state, t)
        y1, slopes, info = implicit_rk_step(F, y0, dt, self.tableau, self.newton, solver_state)
        return unravel(y1), slopes, info


# The methods of Chaurasia (2012) ch. 2, one class each (the CLI's --method is the `name`).


class Euler(AbstractExplicitRungeKutta):
    """Forward Euler (order 1)."""

    tableau = tb.EULER


class ImplicitEuler(AbstractImplicitRungeKutta):
    """Backward Euler (order 1, L-stable)."""

    tableau = tb.IMPLICIT_EULER


class RK4(AbstractExplicitRungeKutta):
    """The classical explicit Runge–Kutta method of order 4."""

    tableau = tb.RK4


class ImplicitMidpoint(AbstractImplicitRungeKutta):
    """The implicit midpoint rule (order 2, symplectic, symmetric)."""

    tableau = tb.IMPLICIT_MIDPOINT


class Gauss2(AbstractImplicitRungeKutta):
    """Gauss–Legendre collocation, 1 stage (the implicit midpoint rule under its GNI name)."""

    tableau = tb.GAUSS2


class Gauss4(AbstractImplicitRungeKutta):
    """Gauss–Legendre collocation, 2 stages, order 4 (GNI Table II.1.1)."""

    tableau = tb.GAUSS4


class Gauss6(AbstractImplicitRungeKutta):
    """Gauss–Legendre collocation, 3 stages, order 6 (GNI Table II.1.1)."""

    tableau = tb.GAUSS6


class RadauIIA5(AbstractImplicitRungeKutta):
    """Radau IIA, 3 stages, order 5 (Hairer & Wanner II, Table IV.5.6; not symplectic)."""

    tableau = tb.RADAU_IIA5


class SunGeng5(AbstractImplicitRungeKutta):
    """Sun Geng's symplectic method of order 5 (Chaurasia 2012, Table 2.1 d)."""

    tableau = tb.SUN_GENG5


CLASSICAL_CLASSES = (
    Euler,
    ImplicitEuler,
    RK4,
    ImplicitMidpoint,
    Gauss2,
    Gauss4,
    Gauss6,
    RadauIIA5,
    SunGeng5,
)
CLASSICAL_METHODS = {cls.name: cls for cls in CLASSICAL_CLASSES}
"""Classical methods by the names of Chaurasia (2012) ch. 2 (the CLI's --method)."""

_CLASS_OF_TABLEAU: dict[tb.ButcherTableau, type] = {cls.tableau: cls for cls in CLASSICAL_CLASSES}


def rk_class(tableau: tb.ButcherTableau) -> type[AbstractRungeKutta]:
    """The method class of `tableau`: the named class of a built-in table (`Gauss6` for
    `GAUSS6`), else one made once per table (explicit or implicit as the table is)."""
    return tableau_method(
        _CLASS_OF_TABLEAU, tableau, AbstractExplicitRungeKutta, AbstractImplicitRungeKutta
    )


def RungeKutta(tableau: tb.ButcherTableau = tb.RK4, newton: Newton | None = None):
    """The Runge–Kutta method of `tableau`: an instance of `rk_class(tableau)` (a user's own
    table is a method this way). `newton` applies to implicit tables; an explicit one has no
    Newton settings, and a `newton` given for it is a `TypeError`."""
    return construct(rk_class(tableau), newton)
