"""Composition of steps: `Φ_Δt = Φ^{(m)}_{γ_m Δt} ∘ … ∘ Φ^{(1)}_{γ_1 Δt}`.

Krysl builds TRAP, IMID, TRAPM and IMIDM as compositions of Euler half-steps (§3.3–3.6);
the same wrapper composes any symmetric method into higher order: `compose(method, scheme)`
with a scheme of `tableau.compositions` (the triple jump and Suzuki's fractal, orders 2k → 2k+2;
Yoshida's and Kahan–Li's order 6, McLachlan's and Kahan–Li's order 8, Sofroniou–Spaletta's
order 10, each checked against its order conditions when loaded).
"""

# No `from __future__ import annotations`: equinox (0.13) takes a string annotation
# `eqx.AbstractClassVar[...]` for a field.
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .. import results
from .._carry import tied
from .._suggest import did_you_mean
from .base import AbstractIntegrator, StepInfo, merge_infos
from .tableau.compositions import (
    SCHEMES,
    CompositionScheme,
    suzuki_fractions,
    triple_jump_fractions,
)


class AbstractComposition(AbstractIntegrator):
    """Apply `integrators[i]` with step `fractions[i]·Δt`, in order.

    A composition's facts depend on what it composes, so each composition is a class of its
    own (`composition_class`, made once per member classes, fractions and order), and its
    facts are class facts: `order` as stated by the caller (composition theory, not
    inferred); `implicit` if a member is; `symmetric` if every member is and the members and
    fractions read the same backwards (the adjoint of `Φ_m ∘ … ∘ Φ_1` is
    `Φ_1* ∘ … ∘ Φ_m*`; GNI §II.4, §V.3); `compensated_summation` if every member has it;
    `preserves` the quantities every member preserves (each step keeps them, whatever its
    size or sign, so the composition does). The members' settings are the instances in the
    field `integrators`.

    Solver state: the tuple of the members' (each member keeps its own, e.g. its stages).
    Members that compensate (`compensated=True`: their solver state is the state's rounding
    error) share one error, passed from each to the next, and so do members whose solver state
    is the state's own function (`first_same_as_last`: RATTLE's gradients)."""

    name: ClassVar[str] = "composition"
    member_classes: eqx.AbstractClassVar[tuple[type, ...]]
    fractions: eqx.AbstractClassVar[tuple[float, ...]]
    integrators: tuple

    def __check_init__(self):
        classes = tuple(type(i) for i in self.integrators)
        if classes != type(self).member_classes:
            raise TypeError(
                f"{type(self).__name__} composes {type(self).member_classes}, got {classes}"
            )

    def requires(self, model) -> str | None:
        """The first member's refusal (its `structures` are the composition's: every member
        must integrate the model)."""
        members: dict[type, AbstractIntegrator] = {}
        for i in self.integrators:  # once per member class, in order
            members.setdefault(type(i), i)
        refusals = (i.refusal(model) for i in members.values())
        return next((r for r in refusals if r is not None), None)

    def preserved(self, model) -> frozenset[str]:
        """What every member keeps on `model`, except TRAP's midpoint energy (`preserves`)."""
        kept = frozenset.intersection(*(i.preserved(model) for i in self.integrators))
        return kept - {"K_midpoint"}

    def value_checks(self, model) -> list:
        """The members' checks, once per member class (the stages repeat a few methods)."""
        first = {type(i): i for i in reversed(self.integrators)}
        return [c for i in first.values() for c in i.value_checks(model)]

    @property
    def compensated(self) -> bool:
        """Whether the members compensate (all or none do): one rounding error is carried."""
        return _compensated(self.integrators)

    @property
    def _passed_on(self) -> bool:
        """Whether one solver state passes from stage to stage: a rounding error
        (`compensated`) or the state's own function (every member `first_same_as_last`)."""
        return self.compensated or all(i.first_same_as_last for i in self.integrators)

    def fast_variant(self):
        """The composition of the members' fast forms, if every member has one and it runs
        its stages the way this one does (looped or unrolled: the solver states must match
        for `simulate` to pick per member between the two runs)."""
        variants = tuple(i.fast_variant() for i in self.integrators)
        if any(v is None for v in variants):
            return None
        fast = type(self)(variants)
        return fast if fast._looped == self._looped else None

    @property
    def _looped(self) -> bool:
        """Whether one member step serves every stage (all members equal, settings too): then
        the stages run as a `lax.scan` over the fractions, compiled once (a 35-stage
        composition compiles like one step)."""
        first = self.integrators[0]
        return len(self.integrators) > 1 and all(
            i is first or eqx.tree_equal(first, i) is True for i in self.integrators[1:]
        )

    def init(self, model, state0, t0, dt):
        if self._passed_on:
            return self.integrators[0].init(model, state0, t0, self.fractions[0] * dt)
        states = tuple(
            i.init(model, state0, t0, gamma * dt)
            for i, gamma in zip(self.integrators, self.fractions)
        )
        if self._looped:  # the members' solver states stacked along a leading stage axis
            return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)
        return states

    def step(self, model, state, solver_state, t, dt):
        if self._looped:
            return self._looped_step(model, state, solver_state, t, dt)
        if self._passed_on:  # the rounding error (or gradient) passes from member to member
            infos, error = [], solver_state
            for integrator, gamma in zip(self.integrators, self.fractions):
                state, error, info = integrator.step(model, state, error, t, gamma * dt)
                infos.append(info)
                t = t + gamma * dt
            return state, error, merge_infos(infos)
        infos, states = [], []
        for integrator, ss, gamma in zip(self.integrators, solver_state, self.fractions):
            h = gamma * dt
            state, ss, info = integrator.step(model, state, ss, t, h)
            infos.append(info)
            states.append(ss)
            t = t + h
        return state, tuple(states), merge_infos(infos)

    def _looped_step(self, model, state, solver_state, t, dt):
        member, passed_on = self.integrators[0], self._passed_on
        gammas = jnp.asarray(self.fractions, jnp.result_type(dt))

        def stage(carry, x):
            state, error, t = carry
            gamma, ss = x
            h = gamma * dt
            if passed_on:  # one rounding error (or gradient), passed from stage to stage
                state, error, info = member.step(model, state, error, t, h)
            else:
                state, ss, info = member.step(model, state, ss, t, h)
            return (state, error, t + h), (ss, info)

        error, per_stage = (solver_state, None) if passed_on else (None, solver_state)
        init = tied((state, error, t), (model, dt, per_stage))
        (state, error, _), (states, infos) = lax.scan(stage, init, (gammas, per_stage))
        info = StepInfo(
            jnp.sum(infos.iterations, axis=0, dtype=infos.iterations.dtype),
            jnp.max(infos.residual, axis=0),
            results.first_failure_of(*infos.result),
        )
        return state, (error if passed_on else states), info


