"""Observers: quantities measured inside `simulate`'s scan, every step, with no host round trip.

`PoincareSection` counts and records the crossings of a canonical trajectory through the
half-plane `q₂ = 0, q₁ > 0, q̇₂ > 0` (Hairer, Lubich & Wanner, GNI p. 322; Chaurasia 2012 §2.4,
Table 2.1), every step, with no host round trip.
"""

from __future__ import annotations

import abc
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .models.hamiltonian import CanonicalState


class AbstractObserver(eqx.Module):
    """Something measured along a trajectory inside the scan, every step, with no host round
    trip (event counts, Poincaré sections, running extrema). Its carry is a pytree of arrays of
    fixed shapes; `simulate(..., observations0=solution.observations)` continues it."""

    @abc.abstractmethod
    def init(self, model, state0, t0):
        """The carry before the first step."""

    @abc.abstractmethod
    def update(self, model, carry, state, next_state, t, dt):
        """The carry after the step from `state` at `t` to `next_state` at `t + dt`."""


class InvariantDrift(AbstractObserver):
    """The model's `invariants` at the start and the largest `|I(t) − I(0)|` over every step:
    the carry is `(initial, largest)`, two dicts by invariant name."""

    def init(self, model, state0, t0):
        initial = model.invariants(t0, state0)
        return initial, jax.tree_util.tree_map(jnp.zeros_like, initial)

    def update(self, model, carry, state, next_state, t, dt):
        initial, largest = carry
        now = model.invariants(t + dt, next_state)
        return initial, {k: jnp.maximum(largest[k], jnp.abs(now[k] - initial[k])) for k in now}


class PoincarePoints(NamedTuple):
    """The carry of `PoincareSection` (per ensemble member in `solution.observations`).

    **Fields:** `count` (int32: crossings so far; it keeps counting past `max_points`, so
    `count > max_points` means the later points were not stored); `times (max_points,)` (the
    crossing times); `points (max_points, 2n)` (the state `(q₁, …, qₙ, p₁, …, pₙ)` at each
    crossing, so `q₂ ≈ 0` there to the root's accuracy). Unused slots are NaN; the first
    `min(count, max_points)` rows are the crossings in time order.
    """

    count: jax.Array
    times: jax.Array
    points: jax.Array


def _hermite(s, h, y0, v0, y1, v1):
    """The cubic Hermite interpolant on `[t, t + h]` at `t + s h` (`s ∈ [0, 1]`) and its
    `d/ds`, from the values `y` and time derivatives `v` at both ends."""
    s2, s3 = s * s, s * s * s
    h00, h10, h01, h11 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2
    d00, d10, d01, d11 = 6 * s2 - 6 * s, 3 * s2 - 4 * s + 1, -6 * s2 + 6 * s, 3 * s2 - 2 * s
    value = h00 * y0 + h10 * h * v0 + h01 * y1 + h11 * h * v1
    slope = d00 * y0 + d10 * h * v0 + d01 * y1 + d11 * h * v1
    return value, slope


