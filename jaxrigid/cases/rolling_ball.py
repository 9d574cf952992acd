"""The rolling ball actuated by internal point masses (Putkaradze & Rogers 2018; issue 13,
"Named cases"), its planar limit (the rolling disk, App. C) and Suslov's problem (App. A.2):
seven cases, family `"rolling_ball"`, default method `RKMK4` (`quaternion_rkmk`), h = 0.01.

The paper survives only as a preview (abstract, references, appendices): its numerical sections
and their data are missing, so apart from `rolling-ball-two-circles` (the issue's contract,
`jaxrigid.models.rolling_ball.two_circles_ball`) the defaults are jaxrigid's own choices,
documented with each case. The ball cases share the two-circles shell: `r = 1`, `m₀ = 1`,
`𝕀 = diag(0.4, 0.45, 0.5)` about the shell's centre of mass, `χ₀ = (0, 0, −0.1)`, `g = 9.81`;
each starts with `Λ = 1` and the contact point at the origin.

**Reports.** Every case reports the total energy as the invariant `energy` (kinetic plus
potential; conserved only by the passive ball and by Suslov's body — elsewhere the actuators
work on the ball). The ball cases' `final_state` is `(q, Omega, x)`: `q` the attitude
quaternion (w, x, y, z), body → space, `Omega` the body angular velocity, `x` the geometric
centre (three components, `x₃ = r`; `x₁, x₂` the contact point's); the passive ball's also has
the rail coordinates `theta` and rates `theta_dot`. Their observables: `min_normal_force`
(`N = e₃·F_contact`, the minimum over the saved trajectory; rolling needs `N > 0`) and
`max_friction_needed` (the maximum of `|F_t|/N`, the friction coefficient rolling without
slipping needs; `null` in the JSON where `N ≤ 0`), one per ensemble member.

**Two cases are not the ball.** `rolling-disk` is App. C's planar disk, integrated as the 3-D
`RollingBall` in the disk's configuration (χ₀ and the mass in the body (e₁, e₃) plane, `𝕀`
with `𝕀₁₂ = 𝕀₂₃ = 0`, `Ω ∥ e₂`), which stays planar and equals `RollingDisk` restricted to the
plane (checked in `tests/test_rolling_ball_cases.py`); no registered method integrates the
scalar `RollingDisk` (it has no attitude quaternion), so its natural state `(φ, φ̇, x)` is
reported as the observable `disk_final_state` (`φ` from `Γ = (sin φ, 0, cos φ)`, unwrapped
along the saved path; `φ̇ = −Ω₂`; `x = x₁`). `suslov` has no contact and no position:
`final_state` is `(q, Omega)`, and instead of the contact observables it reports
`max_constraint_torque`, the largest `|λξ|` of (A.36), the torque the constraint exerts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import Check, is_concrete
from ..controls import AbstractControl, SinusoidControl
from ..models.rolling_ball import (
    TWO_CIRCLES_T_END,
    RollingBall,
    rolling_ball_state,
    two_circles_ball,
)
from ..models.rolling_ball_unreduced import RollingBallUnreduced, RollingBallUnreducedState
from ..models.suslov import Suslov, SuslovState
from ..rails import CircleRail, FigureEightRail, SegmentRail
from .base import Case, Parameter, builds

__all__ = ["CASES", "LinearControl", "ModelPerturbedCase"]

_REF = "Putkaradze & Rogers, Meccanica 53 (2018)"
_NOTE = "the model note shared/models/rolling-ball.md"
FAMILY = "rolling_ball"
METHOD = "RKMK4"
DT = 0.01


@dataclasses.dataclass(frozen=True)
class ModelPerturbedCase(Case):
    """A case whose ensemble perturbation needs the model (Suslov's `ξ`):
    `perturb_with_model(model, state0, rng, spread, n)`, which `jaxrigid run` prefers to
    `perturb` when given."""

    perturb_with_model: Callable | None = None


class LinearControl(AbstractControl):
    """`θᵢ(t) = startᵢ + rateᵢ t`: masses running round their rails at a steady rate.
    **Fields:** `start`, `rate`, each `(n,)`."""

    start: jax.Array
    rate: jax.Array

    def __call__(self, t):
        return self.start + self.rate * t

    @property
    def size(self) -> int:
        return jnp.shape(self.start)[-1]

    def checks(self):
        ok = jnp.all(jnp.isfinite(self.start), -1) & jnp.all(jnp.isfinite(self.rate), -1)
        return [Check(~ok, "LinearControl parameters contain NaN or inf")]


# --- parameters ------------------------------------------------------------------------------


def _f(x):
    return jnp.asarray(x, dtype=float)


def _shell_params(inertia=(0.4, 0.45, 0.5), chi0=(0.0, 0.0, -0.1), what="shell"):
    """The ball's shell (the two-circles defaults): radius, mass, inertia, χ₀, g."""
    return {
        "radius": Parameter(1.0, "ball radius r"),
        "m0": Parameter(1.0, f"{what} mass m0"),
        "I11": Parameter(inertia[0], f"{what} inertia about its centre of mass, entry 11"),
        "I22": Parameter(inertia[1], f"{what} inertia, entry 22"),
        "I33": Parameter(inertia[2], f"{what} inertia, entry 33"),
        "I12": Parameter(0.0, f"{what} inertia, entry 12 (= 21)"),
        "I13": Parameter(0.0, f"{what} inertia, entry 13 (= 31)"),
        "I23": Parameter(0.0, f"{what} inertia, entry 23 (= 32)"),
        "chi01": Parameter(chi0[0], f"{what}'s centre of mass from the centre, body e1"),
        "chi02": Parameter(chi0[1], f"{what}'s centre of mass from the centre, body e2"),
        "chi03": Parameter(chi0[2], f"{what}'s centre of mass from the centre, body e3"),
        "gravity": Parameter(9.81, "gravitational acceleration g (along −e3)"),
    }


def _omega_params(omega=(0.0, 0.0, 0.0)):
    return {
        f"Omega{i + 1}": Parameter(omega[i], f"initial body angular velocity, component {i + 1}")
        for i in range(3)
    }


def _inertia(p):
    return _f(
        [
            [p["I11"], p["I12"], p["I13"]],
            [p["I12"], p["I22"], p["I23"]],
            [p["I13"], p["I23"], p["I33"]],
        ]
    )


def _vec(p, prefix):
    return _f([p[prefix + "1"], p[prefix + "2"], p[prefix + "3"]])


def _ball(p, masses, rails, control):
    return RollingBall(
        radius=_f(p["radius"]),
        mass=_f(p["m0"]),
        inertia=_inertia(p),
        chi0=_vec(p, "chi0"),
        masses=_f(masses),
        rails=tuple(rails),
        control=control,
        gravity=_f(p["gravity"]),
    )


def _horizontal(azimuth):
    """The body unit vector at angle `azimuth` from e1 in the body (e1, e2) plane."""
    return _f([jnp.cos(azimuth), jnp.sin(azimuth), 0.0])


# --- builders --------------------------------------------------------------------------------


@builds(RollingBall)
def _build_two_circles(p):
    model, state0 = two_circles_ball(
        radius=p["radius"],
        mass=p["m0"],
        inertia=_inertia(p),
        chi0=_vec(p, "chi0"),
        masses=(p["m1"], p["m2"]),
        rail_radius=p["rail_radius"],
        offset=p["offset"],
        amplitude=p["amplitude"],
        frequency=p["frequency"],
        phases=(p["phase1"], p["phase2"]),
        gravity=p["gravity"],
    )
    return model, state0._replace(Omega=_vec(p, "Omega"))


@builds(RollingBall)
def _build_pendulum(p):
    rail = CircleRail(
        _f([0.0, 0.0, 0.0]), _f(p["rail_radius"]), _horizontal(p["azimuth"]), _f([0, 0, 1.0])
    )
    control = SinusoidControl(
        offset=_f([p["offset"]]),
        amplitude=_f([p["amplitude"]]),
        frequency=_f([p["frequency"]]),
        phase=_f([p["phase"]]),
    )
    model = _ball(p, [p["m1"]], [rail], control)
    return model, rolling_ball_state(model, Omega=_vec(p, "Omega"))


@builds(RollingBall)
def _build_linear_rail(p):
    d = p["half_length"] * _horizontal(p["azimuth"])
    control = SinusoidControl(
        offset=_f([0.5]),
        amplitude=_f([0.5 * p["amplitude"]]),
        frequency=_f([p["frequency"]]),
        phase=_f([p["phase"]]),
    )
    model = _ball(p, [p["m1"]], [SegmentRail(-d, d)], control)
    return model, rolling_ball_state(model, Omega=_vec(p, "Omega"))


@builds(RollingBall)
def _build_figure_eight(p):
    rail = FigureEightRail(
        _f([0.0, 0.0, -p["depth"]]),
        _f(p["lobe_length"]),
        _f(p["width"]),
        _f([1.0, 0.0, 0.0]),
        _f([0.0, 1.0, 0.0]),
    )
    control = LinearControl(_f([p["theta0"]]), _f([p["speed"]]))
    model = _ball(p, [p["m1"]], [rail], control)
    return model, rolling_ball_state(model, Omega=_vec(p, "Omega"))


def _two_rails(p):
    zero, rho = _f([0.0, 0.0, 0.0]), _f(p["rail_radius"])
    return (
        CircleRail(zero, rho, _f([1.0, 0.0, 0.0]), _f([0.0, 0.0, 1.0])),
        CircleRail(zero, rho, _f([0.0, 1.0, 0.0]), _f([0.0, 0.0, 1.0])),
    )


@builds(RollingBallUnreduced, rails=(CircleRail, CircleRail), control=None, actuation=None)
def _build_passive(p):
    model = RollingBallUnreduced(
        radius=_f(p["radius"]),
        mass=_f(p["m0"]),
        inertia=_inertia(p),
        chi0=_vec(p, "chi0"),
        masses=_f([p["m1"], p["m2"]]),
        rails=_two_rails(p),
        control=None,  # dynamic masses
        gravity=_f(p["gravity"]),
        external_force=_f([0.0, 0.0, 0.0]),
        actuation=None,  # passive: u = 0
    )
    state0 = RollingBallUnreducedState(
        q=_f([1.0, 0.0, 0.0, 0.0]),
        Omega=_vec(p, "Omega"),
        x=_f([0.0, 0.0, p["radius"]]),
        theta=_f([p["theta1"], p["theta2"]]),
        theta_dot=_f([p["theta_dot1"], p["theta_dot2"]]),
    )
    return model, state0


@builds(RollingBall)
def _build_disk(p):
    d2 = p["d2"]
    p3 = {  # a thin disk: in-plane moments d2/2 (perpendicular axes; out-of-plane motion only)
        **p,
        "I11": 0.5 * d2,
        "I22": d2,
        "I33": 0.5 * d2,
        "I12": 0.0,
        "I13": 0.0,
        "I23": 0.0,
        "chi02": 0.0,
    }
    rail = CircleRail(_f([0.0, 0.0, 0.0]), _f(p["rail_radius"]), _f([1, 0, 0.0]), _f([0, 0, 1.0]))
    control = SinusoidControl(
        offset=_f([p["offset"]]),
        amplitude=_f([p["amplitude"]]),
        frequency=_f([p["frequency"]]),
        phase=_f([p["phase"]]),
    )
    model = _ball(p3, [p["m1"]], [rail], control)
    return model, rolling_ball_state(model, Omega=_f([0.0, -p["phi_dot0"], 0.0]))


@builds(Suslov)
def _build_suslov(p):
    """Concrete `ξ = 0`: `ValueError`; traced, `Suslov.parameter_checks` refuses it."""
    xi = _vec(p, "xi")
    if is_concrete(xi) and not float(jnp.linalg.norm(xi)) > 0:
        raise ValueError("xi must be nonzero")
    Omega = _vec(p, "Omega")
    Omega = Omega - (jnp.dot(Omega, xi) / jnp.dot(xi, xi)) * xi  # onto ξ⊥: admissible
    return Suslov(_inertia(p), xi), SuslovState(_f([1.0, 0.0, 0.0, 0.0]), Omega)


# --- ensembles -------------------------------------------------------------------------------


def _noise(rng: np.random.Generator, n: int, k: int) -> jax.Array:
    noise = rng.standard_normal((n, k))
    noise[0] = 0.0  # member 0: the case itself
    return jnp.asarray(noise)


def _members(state, n: int, **replaced):
    """`n` copies of `state` (leaves broadcast to a leading axis), with `replaced` fields."""
    copies = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x)), state)
    return copies._replace(**replaced)


