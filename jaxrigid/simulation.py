"""The batched simulation driver: any integrator under `lax.scan`, ensembles under `vmap`.

`simulate(integrator, model, state0, dt, n_steps)` integrates one trajectory or an ensemble:
leading axes of the state's arrays beyond the model's event shape are ensemble axes, and
model parameters are swept with `model_axes` (as `jax.vmap`'s `in_axes` for the model).
Every `save_every`-th state (or `save(t, state)` of it) is kept, with the initial one; the
per-step outcomes are reduced per saved interval and per trajectory, by cause, never dropped.

The driver knows no particular model or method: it asks the integrator whether it integrates
the model (`integrates`), the model for its event shapes and value checks
(`jaxrigid.models.AbstractModel`), and runs `init`/`step` (`AbstractIntegrator`).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _checks, _input_checks, results
from .compensated import Compensated, value_of
from .observers import AbstractObserver
from .results import (
    RESULTS,
    NewtonConvergenceError,
    Outcome,
    StepFailedError,
)

__all__ = [
    "AbstractObserver",
    "IncompatibleModelError",
    "NewtonConvergenceError",
    "Outcome",
    "Solution",
    "StepFailedError",
    "simulate",
]


class Solution(NamedTuple):
    """`ts (n_save,)`; `states`: leaves `(*ensemble, n_save, *event)` (or what `save`
    returned); `final_state` (for a `Compensated` run, `states` are the rounded values and
    `final_state` the `Compensated` pair to continue from); `outcome`, over the whole run
    (`(*ensemble,)` leaves), and `outcome_per_save` (`(*ensemble, n_save − 1)` leaves);
    `observations`, the observer's final carry (`None` without an observer); `solver_state`,
    the integrator's final solver state (leaves `(*ensemble, ...)`): pass it as
    `simulate(..., solver_state0=...)` with `final_state` to continue a run exactly as if it
    had not been split (a compensated method's rounding error, Newton's warm start).

    `result` is `outcome.result`. `newton` and `newton_per_save` are the names of one release
    ago for `outcome` and `outcome_per_save` (kept for one release)."""

    ts: jax.Array
    states: Any
    final_state: Any
    outcome: Outcome
    outcome_per_save: Outcome
    observations: Any = None
    solver_state: Any = None

    @property
    def result(self) -> jax.Array:
        return self.outcome.result

    @property
    def newton(self) -> Outcome:
        return self.outcome

    @property
    def newton_per_save(self) -> Outcome:
        return self.outcome_per_save


class IncompatibleModelError(TypeError):
    """The integrator does not integrate this kind of model (raised before tracing)."""


# ----------------------------------------------------------------------------------------
# The scans


def _scan(f, init, length: int, checkpoint: bool):
    """`lax.scan(f, init, None, length)`; with `checkpoint`, as ⌈length/b⌉ rematerialised
    blocks of `b ≈ √length` steps, so that a reverse pass stores O(√length) carries instead of
    every step's residuals (Griewank's two-level checkpointing)."""
    if not checkpoint or length < 4:
        return lax.scan(f, init, None, length=length)
    b = _block_length(length)
    q, r = divmod(length, b)

    def block(carry, _):
        return lax.scan(f, carry, None, length=b)

    # prevent_cse=False: inside a scan, CSE across iterations is impossible anyway (jax docs)
    carry, ys = lax.scan(jax.checkpoint(block, prevent_cse=False), init, None, length=q)
    ys = jax.tree_util.tree_map(lambda y: y.reshape((q * b,) + y.shape[2:]), ys)
    if r:
        carry, tail = lax.scan(f, carry, None, length=r)
        ys = jax.tree_util.tree_map(lambda a, c: jnp.concatenate([a, c]), ys, tail)
    return carry, ys


def _block_length(length: int) -> int:
    """A divisor of `length` within a factor 2 of √length where there is one, so that no
    remainder scan (a second copy of the step to compile) is needed; else ⌈√length⌉."""
    root = math.isqrt(length)
    for b in range(max(root, 1), 2 * root + 1):
        if length % b == 0:
            return b
    for b in range(root, max(root // 2, 1) - 1, -1):
        if length % b == 0:
            return b
    return math.isqrt(length - 1) + 1


def _finite(state):
    leaves = jax.tree_util.tree_leaves(value_of(state))
    return functools.reduce(jnp.logical_and, [jnp.all(jnp.isfinite(x)) for x in leaves])


def _run_one(integrator, observer, save, model, state0, obs0, ss0, t0, dt, spec):
    n_save, save_every, checkpoint = spec
    dtype = jax.tree_util.tree_leaves(state0)[0].dtype
    h = jnp.asarray(dt, dtype)
    solver_state0 = integrator.init(model, state0, t0, h)
    if ss0 is not None:
        _check_solver_state(integrator, solver_state0, ss0)
        solver_state0 = ss0
    if observer is not None and obs0 is None:
        obs0 = observer.init(model, value_of(state0), t0.astype(dtype))

    def kept(k, state):
        value = value_of(state)
        return value if save is None else save((t0 + k * dt).astype(dtype), value)

    def one(carry, _):
        s, ss, k, acc, obs = carry
        t = (t0 + k * dt).astype(dtype)
        s1, ss1, info = integrator.step(model, s, ss, t, h)
        if not integrator.implicit:
            # an explicit step has no solve to report a NaN or inf: never accepted silently.
            # An implicit step's Newton reports non-finite iterates and residuals itself, so
            # the hot implicit ensembles do not pay for a second check.
            result = results.where(~_finite(s1), RESULTS.nonfinite, info.result)
            info = info._replace(result=result)
        if observer is not None:
            obs = observer.update(model, obs, value_of(s), value_of(s1), t, h)
        return (s1, ss1, k + 1, results.accumulate(acc, info, k), obs), None

    def segment(carry, _):
        state, ss, k0, obs = carry
        init = (state, ss, k0, results.no_failures(dtype), obs)
        (state, ss, k1, outcome, obs), _ = _scan(one, init, save_every, checkpoint)
        return (state, ss, k1, obs), (kept(k1, state), outcome)

    # `segment` itself need not be rematerialised: an outer block's recomputation keeps each
    # of its ~√n_save segments' ~√save_every block carries, O(√n_steps) in all.
    init = (state0, solver_state0, jnp.int32(0), obs0)
    (final, ss, _, obs), (saved, per_save) = _scan(segment, init, n_save, checkpoint)
    states = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a[None], b]), kept(0, state0), saved
    )
    return states, final, per_save, obs, ss


def _check_solver_state(integrator, expected, given) -> None:
    """`solver_state0` must be what this integrator's `init` makes (one member's)."""
    describe = lambda x: (  # noqa: E731
        jax.tree_util.tree_structure(x),
        [(jnp.shape(a), jnp.result_type(a)) for a in jax.tree_util.tree_leaves(x)],
    )
    if describe(expected) != describe(given):
        raise ValueError(
            f"solver_state0 is not a solver state of {integrator.name} for this model and "
            f"state (pass the `solver_state` of a Solution of the same method and ensemble): "
            f"expected per member {describe(expected)}, got {describe(given)}"
        )


# ----------------------------------------------------------------------------------------
# simulate


def simulate(
    integrator,
    model,
    state0,
    dt,
    n_steps: int,
    *,
    t0=0.0,
    save_every: int = 1,
    save=None,
    model_axes=None,
    throw: bool = False,
    observer: AbstractObserver | None = None,
    observations0=None,
    solver_state0=None,
    checkpoint: bool = True,
    checks: str | None = None,
) -> Solution:
    """Integrate `n_steps` steps of size `dt` from `state0` at `t0`.

    **Arguments:** `integrator` (an `AbstractIntegrator`); `model` (an `AbstractModel`);
    `state0` (leaves with optional leading ensemble axes); `dt` (nonzero; negative runs
    backwards); `save_every` (must divide `n_steps`); `save` (optional `fn(t, state)` of one
    member: what to keep at each saved time instead of the whole state, e.g. an observable);
    `model_axes` (`None`: one model for all members; `0` or a pytree prefix: the model's
    ensemble axis, as `jax.vmap`'s `in_axes`); `throw` (raise `StepFailedError` naming the
    cause, step, time and member of the first failed step, also inside `jit`; for large
    ensembles prefer `throw=False` and inspect `solution.outcome`); `observer` (an
    `AbstractObserver` updated every step inside the scan) and `observations0` (its carry to
    continue from); `solver_state0` (a previous `Solution.solver_state`, to continue that
    run: with its `final_state` as `state0` the two runs equal one unsplit run bit for bit);
    `checkpoint` (default: a reverse pass through the run stores O(√n_steps) states,
    recomputing the rest; `False` stores every step: less compute for short horizons);
    `checks` (`"raise"`, the default: a failed value check raises, see below; `"outcome"`: a
    member that fails one is reported in `solution.outcome` as `RESULTS.invalid_input` with
    its states NaN, and nothing is raised — no host callback, so a caller's `jit` of it
    stays cacheable by JAX's persistent compilation cache). A `compensated.Compensated`
    `state0` (deprecated: use the method's `compensated=True`) runs with compensated
    summation.

    `dt`, `t0` and every array of the model and the state may be traced (`jit` arguments,
    differentiated, `vmap`ped).

    **Raises:** `IncompatibleModelError` (a `TypeError`) when the integrator does not
    integrate this model, naming those that do; `ValueError` for bad shapes; `TypeError` for a
    model parameter whose dtype is not the state's; `ValueError` for bad values (zero or
    non-finite `dt`, non-SPD inertia, non-orthonormal attitude, NaN in the state) naming the
    ensemble member — at once for concrete inputs (also under an eager `jax.grad`), and from
    the compiled program (as a `JaxRuntimeError` carrying the same message) for inputs traced
    by a caller's `jit` or `vmap`: that check is a host callback, and JAX does not put a
    program with one in its persistent cache (`checks="outcome"` avoids it).
    """
    checks = _input_checks.mode(checks)
    if not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if not isinstance(save_every, (int, np.integer)) or save_every < 1 or n_steps % save_every:
        raise ValueError(
            f"save_every must be a positive divisor of n_steps={n_steps}, got {save_every!r}"
        )
    n_save = n_steps // save_every
    check_integrates(integrator, model)

    if isinstance(state0, Compensated):
        _check_compensated(integrator, state0)
    ndims = _event_ndims(model, state0)
    leaves, treedef = jax.tree_util.tree_flatten(state0)
    event = jax.tree_util.tree_leaves(ndims)
    leaves = [jnp.asarray(x) for x in leaves]
    batch_shapes = {x.shape[: x.ndim - e] for x, e in zip(leaves, event)}
    if len(batch_shapes) != 1 or any(x.ndim < e for x, e in zip(leaves, event)):
        raise ValueError(
            "state arrays must share their leading (ensemble) axes; got shapes "
            + ", ".join(str(x.shape) for x in leaves)
        )
    batch_shape = batch_shapes.pop()
    state0 = jax.tree_util.tree_unflatten(treedef, leaves)
    plain0 = value_of(state0)
    model.check_state_shapes(plain0)
    dtype = leaves[0].dtype
    _input_checks.check_dtypes(model, dtype)
    if checks == "raise":
        _input_checks.apply_value_checks(integrator, model, state0, t0, dt)

    broadcast = None
    n_members = int(np.prod(batch_shape)) if batch_shape else None
    if model_axes is not None:
        sizes = {x.shape[a] for x, a in zip(*_leaves_with_axes(model, model_axes)) if a is not None}
        if len(sizes) != 1:
            raise ValueError(f"model_axes must select one ensemble size, got sizes {sorted(sizes)}")
        m = sizes.pop()
        if n_members is None:
            broadcast, batch_shape, n_members = m, (m,), m
        elif n_members != m:
            raise ValueError(f"state ensemble has {n_members} members but the model sweep has {m}")

    spec, inputs = (n_save, save_every, checkpoint), (model, state0, observations0, solver_state0)
    args = (observer, save, *inputs, t0, dt)
    if _checks.is_concrete(integrator, observer, *inputs, t0, dt):
        solution = _fast_then_full(
            integrator, spec, model_axes, (tuple(batch_shape), broadcast), args
        )
    else:
        # Under a derivative the method runs alone: the fast path would build and
        # differentiate both of its runs. A single trajectory keeps the fast path, so that it
        # equals the same member of an ensemble bit for bit.
        fast = not _checks.is_differentiated(*inputs, t0, dt)
        layout = (tuple(batch_shape), broadcast, fast)
        solution = _compiled_runner(spec, model_axes, layout)(integrator, *args)
    if checks == "outcome":
        invalid = _input_checks.invalid_members(
            _input_checks.value_checks(integrator, model, state0, t0, dt), batch_shape
        )
        solution = _input_checks.mark_invalid(solution, invalid, len(batch_shape))
    if throw:
        results.raise_on_failure(solution.outcome, solution.ts[0], dt)
    return solution


def check_integrates(integrator, model) -> None:
    """`IncompatibleModelError` unless `integrator` integrates `model`, naming the methods
    of the registry that do."""
    if integrator.integrates(model):
        return
    from .integrators import methods_for

    valid = methods_for(model)
    raise IncompatibleModelError(
        f"{integrator.name} does not integrate a {type(model).__name__} "
        f"({integrator.model_requirement}); methods that do: {', '.join(valid) or 'none'}"
    )


class _Axis:
    """An axis of `model_axes` carried through `tree_map` as a leaf: neither dropped (as
    `None` would be) nor confused with the model's own tuples (a model's `rails` field)."""

    def __init__(self, axis):
        self.axis = axis


def _leaves_with_axes(model, model_axes):
    """The model's array leaves and, for each, its ensemble axis (`None`: shared), from a
    `vmap`-style prefix."""
    leaves = jax.tree_util.tree_leaves(model)
    if model_axes is None or isinstance(model_axes, int):
        return leaves, [model_axes] * len(leaves)
    wrapped = jax.tree_util.tree_map(
        lambda a, sub: [_Axis(a)] * len(jax.tree_util.tree_leaves(sub)),
        model_axes,
        model,
        is_leaf=lambda x: x is None,
    )
    axes = [
        t.axis for t in jax.tree_util.tree_leaves(wrapped, is_leaf=lambda x: isinstance(x, _Axis))
    ]
    if len(axes) != len(leaves):
        raise ValueError("model_axes must be a prefix of the model's pytree structure")
    return leaves, axes


_RUNNERS: dict = {}


def _compiled_runner(spec, model_axes, layout):
    """The jitted run for `spec = (n_save, save_every, checkpoint)`, `model_axes` and
    `layout = (batch_shape, broadcast, fast)`: the members flattened to one axis, each run by
    `_run_one` (through `_fast_first` when `fast`), and the `Solution` assembled, all in one
    program (an eager reshape or reduction would be a small program of its own to build)."""
    key = (
        spec,
        layout,
        jax.tree_util.tree_structure(model_axes),
        tuple(jax.tree_util.tree_leaves(model_axes)),
    )
    if key not in _RUNNERS:
        batch_shape, broadcast, fast = layout
        n_save, save_every, _ = spec

        def run(integrator, observer, save, model, state0, obs0, ss0, t0, dt):
            dtype = jax.tree_util.tree_leaves(state0)[0].dtype
            t0 = jnp.asarray(t0, dtype)
            ts = t0 + jnp.arange(n_save + 1, dtype=dtype) * jnp.asarray(dt, dtype) * save_every
            ndims = _event_ndims(model, state0)
            if broadcast is not None:
                state0 = jax.tree_util.tree_map(
                    lambda x: jnp.broadcast_to(x, (broadcast,) + x.shape), state0
                )
            if batch_shape:
                nb, n = len(batch_shape), math.prod(batch_shape)
                state0 = jax.tree_util.tree_map(
                    lambda x, e: x.reshape((n,) + x.shape[x.ndim - e :]), state0, ndims
                )
                obs0, ss0 = jax.tree_util.tree_map(
                    lambda x: jnp.reshape(x, (n,) + jnp.shape(x)[nb:]), (obs0, ss0)
                )

            def solve(method):
                def f(m, s, o, ss):
                    return _run_one(method, observer, save, m, s, o, ss, t0, dt, spec)

                if batch_shape:
                    f = jax.vmap(f, in_axes=(model_axes, 0, 0, 0))
                return f(model, state0, obs0, ss0)

            out = _fast_first(integrator, solve) if fast else solve(integrator)
            if batch_shape:
                out = jax.tree_util.tree_map(lambda x: x.reshape(batch_shape + x.shape[1:]), out)
            states, final, per_save, obs, ss = out
            outcome = results.summarize(per_save, batch_shape)
            return Solution(ts, states, final, outcome, per_save, obs, ss)

        _RUNNERS[key] = jax.jit(run, static_argnums=2)
    return _RUNNERS[key]


def _event_ndims(model, state0):
    """The event ranks of the state's leaves (a `Compensated` pair's: twice the model's)."""
    ndims = model.state_event_ndims()
    return Compensated(ndims, ndims) if isinstance(state0, Compensated) else ndims


