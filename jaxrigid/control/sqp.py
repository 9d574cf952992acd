"""Sequential quadratic programming for a few equality constraints: MPC's re-plan.

The problem is `min f(x)` subject to `c(x) = 0`, `x (n,)` a plan's coefficients, `c (m,)` with
`m ≪ n` (the re-plan's terminal miss, `m = 2`), `f` cheap (the effort, quadratic in `x`) and
`c` one simulation. Each iteration (Nocedal & Wright, *Numerical Optimization*, 2nd ed.,
Algorithm 18.3) solves the KKT system of the local quadratic model

    [B  Jᵀ] [d ]     [∇f]
    [J  0 ] [λ⁺] = − [c ],        J = ∂c/∂x (m reverse passes of the simulation),       (KKT)

takes a step `α d` by backtracking on the ℓ1 merit `φ = f + ν|c|₁` (N&W (18.27), `ν = 2|λ⁺|∞`
so that `d` descends on it, Theorem 18.2) with Armijo's condition on `D = ∇fᵀd − ν|c|₁`, and
updates `B` by Powell's damped BFGS formula (N&W Procedure 18.2) with `s = αd` and
`y = ∇ₓL(x⁺, λ⁺) − ∇ₓL(x, λ⁺)` (an iteration whose line search found no decrease keeps its
iterate and restarts from `B₀`). `B₀` is `f`'s Hessian at the start (exact for the effort),
plus a ridge for the directions neither `f` nor `c` sees (a plan's coefficients past the
remaining horizon): the first steps are Gauss–Newton's, and the curvature of the constraint
`Σλᵢ∇²cᵢ` is learned from the iterates (a step of Gauss–Newton's alone cycles where `|λ|` is
large: `bench/mpc_replan_convergence.py`).

Against the augmented Lagrangian with L-BFGS (`augmented_lagrangian`, whose problem has a
condition number growing with the penalty `ρ`), each iteration here is one linearisation of
`c` (one forward and `m` reverse passes) and the `m` constraints hold to rounding after a few.
A fixed number of iterations, pure `jax`: one program under `vmap` for every scenario.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from .._carry import tied

__all__ = ["SQP", "SQPResult", "solve"]

ARMIJO = 1e-4


class SQP(eqx.Module):
    """Settings: `n_iterations` SQP iterations (each one linearisation of `c`); at most
    `max_halvings` halvings of the step per iteration; `ridge` (relative to `B₀`'s largest
    diagonal entry) added to `B₀` for the directions neither `f` nor `c` sees."""

    n_iterations: int = eqx.field(static=True, default=8)
    max_halvings: int = eqx.field(static=True, default=10)
    ridge: float = eqx.field(static=True, default=1e-12)

    def __check_init__(self):
        if self.n_iterations < 1 or self.max_halvings < 0:
            raise ValueError("SQP: needs n_iterations ≥ 1 and max_halvings ≥ 0")
        if not self.ridge > 0:
            raise ValueError("SQP: ridge must be > 0")


class SQPResult(NamedTuple):
    """`x` the last iterate, `multipliers` `λ` there, `cost` `f(x)`, `residual` `c(x)`;
    `history`: per iteration `cost` and `residual_norm` `|c|` after it, and `step` `α`
    (0 where no step decreased the merit)."""

    x: jax.Array
    multipliers: jax.Array
    cost: jax.Array
    residual: jax.Array
    history: dict


def _linearise(f, c, x):
    """`f(x)`, `∇f(x)`, `c(x)` and `J(x)` (one forward pass and `m` reverse passes of `c`)."""
    fx, g = jax.value_and_grad(f)(x)
    cx, vjp = jax.vjp(c, x)
    J = jax.vmap(lambda e: vjp(e)[0])(jnp.eye(cx.shape[0], dtype=cx.dtype))
    return fx, g, cx, J


def _powell_bfgs(B, s, y):
    """Powell's damped BFGS update (N&W Procedure 18.2): `y` replaced by `r = θy + (1 − θ)Bs`
    where `sᵀy < 0.2 sᵀBs`, so that `B` stays positive definite; no update for a zero step."""
    Bs = B @ s
    sBs, sy = s @ Bs, s @ y
    theta = jnp.where(sy >= 0.2 * sBs, 1.0, 0.8 * sBs / jnp.where(sBs == sy, 1.0, sBs - sy))
    r = theta * y + (1 - theta) * Bs
    sr = s @ r
    ok = (sBs > 0) & (sr > 0) & jnp.isfinite(sr)
    new = B - jnp.outer(Bs, Bs) / jnp.where(ok, sBs, 1.0) + jnp.outer(r, r) / jnp.where(ok, sr, 1.0)
    return jnp.where(ok, new, B)


def solve(f, c, x0, multipliers0, settings: SQP = SQP()) -> SQPResult:
    """`settings.n_iterations` SQP iterations (the module's docstring) from `x0 (n,)`, with
    `multipliers0 (m,)` as `λ` until the first solve. `f: (n,) -> ()`, `c: (n,) -> (m,)`.

    The linearisation (`c` with its `m` reverse passes) and the merit (`c`'s forward pass)
    appear once each in the program (build cost): an iteration linearises at its iterate and
    first updates `B` with the step that led there, and its line search evaluates the merit
    in one loop, the first trial included."""
    eps = jnp.finfo(x0.dtype).eps
    n, m = x0.shape[0], multipliers0.shape[0]
    B0 = jax.hessian(f)(x0)
    B0 = B0 + settings.ridge * jnp.max(jnp.abs(jnp.diag(B0))) * jnp.eye(n, dtype=x0.dtype)

    def merit(x, nu):
        fx, cx = f(x), c(x)
        return fx + nu * jnp.sum(jnp.abs(cx)), fx, cx

    def iteration(carry, _):
        x, lam, B, s, g_prev, J_prev = carry
        fx, g, cx, J = _linearise(f, c, x)
        # Powell's update with the step `s` that led here, `λ` the solve's that chose it
        B = _powell_bfgs(B, s, (g + J.T @ lam) - (g_prev + J_prev.T @ lam))
        kkt = jnp.block([[B, J.T], [J, jnp.zeros((m, m), x.dtype)]])
        solution = jnp.linalg.solve(kkt, -jnp.concatenate([g, cx]))
        d, lam_new = solution[:n], solution[n:]
        nu = 2 * jnp.max(jnp.abs(lam_new), initial=0.0)
        phi0 = fx + nu * jnp.sum(jnp.abs(cx))
        slope = g @ d - nu * jnp.sum(jnp.abs(cx))
        # a direction along which the merit's decrease is lost in rounding is taken whole:
        # at a solution, halving would only spend simulations
        flat = ~(slope < -16 * eps * (jnp.abs(phi0) + 1))

        def more(state):
            a, (phi_a, _, _), k = state
            bad = ~jnp.isfinite(phi_a) | (phi_a > phi0 + ARMIJO * a * slope)
            return (k == 0) | (bad & ~flat & (k <= settings.max_halvings))

        def trial(state):
            a, _, k = state
            a = jnp.where(k == 0, a, 0.5 * a)
            return a, merit(x + a * d, nu), k + 1

        nan = jnp.full((), jnp.nan, x.dtype)
        start = tied((jnp.ones((), x.dtype), (nan, nan, cx), jnp.zeros((), jnp.int32)), (x, d, nu))
        a, (phi_a, f_a, c_a), _ = lax.while_loop(more, trial, start)
        ok = jnp.isfinite(phi_a) & jnp.all(jnp.isfinite(d)) & (flat | (phi_a < phi0))
        a = jnp.where(ok, a, 0.0)
        step = jnp.where(ok, a * d, 0.0)
        out = (jnp.where(ok, f_a, fx), jnp.where(ok, c_a, cx), a)
        # a curvature estimate whose step decreased nothing is dropped: the next iteration
        # tries the Gauss–Newton step from `B₀` at the same iterate
        B = jnp.where(ok, B, B0)
        return (x + step, jnp.where(ok, lam_new, lam), B, step, g, J), out

    zero = jnp.zeros((m, n), x0.dtype)
    carry = tied((x0, multipliers0, B0, jnp.zeros_like(x0), jnp.zeros_like(x0), zero))
    (x, lam, *_), (costs, residuals, steps) = lax.scan(
        iteration, carry, None, length=settings.n_iterations
    )
    history = {"cost": costs, "residual_norm": jnp.linalg.norm(residuals, axis=-1), "step": steps}
    return SQPResult(x, lam, costs[-1], residuals[-1], history)