def perturb_omega(state, rng: np.random.Generator, spread: float, n: int):
    """`n` copies whose initial `Ω` has `spread·N(0, 1)` rad/s added to each component (the
    rolling constraint does not restrict `Ω`; `q`, `x` and any rail coordinates are kept);
    member 0 is the unperturbed case."""
    Omega = state.Omega[None, :] + spread * _noise(rng, n, 3)
    return _members(state, n, Omega=Omega)


def perturb_roll_rate(state, rng: np.random.Generator, spread: float, n: int):
    """The disk: `spread·N(0, 1)` rad/s added to `φ̇ = −Ω₂` only (the motion stays planar);
    member 0 is the unperturbed case."""
    e2 = jnp.asarray([0.0, 1.0, 0.0], state.Omega.dtype)
    Omega = state.Omega[None, :] - spread * _noise(rng, n, 1) * e2[None, :]
    return _members(state, n, Omega=Omega)


def perturb_suslov(model: Suslov, state, rng: np.random.Generator, spread: float, n: int):
    """Suslov: `spread·N(0, 1)` rad/s added to each component of `Ω`, then projected onto
    `ξ⊥` (admissible: `⟨Ω, ξ⟩ = 0`); member 0 is the unperturbed case."""
    xi = model.constraint_vector(jnp.zeros((), state.Omega.dtype))[0]
    Omega = state.Omega[None, :] + spread * _noise(rng, n, 3)
    Omega = Omega - (Omega @ xi / jnp.dot(xi, xi))[:, None] * xi[None, :]
    return _members(state, n, Omega=Omega)


