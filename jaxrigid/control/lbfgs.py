"""L-BFGS whose line search is a state of the loop: one `value_and_grad` per iteration.

`optax.lbfgs` with its zoom line search evaluates the function at several call sites of one
iteration (the search's first trial, the two branches of its loop's `lax.cond`, the fallback
of `value_and_grad_from_state`): XLA compiles every call site, so the optimiser's program
carried the simulation's gradient about 3.5 times (`bench/control_program_census.py`). Here
every iteration evaluates once, at a trial point `x + α d`, and decides from that value what
the next trial is: the iterate moves only when a trial is accepted.

The search is Nocedal & Wright's (*Numerical Optimization*, 2nd ed., Algorithms 3.5 and 3.6):
extrapolate until the minimum along `d` is bracketed, then zoom into the bracket with a
safeguarded cubic interpolation (N&W (3.59)). A trial is accepted by the strong Wolfe
conditions (N&W (3.7), c₁ = 10⁻⁴, c₂ = 0.9) or, where the decrease is lost in rounding near
a minimum, by Hager & Zhang's approximate Wolfe conditions (Hager & Zhang 2005, (4.1)):
`(2c₁ − 1) φ'(0) ≥ φ'(α) ≥ c₂ φ'(0)` with `φ(α) ≤ φ(0) + ε|φ(0)|`, ε = 10⁻⁶ — as optax's zoom
search does. The direction is the two-loop recursion over the last `memory` pairs (N&W
Algorithm 7.4) with the initial scaling `sᵀy/yᵀy` (N&W (7.20)). A search that finds no
acceptable step in `max_trials` trials takes the best point it found, or, if none decreased
`f`, restarts from steepest descent with a forgotten memory.

The first iteration only evaluates `f` and `∇f` at the start (`α = 0`, accepted).
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp

C1, C2, APPROX_EPS = 1e-4, 0.9, 1e-6

T = TypeVar("T")


class LBFGSState(NamedTuple):
    """The iterate `x` with `f`, `g`; the direction `d` and `φ'(0) = gᵀd`; the trial step
    `alpha`; the search's bracket ends `lo` (the best step so far, its `f_lo`, `dphi_lo`,
    `g_lo`) and `hi` (`f_hi`, `dphi_hi`), `bracketed`; `trials` in this search; the memory
    `s`, `y` (`(memory, n)`, newest last) and `rho = 1/sᵀy` (0 where empty); `started`."""

    x: jax.Array
    f: jax.Array
    g: jax.Array
    d: jax.Array
    dphi0: jax.Array
    alpha: jax.Array
    lo: jax.Array
    f_lo: jax.Array
    dphi_lo: jax.Array
    g_lo: jax.Array
    hi: jax.Array
    f_hi: jax.Array
    dphi_hi: jax.Array
    bracketed: jax.Array
    trials: jax.Array
    s: jax.Array
    y: jax.Array
    rho: jax.Array
    started: jax.Array


def init(x0, memory: int = 10) -> LBFGSState:
    """The state before the first iteration (which evaluates at `x0` and accepts it)."""
    x = jnp.ravel(x0)
    zero, vector = jnp.zeros((), x.dtype), jnp.zeros_like(x)
    pairs = jnp.zeros((memory,) + x.shape, x.dtype)
    return LBFGSState(
        x=x, f=zero, g=vector, d=vector, dphi0=zero, alpha=zero,
        lo=zero, f_lo=zero, dphi_lo=zero, g_lo=vector, hi=zero, f_hi=zero, dphi_hi=zero,
        bracketed=jnp.asarray(False), trials=jnp.asarray(0),
        s=pairs, y=pairs, rho=jnp.zeros((memory,), x.dtype), started=jnp.asarray(False),
    )  # fmt: skip


def direction(g, s, y, rho):
    """`−H g` by the two-loop recursion (N&W Algorithm 7.4) over the pairs with `rho > 0`,
    `H₀ = sᵀy/yᵀy` of the newest pair (N&W (7.20)), `H₀ = 1` with an empty memory."""
    q = g
    alphas = []
    for i in range(s.shape[0] - 1, -1, -1):  # newest first
        a = rho[i] * jnp.dot(s[i], q)
        alphas.append(a)
        q = q - a * y[i]
    yy = jnp.dot(y[-1], y[-1])
    gamma = jnp.where(
        (rho[-1] > 0) & (yy > 0), jnp.dot(s[-1], y[-1]) / jnp.where(yy > 0, yy, 1.0), 1.0
    )
    r = gamma * q
    for i, a in zip(range(s.shape[0]), alphas[::-1]):  # oldest first
        b = rho[i] * jnp.dot(y[i], r)
        r = r + (a - b) * s[i]
    return -r


def _cubic_step(a, fa, da, b, fb, db):
    """The minimiser of the cubic through `(a, fa, da)` and `(b, fb, db)` (N&W (3.59)),
    kept inside the middle 80 % of `[a, b]`; the midpoint where the cubic has none."""
    d1 = da + db - 3.0 * (fa - fb) / jnp.where(a == b, 1.0, a - b)
    disc = d1 * d1 - da * db
    d2 = jnp.sign(b - a) * jnp.sqrt(jnp.maximum(disc, 0.0))
    denom = db - da + 2.0 * d2
    c = b - (b - a) * (db + d2 - d1) / jnp.where(denom == 0, 1.0, denom)
    low, high = jnp.minimum(a, b), jnp.maximum(a, b)
    width = high - low
    ok = (disc >= 0) & (denom != 0) & jnp.isfinite(c)
    c = jnp.where(ok, c, 0.5 * (a + b))
    return jnp.clip(c, low + 0.1 * width, high - 0.1 * width)


def where_tree(pred, a: T, b: T) -> T:
    """`a` where `pred`, else `b`, leaf by leaf (pytrees of one structure)."""
    return jax.tree_util.tree_map(lambda u, v: jnp.where(pred, u, v), a, b)


def trial_point(state: LBFGSState):
    """Where this iteration evaluates: `x + α d`."""
    return state.x + state.alpha * state.d


def update(state: LBFGSState, f_t, g_t, max_trials: int = 20) -> LBFGSState:
    """One iteration, given `f` and `∇f` at `trial_point(state)`."""
    x_t = trial_point(state)
    dphi_t = jnp.dot(g_t, state.d)
    finite = jnp.isfinite(f_t) & jnp.all(jnp.isfinite(g_t))
    armijo = f_t <= state.f + C1 * state.alpha * state.dphi0
    curvature = jnp.abs(dphi_t) <= -C2 * state.dphi0
    approximate = (
        (f_t <= state.f + APPROX_EPS * jnp.abs(state.f))
        & ((2 * C1 - 1) * state.dphi0 >= dphi_t)
        & (dphi_t >= C2 * state.dphi0)
    )
    accept = ~state.started | (finite & ((armijo & curvature) | approximate))

    # the bracket (N&W Algorithms 3.5 and 3.6 in one): a trial past the minimum (no
    # sufficient decrease, or above the best so far; a non-finite one) becomes `hi`; else it
    # becomes `lo`, and the old `lo` becomes `hi` where the slope there turns back
    too_far = ~finite | ~armijo | (f_t >= state.f_lo)
    turn = ~too_far & (dphi_t * jnp.where(state.bracketed, state.hi - state.lo, 1.0) >= 0)
    hi, f_hi, dphi_hi = where_tree(
        too_far,
        (state.alpha, jnp.where(finite, f_t, jnp.inf), jnp.where(finite, dphi_t, 0.0)),
        where_tree(
            turn, (state.lo, state.f_lo, state.dphi_lo), (state.hi, state.f_hi, state.dphi_hi)
        ),
    )
    lo, f_lo, dphi_lo, g_lo = where_tree(
        too_far, (state.lo, state.f_lo, state.dphi_lo, state.g_lo), (state.alpha, f_t, dphi_t, g_t)
    )
    bracketed = state.bracketed | too_far | turn
    # the next trial: 4× the step until bracketed, then the cubic's minimum in the bracket
    # (the midpoint where `hi` is not finite)
    interpolated = jnp.where(
        jnp.isfinite(f_hi), _cubic_step(lo, f_lo, dphi_lo, hi, f_hi, dphi_hi), 0.5 * (lo + hi)
    )
    alpha_next = jnp.where(bracketed, interpolated, 4.0 * state.alpha)
    trials = state.trials + 1
    eps = jnp.finfo(state.x.dtype).eps
    tiny_bracket = bracketed & (
        jnp.abs(hi - lo) * jnp.max(jnp.abs(state.d)) <= eps * (1.0 + jnp.max(jnp.abs(state.x)))
    )
    give_up = ~accept & ((trials >= max_trials) | tiny_bracket)
    # giving up: the best trial (`lo > 0` only after a sufficient decrease), else steepest
    # descent from `x` with the memory forgotten
    take_lo = give_up & (lo > 0)
    restart = give_up & ~take_lo

    moved = accept | take_lo
    x_new, f_new, g_new = where_tree(
        accept,
        (x_t, f_t, g_t),
        where_tree(take_lo, (state.x + lo * state.d, f_lo, g_lo), (state.x, state.f, state.g)),
    )
    # the memory takes the new pair where the iterate moved with positive curvature
    s_k, y_k = x_new - state.x, g_new - state.g
    sy = jnp.dot(s_k, y_k)
    push = moved & state.started & (sy > eps * jnp.sqrt(jnp.dot(s_k, s_k) * jnp.dot(y_k, y_k)))
    rho_k = 1.0 / jnp.where(sy > 0, sy, 1.0)
    s, y, rho = where_tree(
        push,
        (_roll_in(state.s, s_k), _roll_in(state.y, y_k), _roll_in(state.rho, rho_k)),
        (state.s, state.y, state.rho),
    )
    s, y, rho = where_tree(restart, (0 * s, 0 * y, 0 * rho), (s, y, rho))

    d_new = direction(g_new, s, y, rho)
    d_new = jnp.where(jnp.dot(d_new, g_new) < 0, d_new, -g_new)
    dphi0_new = jnp.dot(d_new, g_new)
    # a search's first trial: the quasi-Newton step (α = 1); without a memory a
    # steepest-descent step no longer than 1
    gnorm = jnp.sqrt(jnp.dot(g_new, g_new))
    first = jnp.where(rho[-1] > 0, 1.0, jnp.minimum(1.0, 1.0 / jnp.where(gnorm > 0, gnorm, 1.0)))
    new_search = moved | restart
    zero = jnp.zeros_like(f_new)
    searching = (lo, f_lo, dphi_lo, g_lo, hi, f_hi, dphi_hi, bracketed, trials)
    fresh = (zero, f_new, dphi0_new, g_new, zero, zero, zero, jnp.asarray(False), jnp.asarray(0))
    return LBFGSState(
        x_new,
        f_new,
        g_new,
        jnp.where(new_search, d_new, state.d),
        jnp.where(new_search, dphi0_new, state.dphi0),
        jnp.where(new_search, first, alpha_next),
        *where_tree(new_search, fresh, searching),
        s,
        y,
        rho,
        jnp.asarray(True),
    )


def _roll_in(memory, new):
    """`memory` without its oldest entry, `new` appended (newest last)."""
    return jnp.concatenate([memory[1:], new[None]])
