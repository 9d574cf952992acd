"""A run integrated chunk by chunk (`run_chunks`), each chunk one `simulate` call that
continues the last one's state, solver state (a method's warm starts, a compensated sum's
rounding error) and observer carry: the run equals one `simulate` call of all its steps, bit
for bit, Newton's iteration counts included, while its chunks come back one by one (a
progress bar, a bounded program). A member whose state turned non-finite is restarted from
the initial state with a fresh solver state (`simulate` refuses non-finite states), and its
results from then on are NaN (`where_members`, `nan_like`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from .. import simulation
from ..results import Outcome

__all__ = [
    "ChunkInputError",
    "ChunkedRun",
    "fresh_solver_state",
    "nan_like",
    "nonfinite_members",
    "run_chunks",
    "where_members",
]


class ChunkInputError(ValueError):
    """`simulate` refused a chunk's input (its `ValueError`'s message, unchanged): `step` is
    the chunk's first step (0: the run's own input, else a state the run reached) and `t` its
    time."""

    def __init__(self, message: str, step: int, t: float):
        super().__init__(message)
        self.step, self.t = step, t


@dataclasses.dataclass
class ChunkedRun:
    """What `run_chunks` returns, as one `simulate` call's `Solution` would hold it (numpy
    arrays; the solver state as `simulate` returned it).

    `ts (n_save,)`; `states`: leaves `(*ensemble, n_save, *event)`; `final_state`;
    `outcome` over the run (`(*ensemble,)` leaves) and `outcome_per_save` (`(*ensemble,
    n_save − 1)` leaves), step indices counted from the run's first step; `observations`,
    the observer's final carry (None without one); `solver_state`, to continue the run.
    `restarted` (per member, or a scalar): members restarted after a non-finite state or
    non-finite at the end; their states from the restart on, final state and observations
    are NaN, and their outcomes after the restart are not counted."""

    ts: np.ndarray
    states: Any
    final_state: Any
    outcome: Outcome
    outcome_per_save: Outcome
    observations: Any
    solver_state: Any
    restarted: np.ndarray

    def first_failure(self) -> tuple[int, int]:
        """`(step, cause)` of the run's first failed step over all members (the lowest
        member on a tie); `(-1, 0)` if none."""
        first, result = np.ravel(self.outcome.first_failure), np.ravel(self.outcome.result)
        if not (first >= 0).any():
            return -1, 0
        step = first[first >= 0].min()
        return int(step), int(result[np.flatnonzero(first == step)[0]])


# ----------------------------------------------------------------------------------------
# Members restarted between chunks


def nonfinite_members(state, ndims) -> np.ndarray:
    """Per member (or a scalar for one trajectory): any non-finite value in the state;
    `ndims` are the leaves' event ranks (`model.state_event_ndims()`)."""

    def bad(x, e):
        x = np.asarray(x)
        return ~np.isfinite(x).all(axis=tuple(range(x.ndim - e, x.ndim)))

    flags = jax.tree_util.tree_leaves(jax.tree_util.tree_map(bad, state, ndims))
    return np.logical_or.reduce(flags)


def where_members(mask, a, b):
    """Members of `a` where `mask`, else of `b` (leaves with the ensemble's leading axes:
    states, solver states, outcomes)."""

    def pick(x, y):
        x, y = np.asarray(x), np.asarray(y)
        return np.where(np.reshape(mask, np.shape(mask) + (1,) * (x.ndim - np.ndim(mask))), x, y)

    return jax.tree_util.tree_map(pick, a, b)


def nan_like(tree):
    """A tree of NaN arrays shaped as `tree`'s leaves."""
    return jax.tree_util.tree_map(lambda x: np.full(np.shape(x), np.nan), tree)


def fresh_solver_state(integrator, model, state, t, dt, ndims):
    """The method's initial solver state (`integrator.init`) for `state` at time `t`, per
    member: `init` is mapped over the state's leading (ensemble) axes, those beyond its
    leaves' event ranks `ndims`."""
    leaf, event = jax.tree_util.tree_leaves(state)[0], jax.tree_util.tree_leaves(ndims)[0]
    t, dt = jnp.asarray(t, leaf.dtype), jnp.asarray(dt, leaf.dtype)
    init = lambda s: integrator.init(model, s, t, dt)  # noqa: E731
    for _ in range(np.ndim(leaf) - event):
        init = jax.vmap(init)
    return init(state)


