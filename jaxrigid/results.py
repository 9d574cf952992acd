"""Outcomes by cause: what happened in a step, reduced per member and per saved interval.

Every step returns a `RESULTS` code (an `int32` array, so it vmaps, scans and reduces like any
other value). A step made of several solves keeps the first failure in order
(`first_failure_of`); a run keeps the cause of its first failed step. Codes are plain integers
so that users compare `solution.result == jr.RESULTS.nonfinite`, and the command line writes
their names.
"""

from __future__ import annotations

import enum
import functools

import jax.numpy as jnp


class RESULTS(enum.IntEnum):
    """The cause of a step's outcome (0 is success; every other code is a failed step)."""

    successful = 0
    max_steps_reached = 1  # Newton made `max_steps` updates without meeting its tolerance
    diverged = 2  # Newton's updates grew (contraction rate > 2): no root near the guess
    nonfinite = 3  # a NaN or inf appeared in the iterate or the residual
    off_branch = 4  # Newton found a root, but not the one continuous in Δt
    step_bound_broken = 5  # the step broke a promise of the method (e.g. `max_angle`)

    @property
    def advice(self) -> str:
        """What to try, for this cause."""
        return _ADVICE[self]


_ADVICE = {
    RESULTS.successful: "",
    RESULTS.max_steps_reached: (
        "Newton needed more updates: raise Newton(max_steps=...), use full Newton instead of "
        "chord=True, or take a smaller dt"
    ),
    RESULTS.diverged: (
        "Newton's updates grew instead of contracting: the step is too large for the "
        "predictor to start in Newton's basin; take a smaller dt"
    ),
    RESULTS.nonfinite: (
        "a NaN or inf appeared: check the model's torque/potential at this state (a "
        "singularity?) and the initial state; a smaller dt may avoid it"
    ),
    RESULTS.off_branch: (
        "Newton converged to a spurious root, not the one continuous in dt: take a smaller dt"
    ),
    RESULTS.step_bound_broken: (
        "a step turned the body by more than the method's max_angle promise: raise "
        "max_angle (at most pi), or take a smaller dt"
    ),
}


def code(cause: RESULTS):
    """`cause` as an `int32` scalar array."""
    return jnp.int32(int(cause))


def where(failed, cause: RESULTS, result):
    """`result`, with `cause` set where `failed` and `result` was still successful: the
    earlier cause wins."""
    return jnp.where(failed & (result == RESULTS.successful), code(cause), result)


def first_failure_of(*results):
    """The first non-successful code in order (successful if none)."""
    return functools.reduce(
        lambda acc, r: jnp.where(acc == RESULTS.successful, r, acc), results[1:], results[0]
    )


def name_of(value) -> str:
    """The cause's name for an integer code."""
    return RESULTS(int(value)).name