def _fast_first(integrator, solve):
    """`solve(integrator)`, by way of the method's `fast_variant` where it has one: the fast
    form runs every member; the members of which a step failed are run again with the method
    itself, and only when there are any (`lax.cond` on the whole ensemble: no cost when every
    member succeeded). Their outcome is the method's own, so a member the method cannot step
    still reports its failure."""
    fast = integrator.fast_variant()
    if fast is None:
        return solve(integrator)
    out = solve(fast)
    ok = jnp.all(out[2].result == RESULTS.successful, axis=-1)  # per member, over the saves

    def redo():
        again = solve(integrator)
        pick = lambda a, b: jnp.where(ok.reshape(ok.shape + (1,) * (a.ndim - ok.ndim)), a, b)  # noqa: E731
        return jax.tree_util.tree_map(pick, out, again)

    return lax.cond(jnp.all(ok), lambda: out, redo)


def _fast_then_full(integrator, spec, model_axes, layout, args):
    """Concrete inputs: `_fast_first` as two programs chosen on the host. The method's
    `fast_variant` runs every member; only if a member had a failed step does the method
    itself run, and its result is kept for exactly those members (`_keep_successful`). The
    second program is built only when it is needed, not with the first (in one program, as
    `_fast_first` under a caller's `jit`, both are built every time)."""
    plain = _compiled_runner(spec, model_axes, layout + (False,))
    fast = integrator.fast_variant()
    if fast is None:
        return plain(integrator, *args)
    first = plain(fast, *args)
    if np.all(np.asarray(first.outcome.result) == RESULTS.successful):
        return first
    return _keep_successful(first, plain(integrator, *args))


