"""Diagnostics: invariants along a trajectory, their drift, and measured order."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


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
