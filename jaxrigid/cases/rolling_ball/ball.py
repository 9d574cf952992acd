"""The five cases of the ball itself: a ball actuated by internal point masses (Putkaradze &
Rogers 2018, (B.8); the passive ball (A.32)–(A.33)). They share the shell of
`rolling-ball-two-circles` (`common.shell_parameters`), start with `Λ = 1` and the contact
point at the origin, and perturb the initial `Ω` in ensembles (`perturb_omega`).

Each case is a builder, `params -> (model, state0)`, and a row of `CASES` (`_ball_case`):
its name, title, where in the paper, description and own parameters, which stand between the
shell's and the initial `Ω`'s.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ...models.rolling_ball import (
    TWO_CIRCLES_T_END,
    RollingBall,
    rolling_ball_state,
    two_circles_ball,
)
from ...models.rolling_ball.controls import LinearControl, SinusoidControl
from ...models.rolling_ball.rails import CircleRail, FigureEightRail, SegmentRail
from ...models.rolling_ball.unreduced import RollingBallUnreduced, RollingBallUnreducedState
from ..base import Case, Parameter, builds, ensemble_members, ensemble_noise
from .common import (
    NOTE,
    REFERENCE,
    ball,
    ball_observables,
    ball_pointwise,
    contact_summary,
    family_fields,
    floats,
    inertia_matrix,
    omega_parameters,
    shell_parameters,
    swing_ball,
    swing_parameters,
    vector,
)


def _horizontal(azimuth):
    """The body unit vector at angle `azimuth` from e1 in the body (e1, e2) plane."""
    return floats([jnp.cos(azimuth), jnp.sin(azimuth), 0.0])


def _two_circles_parameters() -> dict[str, Parameter]:
    """The two masses on the two-circles rails (`_two_rails`)."""
    return {
        "m1": Parameter(0.25, "mass 1 (circle in the body x–z plane)"),
        "m2": Parameter(0.25, "mass 2 (circle in the body y–z plane)"),
        "rail_radius": Parameter(0.5, "radius of both circles (centred at the centre)"),
    }


def _two_rails(p):
    """Circles of radius `rail_radius` about the centre in the body x–z and y–z planes."""
    zero, rho = floats([0.0, 0.0, 0.0]), floats(p["rail_radius"])
    return (
        CircleRail(zero, rho, floats([1.0, 0.0, 0.0]), floats([0.0, 0.0, 1.0])),
        CircleRail(zero, rho, floats([0.0, 1.0, 0.0]), floats([0.0, 0.0, 1.0])),
    )


# --- builders --------------------------------------------------------------------------------


@builds(RollingBall)
def _build_two_circles(p):
    model, state0 = two_circles_ball(
        radius=p["radius"],
        mass=p["m0"],
        inertia=inertia_matrix(p),
        chi0=vector(p, "chi0"),
        masses=(p["m1"], p["m2"]),
        rail_radius=p["rail_radius"],
        offset=p["offset"],
        amplitude=p["amplitude"],
        frequency=p["frequency"],
        phases=(p["phase1"], p["phase2"]),
        gravity=p["gravity"],
    )
    return model, state0._replace(Omega=vector(p, "Omega"))


@builds(RollingBall)
def _build_pendulum(p):
    model = swing_ball(p, _horizontal(p["azimuth"]))
    return model, rolling_ball_state(model, Omega=vector(p, "Omega"))


@builds(RollingBall)
def _build_linear_rail(p):
    d = p["half_length"] * _horizontal(p["azimuth"])
    control = SinusoidControl(
        offset=floats([0.5]),
        amplitude=floats([0.5 * p["amplitude"]]),
        frequency=floats([p["frequency"]]),
        phase=floats([p["phase"]]),
    )
    model = ball(p, [p["m1"]], [SegmentRail(-d, d)], control)
    return model, rolling_ball_state(model, Omega=vector(p, "Omega"))


@builds(RollingBall)
def _build_figure_eight(p):
    rail = FigureEightRail(
        floats([0.0, 0.0, -p["depth"]]),
        floats(p["lobe_length"]),
        floats(p["width"]),
        floats([1.0, 0.0, 0.0]),
        floats([0.0, 1.0, 0.0]),
    )
    control = LinearControl(floats([p["theta0"]]), floats([p["speed"]]))
    model = ball(p, [p["m1"]], [rail], control)
    return model, rolling_ball_state(model, Omega=vector(p, "Omega"))


@builds(RollingBallUnreduced, rails=(CircleRail, CircleRail), control=None, actuation=None)
def _build_passive(p):
    model = RollingBallUnreduced(
        radius=floats(p["radius"]),
        mass=floats(p["m0"]),
        inertia=inertia_matrix(p),
        chi0=vector(p, "chi0"),
        masses=floats([p["m1"], p["m2"]]),
        rails=_two_rails(p),
        control=None,  # dynamic masses
        gravity=floats(p["gravity"]),
        external_force=floats([0.0, 0.0, 0.0]),
        actuation=None,  # passive: u = 0
    )
    state0 = RollingBallUnreducedState(
        q=floats([1.0, 0.0, 0.0, 0.0]),
        Omega=vector(p, "Omega"),
        x=floats([0.0, 0.0, p["radius"]]),
        theta=floats([p["theta1"], p["theta2"]]),
        theta_dot=floats([p["theta_dot1"], p["theta_dot2"]]),
    )
    return model, state0


# --- ensembles and observables ---------------------------------------------------------------


def perturb_omega(state, rng: np.random.Generator, spread: float, n: int):
    """`n` copies whose initial `Ω` has `spread·N(0, 1)` rad/s added to each component (the
    rolling constraint does not restrict `Ω`; `q`, `x` and any rail coordinates are kept);
    member 0 is the unperturbed case."""
    Omega = state.Omega[None, :] + spread * ensemble_noise(rng, n, 3)
    return ensemble_members(state, n, Omega=Omega)


def unreduced_pointwise(model: RollingBallUnreduced, params):
    """The contact force `F` of the unreduced ball (its rolling multiplier) at a state."""
    return lambda t, s: {"contact_force": model.contact_force(t, s)}


def unreduced_observables(model: RollingBallUnreduced, ts, states, params, values):
    """The contact force over the saved path (`values` from `unreduced_pointwise`):
    `N = F₃`, `|F_t|/N` (`inf` where `N ≤ 0`)."""
    F = values["contact_force"]
    N, ft = F[..., 2], np.hypot(F[..., 0], F[..., 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.where(N > 0, ft / np.where(N > 0, N, 1.0), np.inf)
    return contact_summary(N, mu)


# --- the cases -------------------------------------------------------------------------------


def _ball_case(
    name,
    title,
    source,
    description,
    build,
    parameters,
    *,
    omega=(0.0, 0.0, 0.0),
    see="",
    t_end=10.0,
    observables=ball_observables,
    pointwise=ball_pointwise,
) -> Case:
    """A case of the ball: the shell's parameters, then `parameters`, then the initial `Ω`
    (default `omega`); the paper's `source` and the model note as its reference (then `see`);
    the family's method and step, `t_end`; ensembles by `perturb_omega`."""
    return Case(
        name=name,
        title=title,
        reference=f"{REFERENCE}, {source}; {NOTE}" + (f"; {see}" if see else ""),
        description=description,
        **family_fields(t_end),
        parameters={**shell_parameters(), **parameters, **omega_parameters(omega)},
        build=build,
        perturb=perturb_omega,
        observables=observables,
        pointwise=pointwise,
    )


