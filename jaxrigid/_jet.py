"""Derivatives of curves of one scalar by nested forward mode (rails ζ(θ), controls θ(t))."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def as_float(x):
    """`x` as an array with a floating dtype (an integer θ or t cannot carry a tangent)."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x * 1.0


def jet2(fn, x):
    """`(f(x), f′(x), f″(x))` of a function of one scalar, by nested forward mode."""
    x = as_float(x)
    one = jnp.ones_like(x)
    first = lambda x: jax.jvp(fn, (x,), (one,))  # noqa: E731
    (f, df), (_, ddf) = jax.jvp(first, (x,), (one,))
    return f, df, ddf
