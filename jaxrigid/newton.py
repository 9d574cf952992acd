"""Newton's method for nonlinear systems, with convergence info and implicit gradients.

`Newton().solve(residual, guess)` finds `x` with `residual(x) = 0` for `x` any pytree of arrays
(`residual` returns the same structure). The Jacobian comes from autodiff and each linear
system is solved by the `linear_solver` (`jaxrigid.linear_solvers`: by default small dense
systems in closed form, the fast path for ensembles). The iteration runs in `lax.while_loop`
with a `custom_jvp` rule, so derivatives of the solution (forward and reverse mode, with
respect to anything `residual` closes over) come from the implicit function theorem,
`dx/dθ = −(∂r/∂x)⁻¹ ∂r/∂θ`: Newton iterations are never unrolled and the memory of a reverse
pass does not depend on them.

The outcome is returned as data (`NewtonInfo`), never raised: callers decide (DESIGN.md §4).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._carry import tied
from ._checks import is_integer
from .linear_solvers import AbstractLinearSolver, Auto
from .linear_solvers import max_abs as max_abs
from .linear_solvers import value_and_jacobian as value_and_jacobian
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

    Stops when `max|Δx| ≤ atol + rtol·max|x|` (`successful`), when `max_steps` updates were made
    (`max_steps_reached`), when a value became non-finite (`nonfinite`), or when an update grew
    more than twice the previous one (`diverged`: the contraction-rate test of optimistix's
    chord solvers, from the second update on). `chord=True` forms the Jacobian once, at the
    guess, and reuses it (simplified Newton: cheaper per iteration, linear convergence at rate
    O(Δt) for the implicit steps of this library). The first `peel` iterations run outside the
    `while_loop` (each a no-op once the stopping rule holds: the iterates and the info are the
    same). Default 0: peeling barely moves the throughput of an IMIDM ensemble and makes it
    slower to compile (`python bench/imidm_cost_breakdown.py`).

    With `peel ≥ max_steps` no loop is emitted at all: exactly `max_steps` updates, not
    masked (an update after the stopping rule holds moves `x` by round-off), reported
    converged when the last one met the tolerance and every value stayed finite, and
    `iterations = max_steps`. A solve that needs more updates is reported as not converged,
    as always. XLA fuses this with the step around it: the two-update chord solve
    `Newton(chord=True, max_steps=2, peel=2)` is the fast setting for large ensembles
    (measured by the same command).

    `linear_solver` (`jaxrigid.linear_solvers`) forms and solves each update's linear system
    and the implicit-function gradient's: `Auto()` (closed-form small dense, LU above),
    `DenseLU()`, `BlockDiagonal()` (per body, linear in the number of bodies) or `Krylov()`
    (matrix-free GMRES). An approximate Jacobian (`BlockDiagonal` on coupled bodies, a loose
    `Krylov`) changes the convergence rate, never the root: the stopping rule is on the true
    residual's Newton updates.
    """

    rtol: float | None = eqx.field(default=None, static=True)
    atol: float | None = eqx.field(default=None, static=True)
    max_steps: int = eqx.field(default=20, static=True)
    chord: bool = eqx.field(default=False, static=True)
    peel: int = eqx.field(default=0, static=True)
    linear_solver: AbstractLinearSolver = eqx.field(default=Auto(), static=True)

    def __check_init__(self):
        # a zero budget or a NaN/negative tolerance would report every step failed (or never
        # converged) at run time, far from the setting that caused it
        for name in ("max_steps", "peel"):
            n = getattr(self, name)
            if not is_integer(n):
                raise TypeError(f"Newton({name}=...) must be an integer, got {n!r}")
        if self.max_steps < 1 or self.peel < 0:
            raise ValueError(
                f"Newton needs max_steps >= 1 and peel >= 0, got max_steps={self.max_steps}, "
                f"peel={self.peel}"
            )
        for name in ("rtol", "atol"):
            tol = getattr(self, name)
            number = isinstance(tol, (int, float, np.floating)) and not isinstance(tol, bool)
            if tol is not None and not (number and 0 <= tol < math.inf):
                raise ValueError(
                    f"Newton({name}=...) must be a finite tolerance >= 0 or None (the "
                    f"dtype's default), got {tol!r}"
                )
        if not isinstance(self.linear_solver, AbstractLinearSolver):
            raise TypeError(
                "Newton(linear_solver=...) takes a jaxrigid.linear_solvers solver (Auto, "
                f"DenseLU, BlockDiagonal, Krylov), got {self.linear_solver!r}"
            )

    def solve(self, residual, guess):
        """Solve `residual(x) = 0` from `guess`, a pytree of arrays (a flat `(n,)` vector is
        the fast path); `residual` returns the same structure. Returns `(x, NewtonInfo)`.

        **Raises:** `ValueError` when `residual`'s output does not match `guess` or the
        `linear_solver` cannot lay the unknowns out (see its docstring).
        """
        x, info, _ = self.solve_with_curvature(residual, guess)
        return x, info

    def solve_with_curvature(self, residual, guess, *, first_iterate: bool = False):
        """`solve`, and the curvature Newton saw: `κ = max |Δxₖ| / |Δxₖ₋₁|²` over the updates
        `k ≥ 1` that did not meet the tolerance (max-norms; 0 when there were none). Full
        Newton contracts as `|Δxₖ| ≈ (βγ/2)|Δxₖ₋₁|²` (`β = |J⁻¹|`, `γ` the Lipschitz constant
        of `J`), so `2κ` estimates the Kantorovich constant `βγ` near the root: Newton from a
        point `y` converges to the root `x` when `βγ|x − y| ≤ 1/2`, and no other root is
        within `1/(βγ)` of it. The chord iteration contracts linearly, and its `κ` is an
        overestimate. Returns `(x, NewtonInfo, κ)`; `solve_on_branch` uses `κ`.

        `first_iterate=True`: also the distances of the first iterate `x₁ = guess + Δx₀`,
        `(max|x − x₁|, max|x₁ − guess|)`, as a fourth item (`solve_on_branch` without a
        predictor: `x₁` is then one).
        """
        struct = jax.tree.structure(guess), [jnp.shape(leaf) for leaf in jax.tree.leaves(guess)]
        solver = self.linear_solver
        x0, to_array, from_array = solver.layout(guess)
        tol = default_tolerance(x0.dtype)
        rtol = tol if self.rtol is None else self.rtol
        atol = tol if self.atol is None else self.atol

        def f(z):
            # checked where `closure_convert` traces the residual: a separate `eval_shape`
            # would trace it once more per program
            out = residual(from_array(z))
            out_struct = jax.tree.structure(out), [jnp.shape(leaf) for leaf in jax.tree.leaves(out)]
            if out_struct != struct:
                raise ValueError(
                    "residual(x) must return the structure and shapes of the guess: got "
                    f"{out_struct[0]} {out_struct[1]} for {struct[0]} {struct[1]}"
                )
            return to_array(out)

        # The residual as a function of (x, every value it closes over): its derivatives come
        # from `_implicit_root`'s rule, not from the loop.
        f_closed, consts = _closure_convert(f, x0)
        tolerances = (rtol, atol, first_iterate)
        x, aux = _implicit_root(f_closed, self, solver, tolerances, x0, consts)
        info = NewtonInfo(aux[0].astype(jnp.int32), aux[1], aux[2].astype(jnp.int32))
        if first_iterate:
            return from_array(x), info, aux[3], (aux[4], aux[5])
        return from_array(x), info, aux[3]


