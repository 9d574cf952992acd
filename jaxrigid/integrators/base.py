"""The integrator contract (DESIGN.md "The contracts"):

    init(model, state0, t0, dt) -> solver_state
    step(model, state, solver_state, t, dt) -> (state, solver_state, StepInfo)

An integrator is a frozen `equinox.Module`; its solver settings are fields and what it is
(order, symmetry, what it preserves, which model structures it integrates) are class-level
facts, so tests and the CLI can run over a registry of all of them. The solver state carries
what a method reuses between steps (`None` for the methods that reuse nothing). A step is a
pure function of its arguments: it jits, vmaps over states and model parameters, and
differentiates.
"""

# No `from __future__ import annotations`: equinox (0.13) takes a string annotation
# `eqx.AbstractClassVar[...]` for a field.
import abc
import re
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from .. import results
from ..models.structures import AbstractStructure, models_of
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
    (Krysl §3.5: `K` after a forward-Euler half step) — on a model, `preserved(model)`, which
    is `preserves` unless the model's structure keeps fewer (DMV's coupled bodies: no `K`);
    `structures`, the model structures it
    integrates (`models.structures`: a model integrated by it subclasses one of them), and
    `requires(model)`, what it needs beyond them, in words where a model lacks it.
    """

    name: ClassVar[str]
    order: ClassVar[int]
    symmetric: ClassVar[bool] = False
    implicit: ClassVar[bool] = False
    preserves: ClassVar[frozenset[str]] = frozenset()
    reference: ClassVar[str] = ""
    structures: ClassVar[tuple[type[AbstractStructure], ...]] = ()
    # can carry its rounding error (`jaxrigid.compensated`): with its setting
    # `compensated=True`, in its solver state
    compensated_summation: ClassVar[bool] = False
    # its solver state is a function of the state alone, computed at the end of a step for the
    # next (first same as last: RATTLE's gradients), so a composition passes it from stage to
    # stage instead of keeping one per stage
    first_same_as_last: ClassVar[bool] = False
    # a subclass of `composition.AbstractComposition` that runs a composition of this method
    # alone with work shared between its stages (LP-split: the kicks at the stage boundaries
    # merged); `compose` uses it, the same method to round-off. None: the generic stages
    fused_composition: ClassVar[type | None] = None
    # XLA's quick build profile (`xla_options`) for the programs `simulate` builds itself
    # with this method where the caller chose none: a method whose programs compile for long
    # and run no slower so (measured, bench/README). None: XLA's defaults
    build_profile: ClassVar[str | None] = None

    def requires(self, model) -> str | None:
        """What this method needs of a model of its `structures` beyond the structure, in words
        (`"it integrates …"`), where `model` lacks it; `None` where it lacks nothing (the
        default). It reads the model's declared facts (which parts it has, their class facts),
        so a stand-in of a case's model (`cases.base.sketch`) answers as the model would."""
        del model
        return None

    def preserved(self, model) -> frozenset[str]:
        """The quantities of `preserves` this method keeps on `model` (a model it integrates):
        `preserves` itself, unless the method keeps fewer on some of its structures."""
        del model
        return self.preserves

    def integrates(self, model) -> bool:
        """Whether this method applies to `model`: a model of one of its `structures` that
        lacks nothing it `requires`."""
        return isinstance(model, self.structures) and self.requires(model) is None

    def refusal(self, model) -> str | None:
        """Why this method does not integrate `model`, in words (`None`: it does): the
        structures it integrates, or what it `requires`. The words of `simulate`'s and the
        command's refusals."""
        if not isinstance(model, self.structures):
            kinds = [
                f"{s.title} ({', '.join(models_of(s)) or s.__name__})" for s in self.structures
            ]
            return "it integrates " + (" or ".join(kinds) or "no model")
        return self.requires(model)

    def value_checks(self, model) -> list:
        """Checks of the model's values that this method needs beyond the model's own
        (`_checks.Check`s, applied by `simulate` with the model's; none by default)."""
        del model
        return []

    def init(self, model, state0, t0, dt):
        """The solver state before the first step (`None`: nothing reused between steps)."""
        del model, state0, t0, dt
        return None

    def fast_variant(self):
        """A cheaper form of this method that reports every step it cannot take as failed,
        or `None` (the default). `simulate` runs the fast form first and redoes, with this
        method, the members of which any step failed (docs/design-notes.md item 22): the
        answer is this method's, to its solver tolerance, and no failed step is accepted."""
        return None

    @abc.abstractmethod
    def step(self, model, state, solver_state, t, dt):
        """Advance `state` at time `t` by `dt`. Returns `(state, solver_state, StepInfo)`."""


class AbstractImplicitIntegrator(AbstractIntegrator):
    """An integrator that solves a nonlinear equation per step with `newton`."""

    implicit: ClassVar[bool] = True
    newton: eqx.AbstractVar[Newton]


