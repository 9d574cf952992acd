"""Classical Runge–Kutta methods for `dy/dt = f(t, y)` on pytrees, given by their tableau.

The state pytree is flattened with `jax.flatten_util.ravel_pytree` and stepped by the shared
engine `runge_kutta.rk_step`: explicit tables stage by stage, implicit ones by solving for all
stage increments with full `Newton` (Jacobian by `jax.jacfwd`, re-formed every iteration). Its
default stopping rule, `max|Δz| ≤ eps^(3/4)(1 + max|z|)`, leaves an error of order
`(eps^(3/4))²` after a quadratically convergent iteration: round-off, so the symplecticity of
the Gauss and Sun Geng tables is not spoiled by the solver (Chaurasia 2012, ch. 2, used a
fixed tolerance 10⁻¹⁰ instead). The model supplies `vector_field(t, state) -> state`.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import equinox as eqx
from jax.flatten_util import ravel_pytree

from ..models.hamiltonian import HamiltonianSystem
from ..newton import Newton
from . import tableau as tb
from .base import AbstractTableauIntegrator
from .runge_kutta import rk_step


class AbstractHamiltonianTableauIntegrator(AbstractTableauIntegrator):
    """A tableau method for Hamiltonian systems: symmetric and symplectic as its tableau is,
    and then keeping Kepler's angular momentum `L` (a quadratic, resp. bilinear `qᵀBp`,
    invariant) to round-off (GNI Thms. IV.2.2–2.3)."""

    model_types: ClassVar[tuple[type, ...]] = (HamiltonianSystem,)

    @property
    def symmetric(self) -> bool:  # type: ignore[override]
        return self.tableau.symmetric

    @property
    def symplectic(self) -> bool:
        return self.tableau.symplectic

    @property
    def preserves(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset({"L"}) if self.tableau.symplectic else frozenset()


class RungeKutta(AbstractHamiltonianTableauIntegrator):
    """The Runge–Kutta method of `tableau` applied to `model.vector_field`.

    Facts from the tableau: `name`, `order`, `implicit` (any nonzero `a_ij`, `j ≥ i`),
    `symplectic` (`b_i a_ij + b_j a_ji = b_i b_j`), and then `preserves = {"L"}`: symplectic RK
    methods keep every quadratic invariant (Kepler's angular momentum) to round-off (GNI
    Thm. IV.2.2).
    """

    reference: ClassVar[str] = "Chaurasia (2012) ch. 2; Hairer, Lubich & Wanner, GNI §II.1, §VI.4"
    tableau: tb.ButcherTableau = eqx.field(default=tb.RK4, static=True)
    newton: Newton = eqx.field(default_factory=Newton)

    def step(self, model, state, solver_state, t, dt):
        y0, unravel = ravel_pytree(state)

        def F(tau, y):
            return ravel_pytree(model.vector_field(t + tau, unravel(y)))[0]

        y1, info = rk_step(F, y0, dt, self.tableau, self.newton)
        return unravel(y1), solver_state, info


def _rk(table):
    return functools.partial(RungeKutta, tableau=table)


# Classical methods by the names of Chaurasia (2012) ch. 2 (the CLI's --method).
CLASSICAL_METHODS = {
    "euler": _rk(tb.EULER),
    "implicit-euler": _rk(tb.IMPLICIT_EULER),
    "rk4": _rk(tb.RK4),
    "implicit-midpoint": _rk(tb.IMPLICIT_MIDPOINT),
    "gauss2": _rk(tb.GAUSS2),
    "gauss4": _rk(tb.GAUSS4),
    "gauss6": _rk(tb.GAUSS6),
    "radau5": _rk(tb.RADAU_IIA5),
    "sungeng5": _rk(tb.SUN_GENG5),
}
