"""Diagnostics: invariants along a trajectory, their drift, and measured order."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def invariants_along(model, ts, states, model_axes=None) -> dict[str, jax.Array]:
    """`model.invariants` at every saved state: leaves `(*ensemble, n_save)`."""
    per_time = jax.vmap(model.invariants, in_axes=(0, 0))
    R = states[0]
    batch_nd = R.ndim - 3  # (*ensemble, n_save, 3, 3)
    f = lambda m, s: per_time(ts, s)  # noqa: E731
    for _ in range(batch_nd):
        f = jax.vmap(f, in_axes=(model_axes, 0))
        model_axes = model_axes if model_axes is None else model_axes
    return f(model, states)


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
