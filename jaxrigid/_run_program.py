"""The compiled run behind `simulate`: one program per number of saves, ensemble layout and
method form, that flattens the members, runs each (`_run_one`: a scan of saved segments, each
a scan or — in a direct call — a loop of a traced number of steps), takes IMIDM-like methods'
fast form first (`_fast_first` in one program under a caller's `jit`; `fast_then_full`, two
programs chosen on the host, for concrete inputs), and assembles the `Solution`."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import program_store, results, xla_options
from ._carry import tied
from .results import RESULTS, Outcome


class Solution(NamedTuple):
    """`ts (n_save,)`; `states`: leaves `(*ensemble, n_save, *event)` (or what `save`
    returned); `final_state`; `outcome`, over the whole run
    (`(*ensemble,)` leaves), and `outcome_per_save` (`(*ensemble, n_save − 1)` leaves);
    `observations`, the observer's final carry (`None` without an observer); `solver_state`,
    the integrator's final solver state (leaves `(*ensemble, ...)`): pass it as
    `simulate(..., solver_state0=...)` with `final_state` to continue a run exactly as if it
    had not been split (a compensated method's rounding error, Newton's warm start).

    `result` is `outcome.result`."""

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


def _scan(f, init, length: int, checkpoint: bool):
    """`lax.scan(f, init, None, length)`; with `checkpoint`, as ⌈length/b⌉ rematerialised
    blocks of `b ≈ √length` steps, so that a reverse pass stores O(√length) carries instead of
    every step's residuals (Griewank's two-level checkpointing). Every step is the one traced
    body: where `b` does not divide `length` (`_block_length`), the last block's surplus steps
    replay the last step and are discarded (`_replayed_blocks`), where a remainder scan — a
    second copy of the step — cost 1.4–1.5× the build (bench/README.md,
    `checkpoint_blocks.py`)."""
    if not checkpoint or length < 4:
        return lax.scan(f, init, None, length=length)
    b = _block_length(length)
    q, r = divmod(length, b)
    if r:
        return _replayed_blocks(f, init, length, b)

    def block(carry, _):
        return lax.scan(f, carry, None, length=b)

    # prevent_cse=False: inside a scan, CSE across iterations is impossible anyway (jax docs)
    carry, ys = lax.scan(jax.checkpoint(block, prevent_cse=False), init, None, length=q)
    return carry, jax.tree_util.tree_map(lambda y: y.reshape((q * b,) + y.shape[2:]), ys)


def _replayed_blocks(f, init, length: int, b: int):
    """`_scan`'s blocks where `b` does not divide `length`: ⌈length/b⌉ blocks of `b` steps,
    of which the last `b·⌈length/b⌉ − length` are surplus. A surplus step runs `f` again on
    the last real step's carry (kept beside the carry) and its result is discarded by a
    select: its values and derivatives are those of a step the run took (a reverse pass sends
    it a zero cotangent, so it adds no NaN the real step's derivative has not), and the step
    stays one body — no `lax.cond` (a branch per step made the gradient's run 4× slower) and
    no remainder copy."""

    def replay(carry, _):
        c, last, i = carry
        real = i < length

        def pick(new, old):
            return jax.tree_util.tree_map(lambda x, y: jnp.where(real, x, y), new, old)

        x = pick(c, last)  # the step's input, and the last real step's carry from here on
        c1, y = f(x, None)
        return (pick(c1, c), x, i + 1), y

    def block(carry, _):
        return lax.scan(replay, carry, None, length=b)

    n = -(-length // b)
    (carry, _, _), ys = lax.scan(
        jax.checkpoint(block, prevent_cse=False), (init, init, jnp.int32(0)), None, length=n
    )
    return carry, jax.tree_util.tree_map(lambda y: y.reshape((n * b,) + y.shape[2:])[:length], ys)


def _block_length(length: int) -> int:
    """A divisor of `length` within a factor 2 of √length where there is one (no surplus
    steps), else ⌈√length⌉."""
    root = math.isqrt(length)
    for b in range(max(root, 1), 2 * root + 1):
        if length % b == 0:
            return b
    for b in range(root, max(root // 2, 1) - 1, -1):
        if length % b == 0:
            return b
    return math.isqrt(length - 1) + 1


def _finite(state):
    leaves = jax.tree_util.tree_leaves(state)
    return functools.reduce(jnp.logical_and, [jnp.all(jnp.isfinite(x)) for x in leaves])


def _check_step_types(integrator, state, new_state) -> None:
    """At trace time: a step returns its state in the state's dtypes and shapes. A model's
    function that computes in another dtype (a float64 constant beside a float32 state) would
    otherwise surface as the loop's carry mismatch, naming no field."""
    for (path, a), b in zip(
        jax.tree_util.tree_flatten_with_path(state)[0], jax.tree_util.tree_leaves(new_state)
    ):
        if (jnp.shape(a), jnp.result_type(a)) != (jnp.shape(b), jnp.result_type(b)):
            field = jax.tree_util.keystr(path, simple=True, separator=".")
            raise TypeError(
                f"{integrator.name}'s step returned {field} as {jnp.result_type(b)}"
                f"{list(jnp.shape(b))} for a state's {jnp.result_type(a)}{list(jnp.shape(a))}: "
                "the model's functions (torque, potential, force, ...) must compute in the "
                "state's dtype (e.g. constants as jnp.asarray(c, x.dtype))"
            )


def _run_one(integrator, observer, save, model, state0, obs0, ss0, t0, dt, spec, members):
    """The run for `spec = (n_save, save_every, checkpoint)`: `n_save` segments of
    `save_every` steps (a static count: a scan, checkpointed; a traced one: a loop), each
    segment's end kept. `members`: `None` for one trajectory; for an ensemble (members on axis
    0 of the state, observations and solver state), `(model_axes,)`. Returns `(states, final,
    per_save outcomes, observations, solver state)`, members first.

    An ensemble's per-member functions (the step, the observer, `save`) are `vmap`ped inside
    the loops, not the loops over one member: each is then traced once, batched, where a
    `vmap` of the loops would trace them and batch the traced loops again (twice the trace
    time, the same program)."""
    n_save, save_every, checkpoint = spec
    dtype = jax.tree_util.tree_leaves(state0)[0].dtype
    h = jnp.asarray(dt, dtype)

    def each(fn, model_axis=None):
        # `fn(model, *member_args)` over one member, made to take the ensemble's
        return fn if members is None else jax.vmap(fn, in_axes=(model_axis, 0))

    M = None if members is None else members[0]
    solver_state0 = each(lambda m, s: integrator.init(m, s, t0, h), M)(model, state0)
    if ss0 is not None:
        _check_solver_state(integrator, solver_state0, ss0, members is not None)
        solver_state0 = ss0
    if observer is not None and obs0 is None:
        obs0 = each(lambda m, s: observer.init(m, s, t0.astype(dtype)), M)(model, state0)

    def kept(k, state):
        if save is None:
            return state
        t = (t0 + k * dt).astype(dtype)
        return each(lambda _, s: save(t, s))(None, state)

    def one(carry, _):
        s, ss, k, acc, obs = carry
        t = (t0 + k * dt).astype(dtype)

        def member(m, c):
            s, ss, acc, obs = c
            s1, ss1, info = integrator.step(m, s, ss, t, h)
            _check_step_types(integrator, s, s1)
            if not integrator.implicit:
                # an explicit step has no solve to report a NaN or inf: never accepted
                # silently. An implicit step's Newton reports non-finite iterates and
                # residuals itself, so the hot implicit ensembles do not pay for a second check.
                result = results.where(~_finite(s1), RESULTS.nonfinite, info.result)
                info = info._replace(result=result)
            if observer is not None:
                obs = observer.update(m, obs, s, s1, t, h)
            # without a tangent from the start, the outcome gains none (a residual's would
            # cost the scan rules a fixpoint iteration)
            return s1, ss1, results.accumulate(acc, lax.stop_gradient(info), k), obs

        s1, ss1, acc, obs = each(member, M)(model, (s, ss, acc, obs))
        return (s1, ss1, k + 1, acc, obs), None

    def segment(carry, _):
        state, ss, k0, obs = carry
        # the outcome is a report, not a result to differentiate (no tangent, here or from
        # `info`); it starts batched with the state under a caller's `vmap`, as it ends: one
        # batching of the step, not two (the carry's other leaves are so already)
        acc = results.no_failures(dtype)
        if members is not None:
            n = jax.tree_util.tree_leaves(state)[0].shape[0]
            acc = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,)), acc)
        acc = lax.stop_gradient(tied(acc, (state, k0)))
        init = (state, ss, k0, acc, obs)
        if isinstance(save_every, int):
            (state, ss, k1, outcome, obs), _ = _scan(one, init, save_every, checkpoint)
        else:  # a traced count (a concrete call's program): a loop no derivative goes through
            step = lambda i, c: one(c, None)[0]  # noqa: E731
            state, ss, k1, outcome, obs = lax.fori_loop(0, save_every, step, init)
        return (state, ss, k1, obs), (kept(k1, state), outcome)

    # `segment` itself need not be rematerialised: an outer block's recomputation keeps each
    # of its ~√n_save segments' ~√save_every block carries, O(√n_steps) in all.
    init = tied((state0, solver_state0, jnp.int32(0), obs0), (model, t0, h))
    if n_save == 1:
        # one segment (the final state only), outside any loop: the same program, but a step
        # traced inside a loop of segments traced about a quarter slower (bench/README.md,
        # "The step's trace inside a loop of one")
        (final, ss, _, obs), ys = segment(init, None)
        saved, per_save = jax.tree_util.tree_map(lambda y: y[None], ys)
    else:
        (final, ss, _, obs), (saved, per_save) = _scan(segment, init, n_save, checkpoint)
    if members is None:
        states = jax.tree_util.tree_map(
            lambda a, b: jnp.concatenate([a[None], b]), kept(0, state0), saved
        )
    else:  # the saves' axis after the members', assembled so (one kernel per leaf, not two)
        states = jax.tree_util.tree_map(
            lambda a, b: jnp.concatenate([a[:, None], jnp.moveaxis(b, 0, 1)], axis=1),
            kept(0, state0),
            saved,
        )
        per_save = jax.tree_util.tree_map(lambda x: jnp.moveaxis(x, 0, 1), per_save)
    return states, final, per_save, obs, ss


