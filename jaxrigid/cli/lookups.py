"""Resolve the command's input: case and method names, `--set` overrides (the step and end
time: `jaxrigid.runs.step_plan`).

Bad input raises `UsageError` with a message that says what would be valid.
"""

from __future__ import annotations

import math
from typing import Any

from .._suggest import did_you_mean
from .errors import UsageError


def find_case(name: str):
    from ..cases import CASES

    for key, case in CASES.items():
        if key.lower() == name.lower():
            return case
    raise UsageError(
        f"unknown case {name!r}; valid cases: {', '.join(CASES)}{did_you_mean(name, CASES)}"
    )


def applicable_methods(case) -> dict[str, type]:
    """The registered methods that integrate `case`'s model (`integrates`), by canonical name,
    in registry order (where a name recurs, the class that integrates the model)."""
    from ..integrators import REGISTRY

    methods: dict[str, type] = {}
    for cls in REGISTRY:
        if cls.name not in methods and case.accepts(cls()):
            methods[cls.name] = cls
    return methods


def find_method(name: str, case) -> tuple[str, Any]:
    """Canonical name and a fresh integrator of `name` that integrates `case`'s model
    (`<method>:<scheme>`: the method composed by a composition scheme)."""
    from ..integrators import COMPOSITION_SCHEMES, METHODS_BY_FAMILY, compose

    base, sep, scheme = name.partition(":")
    if sep:
        _, integrator = find_method(base, case)
        schemes = {s.lower(): s for s in COMPOSITION_SCHEMES}
        if scheme.lower() not in schemes:
            raise UsageError(
                f"unknown composition scheme {scheme!r}; valid: {', '.join(COMPOSITION_SCHEMES)}"
                + did_you_mean(scheme, COMPOSITION_SCHEMES)
            )
        try:
            composed = compose(integrator, schemes[scheme.lower()])
        except ValueError as e:
            raise UsageError(str(e)) from None
        return composed.name, composed

    applicable = applicable_methods(case)
    valid = ", ".join(applicable)
    for key, cls in applicable.items():
        if key.lower() == name.lower():
            return key, cls()
    # a registered method that does not apply: say why, the case's own family first (a name
    # may recur in several families: DMV-body)
    for key, factory in METHODS_BY_FAMILY.get(case.family, {}).items():
        if key.lower() == name.lower():
            raise UsageError(f"{_why_not(key, factory(), case)}; valid methods for it: {valid}")
    for family, methods in METHODS_BY_FAMILY.items():
        for key in methods:
            if key.lower() == name.lower():
                raise UsageError(
                    f"method {key} is for {family} cases and does not apply to case "
                    f"{case.name} ({case.family}); valid methods for it: {valid}"
                )
    raise UsageError(
        f"unknown method {name!r} for case {case.name}; valid methods: {valid}"
        + did_you_mean(name, applicable)
    )


def _why_not(key: str, integrator, case) -> str:
    """Why a method of the case's family does not integrate its model, in words (the method's
    `refusal` of the case's first form)."""
    why = integrator.refusal(case.sketches()[0])
    return f"method {key} does not apply to case {case.name} ({why})"


def parse_sets(items: list[str], case) -> dict[str, float]:
    """`NAME=VALUE` overrides, names matched case-insensitively to the case's parameters."""
    names = {k.lower(): k for k in case.parameters}
    valid = ", ".join(case.parameters)
    overrides = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise UsageError(
                f"--set {item!r} must be NAME=VALUE; parameters of {case.name}: {valid}"
            )
        key = name if name in case.parameters else names.get(name.lower())
        if key is None:
            raise UsageError(
                f"case {case.name} has no parameter {name!r}; valid: {valid}"
                + did_you_mean(name, case.parameters)
            )
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"--set {key}={value!r}: the value must be a finite number")
        overrides[key] = number
    return overrides
