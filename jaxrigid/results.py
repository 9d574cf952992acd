"""Outcomes by cause: what happened in a step, reduced per member and per saved interval,
and the error `simulate(throw=True)` raises from it.

Every step returns a `RESULTS` code (an `int32` array, so it vmaps, scans and reduces like any
other value). A step made of several solves keeps the first failure in order
(`first_failure_of`); a run keeps the cause of its first failed step (`Outcome`). Codes are
plain integers so that users compare `solution.result == jr.RESULTS.nonfinite`, and the
command line writes their names.
"""

from __future__ import annotations

import enum
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._callbacks import host_callback
from ._checks import first_row, is_concrete, mapped_note, member_of


class RESULTS(enum.IntEnum):
    """The cause of a step's outcome (0 is success; every other code is a failed step)."""

    successful = 0
    max_steps_reached = 1  # Newton made `max_steps` updates without meeting its tolerance
    diverged = 2  # Newton's updates grew (contraction rate > 2): no root near the guess
    nonfinite = 3  # a NaN or inf appeared in the iterate or the residual
    off_branch = 4  # Newton found a root, but not the one continuous in Δt
    step_bound_broken = 5  # the step broke a promise of the method (e.g. `max_angle`)
    model_unsupported = 6  # the model's values are outside what the method integrates
    invalid_input = 7  # a value check failed (simulate(checks="outcome")): not integrated

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
        "a step turned the body by more than the method allows (its max_angle setting "
        "where it has one, else pi per stage, far past any accurate step): take a smaller "
        "dt, or raise max_angle (at most pi) where the method has it"
    ),
    RESULTS.model_unsupported: (
        "the method does not integrate this model's values (its value_checks say "
        "which, e.g. LP-split's principal axes): change the model or the method"
    ),
    RESULTS.invalid_input: (
        "an input failed simulate's value checks (dt, the model's parameters, the initial "
        "state): the member's results are NaN; run it with checks='raise' for the message"
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


# --- reduced over steps --------------------------------------------------------------


class Outcome(NamedTuple):
    """The steps' outcomes reduced over a run or a saved interval (leaves: the ensemble shape).

    `result`: the `RESULTS` code of the first failed step (0, `successful`, if none);
    `first_failure`: that step's index (−1 if none); `max_iterations`, `max_residual`: the
    worst Newton solve. `all_converged` is `result == successful`.
    """

    max_iterations: jax.Array
    max_residual: jax.Array
    result: jax.Array
    first_failure: jax.Array

    @property
    def all_converged(self) -> jax.Array:
        return self.result == RESULTS.successful


class StepFailedError(RuntimeError):
    """A step failed (raised by `simulate(throw=True)`): the message names the cause, the
    step, its time and the ensemble member, with advice for that cause."""


def no_failures(dtype) -> Outcome:
    return Outcome(jnp.int32(0), jnp.zeros((), dtype), code(RESULTS.successful), jnp.int32(-1))


def accumulate(acc: Outcome, info, k) -> Outcome:
    """Fold one step's `StepInfo` (step index `k`) into the running outcome. Done in the
    scan carry, so no per-step info is ever stored (at 10⁶ members × 10³ steps: GBs)."""
    failed = info.result != RESULTS.successful
    fresh = (acc.first_failure < 0) & failed
    return Outcome(
        jnp.maximum(acc.max_iterations, info.iterations),
        jnp.maximum(acc.max_residual, info.residual),
        jnp.where(fresh, info.result, acc.result).astype(jnp.int32),
        jnp.where(fresh, k, acc.first_failure).astype(jnp.int32),
    )


def combine(per_save: Outcome) -> Outcome:
    """The outcome of consecutive intervals (leading axis): the first failed one's cause.

    The first failed interval is the one whose first failed step is earliest (the steps'
    indices count from the run's start, one interval's after another's), found by reductions
    alone: an index into the intervals (`argmax`) is a gather per member to compile, and a
    reduction over one interval is none (XLA drops it)."""
    failed = per_save.result != RESULTS.successful
    big = jnp.iinfo(jnp.int32).max
    first = jnp.min(jnp.where(failed, per_save.first_failure, big), axis=0)
    at_first = failed & (per_save.first_failure == first)
    return Outcome(
        jnp.max(per_save.max_iterations, axis=0),
        jnp.max(per_save.max_residual, axis=0),
        jnp.max(jnp.where(at_first, per_save.result, 0), axis=0).astype(jnp.int32),
        jnp.where(first == big, -1, first).astype(jnp.int32),
    )


def summarize(per_save: Outcome, batch_shape) -> Outcome:
    nd = len(batch_shape)
    if nd == 0:
        return combine(per_save)
    flat = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[nd:]), per_save)
    out = jax.vmap(combine)(flat)
    return jax.tree_util.tree_map(lambda x: x.reshape(batch_shape), out)


# --- throw=True -----------------------------------------------------------------------


def failure_message(result, step, t, member, count, size, mapped: str = "") -> str:
    """The message of `StepFailedError`: cause, step, time, member (`mapped`: the index in
    a caller's `vmap`, `_checks.mapped_note`), and advice."""
    cause = RESULTS(int(result))
    who = ""
    if member is not None:
        who = f" of ensemble member {member}"
    text = f"step {int(step)} (t = {float(t):.6g}){who} failed: {cause.name}"
    if size > 1:
        text += f" ({int(count)} of {int(size)} trajectories had failed steps)"
    return f"{text}{mapped}. {cause.advice}."


def raise_on_failure(outcome: Outcome, t0, dt, note: str = ""):
    """`StepFailedError` for the first failing member, if any: at once for a concrete
    outcome, from the compiled program (a host callback) inside `jit`; `note` is appended to
    its message."""
    shape = jnp.shape(outcome.result)
    failed = (outcome.result != RESULTS.successful).reshape(-1)
    first = jnp.argmax(failed)
    result = outcome.result.reshape(-1)[first]
    step = outcome.first_failure.reshape(-1)[first]
    t = t0 + step * jnp.asarray(dt, t0.dtype)
    reduced = (jnp.any(failed), first, jnp.sum(failed), result, step, t)

    def host(any_failed, first, count, result, step, t):
        if not np.asarray(any_failed).any():
            return
        mapped = mapped_note(any_failed)
        first, count, result, step, t = first_row(any_failed, first, count, result, step, t)
        size = int(np.prod(shape)) if shape else 1
        member = member_of(first, shape)
        message = failure_message(result, step, t, member, count, size, mapped)
        raise StepFailedError(message + note)

    if is_concrete(reduced):
        host(*(np.asarray(r) for r in reduced))
    else:
        host_callback(host, *reduced)