class AbstractTableauIntegrator(AbstractIntegrator):
    """An integrator given by a (Butcher or partitioned) tableau.

    A method is a subclass that names its table, `class Gauss6(...): tableau = GAUSS6`; its
    facts are derived from the table once, when the class is made (`tableau_facts`), and are
    class facts like every other integrator's: `name`, `order`, and whether it is implicit,
    which must match the base it subclasses (an explicit table under an implicit base, or
    the other way round, is a `TypeError`; explicit methods carry no `newton`)."""

    tableau: eqx.AbstractClassVar[Any]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "tableau" in cls.__dict__:
            for fact, value in cls.tableau_facts(cls.tableau).items():
                setattr(cls, fact, value)

    @classmethod
    def tableau_facts(cls, tableau) -> dict[str, Any]:
        """The class facts of the method of `tableau` (subclasses add theirs)."""
        implicit = not tableau.explicit
        if implicit != cls.implicit:
            kind = "implicit" if implicit else "explicit"
            raise TypeError(
                f"tableau {tableau.name} is {kind}, {cls.__name__} is not: an {kind} "
                f"table's method subclasses an {kind} base"
            )
        return {"name": tableau.name, "order": tableau.order}


def tableau_method(classes: dict, tableau, explicit_base: type, implicit_base: type) -> type:
    """The method class of `tableau`: `classes[tableau]` (the named methods' classes by their
    tables; tableaux hash by identity), else a class made once and kept there, the subclass
    of `explicit_base` or `implicit_base` as the table is, its facts derived as a named
    method's (a user's own table)."""
    cls = classes.get(tableau)
    if cls is None:
        base = explicit_base if tableau.explicit else implicit_base
        name = base.__name__.removeprefix("Abstract") + "_" + re.sub(r"\W", "_", tableau.name)
        namespace = {"tableau": tableau, "__module__": base.__module__, "__doc__": base.__doc__}
        cls = classes[tableau] = type(name, (base,), namespace)
    return cls


def construct(cls: type[AbstractIntegrator], newton: Newton | None):
    """`cls()`, with `newton` where given: the call forms `RungeKutta(tableau, newton)`,
    `MKRK(tableau, newton)` and `PartitionedRungeKutta(tableau, newton)`. An explicit method
    has no Newton settings: a `newton` given for one is a `TypeError`."""
    if newton is None:
        return cls()
    if not cls.implicit:
        raise TypeError(f"{cls.name} is explicit and takes no newton")
    return cls(newton=newton)


def solve_on_branch(newton: Newton, residual, guess, start):
    """`newton.solve` from the predictor `guess`, then check that the root `x*` is the one
    continuous in Δt (`start` is the root at Δt = 0); a step whose root passes neither test
    below is reported as `off_branch`.

    - On that branch `x* − guess` is of higher order in Δt than `guess − start`: a root no
      farther from the predictor than the predictor is from `start` passes.
    - Where the start's rate vanishes (a body at rest or on a principal axis under a torque
      that grows from zero, an inflection of the motion) `guess − start` is of higher order
      too, and the first test fails roots of resolved steps. The second asks whether Newton
      started from `start` itself would reach `x*`: the Kantorovich condition
      `βγ|x* − start| ≤ 1/2`, with `βγ ≈ 2κ` from the curvature `κ` of Newton's own updates
      (`Newton.solve_with_curvature`) and `|x* − start| ≤ |x* − guess| + |guess − start|`.
      At Δt → 0 the root it certifies tends to `start`: it is the branch's. A root of an
      unresolved step fails it: on the Coulomb wall at Δt = 0.5 (design note 55) `κ` times
      that bound is 0.97 at the failing step, at most 0.017 at the others, against 1/4.

    `guess=None`: Newton starts at `start`, and its first iterate `x₁` is the predictor.
    One Newton update from the Δt → 0 root is a predictor of the same order as a Taylor one
    (`x₁ − start` is O(Δt), `x* − x₁` O(Δt²) where the step is resolved), without the
    start's rates a Taylor predictor needs (design note 57). Unlike a Taylor predictor it
    moves with Newton, so the first test asks more of it: `|x* − x₁| ≤ |x₁ − start|/2`.
    Newton from a start in the Kantorovich region (`h₀ = βγ|x₁ − start| ≤ 1/2`) ends within
    `(t*(h₀) − 1)|x₁ − start|` of `x₁`, `t*(h) = (1 − √(1 − 2h))/h`, which is half the first
    update at `h₀ ≈ 0.44`: a root farther away was reached by wandering (from 0.1 on
    x² = 1, Newton jumps to 5.05 and walks back: 4.05 against 4.95).
    """
    if guess is None:
        x, info, curvature, distances = newton.solve_with_curvature(
            residual, start, first_iterate=True
        )
        to_guess, guess_to_start = distances
        allowed = 0.5 * guess_to_start
    else:
        x, info, curvature = newton.solve_with_curvature(residual, guess)
        to_guess, guess_to_start = max_abs(x - guess), max_abs(guess - start)
        allowed = guess_to_start
    tol = 1e3 * jnp.finfo(x.dtype).eps * max_abs(x)
    near = to_guess <= allowed + tol
    # |x* − start| bounded by the two distances already formed (one max-chain fewer)
    from_start = 4 * curvature * (to_guess + guess_to_start) <= 1
    on_branch = near | from_start
    return x, info._replace(result=results.where(~on_branch, RESULTS.off_branch, info.result))
