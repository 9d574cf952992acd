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

Fixed iteration counts (an inner iteration whose gradient norm is below `gtol` leaves the
iterate unchanged), so everything is pure `jax`: for concrete inputs the outer loop runs on
the host, one compiled program per outer iteration (`lax.scan` over the inner ones; the same
program every time), and `multi_start` is its `vmap` over `K` initial coefficient sets.
`callback(outer, inner, value, grad_norm)` (optional, for progress bars) is called from the
host after each outer iteration, once per inner iteration in order; under `multi_start` with
arrays of the K starts' values. Traced inputs (a caller's `jit`, `vmap` or `grad`) run as one
program, `lax.scan` over the outer iterations too, the callback called from the program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from .. import xla_options
from .._callbacks import host_callback
from .._checks import is_concrete, real_number
from .._input_checks import reported_in_outcome
from ..compilation_cache import ensure_compilation_cache
from ..program_store import call_filtered
from . import lbfgs

__all__ = [
    "DEFAULT_TOLERANCE",
    "AugmentedLagrangian",
    "MultiStartResult",
    "OptimiseResult",
    "multi_start",
    "optimise",
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


DEFAULT_TOLERANCE = 1e-3
"""The constraint tolerance of an objective that states none (no `tolerance` attribute)."""


def _tolerance(objective, tolerance) -> float:
    """`tolerance`, else the objective's own (`ControlProblem.tolerance`), else
    `DEFAULT_TOLERANCE`: a number ≥ 0 (`inf`: any finite result converges)."""
    if tolerance is None:
        tolerance = getattr(objective, "tolerance", DEFAULT_TOLERANCE)
    value = real_number("tolerance", tolerance)
    if not value >= 0:  # NaN too
        raise ValueError(f"tolerance must be a number ≥ 0 (or inf), got {tolerance!r}")
    return value


def _with_converged(result: OptimiseResult, tolerance: float) -> OptimiseResult:
    ok = jnp.isfinite(result.cost) & (result.residual_norm <= tolerance)  # one per start
    return result._replace(converged=ok)


def _evaluate(objective, p):
    """`(f, c, g)`: an objective's `(f, c)` gets an empty `g`."""
    out = objective(p)
    if len(out) == 2:
        f, c = out
        return f, c, jnp.zeros((0,), f.dtype)
    return out


def _infeasibility(c, g):
    gp = jnp.maximum(g, 0.0)
    return jnp.sqrt(jnp.dot(c, c) + jnp.dot(gp, gp))


def _initial(objective, p0, settings: AugmentedLagrangian):
    """The outer loop's first carry `(p, λ, μ, ρ, |c|)` and `f(p₀)`."""
    f0, c0, g0 = _evaluate(objective, p0)
    rho0 = jnp.asarray(settings.rho0, p0.dtype)
    return (p0, jnp.zeros_like(c0), jnp.zeros_like(g0), rho0, _infeasibility(c0, g0)), f0


def outer_iteration(objective, settings: AugmentedLagrangian, callback, carry, k):
    """One multiplier update: `n_inner` iterations on (AL)+(PHR), then λ, μ and ρ."""
    p, lam, mu, rho, vnorm_prev = carry

    def lagrangian(p):
        f, c, g = _evaluate(objective, p)
        phr = jnp.sum(jnp.square(jnp.maximum(mu + rho * g, 0.0)) - mu * mu) / (2 * rho)
        return f + jnp.dot(lam, c) + 0.5 * rho * jnp.dot(c, c) + phr

    if settings.inner is None:
        p, values, gnorms = _inner_lbfgs(lagrangian, p, settings, callback, k)
    else:
        p, values, gnorms = _inner_optax(lagrangian, p, settings, callback, k)
    f, c, g = _evaluate(objective, p)
    v = jnp.maximum(g, -mu / rho)
    vnorm = jnp.sqrt(jnp.dot(c, c) + jnp.dot(v, v))
    lam = lam + rho * c
    mu = jnp.maximum(mu + rho * g, 0.0)
    grow = vnorm > settings.decrease * vnorm_prev
    rho = jnp.where(grow, jnp.minimum(rho * settings.growth, settings.rho_max), rho)
    return (p, lam, mu, rho, vnorm), (values, gnorms, f, _infeasibility(c, g))


def _inner_lbfgs(lagrangian, p, settings, callback, k):
    """`n_inner` iterations of `lbfgs` (one evaluation of `∇L_A` each); per iteration `L_A`
    and `|∇L_A|` at the iterate after it. An iterate with `|∇L_A| ≤ gtol` stays."""
    value_and_grad = jax.value_and_grad(lambda x: lagrangian(jnp.reshape(x, p.shape)))

    def inner(state, j):
        value, grad = value_and_grad(lbfgs.trial_point(state))
        new = lbfgs.update(state, value, grad)
        done = state.started & (
            (jnp.sqrt(jnp.sum(state.g * state.g)) <= settings.gtol) | ~jnp.isfinite(state.f)
        )
        state = lbfgs.where_tree(done, state, new)
        gnorm = jnp.sqrt(jnp.sum(state.g * state.g))
        if callback is not None:
            host_callback(callback, k, j, state.f, gnorm)
        return state, (state.f, gnorm)

    state, (values, gnorms) = lax.scan(inner, lbfgs.init(p), jnp.arange(settings.n_inner))
    return jnp.reshape(state.x, p.shape), values, gnorms


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

    (p, _), (values, gnorms) = lax.scan(inner, (p, opt.init(p)), jnp.arange(settings.n_inner))
    return p, values, gnorms


def _final(objective, carry, history, f0, cnorm0):
    """The result from the last carry and the outer iterations' stacked history."""
    p, lam, mu, rho, _ = carry
    values, gnorms, fs, cnorms = history
    f, c, g = _evaluate(objective, p)
    history = {"lagrangian": values, "grad_norm": gnorms, "cost": fs, "residual_norm": cnorms}
    return OptimiseResult(p, f, c, _infeasibility(c, g), lam, rho, history, f0, cnorm0, g, mu)


def _optimise(objective, p0, settings: AugmentedLagrangian, callback):
    """The whole optimisation as one program (`lax.scan` over the outer iterations): for a
    caller's `jit`, `vmap` or `grad` around `optimise`."""
    carry, f0 = _initial(objective, p0, settings)
    cnorm0 = carry[4]
    outer = lambda carry, k: outer_iteration(objective, settings, callback, carry, k)  # noqa: E731
    carry, history = lax.scan(outer, carry, jnp.arange(settings.n_outer))
    return _final(objective, carry, history, f0, cnorm0)


def _mapped(fn, batched):
    return jax.vmap(fn) if batched else fn


@xla_options.filter_jit
def _initial_program(objective, p0, settings, batched):
    # a value check failing inside the optimiser's own programs makes the iterate's
    # objective NaN (reported, not raised): the programs then have no host callback and
    # JAX's persistent cache keeps them; p0 is checked before
    with reported_in_outcome():
        return _mapped(lambda p: _initial(objective, p, settings), batched)(p0)


@xla_options.filter_jit
def _outer_program(objective, settings, carry, k, batched):
    with reported_in_outcome():
        return _mapped(lambda c: outer_iteration(objective, settings, None, c, k), batched)(carry)


@xla_options.filter_jit
def _final_program(objective, carry, history, f0, cnorm0, batched):
    axis = 1 if batched else 0  # scan's layout: (K, n_outer, ...) under multi_start
    history = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs, axis=axis), *history)
    with reported_in_outcome():
        return _mapped(lambda *a: _final(objective, *a), batched)(carry, history, f0, cnorm0)


