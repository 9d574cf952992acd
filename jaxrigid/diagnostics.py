"""Diagnostics: a function and the invariants along a trajectory, their drift, and measured
order."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def along(fn, model, ts, states):
    """`fn(t, state)` (a pytree of arrays, one member) at every saved state of a `Solution`'s
    `states` (an unbatched `model`): leaves `(*ensemble, n_save, ...)`. Traceable: jit it
    (`Case.observe`, the command's `evaluate_along`)."""
    ndims = model.state_event_ndims()
    first, nd0 = jax.tree_util.tree_leaves(states)[0], jax.tree_util.tree_leaves(ndims)[0]
    batch = np.shape(first)[: np.ndim(first) - nd0]  # (*ensemble, n_save)
    flat = jax.tree_util.tree_map(
        lambda x, e: jnp.reshape(x, (-1,) + np.shape(x)[np.ndim(x) - e :]), states, ndims
    )
    t = jnp.reshape(jnp.broadcast_to(jnp.asarray(ts), batch), (-1,))
    out = jax.vmap(fn)(t, flat)
    return jax.tree_util.tree_map(lambda y: jnp.reshape(y, batch + y.shape[1:]), out)


def invariants_along(model, ts, states, model_axes=None) -> dict[str, jax.Array]:
    """`model.invariants` at every saved state of a `Solution`'s `states`: leaves
    `(*ensemble, n_save)`. `model_axes` as given to `simulate` (one flat ensemble axis)."""
    ndims = jax.tree_util.tree_leaves(model.state_event_ndims())
    first, nd0 = jax.tree_util.tree_leaves(states)[0], ndims[0]
    batch_shape = first.shape[: first.ndim - nd0 - 1]  # (*ensemble, n_save, *event)
    per_time = lambda m, s: jax.vmap(m.invariants, in_axes=(0, 0))(ts, s)  # noqa: E731
    if not batch_shape:
        return per_time(model, states)
    flat = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[len(batch_shape) :]), states)
    out = jax.vmap(per_time, in_axes=(model_axes, 0))(model, flat)
    return jax.tree_util.tree_map(lambda x: x.reshape(batch_shape + x.shape[1:]), out)


def max_abs_drift(values) -> jax.Array:
    """`max_k |v_k − v_0|` along the last (time) axis."""
    return jnp.max(jnp.abs(values - values[..., :1]), axis=-1)


def relative_drift(values) -> jax.Array:
    """`max_k |v_k − v_0| / max(|v_0|, tiny)`."""
    v0 = jnp.abs(values[..., 0])
    return max_abs_drift(values) / jnp.maximum(v0, jnp.finfo(values.dtype).tiny)


def measured_order(step_sizes, errors) -> float:
    """Slope of log(error) against log(step size), by least squares."""
    slope, _ = np.polyfit(np.log(np.asarray(step_sizes)), np.log(np.asarray(errors)), 1)
    return float(slope)


def second_quotient_of_precision(xi_1, xi_2, xi_4) -> jax.Array:
    """`Q_II = ‖ξ(h) − ξ(h/2)‖ / ‖ξ(h/2) − ξ(h/4)‖` (Gebhardt & Romero, Appendix A, eq. 120),
    Euclidean norms over the last axis; ≈ 2ⁿ for a method of order n (123)."""
    return jnp.linalg.norm(xi_1 - xi_2, axis=-1) / jnp.linalg.norm(xi_2 - xi_4, axis=-1)


def _flat_event(model, states):
    """The state's arrays joined into one vector per saved state: `(*batch, n_save, size)`."""
    ndims = jax.tree_util.tree_leaves(model.state_event_ndims())
    leaves = jax.tree_util.tree_leaves(states)
    return jnp.concatenate(
        [x.reshape(x.shape[: x.ndim - e] + (-1,)) for x, e in zip(leaves, ndims)], axis=-1
    )


def q2_along(integrator, model, state0, dt, times, *, model_axes=None, t0=0.0) -> jax.Array:
    """`Q_II` at `times` (multiples of `dt` after `t0`) for any integrator and model: the run
    is repeated at `dt/2` and `dt/4` and `ξ` is the whole state (all its arrays, flattened).
    Returns `(*ensemble, len(times))`."""
    from math import gcd

    from .simulation import simulate

    steps = [round((float(t) - t0) / dt) for t in np.atleast_1d(times)]
    for t, n in zip(np.atleast_1d(times), steps):
        if n < 1 or abs(t0 + n * dt - float(t)) > 1e-9 * max(1.0, abs(float(t))):
            raise ValueError(f"Q_II time {float(t)!r} is not a positive multiple of dt = {dt!r}")
    g = 0
    for n in steps:
        g = gcd(g, n)
    xi = []
    for k in (1, 2, 4):
        sol = simulate(
            integrator,
            model,
            state0,
            dt / k,
            max(steps) * k,
            t0=t0,
            save_every=g * k,
            model_axes=model_axes,
        )
        xi.append(jnp.take(_flat_event(model, sol.states), jnp.asarray(steps) // g, axis=-2))
    return second_quotient_of_precision(*xi)
