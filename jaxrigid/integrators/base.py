"""The stepper contract: `step(model, state, t, dt) -> (new_state, StepInfo)`.

An integrator is a frozen `equinox.Module`; its solver settings are fields and what it is
(order, symmetry, what it preserves) are class-level facts, so tests and the CLI can run over
a registry of all of them. A step is a pure function of its arguments: it jits, vmaps over
states and model parameters, and differentiates.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from .. import results
from ..newton import Newton, NewtonInfo, max_abs
from ..results import RESULTS

StepInfo = NewtonInfo
"""Per-step outcome: `iterations`, `residual`, `result` (a `RESULTS` code; `converged` is
`result == successful`). Explicit steps: 0, 0, successful."""


def explicit_info(dtype) -> StepInfo:
    return StepInfo(jnp.int32(0), jnp.zeros((), dtype), results.code(RESULTS.successful))


def merge_infos(infos) -> StepInfo:
    """One info for several solves: iterations summed, worst residual, the first failure."""
    return StepInfo(
        sum(i.iterations for i in infos),
        jnp.max(jnp.stack([i.residual for i in infos])),
        results.first_failure_of(*[i.result for i in infos]),
    )


class AbstractIntegrator(eqx.Module):
    """Base of every integrator.

    Class facts: `name` (the paper's name, used by the CLI), `order`, `symmetric`
    (self-adjoint), `implicit`, and `preserves`: the quantities kept to round-off in the
    absence of forcing — `"K"` kinetic energy, `"pi"` the spatial momentum vector `RΠ`
    (invariants `pi1..3`), `"RtR_error"` orthogonality, `"K_midpoint"` TRAP's midpoint energy
    (Krysl §3.5: `K` after a forward-Euler half step).
    """

    name: ClassVar[str]
    order: ClassVar[int]
    symmetric: ClassVar[bool] = False
    implicit: ClassVar[bool] = False
    preserves: ClassVar[frozenset[str]] = frozenset()
    reference: ClassVar[str] = ""
    torque_free_only: ClassVar[bool] = False  # e.g. DMV: the free rigid body only
    compensated_summation: ClassVar[bool] = False  # advances a `compensated.Compensated` state

    @abc.abstractmethod
    def step(self, model, state, t, dt):
        """Advance `state` at time `t` by `dt`. Returns `(new_state, StepInfo)`."""


class AbstractImplicitIntegrator(AbstractIntegrator):
    """An integrator that solves a nonlinear equation per step with `newton`."""

    implicit: ClassVar[bool] = True
    newton: eqx.AbstractVar[Newton]


class AbstractTableauIntegrator(AbstractImplicitIntegrator):
    """An integrator given by a (Butcher or partitioned) tableau: its `name`, `order` and
    whether it is implicit are the tableau's."""

    tableau: eqx.AbstractVar[Any]

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.tableau.name

    @property
    def order(self) -> int:  # type: ignore[override]
        return self.tableau.order

    @property
    def implicit(self) -> bool:  # type: ignore[override]
        return not getattr(self.tableau, "explicit", False)


def solve_on_branch(newton: Newton, residual, guess, start):
    """`newton.solve` from the predictor `guess`, then check that the root is the one continuous
    in Δt: on that branch `x* − guess` is of higher order in Δt than `guess − start` (`start`
    is the root at Δt = 0), so a root farther from the predictor than the predictor is from
    `start` is a spurious one, and the step is reported as `off_branch`."""
    x, info = newton.solve(residual, guess)
    tol = 1e3 * jnp.finfo(x.dtype).eps * max_abs(x)
    on_branch = max_abs(x - guess) <= max_abs(guess - start) + tol
    return x, info._replace(result=results.where(~on_branch, RESULTS.off_branch, info.result))
