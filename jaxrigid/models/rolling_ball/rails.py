"""Rails: body-fixed curves `ζ(θ)` on which the rolling ball's internal masses move.

Putkaradze & Rogers (2018), §3 and the model note (`docs/rolling-ball-model.md`): a mass on
a rail sits at the body vector `χ = ζ(θ)` from the ball's geometric centre, so its body
velocity and acceleration are `χ̇ = ζ′θ̇`, `χ̈ = ζ″θ̇² + ζ′θ̈`. `ζ′` and `ζ″` come from autodiff
(`AbstractRail.derivatives`, nested `jax.jvp`), never by hand, so any smooth user curve works.

A rail is an `equinox.Module`; its array fields are parameters (traced, differentiated,
swept with `vmap`). Methods act on one rail; `max_radius` also accepts a rail whose fields
carry leading sweep axes (it maps over them, see `AbstractRail.event_ndims`).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..._checks import Check, is_concrete
from ..._jet import jet2

__all__ = [
    "AbstractRail",
    "CircleRail",
    "EllipseRail",
    "FigureEightRail",
    "FunctionRail",
    "SegmentRail",
    "max_radius",
    "rail_checks",
]

_TWO_PI = 2.0 * math.pi


class AbstractRail(eqx.Module):
    """A smooth curve `θ ↦ ζ(θ) (3,)` fixed in the ball's body frame, measured from the
    geometric centre.

    Subclasses implement `__call__(theta)`, `theta_range()` (the parameter interval that
    traces the rail once: one period of a closed curve) and `event_ndims()` (the rank of each
    array field for one rail, so that checks can map over sweep axes in front).
    `is_periodic()` (default `True`) says whether every `θ` lies on the rail (`ζ` repeats
    with period `hi − lo`); `False` for a rail with ends (a tube), on which a control's `θ(t)`
    must stay inside `theta_range()` (`rail_checks`).
    """

    @abc.abstractmethod
    def __call__(self, theta):
        """`ζ(θ)`: scalar `theta` -> `(3,)` body vector from the geometric centre."""

    def derivatives(self, theta):
        """`(ζ, ζ′, ζ″)` at `theta`, each `(3,)`, by `jax.jvp` (autodiff, not by hand)."""
        return jet2(self, theta)

    def theta_range(self) -> tuple[float, float]:
        """The parameter interval covering the rail once (checks sample it)."""
        return (0.0, _TWO_PI)

    def is_periodic(self) -> bool:
        """Whether every `θ` is on the rail (a closed curve, one period over `theta_range`)."""
        return True

    @abc.abstractmethod
    def event_ndims(self) -> dict[str, Any]:
        """`{field name: rank of that field for one rail}` (a pytree of ints for a pytree
        field); leading axes beyond these are sweep axes."""


class CircleRail(AbstractRail):
    """`ζ(θ) = c + ρ(cos θ e₁ + sin θ e₂)`: a circle of radius `ρ` about `c` when `e₁, e₂`
    are orthonormal (an ellipse otherwise). **Fields:** `centre (3,)`, `radius ()`,
    `e1 (3,)`, `e2 (3,)`."""

    centre: jax.Array
    radius: jax.Array
    e1: jax.Array
    e2: jax.Array

    def __call__(self, theta):
        return self.centre + self.radius * (jnp.cos(theta) * self.e1 + jnp.sin(theta) * self.e2)

    def event_ndims(self):
        return {"centre": 1, "radius": 0, "e1": 1, "e2": 1}


class EllipseRail(AbstractRail):
    """`ζ(θ) = c + a cos θ e₁ + b sin θ e₂` (semi-axes `a`, `b` along orthonormal `e₁, e₂`).
    **Fields:** `centre (3,)`, `a ()`, `b ()`, `e1 (3,)`, `e2 (3,)`."""

    centre: jax.Array
    a: jax.Array
    b: jax.Array
    e1: jax.Array
    e2: jax.Array

    def __call__(self, theta):
        return self.centre + self.a * jnp.cos(theta) * self.e1 + self.b * jnp.sin(theta) * self.e2

    def event_ndims(self):
        return {"centre": 1, "a": 0, "b": 0, "e1": 1, "e2": 1}


class FigureEightRail(AbstractRail):
    """The lemniscate of Gerono `ζ(θ) = c + a sin θ e₁ + b sin θ cos θ e₂`: a figure eight
    crossing itself at `c` (θ = 0, π), lobes reaching `c ± a e₁` with half-width `b/2`.
    **Fields:** `centre (3,)`, `a ()`, `b ()`, `e1 (3,)`, `e2 (3,)`."""

    centre: jax.Array
    a: jax.Array
    b: jax.Array
    e1: jax.Array
    e2: jax.Array

    def __call__(self, theta):
        s = jnp.sin(theta)
        return self.centre + self.a * s * self.e1 + self.b * s * jnp.cos(theta) * self.e2

    def event_ndims(self):
        return {"centre": 1, "a": 0, "b": 0, "e1": 1, "e2": 1}


class SegmentRail(AbstractRail):
    """The straight segment `ζ(θ) = start + θ (end − start)`, `θ ∈ [0, 1]` (a magnet in a
    linear tube, which it cannot leave). The formula extends linearly beyond `[0, 1]`, the
    rail does not: `rail_checks` refuses a control whose reach (`theta_bounds`) leaves
    `[0, 1]`. **Fields:** `start (3,)`, `end (3,)`."""

    start: jax.Array
    end: jax.Array

    def __call__(self, theta):
        return self.start + theta * (self.end - self.start)

    def theta_range(self):
        return (0.0, 1.0)

    def is_periodic(self):
        return False

    def event_ndims(self):
        return {"start": 1, "end": 1}


class FunctionRail(AbstractRail):
    """Any user curve `ζ(θ) = fn(θ, params)`.

    **Fields:** `fn` (static: a pure `jax` function `(θ, params) -> (3,)`, smooth enough
    for two derivatives); `params` (a pytree of arrays: the curve's parameters, traced and
    differentiable); `interval` (static `(lo, hi)`: the interval covering the rail once,
    default one period `(0, 2π)`); `params_event_ndims` (static, optional: the rank of each
    leaf of `params` for one rail, needed only when `params` carries sweep axes in front
    while the model's checks run; `None` takes the leaves as unswept); `periodic` (static,
    default `True`: `fn` repeats with period `hi − lo`; `False`: the rail is `fn` over
    `interval` only, an open curve, and a control reaching outside it is refused).
    """

    fn: Callable = eqx.field(static=True)
    params: Any = None
    interval: tuple[float, float] = eqx.field(static=True, default=(0.0, _TWO_PI))
    params_event_ndims: Any = eqx.field(static=True, default=None)
    periodic: bool = eqx.field(static=True, default=True)

    def __call__(self, theta):
        return self.fn(theta, self.params)

    def theta_range(self):
        return tuple(float(v) for v in self.interval)

    def is_periodic(self):
        return bool(self.periodic)

    def event_ndims(self):
        if self.params_event_ndims is None:
            return {"params": jax.tree_util.tree_map(jnp.ndim, self.params)}
        return {"params": self.params_event_ndims}


def map_over_sweep(fn, rail: AbstractRail):
    """`fn(one rail)` for every member of a rail whose array fields may carry leading sweep
    axes (in front of `rail.event_ndims()`); the result has the sweep shape in front."""
    ndims = rail.event_ndims()
    names = list(ndims)
    values = [jax.tree_util.tree_map(jnp.asarray, getattr(rail, n)) for n in names]
    leaves = jax.tree_util.tree_leaves(values)
    ranks = jax.tree_util.tree_leaves([ndims[n] for n in names])
    if len(leaves) != len(ranks):
        raise ValueError(
            f"{type(rail).__name__}.event_ndims() does not match its fields: "
            f"{len(ranks)} ranks for {len(leaves)} arrays"
        )
    shapes = [x.shape[: x.ndim - e] for x, e in zip(leaves, ranks)]
    batch = np.broadcast_shapes(*shapes) if shapes else ()
    if not batch:
        return fn(rail)
    size = int(np.prod(batch))
    flat = [
        jnp.broadcast_to(x, batch + x.shape[x.ndim - e :]).reshape((size,) + x.shape[x.ndim - e :])
        for x, e in zip(leaves, ranks)
    ]
    treedef = jax.tree_util.tree_structure(values)
    rebuilt = eqx.tree_at(
        lambda r: [getattr(r, n) for n in names],
        rail,
        jax.tree_util.tree_unflatten(treedef, flat),
        is_leaf=lambda x: x is None,
    )
    out = eqx.filter_vmap(fn)(rebuilt)
    return jax.tree_util.tree_map(lambda y: y.reshape(batch + y.shape[1:]), out)


def max_radius(rail: AbstractRail, num: int = 1025):
    """The largest distance `max |ζ(θ)|` of the rail from the ball's geometric centre,
    sampled at `num` equally spaced `θ` over `rail.theta_range()` (ends included). A rail
    inside the ball of radius `r` has `max_radius(rail) < r`.

    Sampling misses the true maximum of a curve by `O(|ζ″| Δθ²)`; with the default
    `Δθ = 2π/1024` that is below 2e-5 of the rail's size for circles and ellipses (exact for
    a segment, whose maximum is at an end). Sweep axes of the rail's fields come out in front.
    """

    def one(r):
        leaves = [x for x in jax.tree_util.tree_leaves(r) if hasattr(x, "dtype")]
        dtype = jnp.result_type(*leaves, float) if leaves else jnp.result_type(float)
        lo, hi = r.theta_range()
        theta = jnp.linspace(lo, hi, num, dtype=dtype)
        zeta = jax.vmap(r)(theta)
        return jnp.max(jnp.sqrt(jnp.sum(zeta * zeta, axis=-1)))

    return map_over_sweep(one, rail)


def rail_checks(rails, control, radius) -> list[Check]:
    """Value checks of `rails` (a tuple, one per mass) against a ball of `radius` and the
    `control` driving them (flags over sweep axes): every rail inside the ball
    (`max_radius(rail) < radius`), and on a rail with ends (`is_periodic()` false: a
    segment) the control's reach `theta_bounds()` inside `theta_range()` — a mass cannot
    leave its tube, and `max_radius` samples only that range. A control that returns `None`
    (unbounded, e.g. a spline), has no `theta_bounds` (a plain function) or is `None`
    (dynamic masses, moved by their equations) is not checked there."""
    checks = []
    bounds = control.theta_bounds() if rails and hasattr(control, "theta_bounds") else None
    for i, rail in enumerate(rails):
        name = type(rail).__name__
        lo, hi = rail.theta_range()
        R = max_radius(rail)
        checks.append(
            Check(
                ~(R < radius),
                f"rail {i} ({name}) leaves the ball: max |ζ(θ)| over θ in "
                f"[{lo:.4g}, {hi:.4g}] must be < radius",
                R,
            )
        )
        if bounds is None or rail.is_periodic():
            continue
        below, above = (jnp.asarray(b)[..., i] for b in bounds)
        out = jnp.where(lo - below >= above - hi, below, above)  # the θ furthest out
        reach = "outside it"
        if is_concrete(below, above) and not jnp.ndim(below) and not jnp.ndim(above):
            reach = f"in [{float(below):.4g}, {float(above):.4g}]"
        checks.append(
            Check(
                (below < lo) | (above > hi),
                f"rail {i} ({name}) allows θ in [{lo:.4g}, {hi:.4g}] only (a mass cannot "
                f"leave its rail), but the control ({type(control).__name__}) reaches θ "
                f"{reach} (furthest out quoted)",
                out,
            )
        )
    return checks