def _compensated(integrators) -> bool:
    flags = {bool(getattr(i, "compensated", False)) for i in integrators}
    if len(flags) > 1:
        raise ValueError(
            "compose compensated members (compensated=True) only with compensated members: "
            "the rounding error passes from each to the next"
        )
    return flags == {True}


_CLASSES: dict[tuple, type[AbstractComposition]] = {}


def composition_class(
    member_classes: tuple[type[AbstractIntegrator], ...],
    fractions: tuple[float, ...],
    order: int,
    name: str = "composition",
    reference: str = "",
    base: type[AbstractComposition] | None = None,
) -> type[AbstractComposition]:
    """The class of the composition of `member_classes` with step `fractions` and the stated
    `order` (named `name`, citing `reference`), made once and kept (so that equal compositions
    share their compiled programs). `base`: by default the members' `fused_composition` where
    they are all one method that has one (e.g. LP-split's, its kicks merged), else
    `AbstractComposition` (the stages one by one)."""
    if base is None:
        fused = member_classes[0].fused_composition
        single = len(set(member_classes)) == 1
        base = fused if single and fused is not None else AbstractComposition
    key = (member_classes, fractions, order, name, reference, base)
    cls = _CLASSES.get(key)
    if cls is None:
        symmetric = (
            all(c.symmetric for c in member_classes)
            and member_classes == member_classes[::-1]
            and fractions == fractions[::-1]
        )
        namespace = {
            "name": name,
            "reference": reference or "; ".join(dict.fromkeys(c.reference for c in member_classes)),
            # what every member keeps, except TRAP's midpoint energy: it is measured with the
            # step's own Δt (Krysl §3.5), and a composition's sub-steps differ
            "preserves": frozenset.intersection(*(c.preserves for c in member_classes))
            - {"K_midpoint"},
            "__module__": __name__,
            "__doc__": AbstractComposition.__doc__,
            "member_classes": member_classes,
            "fractions": fractions,
            "order": order,
            "implicit": any(c.implicit for c in member_classes),
            # the first member's; `requires` asks every member
            "structures": member_classes[0].structures,
            "symmetric": symmetric,
            "compensated_summation": all(c.compensated_summation for c in member_classes),
        }
        name = "Composition_" + "_".join(c.__name__ for c in member_classes)
        cls = _CLASSES[key] = type(name, (base,), namespace)
    return cls