def _check_solver_state(integrator, expected, given, ensemble: bool) -> None:
    """`solver_state0` must be what this integrator's `init` makes (compared per member:
    an `ensemble`'s leaves without their members' axis)."""
    describe = (
        lambda x: (  # noqa: E731
            jax.tree_util.tree_structure(x),
            [(jnp.shape(a)[ensemble:], jnp.result_type(a)) for a in jax.tree_util.tree_leaves(x)],
        )
    )
    if describe(expected) != describe(given):
        raise ValueError(
            f"solver_state0 is not a solver state of {integrator.name} for this model and "
            f"state (pass the `solver_state` of a Solution of the same method and ensemble): "
            f"expected per member {describe(expected)}, got {describe(given)}"
        )


_RUNNERS: dict = {}


def compiled_runner(spec, model_axes, layout, compiler_options=None):
    """The jitted run for `spec = (n_save, save_every, checkpoint)`, `model_axes` and
    `layout = (batch_shape, broadcast, fast)`: the members flattened to one axis, each run by
    `_run_one` (through `_fast_first` when `fast`), and the `Solution` assembled, all in one
    program (an eager reshape or reduction would be a small program of its own to build).
    With `save_every=None` in `spec` the steps per save are the program's last argument,
    traced (a loop of that many steps: not reverse-differentiable); else that argument is
    `None`."""
    key = (
        spec,
        layout,
        jax.tree_util.tree_structure(model_axes),
        tuple(jax.tree_util.tree_leaves(model_axes)),
        xla_options.key(compiler_options),
    )
    if key not in _RUNNERS:
        batch_shape, broadcast, fast = layout
        n_save, static_every, checkpoint = spec

        def run(integrator, observer, save, model, state0, obs0, ss0, t0, dt, steps):
            every = static_every if steps is None else steps
            dtype = jax.tree_util.tree_leaves(state0)[0].dtype
            t0 = jnp.asarray(t0, dtype)
            ts = t0 + jnp.arange(n_save + 1, dtype=dtype) * jnp.asarray(dt, dtype) * every
            ndims = model.state_event_ndims()
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
                spec = (n_save, every, checkpoint)
                members = (model_axes,) if batch_shape else None
                args = (method, observer, save, model, state0, obs0, ss0, t0, dt)
                return _run_one(*args, spec, members)

            out = _fast_first(integrator, solve) if fast else solve(integrator)
            if batch_shape:
                out = jax.tree_util.tree_map(lambda x: x.reshape(batch_shape + x.shape[1:]), out)
            states, final, per_save, obs, ss = out
            outcome = results.summarize(per_save, batch_shape)
            return Solution(ts, states, final, outcome, per_save, obs, ss)

        _RUNNERS[key] = jax.jit(run, static_argnums=2, compiler_options=compiler_options)
    return _RUNNERS[key]


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


