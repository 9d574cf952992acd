"""Named, documented presets of the papers' numerical examples (the CLI's cases)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

_MODELS: dict[int, tuple[Any, tuple]] = {}  # id(case) -> (case, models): cases are unhashable


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A scalar parameter of a case, overridable with `--set name=value`. `sweepable`:
    whether a sweep may vary it member by member (`False` for a structural parameter, one the
    build or the reports use as a Python value, e.g. a count or a switch of the outputs)."""

    default: float
    doc: str
    sweepable: bool = True


@dataclasses.dataclass(frozen=True)
class Case:
    """A paper's example: how to build `(model, state0)` from its parameters, its defaults,
    the family its default method is listed under (`jaxrigid methods`), how to perturb it into
    an ensemble, and its observables. Which methods apply is asked of the methods
    (`accepts`: `integrates` on the case's model)."""

    name: str
    title: str
    reference: str
    description: str
    family: str
    default_method: str
    default_dt: float
    default_t_end: float
    parameters: dict[str, Parameter]
    build: Callable[[dict[str, float]], tuple[Any, Any]]
    perturb: Callable[[Any, np.ndarray, float], Any]
    observables: Callable[[Any, Any, Any, dict[str, float]], dict[str, Any]] = (
        lambda model, ts, states, params: {}
    )
    ensemble_spread: float = 1e-2
    torque_free: bool = False  # descriptive: the body feels no torque
    # descriptive, no longer consulted (kept for one release): the kind of torque, e.g.
    # "heavy_top" (uniform gravity); which methods apply is asked of the methods (`accepts`)
    torque_kind: str | None = None
    # an `AbstractObserver` built from the parameters, run every step inside the scan (and
    # continued across the CLI's chunks); its final carry goes to `observation_observables`
    observer: Callable[[dict[str, float]], Any] | None = None
    observation_observables: Callable[[Any, dict[str, float]], dict[str, Any]] = (
        lambda observations, params: {}
    )
    # further forms of the same example, `params -> (model, state0)` like `build` but another
    # model type integrated by other methods (the chain of bodies in rotation matrices, for
    # `rattle`, next to its quaternion `build`, for `gauss6`); `build_for` picks the form
    other_forms: tuple[Callable[[dict[str, float]], tuple[Any, Any]], ...] = ()

    def forms(self) -> tuple[Callable, ...]:
        """`(build, *other_forms)`."""
        return (self.build, *self.other_forms)

    def models(self) -> tuple:
        """The model of each form from the default parameters, built once per case (building
        checks values eagerly, which compiles small programs). Which methods apply depends on
        the models' types and torques, which the parameters do not change."""
        if id(self) not in _MODELS:  # the entry keeps the case alive, so its id stays its own
            params = self.resolve()
            _MODELS[id(self)] = (self, tuple(form(params)[0] for form in self.forms()))
        return _MODELS[id(self)][1]

    def model(self):
        """The model of `build` (the first form) from the default parameters."""
        return self.models()[0]

    def accepts(self, integrator) -> bool:
        """Whether `integrator` applies to this case: whether it integrates one of the case's
        models (`integrator.integrates`)."""
        return any(bool(integrator.integrates(m)) for m in self.models())

    def build_for(self, integrator) -> Callable[[dict[str, float]], tuple[Any, Any]]:
        """The form `integrator` integrates (`build` when it integrates none: its own
        checks then say why)."""
        for form, model in zip(self.forms(), self.models()):
            if integrator.integrates(model):
                return form
        return self.build

    def methods(self) -> list[str]:
        """The canonical names of the registered methods that apply to this case, in registry
        order (those that integrate one of the forms' models)."""
        from ..integrators import REGISTRY

        names: list[str] = []
        for cls in REGISTRY:
            if cls.name not in names and self.accepts(cls()):
                names.append(cls.name)
        return names

    def resolve(self, overrides: dict[str, float] | None = None) -> dict[str, float]:
        """Defaults updated with `overrides`; unknown names raise `ValueError`."""
        params = {k: float(p.default) for k, p in self.parameters.items()}
        for key, value in (overrides or {}).items():
            if key not in params:
                valid = ", ".join(self.parameters)
                raise ValueError(f"case {self.name} has no parameter {key!r}; valid: {valid}")
            params[key] = float(value)
        return params