def Composition(
    integrators, fractions, stated_order: int = 1, name: str = "composition", reference: str = ""
) -> AbstractComposition:
    """The composition `Φ^{(m)}_{γ_m Δt} ∘ … ∘ Φ^{(1)}_{γ_1 Δt}` of the `integrators` with
    step `fractions` `γ`, of the `stated_order`: an instance of its `composition_class`."""
    integrators, fractions = tuple(integrators), tuple(float(g) for g in fractions)
    if len(integrators) != len(fractions) or not integrators:
        raise ValueError("Composition needs one fraction per integrator (and at least one)")
    _compensated(integrators)  # all or none
    classes = tuple(type(i) for i in integrators)
    cls = composition_class(classes, fractions, int(stated_order), name, reference)
    return cls(integrators)


_FRACTAL = {"triple-jump": triple_jump_fractions, "suzuki5": suzuki_fractions}
"""Schemes that raise any even order 2k to 2k + 2 (their fractions depend on k)."""


def compose(integrator, scheme: str | CompositionScheme) -> AbstractComposition:
    """The symmetric composition of the symmetric `integrator` by `scheme` (a name of
    `tableau.compositions.SCHEMES` or a `CompositionScheme`), named `<method>:<scheme>`.

    Order: `scheme.order` for a second-order method; the triple jump and Suzuki's fractal
    raise any even order `2k` to `2k + 2`. The composition keeps what the method keeps
    (`preserves`) and is symmetric. `ValueError` for a non-symmetric method, or a tabulated
    scheme (built for order 2) on a method of another order.
    """
    if isinstance(scheme, str):
        if scheme not in SCHEMES:
            raise ValueError(
                f"unknown composition scheme {scheme!r}; valid: {', '.join(SCHEMES)}"
                + did_you_mean(scheme, SCHEMES)
            )
        scheme = SCHEMES[scheme]
    if not integrator.symmetric:
        raise ValueError(
            f"composing by {scheme.name} needs a symmetric method; {integrator.name} is not "
            "(its error expansion has even powers of Δt that the scheme does not cancel)"
        )
    base = integrator.order
    if scheme.name in _FRACTAL and base != 2:
        fractions, order = _FRACTAL[scheme.name](base), base + 2
    elif base == 2:
        fractions, order = scheme.fractions, scheme.order
    else:
        raise ValueError(
            f"{scheme.name} composes second-order methods; {integrator.name} has order {base} "
            f"(use triple-jump or suzuki5, which raise any even order by two)"
        )
    n = len(fractions)
    name = f"{integrator.name}:{scheme.name}"
    reference = f"{integrator.reference}; composed by {scheme.reference}"
    return Composition((integrator,) * n, fractions, order, name, reference)


def triple_jump(integrator) -> AbstractComposition:
    """Yoshida's fourth-order composition of a symmetric second-order method
    (`compose(integrator, "triple-jump")`; order `k + 2` for a symmetric method of even order
    `k`)."""
    return compose(integrator, "triple-jump")
