"""Composition of steps: `Φ_Δt = Φ^{(m)}_{γ_m Δt} ∘ … ∘ Φ^{(1)}_{γ_1 Δt}`.

Krysl builds TRAP, IMID, TRAPM and IMIDM as compositions of Euler half-steps (§3.3–3.6);
the same wrapper composes any symmetric method into higher order (e.g. the triple jump
γ = (1/(2−2^{1/3}), −2^{1/3}/(2−2^{1/3}), 1/(2−2^{1/3}))).
"""

# No `from __future__ import annotations`: equinox (0.13) takes a string annotation
# `eqx.AbstractClassVar[...]` for a field.
from typing import ClassVar

import equinox as eqx

from .base import AbstractIntegrator, merge_infos


class AbstractComposition(AbstractIntegrator):
    """Apply `integrators[i]` with step `fractions[i]·Δt`, in order.

    A composition's facts depend on what it composes, so each composition is a class of its
    own (`composition_class`, made once per member classes, fractions and order), and its
    facts are class facts: `order` as stated by the caller (composition theory, not
    inferred); `implicit` if a member is; `symmetric` if every member is and the members and
    fractions read the same backwards (the adjoint of `Φ_m ∘ … ∘ Φ_1` is
    `Φ_1* ∘ … ∘ Φ_m*`; GNI §II.4, §V.3); `compensated_summation` if every member has it. No
    invariant is claimed (`preserves` is empty), as before. The members' settings are the
    instances in the field `integrators`.

    Solver state: the tuple of the members' (each member keeps its own, e.g. its stages).
    Members that compensate (`compensated=True`: their solver state is the state's rounding
    error) share one error, passed from each to the next, as a `Compensated` state was."""

    name: ClassVar[str] = "composition"
    member_classes: eqx.AbstractClassVar[tuple[type, ...]]
    fractions: eqx.AbstractClassVar[tuple[float, ...]]
    model_requirement: ClassVar[str] = "every composed method must integrate it"
    integrators: tuple

    @property
    def stated_order(self) -> int:
        """The `order` (the name of the field of one release ago)."""
        return self.order

    def __check_init__(self):
        classes = tuple(type(i) for i in self.integrators)
        if classes != type(self).member_classes:
            raise TypeError(
                f"{type(self).__name__} composes {type(self).member_classes}, got {classes}"
            )

    def integrates(self, model) -> bool:
        return all(i.integrates(model) for i in self.integrators)

    @property
    def compensated(self) -> bool:
        """Whether the members compensate (all or none do): one rounding error is carried."""
        return _compensated(self.integrators)

    def init(self, model, state0, t0, dt):
        if self.compensated:
            return self.integrators[0].init(model, state0, t0, self.fractions[0] * dt)
        return tuple(
            i.init(model, state0, t0, gamma * dt)
            for i, gamma in zip(self.integrators, self.fractions)
        )

    def step(self, model, state, solver_state, t, dt):
        if self.compensated:  # the rounding error passes from member to member
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
    member_classes: tuple[type, ...], fractions: tuple[float, ...], order: int
) -> type[AbstractComposition]:
    """The class of the composition of `member_classes` with step `fractions` and the stated
    `order`, made once and kept (so that equal compositions share their compiled programs)."""
    key = (member_classes, fractions, order)
    cls = _CLASSES.get(key)
    if cls is None:
        symmetric = (
            all(c.symmetric for c in member_classes)
            and member_classes == member_classes[::-1]
            and fractions == fractions[::-1]
        )
        namespace = {
            "__module__": __name__,
            "__doc__": AbstractComposition.__doc__,
            "member_classes": member_classes,
            "fractions": fractions,
            "order": order,
            "implicit": any(c.implicit for c in member_classes),
            "symmetric": symmetric,
            "compensated_summation": all(c.compensated_summation for c in member_classes),
        }
        name = "Composition_" + "_".join(c.__name__ for c in member_classes)
        cls = _CLASSES[key] = type(name, (AbstractComposition,), namespace)
    return cls


def Composition(integrators, fractions, stated_order: int = 1) -> AbstractComposition:
    """The composition `Φ^{(m)}_{γ_m Δt} ∘ … ∘ Φ^{(1)}_{γ_1 Δt}` of the `integrators` with
    step `fractions` `γ`, of the `stated_order`: an instance of its `composition_class` (the
    call form of the release when `Composition` was one class)."""
    integrators, fractions = tuple(integrators), tuple(float(g) for g in fractions)
    if len(integrators) != len(fractions) or not integrators:
        raise ValueError("Composition needs one fraction per integrator (and at least one)")
    _compensated(integrators)  # all or none
    cls = composition_class(tuple(type(i) for i in integrators), fractions, int(stated_order))
    return cls(integrators)


def triple_jump(integrator) -> AbstractComposition:
    """Yoshida's fourth-order composition of a symmetric second-order method."""
    if not integrator.symmetric:
        raise ValueError(f"triple_jump needs a symmetric method; {integrator.name} is not")
    g1 = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
    g0 = -(2.0 ** (1.0 / 3.0)) * g1
    return Composition((integrator,) * 3, (g1, g0, g1), stated_order=integrator.order + 2)
