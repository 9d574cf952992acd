"""A loop's initial carry with every tangent and batch axis it will have (build time).

JAX's `jvp`, `linearize` and `vmap` rules for `lax.scan`, `fori_loop` and `while_loop` find
which carry leaves have a tangent (are batched) by a fixpoint: they transform the body, and if
a leaf without one gains one, transform it again — recursively, so in nested loops each extra
iteration repeats every loop below it, `2^depth` times at worst. A carry that starts with a
constant (a zero multiplier, an `ok = True` flag, the problem's own initial state under a
`vmap` over tasks) gains its tangent or batch axis in the first iteration. `tied` makes every
leaf depend on all the others and on a `context` from the start, so each rule transforms the
body once (docs/design-notes.md, notes 36 and 46).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["tied"]


def tied(carry, context=()):
    """`carry`, each numeric leaf plus `select(false, Σ, 0)` and each boolean leaf `or`
    `select(false, Σ ≠ 0, false)`, `Σ` the sum of every numeric leaf of `carry` and
    `context`. The values are unchanged (the `select` never takes the sum, so an inf or NaN in
    it reaches neither them nor, by the transpose's zero cotangent, the inputs); each floating
    leaf has a tangent under a derivative, and each leaf is batched under `vmap`, whenever any
    leaf of `carry` or `context` has one (is)."""
    leaves, tree = jax.tree_util.tree_flatten(carry)
    numbers = [i for i, x in enumerate(leaves) if _numeric(x)]
    flags = [i for i, x in enumerate(leaves) if _boolean(x)]
    sources = [leaves[i] for i in numbers]
    sources += [x for x in jax.tree_util.tree_leaves(context) if _numeric(x)]
    if not sources or not (numbers or flags):
        return carry
    total = functools.reduce(jnp.add, [jnp.sum(x, dtype=_float(x)) for x in sources])
    never = jnp.zeros(jnp.shape(total), bool)
    zero = lax.select(never, total, jnp.zeros_like(total))
    for i in numbers:
        leaves[i] = leaves[i] + zero.astype(leaves[i].dtype)
    if flags:
        false = lax.select(never, total != 0, never)
        for i in flags:
            leaves[i] = leaves[i] | false
    return jax.tree_util.tree_unflatten(tree, leaves)


def _numeric(x):
    """An integer or floating array (a boolean has no zero to add)."""
    return isinstance(x, jax.Array | np.ndarray) and (
        jnp.issubdtype(x.dtype, jnp.inexact) or jnp.issubdtype(x.dtype, jnp.integer)
    )


def _boolean(x):
    return isinstance(x, jax.Array | np.ndarray) and x.dtype == jnp.bool_


def _float(x):
    return x.dtype if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.float32
