"""The batched simulation driver: any `step` under `lax.scan`, ensembles under `vmap`.

`simulate(integrator, model, state0, dt, n_steps)` integrates one trajectory or an ensemble:
leading axes of the state's arrays beyond their event shape are ensemble axes, and model
parameters are swept with `model_axes` (as `jax.vmap`'s `in_axes` for the model). Every
`save_every`-th state is kept, with the initial one; the per-step Newton outcomes are reduced
per saved interval and per trajectory, never dropped.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._checks import is_concrete, require
from .compensated import Compensated, value_of
from .lie import so3
from .models.rigid_body import RigidBody


class NewtonSummary(NamedTuple):
    """Reduction of the step infos of a run (shapes: ensemble shape, or per saved interval).

    `first_failure` is the index of the first step whose solve did not converge, −1 if none.
    """

    max_iterations: jax.Array
    max_residual: jax.Array
    all_converged: jax.Array
    first_failure: jax.Array


class Solution(NamedTuple):
    """`ts (n_save,)`; `states` with leaves `(*ensemble, n_save, *event)`; `final_state`
    (for a `Compensated` run, `states` are the rounded values and `final_state` the
    `Compensated` pair to continue from); `newton`, the summary over the whole run
    (`(*ensemble,)` leaves) and `newton_per_save` (`(*ensemble, n_save − 1)` leaves, one per
    saved interval); `observations`, the observer's final carry (`(*ensemble, ...)` leaves;
    `None` without an observer)."""

    ts: jax.Array
    states: Any
    final_state: Any
    newton: NewtonSummary
    newton_per_save: NewtonSummary
    observations: Any = None


class AbstractObserver(eqx.Module):
    """Something measured along a trajectory inside the scan, every step, with no host round
    trip (event counts, Poincaré sections, running extrema). Its carry is a pytree of arrays of
    fixed shapes; `simulate(..., observations0=solution.observations)` continues it."""

    @abc.abstractmethod
    def init(self, model, state0, t0):
        """The carry before the first step."""

    @abc.abstractmethod
    def update(self, model, carry, state, next_state, t, dt):
        """The carry after the step from `state` at `t` to `next_state` at `t + dt`."""


class NewtonConvergenceError(RuntimeError):
    """An implicit step's Newton solve did not converge (raised by `simulate(throw=True)`)."""


def _no_failures(dtype) -> NewtonSummary:
    return NewtonSummary(jnp.int32(0), jnp.zeros((), dtype), jnp.bool_(True), jnp.int32(-1))


def _accumulate(acc: NewtonSummary, info, k) -> NewtonSummary:
    """Fold one step's `StepInfo` (step index `k`) into the running summary. Done in the scan
    carry, so no per-step info is ever stored (at 10⁶ members × 10³ steps that would be GBs)."""
    first = jnp.where((acc.first_failure < 0) & ~info.converged, k, acc.first_failure)
    return NewtonSummary(
        jnp.maximum(acc.max_iterations, info.iterations),
        jnp.maximum(acc.max_residual, info.residual),
        acc.all_converged & info.converged,
        first.astype(jnp.int32),
    )


def _combine(per_save: NewtonSummary) -> NewtonSummary:
    failures = per_save.first_failure
    has = failures >= 0
    first = jnp.where(jnp.any(has), jnp.min(jnp.where(has, failures, jnp.iinfo(jnp.int32).max)), -1)
    return NewtonSummary(
        jnp.max(per_save.max_iterations),
        jnp.max(per_save.max_residual),
        jnp.all(per_save.all_converged),
        first.astype(jnp.int32),
    )


