"""The two-circles ball: the contract case `rolling-ball-two-circles` as a preset,
`two_circles_ball() -> (model, state0)`, with its horizon `TWO_CIRCLES_T_END`. The named
case (`jaxrigid.cases`) and the control problems (`jaxrigid.control`) build on it."""

from __future__ import annotations

import math

import jax.numpy as jnp

from .controls import SinusoidControl
from .model import RollingBall, rolling_ball_state
from .rails import CircleRail

__all__ = ["TWO_CIRCLES_T_END", "two_circles_ball"]

TWO_CIRCLES_T_END = 10.0
"""The horizon of the `rolling-ball-two-circles` contract case."""


def two_circles_ball(
    radius=1.0,
    mass=1.0,
    inertia=(0.4, 0.45, 0.5),
    chi0=(0.0, 0.0, -0.1),
    masses=(0.25, 0.25),
    rail_radius=0.5,
    offset=-math.pi / 2,
    amplitude=0.8,
    frequency=1.5,
    phases=(0.0, math.pi / 2),
    gravity=9.81,
):
    """The `rolling-ball-two-circles` contract case: `(model, state0)`.

    Defaults (a contract: scripts rely on them): `r = 1`; `m₀ = 1`, `𝕀 = diag(0.4, 0.45,
    0.5)` about the shell's centre of mass, `χ₀ = (0, 0, −0.1)`; `g = 9.81`, no external
    force; `m₁ = m₂ = 0.25` on circles of radius 0.5 about the GC, `ζ₁(θ) = 0.5(cos θ, 0,
    sin θ)` (body x–z plane), `ζ₂(θ) = 0.5(0, cos θ, sin θ)` (body y–z plane);
    `θᵢ(t) = −π/2 + 0.8 sin(1.5t + φᵢ)`, `φ = (0, π/2)`; at rest, `Λ = 1`, contact point at
    the origin (`x = (0, 0, r)`); `t_end = TWO_CIRCLES_T_END = 10`. `inertia` is the
    diagonal (three numbers) or a full `(3, 3)` matrix.
    """
    f = lambda v: jnp.asarray(v, dtype=float)
    inertia = f(inertia)
    inertia = jnp.diag(inertia) if inertia.ndim == 1 else inertia
    zero = f([0.0, 0.0, 0.0])
    rails = (
        CircleRail(zero, f(rail_radius), f([1.0, 0.0, 0.0]), f([0.0, 0.0, 1.0])),
        CircleRail(zero, f(rail_radius), f([0.0, 1.0, 0.0]), f([0.0, 0.0, 1.0])),
    )
    control = SinusoidControl(
        offset=f([offset, offset]),
        amplitude=f([amplitude, amplitude]),
        frequency=f([frequency, frequency]),
        phase=f(phases),
    )
    model = RollingBall(
        radius=f(radius),
        mass=f(mass),
        inertia=inertia,
        chi0=f(chi0),
        masses=f(masses),
        rails=rails,
        control=control,
        gravity=f(gravity),
    )
    return model, rolling_ball_state(model)