# ----------------------------------------------------------------------------------------
# The chunks' results joined


def _host_outcome(*leaves: np.ndarray) -> Outcome:
    """An `Outcome` of numpy arrays, as `ChunkedRun` holds it (`Outcome` types its leaves as
    the jax arrays `simulate` returns)."""
    return Outcome(*cast(tuple[jax.Array, ...], leaves))


def _cleared(outcome: Outcome, mask) -> Outcome:
    """`outcome` with the members in `mask` as if they had made no step (restarted members:
    their outcomes are not the run's)."""
    if not np.any(mask):
        return outcome
    fills = (0, 0, 0, -1)  # max_iterations, max_residual, result, first_failure
    return Outcome(*(where_members(mask, np.full_like(x, f), x) for f, x in zip(fills, outcome)))


def _shifted(outcome: Outcome, offset: int) -> Outcome:
    """`outcome` of a chunk starting `offset` steps into the run, its failed step counted
    from the run's first step."""
    first = outcome.first_failure
    shifted = np.where(first >= 0, first + offset, first)
    return outcome._replace(first_failure=cast(jax.Array, shifted))  # see `_host_outcome`


def _joined(a: Outcome, b: Outcome) -> Outcome:
    """The outcome of a run made of `a` then `b` (both counted from the run's first step):
    the worst solves, and the first failure with its cause (`results.accumulate`)."""
    failed = a.first_failure >= 0
    return _host_outcome(
        np.maximum(a.max_iterations, b.max_iterations),
        np.maximum(a.max_residual, b.max_residual),
        np.where(failed, a.result, b.result),
        np.where(failed, a.first_failure, b.first_failure),
    )


def _time_axis_op(fn, ndims, *trees):
    """Apply `fn(leaves..., axis)` with `axis` the time axis of each leaf (just before its
    event axes)."""
    return jax.tree_util.tree_map(lambda e, *xs: fn(*xs, axis=xs[0].ndim - e - 1), ndims, *trees)


class _Joined:
    """The chunks' saved times, states and outcomes, joined as one run's."""

    def __init__(self, ndims):
        self.ndims, self.ts, self.states, self.per_save = ndims, [], [], []
        self.outcome: Outcome | None = None

    def add(self, sol, masked, offset: int) -> None:
        """Add the chunk `sol` that starts `offset` steps into the run; the members in
        `masked` were restarted before it (their states NaN, their outcomes cleared)."""
        states = jax.tree_util.tree_map(np.asarray, sol.states)
        if masked.any():
            states = where_members(masked, nan_like(states), states)
        first = 0 if not self.ts else 1  # later chunks repeat their initial state
        self.ts.append(np.asarray(sol.ts)[first:])
        self.states.append(
            _time_axis_op(
                lambda x, axis: np.take(x, np.arange(first, x.shape[axis]), axis=axis),
                self.ndims,
                states,
            )
        )
        numpy = lambda o: _host_outcome(*(np.asarray(x) for x in o))  # noqa: E731
        outcome = _shifted(_cleared(numpy(sol.outcome), masked), offset)
        self.per_save.append(_shifted(_cleared(numpy(sol.outcome_per_save), masked), offset))
        self.outcome = outcome if self.outcome is None else _joined(self.outcome, outcome)

    def ts_and_states(self):
        """The saved times and states of all chunks, in order."""
        joined = _time_axis_op(
            lambda *xs, axis: np.concatenate(xs, axis=axis), self.ndims, *self.states
        )
        return np.concatenate(self.ts), joined

    def outcome_per_save(self) -> Outcome:
        return _host_outcome(*(np.concatenate(xs, axis=-1) for xs in zip(*self.per_save)))


# ----------------------------------------------------------------------------------------
# The run


