"""Composition of steps: `Φ_Δt = Φ^{(m)}_{γ_m Δt} ∘ … ∘ Φ^{(1)}_{γ_1 Δt}`.

Krysl builds TRAP, IMID, TRAPM and IMIDM as compositions of Euler half-steps (§3.3–3.6);
the same wrapper composes any symmetric method into higher order (e.g. the triple jump
γ = (1/(2−2^{1/3}), −2^{1/3}/(2−2^{1/3}), 1/(2−2^{1/3}))).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx

from .base import AbstractIntegrator, merge_infos


class Composition(AbstractIntegrator):
    """Apply `integrators[i]` with step `fractions[i]·Δt`, in order. `order` is stated by the
    caller (composition theory, not inferred)."""

    name: ClassVar[str] = "composition"
    integrators: tuple
    fractions: tuple[float, ...] = eqx.field(static=True)
    stated_order: int = eqx.field(default=1, static=True)

    def __check_init__(self):
        if len(self.integrators) != len(self.fractions) or not self.integrators:
            raise ValueError("Composition needs one fraction per integrator (and at least one)")

    @property
    def order(self) -> int:  # type: ignore[override]
        return self.stated_order

    @property
    def implicit(self) -> bool:  # type: ignore[override]
        return any(i.implicit for i in self.integrators)

    @property
    def compensated_summation(self) -> bool:  # type: ignore[override]
        return all(i.compensated_summation for i in self.integrators)

    @property
    def model_requirement(self) -> str:  # type: ignore[override]
        return "every composed method must integrate it"

    def integrates(self, model) -> bool:
        return all(i.integrates(model) for i in self.integrators)

    def init(self, model, state0, t0, dt):
        return tuple(
            i.init(model, state0, t0, gamma * dt)
            for i, gamma in zip(self.integrators, self.fractions)
        )

    def step(self, model, state, solver_state, t, dt):
        infos, states = [], []
        for integrator, ss, gamma in zip(self.integrators, solver_state, self.fractions):
            h = gamma * dt
            state, ss, info = integrator.step(model, state, ss, t, h)
            infos.append(info)
            states.append(ss)
            t = t + h
        return state, tuple(states), merge_infos(infos)


def triple_jump(integrator) -> Composition:
    """Yoshida's fourth-order composition of a symmetric second-order method."""
    if not integrator.symmetric:
        raise ValueError(f"triple_jump needs a symmetric method; {integrator.name} is not")
    g1 = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
    g0 = -(2.0 ** (1.0 / 3.0)) * g1
    return Composition((integrator,) * 3, (g1, g0, g1), stated_order=integrator.order + 2)
