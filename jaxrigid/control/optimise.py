"""Run the augmented-Lagrangian optimiser (`control.augmented_lagrangian`): `optimise` and
`multi_start`.

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
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import xla_options
from .._checks import is_concrete, real_number
from .._input_checks import reported_in_outcome
from ..compilation_cache import ensure_compilation_cache
from ..program_store import call_filtered
from .augmented_lagrangian import AugmentedLagrangian as AugmentedLagrangian
from .augmented_lagrangian import OptimiseResult as OptimiseResult
from .augmented_lagrangian import (
    evaluate,
    initial_carry,
    optimise_in_one_program,
    outer_iteration_ends,
)
from .augmented_lagrangian import outer_iteration as outer_iteration

__all__ = [
    "DEFAULT_TOLERANCE",
    "AugmentedLagrangian",
    "MultiStartResult",
    "OptimiseResult",
    "multi_start",
    "optimise",
]


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


def _mapped(fn, batched):
    return jax.vmap(fn) if batched else fn


@xla_options.filter_jit
def _initial_program(objective, p0, settings, batched):
    # a value check failing inside the optimiser's own programs makes the iterate's
    # objective NaN (reported, not raised): the programs then have no host callback and
    # JAX's persistent cache keeps them; p0 is checked before
    with reported_in_outcome():
        return _mapped(lambda p: initial_carry(objective, p, settings), batched)(p0)


@xla_options.filter_jit
def _outer_program(objective, settings, carry, k, batched):
    with reported_in_outcome():
        outer = lambda c: outer_iteration_ends(objective, settings, None, c, k, start_at_first=True)  # noqa: E731
        return _mapped(outer, batched)(carry)


def _first_carry(objective, p0, settings, batched):
    """The first carry without a program (its `|c|` is taken at `k = 0`, `outer_iteration_ends`):
    `(p₀, λ = 0, μ = 0, ρ₀, NaN)`, shapes from `jax.eval_shape` of the objective."""
    _, c, g = jax.eval_shape(lambda p: evaluate(objective, p), p0[0] if batched else p0)
    lead = p0.shape[:1] if batched else ()
    rho0, vnorm = np.full(lead, settings.rho0, p0.dtype), np.full(lead, np.nan, c.dtype)
    return p0, np.zeros(lead + c.shape, c.dtype), np.zeros(lead + g.shape, g.dtype), rho0, vnorm


def _host_driven(objective, p0, settings, callback, batched):
    """Concrete inputs: the outer loop runs on the host, one compiled program per outer
    iteration (the same program each time), and `callback` is called from the host after
    each with that iteration's inner values. No program carries a host callback, so JAX's
    persistent cache keeps it (a progress bar in the program made it uncacheable). The
    default inner minimiser needs no other program: `f(p₀)` and `|c(p₀)|` come from its
    first evaluation, the result from the last iteration's (an `optax` one starts with
    `_initial_program`)."""
    if settings.inner is None:
        carry, f0, cnorm0 = _first_carry(objective, p0, settings, batched), None, None
    else:
        carry, f0 = call_filtered(_initial_program, objective, p0, settings, batched)
        cnorm0 = carry[4]
    history = []
    for k in range(settings.n_outer):
        k_ = jnp.asarray(k, jnp.int32)  # `k` itself stays an int for the callback
        carry, out, start, end = call_filtered(
            _outer_program, objective, settings, carry, k_, batched
        )
        if f0 is None:
            f0, cnorm0 = start
        history.append(out)
        if callback is not None:
            values, gnorms = np.asarray(out[0]), np.asarray(out[1])
            for j in range(settings.n_inner):
                # under multi_start the counters come as arrays of K equal values, as from
                # the program's callback under `vmap`
                kj = (np.full(p0.shape[0], k), np.full(p0.shape[0], j)) if batched else (k, j)
                callback(*kj, values[..., j], gnorms[..., j])
    axis = 1 if batched else 0  # scan's layout: (K, n_outer, ...) under multi_start
    values, gnorms, fs, cnorms = (np.stack(xs, axis=axis) for xs in zip(*history))
    p, lam, mu, rho, _ = carry
    (c, g), cnorm = end, cnorms[..., -1]  # the last iteration's: at `p`
    history_ = {"lagrangian": values, "grad_norm": gnorms, "cost": fs, "residual_norm": cnorms}
    return OptimiseResult(p, out[2], c, cnorm, lam, rho, history_, f0, cnorm0, g, mu)


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
    (`equinox.filter_jit`: for concrete inputs one program, an outer iteration run
    `n_outer` times from the host; one under a caller's trace); returns an `OptimiseResult`, whose
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
        return optimise_in_one_program(objective, p0, settings, callback)


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
        return jax.vmap(lambda p: optimise_in_one_program(objective, p, settings, callback))(p0s)