def _closure_convert(f, x):
    """`(g, consts)` with `g(x, *consts) == f(x)` and `consts` every value `f` closes over,
    traced once. Unlike `jax.closure_convert`, which hoists only floats that may be
    differentiated, integer and boolean tracers are hoisted too: one left in the closure
    (a batched mask of a constraint, under `vmap`) would escape through the `custom_jvp`."""
    closed = jax.make_jaxpr(f)(x)

    def g(z, *consts):
        return jax.extend.core.jaxpr_as_fun(jax.extend.core.ClosedJaxpr(closed.jaxpr, consts))(z)[0]

    return g, list(closed.consts)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2, 3))
def _implicit_root(f, newton, solver, tolerances, x0, consts):
    """The Newton iteration on `f(x, *consts) = 0` from `x0`: `(x, aux)`, aux the floats
    (iterations, residual, result, curvature[, the first iterate's two distances]).
    Differentiated by the implicit
    function theorem (`_implicit_root_jvp`), never through the loop. A `custom_jvp` rather
    than `lax.custom_root`: its rule is traced only when a derivative is taken, where
    `custom_root` traces the residual's linearisation and the tangent solve into every
    program, a large part of an implicit step's trace time (bench/README.md,
    `compile_cost.py`'s profile)."""
    rtol, atol, first = tolerances
    return _newton_loop(
        lambda z: f(z, *consts),
        x0,
        rtol,
        atol,
        newton.max_steps,
        newton.chord,
        newton.peel,
        solver,
        first,
    )