def _host_driven(objective, p0, settings, callback, batched):
    """Concrete inputs: the outer loop runs on the host, one compiled program per outer
    iteration (the same program each time), and `callback` is called from the host after
    each with that iteration's inner values. No program carries a host callback, so JAX's
    persistent cache keeps all three (a progress bar in the program made it uncacheable)."""
    carry, f0 = call_filtered(_initial_program, objective, p0, settings, batched)
    cnorm0 = carry[4]
    history = []
    for k in range(settings.n_outer):
        k_ = jnp.asarray(k, jnp.int32)  # `k` itself stays an int for the callback
        carry, out = call_filtered(_outer_program, objective, settings, carry, k_, batched)
        history.append(out)
        if callback is not None:
            values, gnorms = np.asarray(out[0]), np.asarray(out[1])
            for j in range(settings.n_inner):
                # under multi_start the counters come as arrays of K equal values, as from
                # the program's callback under `vmap`
                kj = (np.full(p0.shape[0], k), np.full(p0.shape[0], j)) if batched else (k, j)
                callback(*kj, values[..., j], gnorms[..., j])
    return call_filtered(_final_program, objective, carry, tuple(history), f0, cnorm0, batched)


def _check_p0(objective, p0):
    p0 = jnp.asarray(p0)
    if not jnp.issubdtype(p0.dtype, jnp.floating):
        raise TypeError(f"initial coefficients must be floating point, got {p0.dtype}")
    shape = getattr(objective, "coefficient_shape", None)
    if shape is not None and p0.shape[p0.ndim - len(shape) :] != tuple(shape):
        raise ValueError(f"initial coefficients must have shape (..., *{shape}), got {p0.shape}")
    return p0


