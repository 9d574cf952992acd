"""Gradient-based optimisation of control coefficients: an augmented Lagrangian around an
L-BFGS minimiser (`control.lbfgs`, one evaluation per iteration; or any `optax` method),
`jax.grad` through the simulation (the model note, "Optimal control").

The problem is `min f(p)` subject to `c(p) = 0` (`p` the coefficients, `c` e.g. the terminal
miss `x(T)[:2] − x*`). Instead of a fixed trade-off `f + w|c|²`, which leaves a miss of order
`1/w`, the augmented Lagrangian (Hestenes; Powell; Nocedal & Wright, *Numerical
Optimization*, 2nd ed., §17.3, Algorithm 17.4)

    L_A(p; λ, ρ) = f(p) + λ·c(p) + (ρ/2)|c(p)|²                                         (AL)

is minimised in `p` for fixed `(λ, ρ)` by `n_inner` iterations of the inner minimiser, then

    λ ← λ + ρ c(p),     ρ ← min(growth·ρ, ρ_max) unless |c| fell below `decrease`·|c_prev|

(the first-order multiplier update, Nocedal & Wright (17.39)); at a solution `λ` is the
Lagrange multiplier and `c = 0` holds with a moderate `ρ`.

Inequality constraints `g(p) ≤ 0` (an objective returning `(f, c, g)`; e.g. one entry per
saved time and obstacle) enter in the Powell–Hestenes–Rockafellar form (Rockafellar 1973;
Nocedal & Wright §17.4, (17.65) with the slack eliminated in closed form; Birgin & Martínez,
*Practical Augmented Lagrangian Methods*, 2014, (4.8)), one multiplier `μⱼ ≥ 0` each:

    L_A += (1/2ρ) Σⱼ [max(0, μⱼ + ρ gⱼ)² − μⱼ²],     μ ← max(0, μ + ρ g),              (PHR)

C¹ in `p`, exactly the slack form minimised over the slacks `s ≥ 0` in `g + s = 0`. Unlike a
penalty on the integral of the violation (whose gradient vanishes as the violation does),
each active `gⱼ` keeps its own multiplier, so an active constraint holds at a finite `ρ`.
`ρ` grows unless the combined violation `√(|c|² + |max(g, −μ/ρ)|²)` (the complementarity
measure of Birgin & Martínez (4.9)) fell below `decrease` times its previous value.

Fixed iteration counts: an inner iteration whose gradient norm is below `gtol` leaves the
iterate unchanged, so everything is pure `jax`. How the iterations are run (one program per
outer iteration from the host, or one program under a caller's trace) is `control.optimise`'s.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax import lax

from .._callbacks import host_callback
from .._carry import tied
from . import lbfgs

__all__ = [
    "AugmentedLagrangian",
    "OptimiseResult",
    "evaluate",
    "final_result",
    "infeasibility",
    "initial_carry",
    "optimise_in_one_program",
    "outer_iteration",
    "outer_iteration_ends",
]


class AugmentedLagrangian(eqx.Module):
    """Settings of (AL). `n_outer` multiplier updates, `n_inner` iterations of the inner
    minimiser per update: by default (`inner=None`) `control.lbfgs`, whose iteration is one
    evaluation of `∇L_A` (its line search is a state of the loop, so the program carries the
    gradient once); or an `optax` method (`inner=optax.lbfgs()`, whose iterations evaluate
    as often as its line search needs, ≈ 1.8 times each on `tests/test_control_optimise.py`'s
    problem); `rho0` the first penalty,
    multiplied by `growth` (up to `rho_max`) when `|c|` did not fall below `decrease` times
    its previous value; `gtol`: an inner iteration with `|∇L_A| ≤ gtol` is skipped."""

    n_outer: int = eqx.field(static=True, default=8)
    n_inner: int = eqx.field(static=True, default=25)
    rho0: float = eqx.field(static=True, default=10.0)
    growth: float = eqx.field(static=True, default=10.0)
    rho_max: float = eqx.field(static=True, default=1e8)
    decrease: float = eqx.field(static=True, default=0.25)
    gtol: float = eqx.field(static=True, default=1e-10)
    inner: Any = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.n_outer < 1 or self.n_inner < 1:
            raise ValueError("AugmentedLagrangian: n_outer and n_inner must be ≥ 1")
        if not (self.rho0 > 0 and self.growth >= 1 and self.rho_max >= self.rho0):
            raise ValueError("AugmentedLagrangian: needs rho0 > 0, growth ≥ 1, rho_max ≥ rho0")


class OptimiseResult(NamedTuple):
    """`coefficients` the optimum; `cost` `f` there; `residual` `c` there and
    `residual_norm` the infeasibility `√(|c|² + |max(g, 0)|²)` (`|c|` without inequalities);
    `multipliers` `λ`, `penalty` `ρ` (final); `history`: per inner iteration
    `(n_outer, n_inner)` arrays `lagrangian` (`L_A`), `grad_norm` (`|∇ₚL_A|`), and per outer
    iteration `cost`, `residual_norm` (`(n_outer,)`, after it); `cost_initial` `f(p₀)`,
    `residual_norm_initial`; `inequality` `g` at the optimum and `inequality_multipliers`
    `μ` (`(0,)` for an objective without inequalities); `converged` (bool) whether
    `residual_norm ≤ tolerance` (`optimise`'s) with a finite `cost`: read it before
    trusting `coefficients`."""

    coefficients: jax.Array
    cost: jax.Array
    residual: jax.Array
    residual_norm: jax.Array
    multipliers: jax.Array
    penalty: jax.Array
    history: dict
    cost_initial: jax.Array
    residual_norm_initial: jax.Array
    inequality: Any = None
    inequality_multipliers: Any = None
    converged: Any = None


def evaluate(objective, p):
    """`(f, c, g)`: an objective's `(f, c)` gets an empty `g`."""
    out = objective(p)
    if len(out) == 2:
        f, c = out
        return f, c, jnp.zeros((0,), f.dtype)
    return out


def infeasibility(c, g):
    gp = jnp.maximum(g, 0.0)
    return jnp.sqrt(jnp.dot(c, c) + jnp.dot(gp, gp))


def initial_carry(objective, p0, settings: AugmentedLagrangian):
    """The outer loop's first carry `(p, λ, μ, ρ, |c|)` and `f(p₀)`."""
    f0, c0, g0 = evaluate(objective, p0)
    rho0 = jnp.asarray(settings.rho0, p0.dtype)
    return (p0, jnp.zeros_like(c0), jnp.zeros_like(g0), rho0, infeasibility(c0, g0)), f0


def outer_iteration(objective, settings: AugmentedLagrangian, callback, carry, k):
    """One multiplier update: `n_inner` iterations on (AL)+(PHR), then λ, μ and ρ."""
    return outer_iteration_ends(objective, settings, callback, carry, k)[:2]


def outer_iteration_ends(objective, settings, callback, carry, k, start_at_first=False):
    """`outer_iteration`, and `(f, |c|)` at the carried `p` (the default inner minimiser's
    first evaluation is there; `None` for an `optax` one) and `(f, c, g)` after it. With
    `start_at_first`, iteration `k = 0` takes the previous `|c|` from that evaluation, not
    from the carry: the host-driven optimiser then needs no program of its own to start."""
    p, lam, mu, rho, vnorm_prev = carry

    def lagrangian(p):
        f, c, g = evaluate(objective, p)
        phr = jnp.sum(jnp.square(jnp.maximum(mu + rho * g, 0.0)) - mu * mu) / (2 * rho)
        return f + jnp.dot(lam, c) + 0.5 * rho * jnp.dot(c, c) + phr, (f, c, g)

    start = None
    if settings.inner is None:
        p, values, gnorms, (f0, c0, g0) = _inner_lbfgs(lagrangian, p, settings, callback, k)
        start = (f0, infeasibility(c0, g0))
        if start_at_first:
            vnorm_prev = jnp.where(k == 0, start[1], vnorm_prev)
    else:
        p, values, gnorms = _inner_optax(lambda x: lagrangian(x)[0], p, settings, callback, k)
    f, c, g = evaluate(objective, p)
    v = jnp.maximum(g, -mu / rho)
    vnorm = jnp.sqrt(jnp.dot(c, c) + jnp.dot(v, v))
    lam = lam + rho * c
    mu = jnp.maximum(mu + rho * g, 0.0)
    grow = vnorm > settings.decrease * vnorm_prev
    rho = jnp.where(grow, jnp.minimum(rho * settings.growth, settings.rho_max), rho)
    out = (values, gnorms, f, infeasibility(c, g))
    return (p, lam, mu, rho, vnorm), out, start, (c, g)


def _inner_lbfgs(lagrangian, p, settings, callback, k):
    """`n_inner` iterations of `lbfgs` (one evaluation of `∇L_A` each); per iteration `L_A`
    and `|∇L_A|` at the iterate after it. An iterate with `|∇L_A| ≤ gtol` stays. Also the
    `lagrangian`'s aux at the first evaluation, which is at `p` (`lbfgs.init`)."""
    value_and_grad = jax.value_and_grad(lambda x: lagrangian(jnp.reshape(x, p.shape)), has_aux=True)

    def inner(state, j):
        (value, aux), grad = value_and_grad(lbfgs.trial_point(state))
        new = lbfgs.update(state, value, grad)
        done = state.started & (
            (jnp.sqrt(jnp.sum(state.g * state.g)) <= settings.gtol) | ~jnp.isfinite(state.f)
        )
        state = lbfgs.where_tree(done, state, new)
        gnorm = jnp.sqrt(jnp.sum(state.g * state.g))
        if callback is not None:
            host_callback(callback, k, j, state.f, gnorm)
        return state, (state.f, gnorm, aux)

    init = tied(lbfgs.init(p))
    state, (values, gnorms, aux) = lax.scan(inner, init, jnp.arange(settings.n_inner))
    first = jax.tree_util.tree_map(lambda x: x[0], aux)
    return jnp.reshape(state.x, p.shape), values, gnorms, first


def _inner_optax(lagrangian, p, settings, callback, k):
    """`n_inner` iterations of an `optax` method (`settings.inner`); per iteration `L_A` and
    `|∇L_A|` at the iterate before it."""
    opt = settings.inner
    value_and_grad = optax.value_and_grad_from_state(lagrangian)

    def inner(carry, j):
        p, state = carry
        value, grad = value_and_grad(p, state=state)
        gnorm = jnp.sqrt(jnp.sum(grad * grad))
        updates, new_state = opt.update(grad, state, p, value=value, grad=grad, value_fn=lagrangian)
        new_p = optax.apply_updates(p, updates)
        done = (gnorm <= settings.gtol) | ~jnp.isfinite(value)
        p, state = lbfgs.where_tree(done, (p, state), (new_p, new_state))
        if callback is not None:
            host_callback(callback, k, j, value, gnorm)
        return (p, state), (value, gnorm)

    init = tied((p, opt.init(p)))
    (p, _), (values, gnorms) = lax.scan(inner, init, jnp.arange(settings.n_inner))
    return p, values, gnorms


def final_result(objective, carry, history, f0, cnorm0):
    """The result from the last carry and the outer iterations' stacked history."""
    p, lam, mu, rho, _ = carry
    values, gnorms, fs, cnorms = history
    f, c, g = evaluate(objective, p)
    history = {"lagrangian": values, "grad_norm": gnorms, "cost": fs, "residual_norm": cnorms}
    return OptimiseResult(p, f, c, infeasibility(c, g), lam, rho, history, f0, cnorm0, g, mu)


def optimise_in_one_program(objective, p0, settings: AugmentedLagrangian, callback):
    """The whole optimisation as one program (`lax.scan` over the outer iterations): for a
    caller's `jit`, `vmap` or `grad` around `optimise`."""
    carry, f0 = initial_carry(objective, p0, settings)
    cnorm0 = carry[4]
    outer = lambda carry, k: outer_iteration(objective, settings, callback, carry, k)  # noqa: E731
    carry, history = lax.scan(outer, tied(carry, p0), jnp.arange(settings.n_outer))
    return final_result(objective, carry, history, f0, cnorm0)
