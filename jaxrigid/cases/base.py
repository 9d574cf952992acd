"""Named, documented presets of the papers' numerical examples (the CLI's cases)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A scalar parameter of a case, overridable with `--set name=value`."""

    default: float
    doc: str


@dataclasses.dataclass(frozen=True)
class Case:
    """A paper's example: how to build `(model, state0)` from its parameters, its defaults,
    which method family applies, how to perturb it into an ensemble, and its observables."""

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
    torque_free: bool = False
    # the kind of torque, for methods that are torque-free-only but take some torques
    # (`integrator.accepted_torques`; e.g. "heavy_top": DMV takes uniform gravity)
    torque_kind: str | None = None
    # an `AbstractObserver` built from the parameters, run every step inside the scan (and
    # continued across the CLI's chunks); its final carry goes to `observation_observables`
    observer: Callable[[dict[str, float]], Any] | None = None
    observation_observables: Callable[[Any, dict[str, float]], dict[str, Any]] = (
        lambda observations, params: {}
    )

    def accepts(self, integrator) -> bool:
        """Whether `integrator` (of this case's family) applies: torque-free-only methods
        need a torque-free case, or one whose `torque_kind` they list in `accepted_torques`."""
        if self.torque_free or not integrator.torque_free_only:
            return True
        return self.torque_kind in getattr(integrator, "accepted_torques", frozenset())

    def resolve(self, overrides: dict[str, float] | None = None) -> dict[str, float]:
        """Defaults updated with `overrides`; unknown names raise `ValueError`."""
        params = {k: float(p.default) for k, p in self.parameters.items()}
        for key, value in (overrides or {}).items():
            if key not in params:
                valid = ", ".join(self.parameters)
                raise ValueError(f"case {self.name} has no parameter {key!r}; valid: {valid}")
            params[key] = float(value)
        return params