def _simulate_chunk(integrator, model, carry, dt, steps, save_every, t, observer, first):
    """One chunk: `simulate` from `carry = (state, observations, solver_state)` at `t`. Only
    the `first` chunk's state is checked: the others are states the run reached, which one
    `simulate` call of all the steps would not check (a restarted member's is `state0`,
    checked with the first)."""
    # every chunk's inputs committed to one device, as the outputs of a stored program are
    # (`program_store`): one program for all chunks, not one for the first and one for the rest
    state, observations, solver_state = jax.device_put(carry, jax.devices()[0])
    sol = simulation.simulate(
        integrator,
        model,
        state,
        dt,
        steps,
        t0=t,
        save_every=save_every,
        observer=observer,
        observations0=observations,
        solver_state0=solver_state,
        check_state=first,
    )
    return jax.block_until_ready(sol)


def _nan_members(mask, tree):
    """`tree` (leaves with the members' leading axes) with the members in `mask` NaN."""
    if tree is None or not np.any(mask):
        return tree
    return where_members(mask, nan_like(tree), tree)


def run_chunks(
    integrator,
    model,
    state0,
    dt: float,
    chunks: Sequence[tuple[int, int]],
    *,
    t0: float = 0.0,
    observer=None,
    observations0=None,
    solver_state0=None,
    on_chunk: Callable[[int], None] | None = None,
) -> ChunkedRun:
    """Integrate `state0` (one trajectory or an ensemble, as `simulate` takes it) by `dt`
    from `t0`, one `simulate` call per `(steps, save_every)` of `chunks` (`plan_chunks`),
    each continuing the last one's state, solver state and `observer`'s carry (from
    `observations0`, `solver_state0` for the first, as `simulate` takes them): the run equals
    one `simulate` call of all the steps bit for bit, Newton's iteration counts included,
    where XLA rounds the chunks' programs as that call's (its defaults do). A chunk's times
    are its `t0 + steps_done·dt` plus its own `k·dt`: the saved times, and the values of a
    vector field that depends on `t`, equal one call's up to round-off. `on_chunk(done)` is
    called with the steps done after each chunk (a progress bar).

    A member whose state is non-finite after a chunk is restarted from its `state0` with a
    fresh solver state (`fresh_solver_state`) and masked: its later states, final state and
    observations are NaN and its later outcomes do not count (`ChunkedRun.restarted`).

    **Raises:** `ChunkInputError` (a `ValueError`) when `simulate` refuses a chunk's input,
    naming its first step and time (step 0: `state0` or the model itself). Only `state0` is
    checked, not the states the run reaches (`simulate(check_state=False)` for the later
    chunks), as in one `simulate` call.
    """
    if not chunks:
        raise ValueError("run_chunks: no chunks to run")
    ndims = model.state_event_ndims()
    joined = _Joined(ndims)
    state, observations, solver_state = state0, observations0, solver_state0
    done, masked = 0, np.zeros((), bool)
    for steps, save_every in chunks:
        t = t0 + done * dt
        masked = masked | nonfinite_members(state, ndims)
        if masked.any():
            state = where_members(masked, state0, state)
            if solver_state is not None:
                fresh = fresh_solver_state(integrator, model, state, t, dt, ndims)
                solver_state = where_members(masked, fresh, solver_state)
        carry = (state, observations, solver_state)
        try:
            sol = _simulate_chunk(
                integrator, model, carry, dt, steps, save_every, t, observer, done == 0
            )
        except ValueError as err:
            raise ChunkInputError(str(err), done, t) from None
        joined.add(sol, masked, done)
        state, observations, solver_state = sol.final_state, sol.observations, sol.solver_state
        done += steps
        if on_chunk is not None:
            on_chunk(done)
    final = jax.tree_util.tree_map(np.asarray, state)
    masked = masked | nonfinite_members(final, ndims)
    ts, states = joined.ts_and_states()
    assert joined.outcome is not None  # `chunks` is not empty
    return ChunkedRun(
        ts=ts,
        states=states,
        final_state=_nan_members(masked, final),
        outcome=joined.outcome,
        outcome_per_save=joined.outcome_per_save(),
        observations=_nan_members(masked, jax.tree_util.tree_map(np.asarray, observations)),
        solver_state=solver_state,
        restarted=masked,
    )
