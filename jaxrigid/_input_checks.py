"""`simulate`'s value checks on its inputs (DESIGN.md §4b): what they are (`value_checks`),
how they are applied (`apply_value_checks`: raised), and the other way, reported per member
in the outcome (`invalid_members`, `mark_invalid`)."""

from __future__ import annotations

import contextlib
import contextvars
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, results
from ._checks import Check
from .integrators.base import AbstractIntegrator
from .results import RESULTS

_MODE = contextvars.ContextVar("jaxrigid_checks", default="raise")


def mode(checks: str | None) -> str:
    """`checks` as given to `simulate`, else the mode set by `reported_in_outcome`."""
    checks = _MODE.get() if checks is None else checks
    if checks not in ("raise", "outcome"):
        raise ValueError(f'checks must be "raise" or "outcome", got {checks!r}')
    return checks


@contextlib.contextmanager
def reported_in_outcome():
    """While tracing inside it, `simulate(checks=None)` reports failed value checks in the
    outcome instead of raising from the graph: for programs jaxrigid builds itself (the
    optimiser), which then carry no host callback and stay cacheable."""
    token = _MODE.set("outcome")
    try:
        yield
    finally:
        _MODE.reset(token)


def value_checks(integrator, model, state0, t0, dt, n_steps=1, check_state=True) -> list[Check]:
    """`dt`'s and `t0`'s, the run's times', the model's, the initial state's (unless
    `check_state` is false) and the method's own (`value_checks`; none for
    `integrator=None`). `n_steps` may be traced (a new count does not rebuild the check
    program). The checks see the values without their derivatives: they are flags, and some
    are not differentiable (the saddle checks' full SVD), which would break a caller's
    derivative through the run (`jax.grad` with respect to a rolling ball's initial state)."""
    integrator, model, state0, t0, dt = _without_derivatives((integrator, model, state0, t0, dt))
    dt = jnp.asarray(dt)
    if dt.ndim:
        raise ValueError(f"dt must be a finite nonzero scalar, got shape {dt.shape}")
    checks = [Check(~jnp.isfinite(dt) | (dt == 0), "dt must be a finite nonzero scalar", dt)]
    t0 = jnp.asarray(t0)
    if t0.ndim:
        raise ValueError(f"t0 must be a finite scalar, got shape {t0.shape}")
    checks.append(Check(~jnp.isfinite(t0), "t0 must be a finite scalar", t0))
    checks += time_checks(t0, dt, n_steps, jax.tree_util.tree_leaves(state0)[0].dtype)
    checks += model.parameter_checks()
    checks += model.state_checks(state0, t0) if check_state else []
    checks += [] if integrator is None else integrator.value_checks(model)
    return checks


def continued_value_checks(integrator, model, state0, t0, dt, n_steps=1) -> list[Check]:
    """`value_checks` with, of the state's, only that it is finite: for a state that a run of
    this method reached and that is continued, whose constraints may have drifted as far as
    the method lets them (a module-level function: a key of `_checks.raise_compiled`)."""
    leaves = jax.tree_util.tree_leaves(state0)
    events = jax.tree_util.tree_leaves(model.state_event_ndims())
    bad = [
        ~jnp.all(jnp.isfinite(x), axis=tuple(range(x.ndim - e, x.ndim)))
        for x, e in zip(leaves, events)
    ]
    finite = Check(functools.reduce(jnp.logical_or, bad), "state0 contains NaN or inf")
    return value_checks(integrator, model, state0, t0, dt, n_steps, check_state=False) + [finite]


def _without_derivatives(tree):
    """`tree` with `lax.stop_gradient` on its inexact arrays (other leaves as they are)."""
    return jax.tree_util.tree_map(
        lambda x: jax.lax.stop_gradient(x) if eqx.is_inexact_array(x) else x, tree
    )


def time_checks(t0, dt, n_steps, dtype) -> list[Check]:
    """The run's times `t0 + k·dt` (in the state's `dtype`, as the run computes them) are
    finite and advance: `t0 + n_steps·dt` overflowed to inf, and a step below `t0`'s
    resolution (`t0 + dt == t0`: 1e-3 at t0 = 1e308, 0.01 at t0 = 1e6 in float32) left every
    time equal to t0 — wrong times, reported as success, for a time-dependent model."""
    t0, h = jnp.asarray(t0, dtype), jnp.asarray(dt, dtype)
    end = t0 + jnp.asarray(n_steps, dtype) * h
    return [
        Check(
            ~jnp.isfinite(end), "t0 + n_steps·dt overflows: the run's last time is not finite", end
        ),
        Check(
            (t0 + h == t0) & (h != 0),
            f"dt is below t0's resolution in {jnp.dtype(dtype).name} (t0 + dt == t0: the times "
            "would not advance); start the run nearer t = 0",
            dt,
        ),
    ]


def check_time_types(t0, dt) -> None:
    """Types before values: `dt` and `t0` are real numbers — a boolean (`True`
    would be a step of 1) or a string is refused, also as an array or a traced value (its
    dtype is known when tracing)."""
    for name, x in (("dt", dt), ("t0", t0)):
        if x is None:
            raise TypeError(f"{name} must be a real number, got None")
        if isinstance(x, str | bytes):
            raise TypeError(f"{name} must be a real number, got the string {x!r}")
        kind = jnp.result_type(x)
        if kind == jnp.bool_:
            shown = repr(bool(x)) if isinstance(x, bool | np.bool_) else "an array of them"
            raise TypeError(f"{name} must be a real number, got a boolean ({shown})")
        if not jnp.issubdtype(kind, jnp.integer) and not jnp.issubdtype(kind, jnp.floating):
            raise TypeError(f"{name} must be a real number, got dtype {kind}")


