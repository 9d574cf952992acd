"""Sequences of interval plans driven on a plant: the pieces the re-planning references of
`hindsight` are made of.

A feedback law of the closed loop's form (`closed_loop`, (F1)) chooses at the start of each
interval `k` the coefficients `cₖ (rows, n)` of the rails' plan on it; over the horizon its
control is a sequence `C = (c₀, …, c_{R−1})` with effort `Σₖ cₖᵀ G cₖ` ((C1),
`closed_loop.IntervalMaps`). Here: the task's own plan in that form (`nominal_sequence`), a
plant's run under `C` from any interval's state (`drive_sequence`), and the least effort of
the intervals still free that ends within `r` of the target ((H1), `least_effort`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._carry import tied
from .closed_loop import drive_interval
from .mpc import warm_start
from .region import task_plan
from .sqp import solve

__all__ = [
    "drive_sequence",
    "least_effort",
    "nominal_sequence",
    "outcome",
    "sequence_effort",
    "sequence_error",
]


def nominal_sequence(problem, coefficients, theta0, H: float, R: int, rows: int):
    """The task's plan with `coefficients` (from its rails at rest) in interval form: plan `k`
    its tail from `tₖ = kH` (`mpc.warm_start`), rows `< rows` (`policies.active_rows`)."""
    plan = task_plan(problem, coefficients, theta0)

    def interval(plan, _):
        return warm_start(plan, None, H), plan.coefficients[:rows]

    _, C = jax.lax.scan(interval, tied(plan, (coefficients, theta0)), None, length=R)
    return C


def drive_sequence(problem, m, maps, scenario, at, carry, C, start=None, collect=False):
    """The plant's run under the sequence `C (R, rows, n)` from `carry = (state, θ, θ̇)` at
    the start of interval `start` (`None`: 0; traced: the intervals before it skipped, under
    `lax.cond`). Returns `(carry, ok)` at `T` and, where `collect`, the carry at every
    interval's end (leading axis `R`)."""
    zero = jnp.zeros_like(problem.control.coefficients)

    def interval(carry_ok, kc):
        k, c = kc
        (state, theta, theta_dot), ok = carry_ok
        c = zero.at[: c.shape[0]].set(c)

        def drive():
            state1, _, ok_k, theta1, theta_dot1, _ = drive_interval(
                problem, maps, m, scenario, at, k, state, theta, theta_dot, c
            )
            return (state1, theta1, theta_dot1), ok & ok_k

        new = drive() if start is None else jax.lax.cond(k >= start, drive, lambda: carry_ok)
        return new, (new[0] if collect else None)

    R = C.shape[0]
    ks = jnp.arange(R, dtype=jnp.int32)
    init = tied((carry, jnp.asarray(True)), (scenario, at, C, start))
    (carry, ok), ends = jax.lax.scan(interval, init, (ks, C))
    return (carry, ok, ends) if collect else (carry, ok)


def sequence_error(problem, m, maps, scenario, at, target, theta0, C):
    """The plant's run under the sequence `C (R, rows, n)` from the rails at rest at `theta0`:
    `(e, ok)`, `e = x(T)[:2] − x*`."""
    carry = (problem.state0, theta0, jnp.zeros_like(theta0))
    (state, _, _), ok = drive_sequence(problem, m, maps, scenario, at, carry, C)
    return state.x[:2] - target, ok


def sequence_effort(maps, C):
    """`Σₖ cₖᵀ G cₖ` (the rows past `rows` are zero: `G`'s leading block)."""
    rows = C.shape[1]
    G = maps.gram[:rows, :rows]
    return jnp.sum(C * jnp.einsum("ij,kjn->kin", G, C))


def least_effort(settings, maps, run, C, free, r):
    """(H1) over the intervals where `free (R,)` (the others kept as in `C`) for the plant's
    run `run(C) -> (e, ok)`, from `C`: `(C, zero)`, `zero` where the free intervals at rest
    already end within `r > 0` (the effort, convex in them, is then least there)."""
    free = free[:, None, None]
    shape, dtype = C.shape, C.dtype

    def sequence(x):
        return jnp.where(free, jnp.reshape(x, shape), C)

    def e(x):
        return run(sequence(x))[0]

    def effort(x):
        return sequence_effort(maps, sequence(x))

    # |e|² = r² has no gradient where e = 0 (the nominal plan on an undisturbed plant):
    # first e = r·d, d towards where the free intervals at rest end (for r = 0 the answer),
    # then |e|² = r² from there
    rest = jnp.zeros((C.size,), dtype)
    e0, ok0 = run(sequence(rest))
    moved = jnp.any(e0 != 0)
    d = jnp.where(
        moved, e0 / jnp.where(moved, jnp.linalg.norm(e0), 1.0), jnp.eye(2, dtype=dtype)[0]
    )
    on = solve(effort, lambda x: e(x) - r * d, jnp.ravel(C), jnp.zeros((2,), dtype), settings)
    ring = lambda x: jnp.sum(e(x) ** 2, keepdims=True) - r**2  # noqa: E731
    # `r` is one for every rollout (not batched): the second solve runs only where r > 0
    x = jax.lax.cond(
        r > 0, lambda: solve(effort, ring, on.x, jnp.zeros((1,), dtype), settings).x, lambda: on.x
    )
    zero = (r > 0) & ok0 & (jnp.linalg.norm(e0) <= r)
    return sequence(jnp.where(zero, rest, x)), zero


def outcome(problem, m, maps, scenario, at, target, theta0, C):
    """`(C, effort, miss)` of the sequence `C` on the plant (miss NaN where a step failed)."""
    e, ok = sequence_error(problem, m, maps, scenario, at, target, theta0, C)
    return C, sequence_effort(maps, C), jnp.where(ok, jnp.linalg.norm(e), jnp.nan)