def perturb_suslov_scale(state, rng: np.random.Generator, spread: float, n: int):
    """Suslov without its model: `Ω` scaled by `1 + spread·N(0, 1)` (admissible for any `ξ`);
    `jaxrigid run` uses `perturb_suslov`, which knows `ξ`."""
    Omega = state.Omega[None, :] * (1.0 + spread * _noise(rng, n, 1))
    return _members(state, n, Omega=Omega)


# --- observables -----------------------------------------------------------------------------


def along(fn, model, ts, states):
    """`fn(t, state)` (a pytree of arrays, one member) at every saved state: leaves
    `(*ensemble, n_save, ...)`."""
    ndims = model.state_event_ndims()
    first, nd0 = jax.tree_util.tree_leaves(states)[0], jax.tree_util.tree_leaves(ndims)[0]
    batch = np.shape(first)[: np.ndim(first) - nd0]  # (*ensemble, n_save)
    flat = jax.tree_util.tree_map(
        lambda x, e: jnp.reshape(jnp.asarray(x), (-1,) + np.shape(x)[np.ndim(x) - e :]),
        states,
        ndims,
    )
    t = jnp.reshape(jnp.broadcast_to(jnp.asarray(ts), batch), (-1,))
    out = jax.jit(jax.vmap(fn))(t, flat)
    return jax.tree_util.tree_map(lambda y: np.asarray(y).reshape(batch + y.shape[1:]), out)


