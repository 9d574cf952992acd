"""A run's plan: the number of steps of `dt` that make `t_end` (`whole_steps`, `step_plan`)
and the chunks a long run is integrated in (`plan_chunks`, `saves_for`).

Bad input raises `ValueError` with a message that names the nearest valid values. The
messages name `t_end` and `dt` as `names` says (default `t_end`, `dt`; the command passes
its flags `--t-end`, `--dt`).
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal

__all__ = [
    "CHUNK_STEPS",
    "MAX_CHUNKS",
    "MAX_SAVED_STATES",
    "MAX_SAVES",
    "MIN_SAVES",
    "plan_chunks",
    "positive",
    "saves_for",
    "step_plan",
    "whole_steps",
]

NAMES = ("t_end", "dt")  # how the messages name t_end and dt by default

_INT32_MAX = 2**31 - 1
# How far t_end / dt may be from a whole number n of steps, relative to n. A decimal t_end
# and dt are each rounded to the nearest double (relative error ≤ eps/2) and their quotient
# is rounded once more, so an exact decimal multiple (1 / 0.1, 0.3 / 0.1, 5 / 0.005) gives
# t_end / dt within 1.5 eps·n of n (to first order; 360,000 random multiples of 18 decimal
# steps, n up to 2³¹, gave at most 1.0 eps·n). 8 eps leaves room for that, and what it
# accepts differs from n·dt by a few ulps of t_end: round-off, never a changed t_end.
_WHOLE_RTOL = 8 * sys.float_info.epsilon

MAX_SAVES = 2000  # at most about this many saved states per member
MAX_SAVED_STATES = 200_000  # and about this many over the ensemble (≈ 19 MB for rigid bodies)
MIN_SAVES = 10
CHUNK_STEPS = 2000  # aim for chunks of about this many steps (progress-bar granularity)
MAX_CHUNKS = 50


# ----------------------------------------------------------------------------------------
# Steps


def _number(x: float) -> str:
    """`x` as a user would write it: short when that is exact, else its full repr."""
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def _multiple(dt: float, k: int) -> str:
    """`k · dt` in decimal (0.3 · 3 is 0.9, not 0.8999999999999999)."""
    return f"{float(Decimal(repr(dt)) * k):.15g}"


def positive(value: float | None, default: float, name: str) -> float:
    """`value` (`default` when None) as a float; `ValueError` naming it as `name` unless it
    is positive and finite."""
    value = default if value is None else value
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return float(value)


def whole_steps(
    t_end: float, dt: float, what: str | None = None, names: tuple[str, str] = NAMES
) -> int:
    """The number of steps of `dt` that make `t_end` (both positive and finite). `ValueError`
    unless that is a whole number, up to decimal round-off (`_WHOLE_RTOL`), or more than
    2³¹ − 1 steps; the message names the nearest valid values. `what` names `t_end` in it
    (default `t_end T`, with `names[0]` for `t_end`)."""
    t_name, dt_name = names
    what = what or f"{t_name} {_number(t_end)}"
    ratio = t_end / dt
    if not math.isfinite(ratio) or ratio > _INT32_MAX:
        raise ValueError(
            f"{t_name} / {dt_name} = {ratio:g} steps; at most {_INT32_MAX} are supported"
        )
    n = round(ratio)
    if n >= 1 and abs(ratio - n) <= _WHOLE_RTOL * n:
        return n
    if ratio < 1:
        raise ValueError(
            f"{what} is shorter than one step of {dt_name} {_number(dt)}; "
            f"nearest valid: {_multiple(dt, 1)}"
        )
    raise ValueError(
        f"{what} is not a whole number of steps of {dt_name} {_number(dt)}; nearest valid: "
        f"{_multiple(dt, math.floor(ratio))} or {_multiple(dt, math.ceil(ratio))}"
    )


def step_plan(
    case, t_end: float | None, dt: float | None, names: tuple[str, str] = NAMES
) -> tuple[float, float, int]:
    """`(dt, t_end, n_steps)` of a run of `case` (a `jaxrigid.cases` case) for `t_end` and
    `dt` (None: the case's defaults). `ValueError` for a step or end time that is not
    positive and finite, or an end time that is not a whole number of steps.

    A `t_end` given must be a whole number of steps of `dt` (`whole_steps`); so must the
    case's default t_end with a `dt` other than the case's. The case's own pair runs as
    `jaxrigid cases CASE` shows it: its default t_end may be nominal (the harmonic
    oscillator's 50π in steps of 0.01), and then runs the nearest whole number of steps, with
    t_end = n_steps·dt.
    """
    t_name, dt_name = names
    dt = positive(dt, case.default_dt, dt_name)
    if t_end is not None:
        t_end = positive(t_end, case.default_t_end, t_name)
        return dt, t_end, whole_steps(t_end, dt, names=names)
    t_end = positive(None, case.default_t_end, t_name)
    if dt != case.default_dt:
        what = f"the default {t_name} {_number(t_end)} of case {case.name}"
        return dt, t_end, whole_steps(t_end, dt, what, names)
    n = max(1, round(t_end / dt))
    if abs(t_end / dt - n) > _WHOLE_RTOL * n:
        t_end = n * dt
    return dt, t_end, n


# ----------------------------------------------------------------------------------------
# Chunks


def _divisors(n: int) -> list[int]:
    """The divisors of `n`, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _smallest_divisor_from(n: int, k: int) -> int:
    """The smallest divisor of `n` that is at least `k` (`n` itself at worst)."""
    return next(d for d in _divisors(n) if d >= k)


def saves_for(members: int | None) -> int:
    """Saved states per member for an ensemble of `members` (None: one trajectory):
    `MAX_SAVES`, fewer for large ensembles (at most about `MAX_SAVED_STATES` in all, at least
    `MIN_SAVES` each)."""
    return max(MIN_SAVES, min(MAX_SAVES, MAX_SAVED_STATES // (members or 1)))


def plan_chunks(n_steps: int, max_saves: int | None = None) -> list[tuple[int, int]]:
    """`[(steps, save_every), ...]` covering `n_steps`: equal chunks (one compilation), then
    maybe a shorter tail; about `CHUNK_STEPS` steps a chunk, at most `MAX_CHUNKS` equal ones,
    at most ~`max_saves` saves (default `MAX_SAVES`).

    The save stride is a divisor of `n_steps` when one lies within twice the smallest stride
    allowed, and the saves per chunk a divisor of the saves when one lies within a factor 2
    of the wanted number: then there is no tail.
    """
    s = -(-n_steps // (max_saves or MAX_SAVES))
    d = _smallest_divisor_from(n_steps, s)
    s = d if d <= 2 * s else s
    n_save = n_steps // s
    k = max(1, n_save // min(MAX_CHUNKS, max(1, n_steps // CHUNK_STEPS)))
    k = max([d for d in _divisors(n_save) if k // 2 <= d <= k] or [k])
    chunks = [(k * s, s)] * (n_steps // (k * s))
    tail = n_steps % (k * s)
    if tail:  # saved at most as densely as the other chunks
        chunks.append((tail, _smallest_divisor_from(tail, min(s, -(-tail // k)))))
    return chunks