def fast_then_full(integrator, spec, model_axes, layout, args):
    """Concrete inputs: `_fast_first` as two programs chosen on the host. The method's
    `fast_variant` runs every member; only if a member had a failed step does the method
    itself run, and its result is kept for exactly those members (`_keep_successful`). The
    second program is built only when it is needed, not with the first (in one program, as
    `_fast_first` under a caller's `jit`, both are built every time)."""
    name = repr((spec, model_axes, layout))

    def plain(method):
        # a stored program where the caller asks for one (`program_store`: its key covers the
        # `save` function too, named here), else the runner itself, top-level, with XLA's
        # options (`xla_options`; none while `program_store` traces it for export)
        save = args[1]

        def run(method, observer, *rest):
            runner = compiled_runner(spec, model_axes, layout + (False,), xla_options.options())
            return runner(method, observer, save, *rest)

        what = f"{getattr(save, '__module__', '')}.{getattr(save, '__qualname__', save)}"
        with xla_options.preferred(method.build_profile):
            return program_store.call(run, f"{name} save={what}", (method, args[0], *args[2:]))

    fast = integrator.fast_variant()
    if fast is None:
        return plain(integrator)
    first = plain(fast)
    if np.all(np.asarray(first.outcome.result) == RESULTS.successful):
        return first
    return _keep_successful(first, plain(integrator))


@jax.jit
def _keep_successful(first, full):
    """Each member's `first` solution where its whole run succeeded, else its `full` one."""
    ok = first.outcome.result == RESULTS.successful  # the ensemble's shape

    def pick(a, b):
        return jnp.where(ok.reshape(ok.shape + (1,) * (a.ndim - ok.ndim)), a, b)

    rest = jax.tree_util.tree_map(pick, tuple(first[1:]), tuple(full[1:]))
    return Solution(first.ts, *rest)
