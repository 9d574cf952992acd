"""Compensated summation of time steps: a state carried with its own rounding error.

A one-step method writes `x_{n+1} = x_n + Δ_n`. In floating point every addition rounds
`x_{n+1}` by up to half an ulp of `x`, independently of how small and how accurately computed
the increment `Δ_n` is, so over `n` steps the state random-walks by about `√n·eps·|x|`; that
is the floor of every invariant a method keeps "to round-off" (for IMIDM, `‖RᵀR − 1‖` and
`‖RΠ − π₀‖` near 1e-13 after 10⁶ steps in float64). Compensated summation (Kahan; Hairer,
Lubich & Wanner, *Geometric Numerical Integration*, §VIII.5) keeps the rounding error `e` of
each addition and adds it back into the next increment, so only the error of computing the
increments themselves remains: about `|Δ|/|x|` times smaller.

A method that can compensate (`integrator.compensated_summation`, a class fact: IMIDM, fEM,
a composition of such) writes its step as `advance(state, linear, forcing)`: the increment
`linear(x) + forcing`, with `linear` linear in the state (the attitude's `R (exp(Ψ) − 1)`, the
momentum's `(exp(−Ψ) − 1)Π`), so that it applies to the error as well as to the value. It
compensates when asked by its setting `compensated=True` (e.g. `IMIDM(compensated=True)`):
its solver state is then the rounding error (`zero_error` at `init`), the step advances
`Compensated(state, error)` (`attach`) and returns the rounded state and the new error. The
states the driver sees stay plain.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class Compensated(NamedTuple):
    """A state `value` and the rounding `error` of its accumulation: the state is
    `value + error` (both of the model's state type, `|error| ≤ ulp(value)/2`)."""

    value: Any
    error: Any


def zero_error(state):
    """The rounding error of a state not yet advanced: zeros of its structure and dtypes (the
    solver state of a compensated method before its first step)."""
    return jax.tree_util.tree_map(jnp.zeros_like, state)


def attach(state, error) -> Compensated:
    """The state a compensated method's step advances: `Compensated(state, error)`, with the
    `error` from its solver state. A `Compensated` state is refused: the error would be
    carried twice."""
    if isinstance(state, Compensated):
        raise TypeError(
            "a method with compensated=True carries the rounding error in its solver state: "
            "pass the plain state"
        )
    return Compensated(state, error)


def value_of(state):
    """The rounded state: `state.value` for a `Compensated` one, else `state` itself."""
    return state.value if isinstance(state, Compensated) else state


def two_sum(a, b):
    """Knuth's TwoSum: `s = fl(a + b)` and `e` with `a + b = s + e` exactly (round to nearest,
    no overflow), for any magnitudes of `a` and `b` (6 additions, no branch)."""
    s = a + b
    b_virtual = s - a
    a_virtual = s - b_virtual
    return s, (a - a_virtual) + (b - b_virtual)


def _increment(x, linear, forcing):
    increment = linear(x)
    if forcing is None:
        return increment
    return jax.tree_util.tree_map(
        lambda f, d: d if f is None else d + f, forcing, increment, is_leaf=lambda f: f is None
    )


def advance(state, linear, forcing=None):
    """`x + linear(x) + forcing`, where `linear` maps a state to the linear part of the step's
    increment and `forcing` the rest: None, or a pytree of the state's structure whose `None`
    leaves add nothing (e.g. `RigidBodyState(None, Δt T)`).

    A plain state is advanced by the rounded sum. A `Compensated` one by TwoSum: the increment
    of the exact state `value + error` is `linear(value) + forcing + linear(error)`; `error`
    joins it before the one rounded addition to `value`, whose error becomes the new `error`.
    """
    if not isinstance(state, Compensated):
        return jax.tree_util.tree_map(jnp.add, state, _increment(state, linear, forcing))
    value, error = state
    total = jax.tree_util.tree_map(
        lambda d, d_error, e: d + (d_error + e),
        _increment(value, linear, forcing),
        linear(error),
        error,
    )
    leaves, treedef = jax.tree_util.tree_flatten(value)
    sums = [two_sum(x, d) for x, d in zip(leaves, treedef.flatten_up_to(total))]
    return Compensated(
        treedef.unflatten([s for s, _ in sums]), treedef.unflatten([e for _, e in sums])
    )