@_implicit_root.defjvp
def _implicit_root_jvp(f, newton, solver, tolerances, primals, tangents):
    # dx = −(∂f/∂x)⁻¹ (∂f/∂consts · dconsts); the guess's tangent does not enter (the root
    # does not depend on where the iteration started)
    x0, consts = primals
    _, dconsts = tangents
    x, aux = _implicit_root(f, newton, solver, tolerances, x0, consts)
    _, df = jax.jvp(lambda c: f(x, *c), (consts,), (dconsts,))
    _, jacobian = jax.linearize(lambda z: f(z, *consts), x)
    dx = solver.tangent_solve(jacobian, -df)
    return (x, aux), (dx, jnp.zeros_like(aux))


def _newton_loop(f, x0, rtol, atol, max_steps, chord, peel, solver=Auto(), first=False):
    """The iteration on the solver's array layout `x0`; `first`: the first iterate is kept
    in the carry and its distances to the root and to `x0` end the aux."""
    dtype = x0.dtype
    norm = solver.norm  # Auto: today's chain of maxima (`max_abs`)
    r0, op0 = solver.linearise(f, x0) if chord else (None, None)

    def update(x, r=None):
        if chord:
            r = f(x) if r is None else r
            op = op0
        else:
            r, op = solver.linearise(f, x)
        dx = -solver.solve(op, r)
        return r, dx

    def cond(carry):
        k, _, _, _, done, _, _ = carry[:7]
        return (k < max_steps) & ~done

    def body(carry, r=None):
        k, x, _, size_prev, _, diverged_before, curvature = carry[:7]
        r, dx = update(x, r)
        x_new = x + dx
        res, size, scale = norm(r), norm(dx), norm(x_new)
        finite = jnp.isfinite(scale) & jnp.isfinite(res)
        small = size <= atol + rtol * scale
        diverged = (k >= 1) & (size > 2.0 * size_prev) & ~small
        done = small | ~finite | diverged
        # max |Δxₖ|/|Δxₖ₋₁|² over the updates that did not meet the tolerance (a smaller
        # one is round-off, not the quadratic term); 0 for the first (size_prev = inf)
        ratio = jnp.where(small, 0, size / size_prev**2)
        curvature = jnp.maximum(curvature, ratio)
        new = (k + 1, x_new, res, size, done, diverged_before | diverged, curvature)
        return new + ((jnp.where(k == 0, x_new, carry[7]),) if first else ())

    def masked_body(carry):
        # An iteration outside the loop: a no-op once the loop would have stopped.
        go = cond(carry)
        return jax.tree.map(lambda new, old: jnp.where(go, new, old), body(carry), carry)

    inf = jnp.asarray(jnp.inf, dtype)
    zero = jnp.zeros((), dtype)
    start = (jnp.int32(0), x0, inf, inf, jnp.bool_(False), jnp.bool_(False), zero)
    carry = tied(start + ((x0,) if first else ()))
    if peel >= max_steps:  # no loop (a fusion barrier) and no masks: max_steps plain updates
        for i in range(max_steps):
            carry = body(carry, r0 if i == 0 else None)  # chord: f(x0) came with J0
    else:
        for _ in range(peel):
            carry = masked_body(carry)
        carry = lax.while_loop(cond, body, carry)
    k, x, res, size, _, diverged, curvature = carry[:7]
    scale = norm(x)
    finite = jnp.isfinite(scale) & jnp.isfinite(res)
    small = size <= atol + rtol * scale
    result = jnp.where(
        ~finite,
        code(RESULTS.nonfinite),
        jnp.where(
            small,
            code(RESULTS.successful),
            jnp.where(diverged, code(RESULTS.diverged), code(RESULTS.max_steps_reached)),
        ),
    )
    aux = [k.astype(dtype), res, result.astype(dtype), curvature]
    if first:
        aux += [norm(x - carry[7]), norm(carry[7] - x0)]
    return x, jnp.stack(aux)
