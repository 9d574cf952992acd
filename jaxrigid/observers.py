"""Observers: quantities measured inside `simulate`'s scan, every step, with no host round trip.

`PoincareSection` counts and records the crossings of a canonical trajectory through the
half-plane `q₂ = 0, q₁ > 0, q̇₂ > 0` (Hairer, Lubich & Wanner, GNI p. 322; Chaurasia 2012 §2.4,
Table 2.1), every step, with no host round trip.
"""

from __future__ import annotations

import abc
import dataclasses
import re
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ._suggest import did_you_mean
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


REDUCTIONS = ("min", "max", "mean", "first_zero")


def state_fields(state) -> dict:
    if hasattr(state, "_fields"):  # a NamedTuple
        return {name: getattr(state, name) for name in state._fields}
    if dataclasses.is_dataclass(state):  # an equinox Module
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    return {}


def observable(model, t, state, name: str):
    """The scalar observable `name` of one member: an invariant of the model (`"H"`,
    `"energy"`), or a state field, indexed unless it is a scalar (`"Pi[1]"`, `"R[0,2]"`).
    `ValueError` naming the choices otherwise."""
    match = re.fullmatch(r"(\w+)(?:\[(\d+(?:,\d+)*)\])?", name.replace(" ", ""))
    invariants = model.invariants(t, state)
    fields = state_fields(state)
    if match and match[2] is None and match[1] in invariants:
        return invariants[match[1]]
    if not match or match[1] not in fields:
        raise ValueError(
            f"unknown observable {name!r}: give an invariant ({', '.join(invariants)}) or a "
            f"state field with its index ({', '.join(fields)}; e.g. {next(iter(fields), 'x')}[0])"
            + did_you_mean(match[1] if match else name, [*invariants, *fields])
        )
    value = jnp.asarray(fields[match[1]])
    index = () if match[2] is None else tuple(int(i) for i in match[2].split(","))
    if len(index) != value.ndim or any(i >= n for i, n in zip(index, value.shape)):
        raise ValueError(
            f"observable {name!r}: {match[1]} has shape {value.shape}; give one index per axis, "
            "each within it"
        )
    return value[index]


class Reductions(AbstractObserver):
    """Reductions over every step of scalar observables (`observable`): their `min`, `max`,
    time average `mean` (the trapezoidal rule over the steps: (1/T)∫v dt to second order)
    and `first_zero` (the first time the observable is zero, linearly interpolated in the step
    where its sign changes; NaN if it never does; e.g. a tennis-racket flip: `Pi[1]`).
    The carry is a dict by observable; `results(carry)` gives `{(name, reduction): value}`."""

    names: tuple[str, ...] = eqx.field(static=True)
    reductions: tuple[str, ...] = eqx.field(default=REDUCTIONS, static=True)

    def __check_init__(self):
        unknown = sorted(set(self.reductions) - set(REDUCTIONS))
        if unknown:
            raise ValueError(
                f"unknown reduction(s) {unknown}; known: {list(REDUCTIONS)}"
                + "".join(did_you_mean(u, REDUCTIONS) for u in unknown)
            )
        if not self.names:
            raise ValueError("Reductions needs at least one observable name")

    def init(self, model, state0, t0):
        carry = {}
        for name in self.names:
            v = observable(model, t0, state0, name)
            zero = jnp.zeros_like(v)
            first = jnp.where(v == 0, jnp.asarray(t0, v.dtype), jnp.nan)
            carry[name] = dict(min=v, max=v, integral=zero, duration=zero, first_zero=first, last=v)
        return carry

    def update(self, model, carry, state, next_state, t, dt):
        out = {}
        for name in self.names:
            c = carry[name]
            v0, v1 = c["last"], observable(model, t + dt, next_state, name)
            h = jnp.asarray(dt, v1.dtype)
            crosses = jnp.isnan(c["first_zero"]) & ((v1 == 0) | (jnp.sign(v1) != jnp.sign(v0)))
            span = jnp.where(v0 == v1, 1.0, v0 - v1)  # v0 ≠ v1 where it crosses
            t_cross = t + h * jnp.clip(v0 / span, 0.0, 1.0)
            out[name] = dict(
                min=jnp.minimum(c["min"], v1),
                max=jnp.maximum(c["max"], v1),
                integral=c["integral"] + 0.5 * h * (v0 + v1),
                duration=c["duration"] + h,
                first_zero=jnp.where(crosses, t_cross, c["first_zero"]),
                last=v1,
            )
        return out

    def results(self, carry) -> dict:
        """`{(observable, reduction): value}` from a final carry (leaves of any batch shape)."""
        out = {}
        for name in self.names:
            c = carry[name]
            values = dict(
                min=c["min"],
                max=c["max"],
                mean=c["integral"] / c["duration"],
                first_zero=c["first_zero"],
            )
            for r in self.reductions:
                out[(name, r)] = values[r]
        return out


class Combined(AbstractObserver):
    """Several observers in one scan: the carry is the tuple of their carries."""

    observers: tuple[AbstractObserver, ...]

    def init(self, model, state0, t0):
        return tuple(o.init(model, state0, t0) for o in self.observers)

    def update(self, model, carry, state, next_state, t, dt):
        return tuple(
            o.update(model, c, state, next_state, t, dt) for o, c in zip(self.observers, carry)
        )


class PoincarePoints(NamedTuple):
    """The carry of `PoincareSection` (per ensemble member in `solution.observations`).

    **Fields:** `count` (int32: crossings so far; it keeps counting past `max_points`, so
    `count > max_points` means the later points were not stored); `times (max_points,)` (the
    crossing times); `points (max_points, 2n)` (the state `(q₁, …, qₙ, p₁, …, pₙ)` at each
    crossing, so `q₂ ≈ 0` there to the root's accuracy). Unused slots are NaN; the first
    `min(count, max_points)` rows are the crossings in time order.
    """

    count: jax.Array  # type: ignore[assignment]  # shadows `tuple.count`, by design
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
