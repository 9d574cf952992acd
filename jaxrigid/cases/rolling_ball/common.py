"""What the cases of the rolling-ball family share: the family's method, step and horizon;
the parameters of the ball's shell, of the initial `Ω` and of a mass swung on a circle; the
`RollingBall` built from them; the contact observables along a saved path."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from ...models.rolling_ball import RollingBall
from ...models.rolling_ball.controls import SinusoidControl
from ...models.rolling_ball.rails import CircleRail
from .. import base
from ..base import Parameter, inertia_parameters, vector_parameters

REFERENCE = "Putkaradze & Rogers, Meccanica 53 (2018)"
NOTE = "the model note docs/rolling-ball-model.md"
FAMILY = "rolling_ball"
METHOD = "RKMK4"
DT = 0.01


def family_fields(t_end: float = 10.0) -> dict[str, Any]:
    """The `Case` fields of every case of the family: family, method, step, horizon, and its
    units (SI: g = 9.81 m/s²)."""
    return dict(
        family=FAMILY, default_method=METHOD, default_dt=DT, default_t_end=t_end, si_units=True
    )


# --- parameters ------------------------------------------------------------------------------


def floats(x):
    """`x` as an array of the default float (float64 under x64)."""
    return jnp.asarray(x, dtype=float)


def shell_parameters() -> dict[str, Parameter]:
    """The ball's shell (the two-circles defaults): radius, mass, inertia, χ₀, g."""
    return {
        "radius": Parameter(1.0, "ball radius r"),
        "m0": Parameter(1.0, "shell mass m0"),
        **inertia_parameters(0.4, 0.45, 0.5, "shell inertia about its centre of mass"),
        **vector_parameters("chi0", "shell's centre of mass from the centre (body)", (0, 0, -0.1)),
        "gravity": Parameter(9.81, "gravitational acceleration g (along −e3)"),
    }


def omega_parameters(omega=(0.0, 0.0, 0.0)) -> dict[str, Parameter]:
    """`Omega1`, `Omega2`, `Omega3`: the initial body angular velocity, default `omega`."""
    return vector_parameters("Omega", "initial body angular velocity", omega)


def swing_parameters() -> dict[str, Parameter]:
    """A mass swung on its circle, `θ(t) = offset + amplitude sin(frequency t + phase)`
    (`swing_ball`): hanging at the bottom, swinging ±57° at 2 rad/s."""
    return {
        "offset": Parameter(-math.pi / 2, "θ(t) = offset + amplitude sin(frequency t + phase)"),
        "amplitude": Parameter(1.0, "swing amplitude [rad]"),
        "frequency": Parameter(2.0, "swing angular frequency [rad/s]"),
        "phase": Parameter(0.0, "swing phase [rad]"),
    }


def inertia_matrix(p):
    """The shell's `(3, 3)` inertia (`base.inertia_matrix`) in the default float."""
    return base.inertia_matrix(p, dtype=float)


def vector(p, prefix):
    """The `(3,)` vector of the parameters `prefix1`, `prefix2`, `prefix3` in the default
    float."""
    return base.vector(p, prefix, dtype=float)


# --- the ball --------------------------------------------------------------------------------


def ball(p, masses, rails, control) -> RollingBall:
    """The `RollingBall` of the shell parameters in `p` with `masses` on `rails`, moved by
    `control`."""
    return RollingBall(
        radius=floats(p["radius"]),
        mass=floats(p["m0"]),
        inertia=inertia_matrix(p),
        chi0=vector(p, "chi0"),
        masses=floats(masses),
        rails=tuple(rails),
        control=control,
        gravity=floats(p["gravity"]),
    )


def swing_ball(p, plane) -> RollingBall:
    """The ball of `p` with one mass `m1` on a circle of radius `rail_radius` about the centre,
    in the vertical body plane through the body vector `plane` and e3,
    `ζ(θ) = rail_radius (cos θ plane + sin θ e3)`, swung as `swing_parameters` says."""
    rail = CircleRail(floats([0.0, 0.0, 0.0]), floats(p["rail_radius"]), plane, floats([0, 0, 1.0]))
    control = SinusoidControl(
        offset=floats([p["offset"]]),
        amplitude=floats([p["amplitude"]]),
        frequency=floats([p["frequency"]]),
        phase=floats([p["phase"]]),
    )
    return ball(p, [p["m1"]], [rail], control)


# --- observables -----------------------------------------------------------------------------


def contact_summary(N, mu):
    """`min_normal_force`, `max_friction_needed` over the saved times (last axis)."""
    return {"min_normal_force": N.min(axis=-1), "max_friction_needed": mu.max(axis=-1)}


def ball_pointwise(model: RollingBall, params):
    """`normal_force` and `friction_needed` (`RollingBall.contact_observables`) at a state."""

    def contact(t, s):
        obs = model.contact_observables(t, s)
        return {k: obs[k] for k in ("normal_force", "friction_needed")}

    return contact


def ball_observables(model: RollingBall, ts, states, params, values):
    """The contact observables over the saved path (`values` from `ball_pointwise`)."""
    return contact_summary(values["normal_force"], values["friction_needed"])