@jax.jit
def _keep_successful(first, full):
    """Each member's `first` solution where its whole run succeeded, else its `full` one."""
    ok = first.outcome.result == RESULTS.successful  # the ensemble's shape

    def pick(a, b):
        return jnp.where(ok.reshape(ok.shape + (1,) * (a.ndim - ok.ndim)), a, b)

    rest = jax.tree_util.tree_map(pick, tuple(first[1:]), tuple(full[1:]))
    return Solution(first.ts, *rest)


def _check_compensated(integrator, state0):
    if not getattr(integrator, "compensated_summation", False):
        raise TypeError(
            f"{integrator.name} does not advance a Compensated state "
            "(integrator.compensated_summation is False). Compensated states are deprecated: "
            "ask the method instead, e.g. IMIDM(compensated=True), and continue a run with "
            "simulate(..., solver_state0=solution.solver_state)"
        )
    value, error = state0
    v_struct, e_struct = (jax.tree_util.tree_structure(x) for x in (value, error))
    shapes = lambda x: [jnp.shape(a) for a in jax.tree_util.tree_leaves(x)]  # noqa: E731
    if v_struct != e_struct or shapes(value) != shapes(error):
        raise ValueError(
            "Compensated(value, error) needs value and error of the same structure and shapes; "
            f"got {v_struct} {shapes(value)} and {e_struct} {shapes(error)}"
        )
