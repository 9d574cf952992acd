"""Newton's method for small nonlinear systems, with convergence info and implicit gradients.

`Newton().solve(residual, guess)` finds `x` with `residual(x) = 0` for a flat vector `x (n,)`.
The Jacobian comes from autodiff (`n` JVPs) and each linear system is solved in closed form
(`_linalg.solve`). The iteration runs in `lax.while_loop` inside `lax.custom_root`, so
derivatives of the solution (forward and reverse mode, with respect to anything `residual`
closes over) come from the implicit function theorem, `dx/dθ = −(∂r/∂x)⁻¹ ∂r/∂θ`: Newton
iterations are never unrolled and the memory of a reverse pass does not depend on them.

The outcome is returned as data (`NewtonInfo`), never raised: callers decide (DESIGN.md §4).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from . import _linalg
from .results import RESULTS, code


class NewtonInfo(NamedTuple):
    """Outcome of one solve.

    **Fields:** `iterations` (int32), `residual` (max-norm of `residual(x)` at the last iterate
    evaluated, one Newton update before the returned `x`), `result` (a `RESULTS` code, int32:
    `successful` when the last update met the tolerance and every value stayed finite, else
    `max_steps_reached`, `diverged` or `nonfinite`; the integrators add `off_branch` and
    `step_bound_broken`). `converged` is `result == successful`.
    """

    iterations: jax.Array
    residual: jax.Array
    result: jax.Array

    @property
    def converged(self) -> jax.Array:
        return self.result == RESULTS.successful


def default_tolerance(dtype) -> float:
    """`eps^(3/4)`: 1.8e-12 in float64, 6.5e-6 in float32.

    Full Newton converges quadratically, so when an update falls below this the error left
    in `x` is of order its square: round-off. A chord iteration contracting by ρ leaves
    about ρ times it.
    """
    return float(jnp.finfo(dtype).eps) ** 0.75


class Newton(eqx.Module):
    """Newton (or chord) iteration with a step-size stopping rule scaled to the unknowns.

    Stops when `max|Δx| ≤ atol + rtol·max|x|` (`successful`), when `max_steps` updates were
    made (`max_steps_reached`), when a value became non-finite (`nonfinite`), or when an update
    grew more than twice the previous one (`diverged`: the contraction-rate test of
    optimistix's chord solvers, from the second update on). `chord=True` forms the Jacobian once, at the guess, and reuses it
    (simplified Newton: cheaper per iteration, linear convergence at rate O(Δt) for the
    implicit steps of this library). The first `peel` iterations run outside the
    `while_loop` (each a no-op once the stopping rule holds: the iterates and the info are
    the same). Default 0: peeling barely moves the throughput of an IMIDM ensemble and
    makes it slower to compile (`python bench/imidm_cost_breakdown.py`).

    With `peel ≥ max_steps` no loop is emitted at all: exactly `max_steps` updates, not
    masked (an update after the stopping rule holds moves `x` by round-off), reported
    converged when the last one met the tolerance and every value stayed finite, and
    `iterations = max_steps`. A solve that needs more updates is reported as not converged,
    as always. XLA fuses this with the step around it: the two-update chord solve
    `Newton(chord=True, max_steps=2, peel=2)` is the fast setting for large ensembles
    (measured by the same command).
    """

    rtol: float | None = eqx.field(default=None, static=True)
    atol: float | None = eqx.field(default=None, static=True)
    max_steps: int = eqx.field(default=20, static=True)
    chord: bool = eqx.field(default=False, static=True)
    peel: int = eqx.field(default=0, static=True)

    def solve(self, residual, guess):
        """Solve `residual(x) = 0` from `guess (n,)`. Returns `(x, NewtonInfo)`."""
        if guess.ndim != 1:
            raise ValueError(f"Newton.solve works on flat vectors (n,), got shape {guess.shape}")
        tol = default_tolerance(guess.dtype)
        rtol = tol if self.rtol is None else self.rtol
        atol = tol if self.atol is None else self.atol

        def iterate(f, x0):
            return _newton_loop(f, x0, rtol, atol, self.max_steps, self.chord, self.peel)

        def tangent_solve(g, y):
            return _linalg.solve(_value_and_jacobian(g, jnp.zeros_like(y))[1], y)

        # custom_root differentiates its aux output too, so it carries floats only
        # (integer/bool tangents are rejected): unpacked into NewtonInfo here.
        x, aux = lax.custom_root(residual, guess, iterate, tangent_solve, has_aux=True)
        aux = lax.stop_gradient(aux)
        return x, NewtonInfo(aux[0].astype(jnp.int32), aux[1], aux[2].astype(jnp.int32))


def max_abs(v):
    """`max |v_i|` of a small flat vector, as a chain of elementwise maxima: under `vmap` XLA
    fuses it into its neighbours, where a reduction would be its own pass over an ensemble."""
    return functools.reduce(jnp.maximum, [jnp.abs(v[i]) for i in range(v.shape[0])])


def _value_and_jacobian(f, x):
    """`f(x)` and its Jacobian by forward-mode autodiff. Up to 6 unknowns column by column
    from `n` JVPs along the unit vectors: unlike `jax.jacfwd` (a `vmap` of the JVP over the
    basis) every column stays a separate small vector, so under an ensemble `vmap` the closed-
    form solve that follows is plain elementwise arithmetic (see `_linalg`). Larger systems
    use `jacfwd`, whose program does not grow with `n` (24 unrolled columns took 40 s to
    compile for the quaternion top's Gauss6 stages)."""
    n = x.shape[0]
    if n > 6:
        J, r = jax.jacfwd(lambda z: (f(z), f(z)), has_aux=True)(x)
        return r, J
    r, f_jvp = jax.linearize(f, x)
    basis = jnp.eye(n, dtype=x.dtype)
    return r, jnp.stack([f_jvp(basis[j]) for j in range(n)], axis=-1)


def _newton_loop(f, x0, rtol, atol, max_steps, chord, peel):
    dtype = x0.dtype
    r0, J0 = _value_and_jacobian(f, x0) if chord else (None, None)

    def update(x, r=None):
        if chord:
            r = f(x) if r is None else r
            J = J0
        else:
            r, J = _value_and_jacobian(f, x)
        dx = -_linalg.solve(J, r)
        return r, dx

    def cond(carry):
        k, _, _, _, done, _ = carry
        return (k < max_steps) & ~done

    def body(carry, r=None):
        k, x, _, size_prev, _, diverged_before = carry
        r, dx = update(x, r)
        x_new = x + dx
        res, size = max_abs(r), max_abs(dx)
        finite = jnp.isfinite(max_abs(x_new)) & jnp.isfinite(res)
        small = size <= atol + rtol * max_abs(x_new)
        diverged = (k >= 1) & (size > 2.0 * size_prev) & ~small
        done = small | ~finite | diverged
        return k + 1, x_new, res, size, done, diverged_before | diverged

    def masked_body(carry):
        # An iteration outside the loop: a no-op once the loop would have stopped.
        go = cond(carry)
        return jax.tree.map(lambda new, old: jnp.where(go, new, old), body(carry), carry)

    inf = jnp.asarray(jnp.inf, dtype)
    carry = (jnp.int32(0), x0, inf, inf, jnp.bool_(False), jnp.bool_(False))
    if peel >= max_steps:  # no loop (a fusion barrier) and no masks: max_steps plain updates
        for i in range(max_steps):
            carry = body(carry, r0 if i == 0 else None)  # chord: f(x0) came with J0
    else:
        for _ in range(peel):
            carry = masked_body(carry)
        carry = lax.while_loop(cond, body, carry)
    k, x, res, size, _, diverged = carry
    finite = jnp.isfinite(max_abs(x)) & jnp.isfinite(res)
    small = size <= atol + rtol * max_abs(x)
    result = jnp.where(
        ~finite,
        code(RESULTS.nonfinite),
        jnp.where(
            small,
            code(RESULTS.successful),
            jnp.where(diverged, code(RESULTS.diverged), code(RESULTS.max_steps_reached)),
        ),
    )
    return x, jnp.stack([k.astype(dtype), res, result.astype(dtype)])
