"""Classical Runge–Kutta methods for `dy/dt = f(t, y)` on pytrees, given by their tableau.

The model lays its state out as one array (`state_layout`: a flat vector for a canonical
system, one row per body for a chain) and supplies `vector_field(t, state) -> state`; the
shared engine `runge_kutta` steps it: explicit tables stage by stage, implicit ones by solving
for all stage increments with `Newton`, started from the previous step's stages extrapolated
(the solver state). Newton's linear solver is by default the one the model's structure
declares (`StructureDefault`, resolved at each step): for a canonical system full Newton
(`Auto`: the Jacobian by `jax.jacfwd`, re-formed every iteration), whose default stopping
rule, `max|Δz| ≤ eps^(3/4)(1 + max|z|)`, leaves an error of order `(eps^(3/4))²` after a
quadratically convergent iteration: round-off, so the symplecticity of the Gauss and Sun Geng
tables is not spoiled by the solver (Chaurasia 2012, ch. 2, used a fixed tolerance 10⁻¹⁰
instead); for a chain of bodies the per-body simplified Newton (`StageJacobian`, Hairer &
Wanner II §IV.8), cost linear in the number of bodies.

The Gauss methods integrate both structures: Chaurasia (2012) §3.3–3.5 integrates the
quaternion chain (3.28a–d) with Gauss6. There `qᵀg` is a quadratic first integral of the
vector field (`QuaternionChain.multiplier`), so the Gauss methods keep it to round-off, and
the unit-norm error is the method's own error (tests/test_chain_gauss.py measures it against
the thesis's Figure 3.3 claim of second order). Any other `Newton` linear solver applies to
the stage residual itself, e.g. `Gauss6(newton=Newton(chord=True,
linear_solver=BlockDiagonal()))` on a chain: the Jacobian's `N+2` diagonal `14s × 14s` blocks
(each also holding its neighbours' blocks) and a dense LU per body, slower per step than the
default (bench/README.md, `chain_gauss_timing.py`). Either way the root is the collocation
solution, and gradients come from the implicit function theorem with the exact Jacobian.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import equinox as eqx

from ..linear_solvers import StructureDefault
from ..models.structures import (
    AbstractCanonicalChain,
    AbstractCanonicalSystem,
    AbstractStructure,
)
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

    structures: ClassVar[tuple[type[AbstractStructure], ...]] = (AbstractCanonicalSystem,)
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

    def _field(self, model, state, t):
        """`(F, y0, from_array)`: the field `F(τ, y)` at `t + τ` on the model's array layout of
        the state, the state `y0` in it, and the map back to a state."""
        y0, to_array, from_array = model.state_layout(state)

        def F(tau, y):
            return to_array(model.vector_field(t + tau, from_array(y)))

        return F, y0, from_array


class AbstractExplicitRungeKutta(AbstractRungeKutta):
    """An explicit Runge–Kutta method: stage by stage, no solve, no Newton settings."""

    def step(self, model, state, solver_state, t, dt):
        F, y0, unravel = self._field(model, state, t)
        y1, info = explicit_rk_step(F, y0, dt, self.tableau)
        return unravel(y1), solver_state, info


def _structure_default_newton() -> Newton:
    return Newton(linear_solver=StructureDefault())


class AbstractImplicitRungeKutta(AbstractRungeKutta, AbstractImplicitIntegrator):
    """An implicit Runge–Kutta method: all stage increments solved at once with `newton`
    (default: `Newton` with the linear solver the model's structure declares,
    `stage_linear_solver`: `Auto()` for a canonical system, `StageJacobian()` for a chain).

    Solver state: the guess `(s, *y.shape)` of the next step's stage derivatives on the
    model's `state_layout`, from which Newton starts (`runge_kutta`: `f(y0)` for the first
    step, then the previous step's stage derivatives extrapolated, Hairer & Wanner IV.8)."""

    newton: Newton = eqx.field(default_factory=_structure_default_newton)

    def newton_for(self, model) -> Newton:
        """`newton` with its linear solver resolved against the model's structure (a
        `StructureDefault` becomes the structure's `stage_linear_solver`)."""
        solver = self.newton.linear_solver.resolve(model.stage_linear_solver)
        if solver is self.newton.linear_solver:
            return self.newton
        return dataclasses.replace(self.newton, linear_solver=solver)

    def init(self, model, state0, t0, dt):
        F, y0, _ = self._field(model, state0, t0)
        return initial_slopes(F, y0, dt, self.tableau)

    def step(self, model, state, solver_state, t, dt):
        F, y0, from_array = self._field(model, state, t)
        newton, reach = self.newton_for(model), model.coupling_reach
        y1, slopes, info = implicit_rk_step(F, y0, dt, self.tableau, newton, solver_state, reach)
        return from_array(y1), slopes, info


class AbstractGauss(AbstractImplicitRungeKutta):
    """Gauss–Legendre collocation (GNI §II.1.3), on a canonical system or on a chain of bodies
    in quaternions (Chaurasia 2012, §3.3–3.5: Gauss6 on (3.28a–d)); module docstring."""

    structures = (AbstractCanonicalSystem, AbstractCanonicalChain)
    reference: ClassVar[str] = (
        "Chaurasia (2012) ch. 2, §3.3–3.5; Hairer, Lubich & Wanner, GNI §II.1, §VI.4; "
        "Hairer & Wanner II §IV.8"
    )


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


class Gauss2(AbstractGauss):
    """Gauss–Legendre collocation, 1 stage (the implicit midpoint rule under its GNI name)."""

    tableau = tb.GAUSS2


class Gauss4(AbstractGauss):
    """Gauss–Legendre collocation, 2 stages, order 4 (GNI Table II.1.1)."""

    tableau = tb.GAUSS4


class Gauss6(AbstractGauss):
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
