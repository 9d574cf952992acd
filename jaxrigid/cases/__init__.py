"""The papers' numerical examples as named cases."""

from __future__ import annotations

from .._suggest import did_you_mean
from . import chain, dmv, hamiltonian, krysl, nontwisting, rolling_ball, symmetric_top
from .base import Case as Case
from .base import Parameter as Parameter

CASES: dict[str, Case] = {
    case.name: case
    for case in (
        krysl.CASES
        + dmv.CASES
        + hamiltonian.CASES
        + nontwisting.CASES
        + symmetric_top.CASES
        + rolling_ball.CASES
        + chain.CASES
    )
}


def get_case(name: str) -> Case:
    """Case by name, case-insensitively; `ValueError` listing the valid names otherwise."""
    for key, case in CASES.items():
        if key.lower() == name.lower():
            return case
    raise ValueError(
        f"unknown case {name!r}; valid cases: {', '.join(CASES)}{did_you_mean(name, CASES)}"
    )