def _run_one(integrator, observer, model, state0, obs0, t0, dt, n_save, save_every):
    dtype = jax.tree_util.tree_leaves(state0)[0].dtype
    if observer is not None and obs0 is None:
        obs0 = observer.init(model, value_of(state0), t0.astype(dtype))

    def segment(carry, _):
        state, k0, obs = carry

        def one(c, _):
            s, k, acc, obs = c
            t = (t0 + k * dt).astype(dtype)
            h = jnp.asarray(dt, dtype)
            s1, info = integrator.step(model, s, t, h)
            if observer is not None:
                obs = observer.update(model, obs, value_of(s), value_of(s1), t, h)
            return (s1, k + 1, _accumulate(acc, info, k), obs), None

        init = (state, k0, _no_failures(dtype), obs)
        (state, k1, summary, obs), _ = lax.scan(one, init, None, length=save_every)
        return (state, k1, obs), (value_of(state), summary)

    init = (state0, jnp.int32(0), obs0)
    (final, _, obs), (saved, per_save) = lax.scan(segment, init, None, length=n_save)
    states = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a[None], b]), value_of(state0), saved
    )
    return states, final, per_save, obs


def _event_ndims(model):
    if hasattr(model, "state_event_ndims"):
        return model.state_event_ndims()
    raise TypeError(f"{type(model).__name__} does not declare state_event_ndims()")


def simulate(
    integrator,
    model,
    state0,
    dt,
    n_steps: int,
    *,
    t0=0.0,
    save_every: int = 1,
    model_axes=None,
    throw: bool = False,
    observer: AbstractObserver | None = None,
    observations0=None,
) -> Solution:
    """Integrate `n_steps` steps of size `dt` from `state0` at `t0`.

    **Arguments:** `integrator` (an `AbstractIntegrator`); `model`; `state0` (leaves with
    optional leading ensemble axes); `dt` (nonzero; negative runs backwards); `save_every`
    (must divide `n_steps`); `model_axes` (`None`: one model for all members; `0` or a pytree
    prefix: the model's ensemble axis, as `jax.vmap`'s `in_axes`); `throw` (raise
    `NewtonConvergenceError` naming the step and member of the first failed solve. For large
    ensembles prefer `throw=False` and inspect `solution.newton`); `observer` (an
    `AbstractObserver` updated every step inside the scan) and `observations0` (its carry to
    continue from, e.g. the previous chunk's `solution.observations`). A
    `compensated.Compensated` `state0` runs with compensated summation (methods with
    `compensated_summation`).

    **Raises:** `ValueError`/`TypeError` for bad shapes and values (non-finite or zero `dt`,
    non-SPD inertia, non-orthonormal attitude, NaN in the state).
    """
    if not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if not isinstance(save_every, (int, np.integer)) or save_every < 1 or n_steps % save_every:
        raise ValueError(
            f"save_every must be a positive divisor of n_steps={n_steps}, got {save_every!r}"
        )
    n_save = n_steps // save_every

    ndims = _event_ndims(model)
    if isinstance(state0, Compensated):
        _check_compensated(integrator, state0)
        ndims = Compensated(ndims, ndims)
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
    _check_inputs(model, state0, dt, batch_shape)

    dtype = leaves[0].dtype
    t0 = jnp.asarray(t0, dtype)
    ts = t0 + jnp.arange(n_save + 1, dtype=dtype) * jnp.asarray(dt, dtype) * save_every

    n_members = int(np.prod(batch_shape)) if batch_shape else None
    if model_axes is not None:
        sizes = {x.shape[a] for x, a in zip(*_leaves_with_axes(model, model_axes)) if a is not None}
        if len(sizes) != 1:
            raise ValueError(f"model_axes must select one ensemble size, got sizes {sorted(sizes)}")
        m = sizes.pop()
        if n_members is None:
            state0 = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (m,) + x.shape), state0)
            batch_shape, n_members = (m,), m
        elif n_members != m:
            raise ValueError(f"state ensemble has {n_members} members but the model sweep has {m}")

    run = _compiled_runner(n_save, save_every, model_axes, n_members is not None)
    flat = jax.tree_util.tree_map(
        lambda x, e: x.reshape((n_members,) + x.shape[x.ndim - e :]) if n_members else x,
        state0,
        ndims,
    )
    nb = len(batch_shape)
    flat_obs0 = jax.tree_util.tree_map(
        lambda x: jnp.reshape(x, (n_members,) + jnp.shape(x)[nb:]) if n_members else x,
        observations0,
    )
    states, final, per_save, obs = run(integrator, observer, model, flat, flat_obs0, t0, dt)
    unflat = lambda x: x.reshape(batch_shape + x.shape[1:]) if n_members else x  # noqa: E731
    states = jax.tree_util.tree_map(unflat, states)
    final = jax.tree_util.tree_map(unflat, final)
    per_save = jax.tree_util.tree_map(unflat, per_save)
    obs = jax.tree_util.tree_map(unflat, obs)
    summary = _summary(per_save, batch_shape)
    solution = Solution(ts, states, final, summary, per_save, obs)
    if throw:
        _raise_on_failure(solution, t0, dt)
    return solution