def _contact_summary(N, mu):
    """`min_normal_force`, `max_friction_needed` over the saved times (last axis)."""
    return {"min_normal_force": N.min(axis=-1), "max_friction_needed": mu.max(axis=-1)}


def ball_observables(model: RollingBall, ts, states, params):
    """The contact observables of `RollingBall.contact_observables` over the saved path."""
    obs = along(
        lambda t, s: {
            k: model.contact_observables(t, s)[k] for k in ("normal_force", "friction_needed")
        },
        model,
        ts,
        states,
    )
    return _contact_summary(obs["normal_force"], obs["friction_needed"])


def unreduced_observables(model: RollingBallUnreduced, ts, states, params):
    """The contact force of the unreduced ball (its rolling multiplier) over the saved path:
    `N = F₃`, `|F_t|/N` (`inf` where `N ≤ 0`)."""
    F = along(model.contact_force, model, ts, states)
    N, ft = F[..., 2], np.hypot(F[..., 0], F[..., 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.where(N > 0, ft / np.where(N > 0, N, 1.0), np.inf)
    return _contact_summary(N, mu)


def disk_observables(model: RollingBall, ts, states, params):
    """The ball's contact observables and the disk's final `(φ, φ̇, x)` (module docstring)."""
    q = np.asarray(states.q)
    w, a, b, c = (q[..., i] for i in range(4))
    gamma1, gamma3 = 2 * (a * c - w * b), w * w - a * a - b * b + c * c
    phi = np.unwrap(np.arctan2(gamma1, gamma3), axis=-1)
    final = {
        "phi": phi[..., -1],
        "phi_dot": -np.asarray(states.Omega)[..., -1, 1],
        "x": np.asarray(states.x)[..., -1, 0],
    }
    return {**ball_observables(model, ts, states, params), "disk_final_state": final}


def suslov_observables(model: Suslov, ts, states, params):
    """`max_constraint_torque`: the largest `|λ ξ|` of (A.36) over the saved path."""

    def torque(t, s):
        xi = model.constraint_vector(t)[0]
        return jnp.abs(model.multiplier(t, s.Omega)) * jnp.linalg.norm(xi)

    return {"max_constraint_torque": along(torque, model, ts, states).max(axis=-1)}


# --- the cases -------------------------------------------------------------------------------


def _common(**kw) -> dict[str, Any]:
    return dict(family=FAMILY, default_method=METHOD, default_dt=DT, **kw)


_BALL_REPORT = (
    " Reports: invariant energy; final_state q (w, x, y, z), Omega, x (x3 = r); observables "
    "min_normal_force, max_friction_needed."
)
_SHELL = (
    "The shell of rolling-ball-two-circles (r = 1, m0 = 1, I = diag(0.4, 0.45, 0.5), "
    "chi0 = (0, 0, −0.1), g = 9.81); Λ(0) = 1, contact point at the origin."
)

CASES = [
    Case(
        name="rolling-ball-pendulum",
        title="Rolling ball driven by one mass swinging like a pendulum",
        reference=f"{_REF}, (B.8) (the abstract's 'swinging pendula'); {_NOTE}",
        description=_SHELL + " One mass m1 = 0.5 on a circle of radius 0.5 about the centre "
        "in the vertical body plane through e3 and (cos a, sin a, 0), a = azimuth = 0 (the "
        "x–z plane): zeta(θ) = 0.5(cos θ (cos a, sin a, 0) + sin θ e3), prescribed "
        "θ(t) = −π/2 + 1.0 sin(2 t) (hanging at the bottom, swinging ±57°); starts at rest. "
        "With a = 0 the ball rocks back and forth along x1 (planar); another azimuth couples "
        "the unequal inertias into 3-D motion. h = 0.01, t_end = 10." + _BALL_REPORT,
        **_common(default_t_end=10.0),
        parameters={
            **_shell_params(),
            "m1": Parameter(0.5, "the swinging mass"),
            "rail_radius": Parameter(0.5, "radius of its circle (centred at the centre)"),
            "azimuth": Parameter(0.0, "the swing plane's angle from body e1 about e3 [rad]"),
            "offset": Parameter(-math.pi / 2, "θ(t) = offset + amplitude sin(frequency t + phase)"),
            "amplitude": Parameter(1.0, "swing amplitude [rad]"),
            "frequency": Parameter(2.0, "swing angular frequency [rad/s]"),
            "phase": Parameter(0.0, "swing phase [rad]"),
            **_omega_params(),
        },
        build=_build_pendulum,
        perturb=perturb_omega,
        observables=ball_observables,
    ),
    Case(
        name="rolling-ball-two-circles",
        title="Rolling ball, two masses swinging on circles (issue 13's contract case)",
        reference=f"{_REF}, (B.8); {_NOTE}; jaxrigid.models.rolling_ball.two_circles_ball",
        description="r = 1; shell m0 = 1, I = diag(0.4, 0.45, 0.5) about its centre of mass, "
        "chi0 = (0, 0, −0.1); g = 9.81, no external force; m1 = m2 = 0.25 on circles of "
        "radius 0.5 about the centre, zeta1(θ) = 0.5(cos θ, 0, sin θ) (body x–z plane), "
        "zeta2(θ) = 0.5(0, cos θ, sin θ) (body y–z plane); θi(t) = −π/2 + 0.8 sin(1.5 t + φi), "
        "φ = (0, π/2); at rest, Λ = 1, contact point at the origin; t_end = 10. These defaults "
        "are a contract (exactly two_circles_ball()); the actuators do work, so energy "
        "changes." + _BALL_REPORT,
        **_common(default_t_end=TWO_CIRCLES_T_END),
        parameters={
            **_shell_params(),
            "m1": Parameter(0.25, "mass 1 (circle in the body x–z plane)"),
            "m2": Parameter(0.25, "mass 2 (circle in the body y–z plane)"),
            "rail_radius": Parameter(0.5, "radius of both circles (centred at the centre)"),
            "offset": Parameter(-math.pi / 2, "θi(t) = offset + amplitude sin(frequency t + φi)"),
            "amplitude": Parameter(0.8, "amplitude of θi(t) [rad]"),
            "frequency": Parameter(1.5, "angular frequency of θi(t) [rad/s]"),
            "phase1": Parameter(0.0, "phase φ1 of mass 1 [rad]"),
            "phase2": Parameter(math.pi / 2, "phase φ2 of mass 2 [rad]"),
            **_omega_params(),
        },
        build=_build_two_circles,
        perturb=perturb_omega,
        observables=ball_observables,
    ),
    Case(
        name="rolling-ball-linear-rail",
        title="Rolling ball driven by a mass sliding on a straight rail through its centre",
        reference=f"{_REF}, (B.8) (the abstract's 'magnets sliding inside linear tubes'); {_NOTE}",
        description=_SHELL + " One mass m1 = 0.5 on the horizontal body segment from −L d to "
        "L d through the centre, d = (cos a, sin a, 0), L = half_length = 0.6, a = azimuth = 0; "
        "zeta(θ) = −L d + θ 2L d, θ(t) = 0.5 + 0.5 amplitude sin(frequency t + phase) with "
        "amplitude = 0.8 (of the half-length: the mass moves ±0.48 about the centre, inside "
        "the rail's θ ∈ [0, 1] for amplitude ≤ 1) and frequency = 1.5 rad/s; starts at rest. "
        "h = 0.01, t_end = 10." + _BALL_REPORT,
        **_common(default_t_end=10.0),
        parameters={
            **_shell_params(),
            "m1": Parameter(0.5, "the sliding mass"),
            "half_length": Parameter(0.6, "half length L of the segment (< r)"),
            "azimuth": Parameter(0.0, "the segment's angle from body e1 about e3 [rad]"),
            "amplitude": Parameter(0.8, "stroke as a fraction of the half length (≤ 1)"),
            "frequency": Parameter(1.5, "angular frequency of the stroke [rad/s]"),
            "phase": Parameter(0.0, "phase of the stroke [rad]"),
            **_omega_params(),
        },
        build=_build_linear_rail,
        perturb=perturb_omega,
        observables=ball_observables,
    ),
    Case(
        name="rolling-ball-figure-eight",
        title="Rolling ball driven by a mass running round a figure-eight rail",
        reference=f"{_REF}, (B.8) (the abstract's 'figure eights'); {_NOTE}",
        description=_SHELL + " One mass m1 = 0.5 on the horizontal lemniscate of Gerono "
        "zeta(θ) = (0, 0, −depth) + lobe_length sin θ e1 + width sin θ cos θ e2 (depth 0.3 "
        "below the centre, lobes reaching ±0.6 along e1, half-width 0.4), run round at a "
        "steady rate θ(t) = theta0 + speed t, theta0 = 0, speed = 2π/5 rad/s (one loop of "
        "the eight in 5 s, two by t_end = 10); starts at rest. h = 0.01." + _BALL_REPORT,
        **_common(default_t_end=10.0),
        parameters={
            **_shell_params(),
            "m1": Parameter(0.5, "the running mass"),
            "depth": Parameter(0.3, "the eight's crossing point below the centre (body −e3)"),
            "lobe_length": Parameter(0.6, "the lobes reach ±lobe_length along body e1"),
            "width": Parameter(0.8, "twice the lobes' half-width along body e2"),
            "theta0": Parameter(0.0, "θ(0) [rad]"),
            "speed": Parameter(2 * math.pi / 5, "dθ/dt [rad/s]"),
            **_omega_params(),
        },
        build=_build_figure_eight,
        perturb=perturb_omega,
        observables=ball_observables,
    ),
    Case(
        name="rolling-ball-passive",
        title="Rolling ball with two masses free on circular rails (u = 0): energy conserved",
        reference=f"{_REF}, (A.32)–(A.33), dynamic masses with u = 0; {_NOTE}",
        description=_SHELL + " The two-circles rails (m1 = m2 = 0.25 on circles of radius "
        "0.5 in the body x–z and y–z planes) with the masses free to slide (no actuator, "
        "u = 0): RollingBallUnreduced with control=None, the rail coordinates θ part of the "
        "state. Released from θ = (−π/2 + 0.6, −π/2 − 0.4) at rest on the rails, the ball "
        "spinning at Ω = (0.5, 0, 2) rad/s. Energy is conserved by the flow; RKMK4 at "
        "h = 0.01 keeps it to 2.2e-9 relative over t_end = 10 (its error: measured O(h⁵) "
        "here, 6.9e-8 at h = 0.02). Reports as the ball's, with "
        "final_state also theta, theta_dot.",
        **_common(default_t_end=10.0),
        parameters={
            **_shell_params(),
            "m1": Parameter(0.25, "mass 1 (circle in the body x–z plane)"),
            "m2": Parameter(0.25, "mass 2 (circle in the body y–z plane)"),
            "rail_radius": Parameter(0.5, "radius of both circles (centred at the centre)"),
            "theta1": Parameter(-math.pi / 2 + 0.6, "initial rail coordinate of mass 1 [rad]"),
            "theta2": Parameter(-math.pi / 2 - 0.4, "initial rail coordinate of mass 2 [rad]"),
            "theta_dot1": Parameter(0.0, "initial rate of mass 1 on its rail [rad/s]"),
            "theta_dot2": Parameter(0.0, "initial rate of mass 2 on its rail [rad/s]"),
            **_omega_params((0.5, 0.0, 2.0)),
        },
        build=_build_passive,
        perturb=perturb_omega,
        observables=unreduced_observables,
    ),
    Case(
        name="rolling-disk",
        title="Rolling disk with a pendulum mass (the planar limit, App. C)",
        reference=f"{_REF}, App. C, (C.1)–(C.5); {_NOTE}",
        description="A uniform disk of radius r = 1, mass m0 = 1, moment d2 = m0 r²/2 = 0.5 "
        "about its axis (in-plane moments d2/2, a thin disk's), centre of mass at the centre "
        "(chi01 = chi03 = 0), rolling in the vertical plane, with a mass m1 = 0.5 on a "
        "pendulum circle of radius 0.5 about the centre in the disk's plane, swung as "
        "θ(t) = −π/2 + 1.0 sin(2 t); starts at rest (phi_dot0 = 0). Integrated as the 3-D "
        "RollingBall in the disk's configuration (it stays planar; equal to RollingDisk "
        "restricted to the plane), so final_state is the ball's (q, Omega, x), with "
        "Omega = −φ̇ e2 and x = (x, 0, r); the disk's own state (φ, φ̇, x), Γ = (sin φ, 0, "
        "cos φ), is the observable disk_final_state. Also min_normal_force, "
        "max_friction_needed; invariant energy. h = 0.01, t_end = 10.",
        **_common(default_t_end=10.0),
        parameters={
            "radius": Parameter(1.0, "disk radius r"),
            "m0": Parameter(1.0, "disk mass m0"),
            "d2": Parameter(0.5, "moment about the rolling axis through its centre of mass"),
            "chi01": Parameter(0.0, "disk's centre of mass from the centre, body e1"),
            "chi03": Parameter(0.0, "disk's centre of mass from the centre, body e3"),
            "gravity": Parameter(9.81, "gravitational acceleration g (along −e3)"),
            "m1": Parameter(0.5, "the pendulum mass"),
            "rail_radius": Parameter(0.5, "radius of its circle (centred at the centre)"),
            "offset": Parameter(-math.pi / 2, "θ(t) = offset + amplitude sin(frequency t + phase)"),
            "amplitude": Parameter(1.0, "swing amplitude [rad]"),
            "frequency": Parameter(2.0, "swing angular frequency [rad/s]"),
            "phase": Parameter(0.0, "swing phase [rad]"),
            "phi_dot0": Parameter(0.0, "initial rolling rate φ̇ (Ω = −φ̇ e2) [rad/s]"),
        },
        build=_build_disk,
        perturb=perturb_roll_rate,
        observables=disk_observables,
    ),
    ModelPerturbedCase(
        name="suslov",
        title="Suslov's problem: a rigid body with ⟨Ω, ξ⟩ = 0, constant ξ (App. A.2)",
        reference=f"{_REF}, App. A.2, (A.34)–(A.38); Suslov (1902)",
        description="A body about a fixed point with I = diag(1, 2, 3) and the body vector "
        "ξ = (0, 0.6, 0.8) (not an eigenvector of I, so the motion is not a steady "
        "rotation), Ω(0) = (1, 0.8, −0.6) (admissible: ⟨Ω, ξ⟩ = 0; a given Omega is "
        "projected onto ξ⊥), Λ(0) = 1. The energy ½Ω·IΩ is conserved and ⟨Ω, ξ⟩ kept. No "
        "contact and no position: final_state is (q, Omega); invariants energy, "
        "constraint, quaternion_norm_error; instead of the contact observables, "
        "max_constraint_torque (max |λξ| of (A.36)). Ensembles perturb Ω within ξ⊥. "
        "h = 0.01, t_end = 10.",
        **_common(default_t_end=10.0),
        parameters={
            "I11": Parameter(1.0, "body inertia, entry 11"),
            "I22": Parameter(2.0, "body inertia, entry 22"),
            "I33": Parameter(3.0, "body inertia, entry 33"),
            "I12": Parameter(0.0, "body inertia, entry 12 (= 21)"),
            "I13": Parameter(0.0, "body inertia, entry 13 (= 31)"),
            "I23": Parameter(0.0, "body inertia, entry 23 (= 32)"),
            "xi1": Parameter(0.0, "constraint vector ξ (body), component 1"),
            "xi2": Parameter(0.6, "constraint vector ξ (body), component 2"),
            "xi3": Parameter(0.8, "constraint vector ξ (body), component 3"),
            **_omega_params((1.0, 0.8, -0.6)),
        },
        build=_build_suslov,
        perturb=perturb_suslov_scale,
        perturb_with_model=perturb_suslov,
        observables=suslov_observables,
    ),
]