_BALL_REPORT = (
    " Reports: invariants quaternion_norm_error, height_error; observables energy and "
    "actuator_work (the masses work on the ball: E(t) − E(0) = W(t)), min_normal_force, "
    "max_friction_needed; final_state q (w, x, y, z), Omega, x (x3 = r)."
)
_SHELL = (
    "The shell of rolling-ball-two-circles (r = 1, m0 = 1, I = diag(0.4, 0.45, 0.5), "
    "chi0 = (0, 0, −0.1), g = 9.81); Λ(0) = 1, contact point at the origin."
)

CASES = [
    _ball_case(
        "rolling-ball-pendulum",
        "Rolling ball driven by one mass swinging like a pendulum",
        "(B.8) (the abstract's 'swinging pendula')",
        _SHELL + " One mass m1 = 0.5 on a circle of radius 0.5 about the centre "
        "in the vertical body plane through e3 and (cos a, sin a, 0), a = azimuth = 0 (the "
        "x–z plane): zeta(θ) = 0.5(cos θ (cos a, sin a, 0) + sin θ e3), prescribed "
        "θ(t) = −π/2 + 1.0 sin(2 t) (hanging at the bottom, swinging ±57°); starts at rest. "
        "With a = 0 the ball rocks back and forth along x1 (planar); another azimuth couples "
        "the unequal inertias into 3-D motion. h = 0.01, t_end = 10." + _BALL_REPORT,
        _build_pendulum,
        {
            "m1": Parameter(0.5, "the swinging mass"),
            "rail_radius": Parameter(0.5, "radius of its circle (centred at the centre)"),
            "azimuth": Parameter(0.0, "the swing plane's angle from body e1 about e3 [rad]"),
            **swing_parameters(),
        },
    ),
    _ball_case(
        "rolling-ball-two-circles",
        "Rolling ball, two masses swinging on circles (the contract case)",
        "(B.8)",
        "r = 1; shell m0 = 1, I = diag(0.4, 0.45, 0.5) about its centre of mass, "
        "chi0 = (0, 0, −0.1); g = 9.81, no external force; m1 = m2 = 0.25 on circles of "
        "radius 0.5 about the centre, zeta1(θ) = 0.5(cos θ, 0, sin θ) (body x–z plane), "
        "zeta2(θ) = 0.5(0, cos θ, sin θ) (body y–z plane); θi(t) = −π/2 + 0.8 sin(1.5 t + φi), "
        "φ = (0, π/2); at rest, Λ = 1, contact point at the origin; t_end = 10. These defaults "
        "are a contract (exactly two_circles_ball()); the actuators do work, so energy "
        "changes." + _BALL_REPORT,
        _build_two_circles,
        {
            **_two_circles_parameters(),
            "offset": Parameter(-math.pi / 2, "θi(t) = offset + amplitude sin(frequency t + φi)"),
            "amplitude": Parameter(0.8, "amplitude of θi(t) [rad]"),
            "frequency": Parameter(1.5, "angular frequency of θi(t) [rad/s]"),
            "phase1": Parameter(0.0, "phase φ1 of mass 1 [rad]"),
            "phase2": Parameter(math.pi / 2, "phase φ2 of mass 2 [rad]"),
        },
        see="jaxrigid.models.rolling_ball.two_circles_ball",
        t_end=TWO_CIRCLES_T_END,
    ),
    _ball_case(
        "rolling-ball-linear-rail",
        "Rolling ball driven by a mass sliding on a straight rail through its centre",
        "(B.8) (the abstract's 'magnets sliding inside linear tubes')",
        _SHELL + " One mass m1 = 0.5 on the horizontal body segment from −L d to "
        "L d through the centre, d = (cos a, sin a, 0), L = half_length = 0.6, a = azimuth = 0; "
        "zeta(θ) = −L d + θ 2L d, θ(t) = 0.5 + 0.5 amplitude sin(frequency t + phase) with "
        "amplitude = 0.8 (of the half-length: the mass moves ±0.48 about the centre, inside "
        "the rail's θ ∈ [0, 1] for amplitude ≤ 1) and frequency = 1.5 rad/s; starts at rest. "
        "h = 0.01, t_end = 10." + _BALL_REPORT,
        _build_linear_rail,
        {
            "m1": Parameter(0.5, "the sliding mass"),
            "half_length": Parameter(0.6, "half length L of the segment (< r)"),
            "azimuth": Parameter(0.0, "the segment's angle from body e1 about e3 [rad]"),
            "amplitude": Parameter(0.8, "stroke as a fraction of the half length (≤ 1)"),
            "frequency": Parameter(1.5, "angular frequency of the stroke [rad/s]"),
            "phase": Parameter(0.0, "phase of the stroke [rad]"),
        },
    ),
    _ball_case(
        "rolling-ball-figure-eight",
        "Rolling ball driven by a mass running round a figure-eight rail",
        "(B.8) (the abstract's 'figure eights')",
        _SHELL + " One mass m1 = 0.5 on the horizontal lemniscate of Gerono "
        "zeta(θ) = (0, 0, −depth) + lobe_length sin θ e1 + width sin θ cos θ e2 (depth 0.3 "
        "below the centre, lobes reaching ±0.6 along e1, half-width 0.4), run round at a "
        "steady rate θ(t) = theta0 + speed t, theta0 = 0, speed = 2π/5 rad/s (one loop of "
        "the eight in 5 s, two by t_end = 10); starts at rest. h = 0.01." + _BALL_REPORT,
        _build_figure_eight,
        {
            "m1": Parameter(0.5, "the running mass"),
            "depth": Parameter(0.3, "the eight's crossing point below the centre (body −e3)"),
            "lobe_length": Parameter(0.6, "the lobes reach ±lobe_length along body e1"),
            "width": Parameter(0.8, "twice the lobes' half-width along body e2"),
            "theta0": Parameter(0.0, "θ(0) [rad]"),
            "speed": Parameter(2 * math.pi / 5, "dθ/dt [rad/s]"),
        },
    ),
    _ball_case(
        "rolling-ball-passive",
        "Rolling ball with two masses free on circular rails (u = 0): energy conserved",
        "(A.32)–(A.33), dynamic masses with u = 0",
        _SHELL + " The two-circles rails (m1 = m2 = 0.25 on circles of radius "
        "0.5 in the body x–z and y–z planes) with the masses free to slide (no actuator, "
        "u = 0): RollingBallUnreduced with control=None, the rail coordinates θ part of the "
        "state. Released from θ = (−π/2 + 0.6, −π/2 − 0.4) at rest on the rails, the ball "
        "spinning at Ω = (0.5, 0, 2) rad/s. Energy is conserved by the flow; RKMK4 at "
        "h = 0.01 keeps it within 2e-8 relative over t_end = 10, its error falling about as "
        "h⁵ here (tests/test_rolling_ball_cases.py). Reports as the ball's, with "
        "energy an invariant (no actuator work) and final_state also theta, theta_dot.",
        _build_passive,
        {
            **_two_circles_parameters(),
            "theta1": Parameter(-math.pi / 2 + 0.6, "initial rail coordinate of mass 1 [rad]"),
            "theta2": Parameter(-math.pi / 2 - 0.4, "initial rail coordinate of mass 2 [rad]"),
            "theta_dot1": Parameter(0.0, "initial rate of mass 1 on its rail [rad/s]"),
            "theta_dot2": Parameter(0.0, "initial rate of mass 2 on its rail [rad/s]"),
        },
        omega=(0.5, 0.0, 2.0),
        observables=unreduced_observables,
        pointwise=unreduced_pointwise,
    ),
]
