"""`reach-region`: a family of reaching tasks for feedback policies.

From rest at the origin (the two-circles ball, prescribed rails, `presets.two_circles_start`),
reach any target in the disc of radius `ρ = 2` around the start by `T = 5`, the rails starting
at rest at random phases. A task is drawn as

    x* = ρ √u (cos φ, sin φ),   u ~ U[0, 1],  φ ~ U[0, 2π)   (uniform on the disc:          (R1)
                                                               |x*|²/ρ² ~ U[0, 1]),
    θᵢ(0) = −π/2 + α (2vᵢ − 1),  vᵢ ~ U[0, 1]                  (α = π: any phase)

Tasks come from named seed streams: `sample_tasks(seed, count, split, step)` folds the split's
tag (`"train"` or `"heldout"`) and then the step into the seed's key, so the held-out targets
are a stream of their own that training never draws from (training draws `split="train"`
with its step numbers; evaluation `split="heldout"`).

`reach_region(...)` is the family's `ControlProblem`: reach-point's model, integrator and
step with a B-spline whose knot spacing divides the control interval (`mpc.basis_size`); its
target (the origin) is a placeholder, each rollout's target is its task's.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from .._checks import is_integer
from .closed_loop import Tasks
from .costs import FinalPosition
from .mpc import basis_size
from .presets import reach_point

__all__ = ["HORIZON", "RADIUS", "SPLITS", "reach_region", "sample_tasks"]

RADIUS = 2.0
"""`ρ`: the targets' disc radius around the start."""
HORIZON = 5.0
"""`T`."""
SPLITS = {"train": 0, "heldout": 1}
"""The seed streams' tags (folded into the seed's key)."""
INTERVAL = 0.5
"""The default control interval `H = T/10`."""


def reach_region(
    dt: float | None = None, integrator=None, dtype=None, interval: float = INTERVAL, n_basis=8
):
    """The family's `ControlProblem` (named `"reach-region"`): reach-point's ball, integrator
    (RKMK4 default) and step (`dt` default 0.05), `T = 5`, a quintic B-spline with at least
    `n_basis` knot intervals whose spacing divides `interval`."""
    n = basis_size(HORIZON, interval, n_basis)
    problem = reach_point(dt=dt, n_basis=n, integrator=integrator, dtype=dtype, target=(0.0, 0.0))
    target = jnp.zeros((2,), problem.model.inertia.dtype)
    return dataclasses.replace(
        problem,
        name="reach-region",
        constraints=(FinalPosition(target),),
        description=f"T = 5: reach any target within {RADIUS:g} of the start, rails at random "
        "phases at rest",
    )


def sample_tasks(
    seed, count: int, split: str = "train", step: int = 0, n_masses: int = 2, spread=math.pi,
    dtype=None,
) -> Tasks:  # fmt: skip
    """`count` tasks (R1) from the stream `(seed, split, step)`: targets uniform on the disc of
    radius `RADIUS`, rail phases `−π/2 + spread·U(−1, 1)` per mass (`spread = π`: uniform on
    the circle). The same arguments give the same tasks."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if not is_integer(count) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count (the number of tasks) must be a positive integer, got {count!r}")
    if not (is_integer(seed) and seed >= 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    dtype = jnp.result_type(float) if dtype is None else dtype
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(int(seed)), SPLITS[split]), step)
    k_r, k_phi, k_theta = jax.random.split(key, 3)
    u = jax.random.uniform(k_r, (count,), dtype)
    phi = jax.random.uniform(k_phi, (count,), dtype, 0.0, 2 * math.pi)
    r = RADIUS * jnp.sqrt(u)
    target = jnp.stack([r * jnp.cos(phi), r * jnp.sin(phi)], axis=-1)
    v = jax.random.uniform(k_theta, (count, n_masses), dtype, -1.0, 1.0)
    return Tasks(target, -math.pi / 2 + spread * v)