def optimise(
    objective: Callable,
    p0,
    settings: AugmentedLagrangian | None = None,
    callback: Callable | None = None,
    *,
    tolerance: float | None = None,
) -> OptimiseResult:
    """Minimise `f(p)` subject to `c(p) = 0` (and `g(p) ≤ 0`) by (AL) and (PHR) from `p0`.

    `objective(p) -> (f (), c (k,))` or `(f, c, g (m,))`, a pure function (an
    `equinox.Module`, e.g. a `ControlProblem`, so that its arrays are traced, not baked
    in); `p0` an array (any shape, e.g. `(M, n)` coefficients). Compiled
    (`equinox.filter_jit`: for concrete inputs three programs, the start, one outer
    iteration and the end; one under a caller's trace); returns an `OptimiseResult`, whose
    `converged` says whether `|c|` (with the inequalities' violation) ended within
    `tolerance` (default: the objective's `tolerance` attribute, e.g. a `ControlProblem`'s,
    else `DEFAULT_TOLERANCE`). NaN or inf in `p0` raises `ValueError` (concrete `p0`).
    Turns on the persistent compilation cache unless JAX has one
    (`jaxrigid.compilation_cache.ensure_compilation_cache`)."""
    ensure_compilation_cache()
    settings = AugmentedLagrangian() if settings is None else settings
    tolerance = _tolerance(objective, tolerance)
    p0 = _check_p0(objective, p0)
    if not isinstance(p0, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(p0))):
        raise ValueError("initial coefficients contain NaN or inf")
    if is_concrete(objective, p0):
        result = _host_driven(objective, p0, settings, callback, batched=False)
    else:
        result = _jitted(objective, p0, settings, callback)
    return _with_converged(result, tolerance)


@eqx.filter_jit
def _jitted(objective, p0, settings, callback):
    with reported_in_outcome():  # as in `_initial_program`
        return _optimise(objective, p0, settings, callback)


class MultiStartResult(NamedTuple):
    """`best` (an `OptimiseResult` of one start: among the converged starts (`|c| ≤
    tolerance`, finite cost) the least `cost`, else the least `|c|`: then `best.converged`
    is False); `best_index`; `all` (every start's result, leading axis `K`); `spread`:
    `{"cost_min", "cost_median", "cost_max", "n_feasible"}` (`n_feasible` the converged
    starts)."""

    best: OptimiseResult
    best_index: jax.Array
    all: OptimiseResult
    spread: dict


def multi_start(
    objective: Callable,
    p0s,
    settings: AugmentedLagrangian | None = None,
    tolerance: float | None = None,
    callback: Callable | None = None,
) -> MultiStartResult:
    """`K` runs of `optimise` at once: `jax.vmap` over the leading axis of `p0s (K, ...)`
    (one compiled program; on a GPU the starts run in parallel). `tolerance` as
    `optimise`'s (default: the objective's, else `DEFAULT_TOLERANCE`)."""
    ensure_compilation_cache()
    settings = AugmentedLagrangian() if settings is None else settings
    tolerance = _tolerance(objective, tolerance)
    p0s = _check_p0(objective, p0s)
    if p0s.ndim < 1 or p0s.shape[0] < 1:
        raise ValueError(f"p0s needs a leading axis of starts, got shape {p0s.shape}")
    if not bool(jnp.all(jnp.isfinite(p0s))):
        raise ValueError("initial coefficients contain NaN or inf")
    if is_concrete(objective, p0s):
        results = _host_driven(objective, p0s, settings, callback, batched=True)
    else:
        results = _multi(objective, p0s, settings, callback)
    results = _with_converged(results, tolerance)
    feasible = results.converged
    score = jnp.where(feasible, results.cost, jnp.inf)
    miss = jnp.where(jnp.isnan(results.residual_norm), jnp.inf, results.residual_norm)
    best = jnp.where(jnp.any(feasible), jnp.argmin(score), jnp.argmin(miss))  # NaN: last
    pick = jax.tree_util.tree_map(lambda x: x[best], results)
    spread = {
        "cost_min": jnp.min(results.cost),
        "cost_median": jnp.median(results.cost),
        "cost_max": jnp.max(results.cost),
        "n_feasible": jnp.sum(feasible),
    }
    return MultiStartResult(pick, best, results, spread)


@eqx.filter_jit
def _multi(objective, p0s, settings, callback):
    with reported_in_outcome():  # as in `_jitted`
        return jax.vmap(lambda p: _optimise(objective, p, settings, callback))(p0s)