def _leaves_with_axes(model, model_axes):
    """The model's array leaves and, for each, its ensemble axis (`None`: shared), from a
    `vmap`-style prefix. Axes travel wrapped in 1-tuples so that `None` is not dropped."""
    leaves = jax.tree_util.tree_leaves(model)
    if model_axes is None or isinstance(model_axes, int):
        return leaves, [model_axes] * len(leaves)
    wrapped = jax.tree_util.tree_map(
        lambda a, sub: [(a,)] * len(jax.tree_util.tree_leaves(sub)),
        model_axes,
        model,
        is_leaf=lambda x: x is None,
    )
    axes = [
        t[0] for t in jax.tree_util.tree_leaves(wrapped, is_leaf=lambda x: isinstance(x, tuple))
    ]
    if len(axes) != len(leaves):
        raise ValueError("model_axes must be a prefix of the model's pytree structure")
    return leaves, axes


_RUNNERS: dict = {}


def _compiled_runner(n_save, save_every, model_axes, batched):
    key = (
        n_save,
        save_every,
        batched,
        jax.tree_util.tree_structure(model_axes),
        tuple(jax.tree_util.tree_leaves(model_axes)),
    )
    if key not in _RUNNERS:

        def run(integrator, observer, model, state0, obs0, t0, dt):
            def f(m, s, o):
                return _run_one(integrator, observer, m, s, o, t0, dt, n_save, save_every)

            if batched:
                f = jax.vmap(f, in_axes=(model_axes, 0, 0))
            return f(model, state0, obs0)

        _RUNNERS[key] = jax.jit(run)
    return _RUNNERS[key]


def _summary(per_save: NewtonSummary, batch_shape) -> NewtonSummary:
    nd = len(batch_shape)
    if nd == 0:
        return _combine(per_save)
    flat = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[nd:]), per_save)
    out = jax.vmap(_combine)(flat)
    return jax.tree_util.tree_map(lambda x: x.reshape(batch_shape), out)


def _raise_on_failure(solution: Solution, t0, dt):
    summary = solution.newton
    if not is_concrete(summary):
        raise TypeError(
            "simulate(throw=True) must be called outside jit; use throw=False "
            "and inspect solution.newton inside jit"
        )
    failed = ~np.asarray(summary.all_converged)
    if failed.any():
        first = np.asarray(summary.first_failure)
        member = tuple(int(i) for i in np.argwhere(failed)[0]) if failed.ndim else ()
        step = int(first[member]) if member else int(first)
        who = f" of ensemble member {member[0] if len(member) == 1 else member}" if member else ""
        raise NewtonConvergenceError(
            f"Newton did not converge at step {step} (t = {float(t0) + step * float(dt):.6g})"
            f"{who}; {int(failed.sum())} of {failed.size} trajectories had failed steps. "
            "Try a smaller dt or a larger Newton(max_steps=...)."
        )