class PoincareSection(AbstractObserver):
    """Crossings of the half-plane `q₂ = 0, q₁ > 0, q̇₂ > 0` by a `CanonicalState` trajectory
    (any model with `vector_field(t, state) -> CanonicalState`, `n ≥ 2` coordinates).

    A step from `t` to `t + h` crosses when `q₂` goes from `< 0` to `≥ 0` (so `q̇₂ ≥ 0` at the
    root: the orientation `q̇₂ > 0` in the limit) and `q₁ > 0` at the located crossing. A state
    landing exactly on `q₂ = 0` is counted at the step that reaches it, never again at the next
    (which starts from `q₂ = 0`, not `< 0`).

    The crossing is located on the cubic Hermite interpolant of the step, built from the two
    states and their velocities `model.vector_field` at both ends (two extra field
    evaluations a step, independent of the integrator): the root of the cubic in `q₂` is found
    by Newton's method from the secant (linear) estimate (3 iterations, kept in `[t, t + h]`),
    and all of `q` and `p` are interpolated with the same cubic Hermite formula. The local
    error is `O(h⁴)`: at most `h⁴/384 · max|y⁗|` in each coordinate, plus `O(h⁴)` from the root
    time, on top of the integrator's own error.

    **Fields:** `max_points` (static, default 2048: how many crossings are stored; all are
    counted); `include_initial` (static, default `False`): whether an initial state lying on
    the section (`q₂(t₀) = 0` exactly, `q₁ > 0`, `q̇₂ > 0`) counts as a crossing at `t₀`. It
    does not by default: a crossing is a transit through the section during `(t₀, t_end]`,
    so that a run split into chunks (`observations0`) counts the same as one run. The
    galactic orbit of §2.4 starts on the section (`q₂(0) = 0`, `q₁ = 2.5`,
    `q̇₂ = p₂ − Ω q₁ > 0`); `include_initial=True` adds that one point.

    The section's coordinates: GNI plots two of them (the section is 4-dimensional for the
    galactic orbit, 3-dimensional on an energy surface); all of `(q, p)` are stored, so any
    pair, e.g. `(q₁, p₁)`, can be plotted from `points`.

    Forward time (`dt > 0`) is assumed: run backwards, the step test `q₂: < 0 → ≥ 0` selects
    `q̇₂ < 0` transits.
    """

    max_points: int = eqx.field(default=2048, static=True)
    include_initial: bool = eqx.field(default=False, static=True)
    newton_steps: int = eqx.field(default=3, static=True)

    def init(self, model, state0, t0):
        state0 = CanonicalState(*state0)
        q, p = state0
        dtype = q.dtype
        n = q.shape[-1]
        points = jnp.full((self.max_points, 2 * n), jnp.nan, dtype)
        times = jnp.full((self.max_points,), jnp.nan, dtype)
        carry = PoincarePoints(jnp.int32(0), times, points)
        if not self.include_initial:
            return carry
        v = model.vector_field(t0, state0)
        on = (q[1] == 0) & (q[0] > 0) & (v.q[1] > 0)
        return self._record(carry, on, jnp.asarray(t0, dtype), jnp.concatenate([q, p]))

    def _record(self, carry, hit, t_cross, point):
        count, times, points = carry
        store = hit & (count < self.max_points)
        i = jnp.clip(count, 0, self.max_points - 1)
        times = times.at[i].set(jnp.where(store, t_cross, times[i]))
        points = points.at[i].set(jnp.where(store, point, points[i]))
        return PoincarePoints(count + hit.astype(jnp.int32), times, points)

    def update(self, model, carry, state, next_state, t, dt):
        state, next_state = CanonicalState(*state), CanonicalState(*next_state)
        v0 = model.vector_field(t, state)
        v1 = model.vector_field(t + dt, next_state)
        y0 = jnp.concatenate([state.q, state.p])
        y1 = jnp.concatenate([next_state.q, next_state.p])
        f0 = jnp.concatenate([v0.q, v0.p])
        f1 = jnp.concatenate([v1.q, v1.p])
        a, b = y0[1], y1[1]
        crosses = (a < 0) & (b >= 0)
        # the secant's root, then Newton on the cubic in q₂ (guarded where there is no crossing)
        gap = jnp.where(crosses, b - a, 1)
        s = jnp.where(crosses, -a / gap, 0)
        for _ in range(self.newton_steps):
            value, slope = _hermite(s, dt, a, f0[1], b, f1[1])
            ok = crosses & (slope != 0)
            s = jnp.clip(s - jnp.where(ok, value / jnp.where(ok, slope, 1), 0), 0, 1)
        point, _ = _hermite(s, dt, y0, f0, y1, f1)
        hit = crosses & (point[0] > 0)
        return self._record(carry, hit, t + s * dt, point)
