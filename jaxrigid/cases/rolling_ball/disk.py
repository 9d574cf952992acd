"""`rolling-disk`: App. C's planar rolling disk with a pendulum mass (Putkaradze & Rogers
2018, (C.1)–(C.5)), integrated as the 3-D `RollingBall` in the disk's configuration.

χ₀ and the mass lie in the body (e₁, e₃) plane, `𝕀` has `𝕀₁₂ = 𝕀₂₃ = 0`, `Ω ∥ e₂`: the ball
stays planar and equals `RollingDisk` restricted to the plane (checked in
`tests/test_rolling_ball_cases.py`). No registered method integrates the scalar
`RollingDisk` (it has no attitude quaternion), so its natural state `(φ, φ̇, x)` is reported
as the observable `disk_final_state` (`φ` from `Γ = (sin φ, 0, cos φ)`, unwrapped along the
saved path; `φ̇ = −Ω₂`; `x = x₁`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...models.rolling_ball import RollingBall, rolling_ball_state
from ..base import Case, Parameter, builds, ensemble_members, ensemble_noise
from .common import (
    NOTE,
    REFERENCE,
    ball_observables,
    ball_pointwise,
    family_fields,
    floats,
    swing_ball,
    swing_parameters,
)


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
    model = swing_ball(p3, floats([1, 0, 0.0]))  # the pendulum in the disk's plane, body x–z
    return model, rolling_ball_state(model, Omega=floats([0.0, -p["phi_dot0"], 0.0]))


def perturb_roll_rate(state, rng: np.random.Generator, spread: float, n: int):
    """The disk: `spread·N(0, 1)` rad/s added to `φ̇ = −Ω₂` only (the motion stays planar);
    member 0 is the unperturbed case."""
    e2 = jnp.asarray([0.0, 1.0, 0.0], state.Omega.dtype)
    Omega = state.Omega[None, :] - spread * ensemble_noise(rng, n, 1) * e2[None, :]
    return ensemble_members(state, n, Omega=Omega)


def disk_observables(model: RollingBall, ts, states, params, values):
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
    return {**ball_observables(model, ts, states, params, values), "disk_final_state": final}


CASES = [
    Case(
        name="rolling-disk",
        title="Rolling disk with a pendulum mass (the planar limit, App. C)",
        reference=f"{REFERENCE}, App. C, (C.1)–(C.5); {NOTE}",
        description="A uniform disk of radius r = 1, mass m0 = 1, moment d2 = m0 r²/2 = 0.5 "
        "about its axis (in-plane moments d2/2, a thin disk's), centre of mass at the centre "
        "(chi01 = chi03 = 0), rolling in the vertical plane, with a mass m1 = 0.5 on a "
        "pendulum circle of radius 0.5 about the centre in the disk's plane, swung as "
        "θ(t) = −π/2 + 1.0 sin(2 t); starts at rest (phi_dot0 = 0). Integrated as the 3-D "
        "RollingBall in the disk's configuration (it stays planar; equal to RollingDisk "
        "restricted to the plane), so final_state is the ball's (q, Omega, x), with "
        "Omega = −φ̇ e2 and x = (x, 0, r); the disk's own state (φ, φ̇, x), Γ = (sin φ, 0, "
        "cos φ), is the observable disk_final_state. Also min_normal_force, "
        "max_friction_needed; observables energy and actuator_work (the swung mass works "
        "on the disk). h = 0.01, t_end = 10.",
        **family_fields(),
        parameters={
            "radius": Parameter(1.0, "disk radius r"),
            "m0": Parameter(1.0, "disk mass m0"),
            "d2": Parameter(0.5, "moment about the rolling axis through its centre of mass"),
            "chi01": Parameter(0.0, "disk's centre of mass from the centre, body e1"),
            "chi03": Parameter(0.0, "disk's centre of mass from the centre, body e3"),
            "gravity": Parameter(9.81, "gravitational acceleration g (along −e3)"),
            "m1": Parameter(0.5, "the pendulum mass"),
            "rail_radius": Parameter(0.5, "radius of its circle (centred at the centre)"),
            **swing_parameters(),
            "phi_dot0": Parameter(0.0, "initial rolling rate φ̇ (Ω = −φ̇ e2) [rad/s]"),
        },
        build=_build_disk,
        perturb=perturb_roll_rate,
        observables=disk_observables,
        pointwise=ball_pointwise,
    )
]