def _check_compensated(integrator, state0):
    if not getattr(integrator, "compensated_summation", False):
        raise TypeError(
            f"{getattr(integrator, 'name', type(integrator).__name__)} does not advance a "
            "Compensated state (integrator.compensated_summation is False); pass the plain "
            "state, or use a method that does (e.g. IMIDM)"
        )
    value, error = state0
    v_struct, e_struct = (jax.tree_util.tree_structure(x) for x in (value, error))
    shapes = lambda x: [jnp.shape(a) for a in jax.tree_util.tree_leaves(x)]  # noqa: E731
    if v_struct != e_struct or shapes(value) != shapes(error):
        raise ValueError(
            "Compensated(value, error) needs value and error of the same structure and shapes; "
            f"got {v_struct} {shapes(value)} and {e_struct} {shapes(error)}"
        )
    if is_concrete(error) and not all(
        np.isfinite(np.asarray(a)).all() for a in jax.tree_util.tree_leaves(error)
    ):
        raise ValueError("Compensated state's error contains NaN or inf")


def _check_inputs(model, state0, dt, batch_shape):
    state0 = value_of(state0)
    if is_concrete(dt):
        dt_val = np.asarray(dt)
        if dt_val.ndim or not np.isfinite(dt_val) or dt_val == 0:
            raise ValueError(f"dt must be a finite nonzero scalar, got {dt!r}")
    if isinstance(model, RigidBody):
        check_rigid_body(model)
        check_rigid_body_state(state0)
    elif hasattr(model, "check_state"):  # other models validate their own states
        model.check_state(state0)


def check_rigid_body(model: RigidBody):
    """Inertia `(…, 3, 3)` finite, symmetric and positive definite."""
    inertia = model.inertia
    if inertia.shape[-2:] != (3, 3):
        raise ValueError(f"inertia must have shape (..., 3, 3), got {inertia.shape}")
    if not is_concrete(inertia):
        return
    I = np.asarray(inertia)
    eps = np.finfo(I.dtype).eps
    scale = np.max(np.abs(I), axis=(-2, -1))
    finite = np.isfinite(I).all(axis=(-2, -1))
    require(I, ~finite, "inertia contains NaN or inf")
    asym = np.max(np.abs(I - np.swapaxes(I, -1, -2)), axis=(-2, -1)) > 100 * eps * scale
    require(I, asym, "inertia must be symmetric (to 100 eps of its largest entry)")
    eig = np.linalg.eigvalsh(0.5 * (I + np.swapaxes(I, -1, -2)))
    require(
        I,
        eig[..., 0] <= 0,
        f"inertia must be positive definite; smallest eigenvalue(s) {eig[..., 0].min():.3g}",
    )


def check_rigid_body_state(state):
    """`R (…, 3, 3)` a rotation to √eps, `Pi (…, 3)` finite."""
    R, Pi = state
    if R.shape[-2:] != (3, 3) or Pi.shape[-1:] != (3,) or R.shape[:-2] != Pi.shape[:-1]:
        raise ValueError(
            f"rigid-body state needs R (..., 3, 3) and Pi (..., 3), got {R.shape}, {Pi.shape}"
        )
    if not is_concrete(R, Pi):
        return
    Rn, Pn = np.asarray(R), np.asarray(Pi)
    require(
        R,
        ~(np.isfinite(Rn).all(axis=(-2, -1)) & np.isfinite(Pn).all(axis=-1)),
        "initial state contains NaN or inf",
    )
    tol = np.sqrt(np.finfo(Rn.dtype).eps)
    err = np.asarray(so3.orthogonality_error(R))
    require(R, err > tol, f"R0 is not orthonormal: ‖RᵀR − 1‖ = {err.max():.3g} > {tol:.2g}")
    require(
        R, np.linalg.det(Rn) <= 0, "R0 has a negative determinant (a reflection, not a rotation)"
    )