def check_state_type(model, state0) -> None:
    """The state is the model's `state_type`: a plain tuple or another model's state is
    refused by name, not by an `AttributeError` deep inside."""
    state_type = getattr(model, "state_type", None)
    if isinstance(state_type, type) and not isinstance(state0, state_type):
        raise TypeError(
            f"state0 must be a {state_type.__name__} (the state of {type(model).__name__}), "
            f"got {type(state0).__name__}"
        )


def check_state_dtypes(state0) -> None:
    """A state's arrays are of one floating dtype (an integer, or a float32 leaf beside
    float64 ones, would change the scan carry's type mid-run): the message names the leaves.
    Weakly typed leaves (Python scalars) take the others' dtype and are not counted."""
    leaves = [
        (jax.tree_util.keystr(path) or "state0", leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(state0)[0]
    ]
    for name, leaf in leaves:
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            raise TypeError(
                f"state leaf {name} is {leaf.dtype}: a state is floating point (cast it, e.g. "
                "x.astype(jnp.float64))"
            )
    strong = [(name, leaf.dtype) for name, leaf in leaves if not getattr(leaf, "weak_type", False)]
    if len({kind for _, kind in strong}) > 1:
        listed = ", ".join(f"{name} {kind}" for name, kind in strong)
        raise TypeError(
            f"state leaves must share one floating dtype, got {listed}: cast them, e.g. "
            "jax.tree.map(lambda x: x.astype(jnp.float64), state0)"
        )


def check_dtypes(model, dtype) -> None:
    """Mixed precision is refused, not silently promoted: a float64 inertia would make a
    float32 run's scan carry change type deep inside `lax.scan`. So is an integer or boolean
    array parameter (an inertia written with integers): a model's arrays are floating (a
    weakly typed Python number, e.g. `mass=1`, takes the state's dtype)."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(model)[0]:
        leaf_dtype = getattr(leaf, "dtype", None)
        if leaf_dtype is None or getattr(leaf, "weak_type", False):
            continue
        name = jax.tree_util.keystr(path)
        if not jnp.issubdtype(leaf_dtype, jnp.inexact):
            raise TypeError(
                f"model parameter {type(model).__name__}{name} is {leaf_dtype}, not a floating "
                f"array: cast it, e.g. jnp.asarray(x, jnp.{dtype})"
            )
        if leaf_dtype == dtype or not jnp.issubdtype(leaf_dtype, jnp.floating):
            continue
        raise TypeError(
            f"model parameter {type(model).__name__}{name} is {leaf_dtype} but the state is "
            f"{dtype}: cast one, e.g. jax.tree.map(lambda x: x.astype(jnp.{dtype}), model) "
            "(jaxrigid computes in the state's dtype and does not promote silently)"
        )


def apply_value_checks(integrator, model, state0, t0, dt, n_steps=1, check_state=True) -> None:
    """`value_checks`, by one compiled program for concrete inputs, also those an eager
    `jax.grad` differentiates (cacheable: no callback), and in the caller's graph for traced
    ones (`_checks.raise_in_graph`)."""
    # a method without checks of its own is left out of the program's arguments, so that
    # every such method shares one check program per model and shapes
    own = type(integrator).value_checks is not AbstractIntegrator.value_checks
    args = _checks.primal_values((integrator if own else None, model, state0, t0, dt))
    make = value_checks if check_state else continued_value_checks
    if args is not None:
        _checks.raise_compiled(make, *args, n_steps)
    else:
        _checks.raise_in_graph(make(integrator, model, state0, t0, dt, n_steps))


def invalid_members(checks, batch_shape):
    """Per member (`batch_shape`), whether any check fails: a check's flags broadcast to the
    members where their shape allows (one flag per member, or one for all), else any flag
    marks every member."""
    invalid = jnp.zeros(batch_shape, bool)
    for check in checks:
        bad = jnp.asarray(check.bad)
        try:
            bad = jnp.broadcast_to(bad, batch_shape)
        except ValueError:
            bad = jnp.broadcast_to(jnp.any(bad), batch_shape)
        invalid = invalid | bad
    return invalid


def mark_invalid(solution, invalid, nb: int):
    """`solution` with the `invalid` members' states (and observations, solver state) NaN
    and their outcomes `RESULTS.invalid_input` from step 0."""

    def nan_where(x):
        if not jnp.issubdtype(jnp.result_type(x), jnp.inexact):
            return x
        mask = invalid.reshape(invalid.shape + (1,) * (jnp.ndim(x) - nb))
        return jnp.where(mask, jnp.nan, x)

    def mark(outcome):
        mask = invalid.reshape(invalid.shape + (1,) * (jnp.ndim(outcome.result) - nb))
        return outcome._replace(
            result=jnp.where(mask, results.code(RESULTS.invalid_input), outcome.result),
            first_failure=jnp.where(mask, jnp.int32(0), outcome.first_failure),
        )

    states, final, obs, ss = jax.tree_util.tree_map(
        nan_where,
        (solution.states, solution.final_state, solution.observations, solution.solver_state),
    )
    return solution._replace(
        states=states,
        final_state=final,
        observations=obs,
        solver_state=ss,
        outcome=mark(solution.outcome),
        outcome_per_save=mark(solution.outcome_per_save),
    )
