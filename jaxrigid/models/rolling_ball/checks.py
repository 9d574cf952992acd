"""The rolling ball's checks: the shapes of its fields and of a state (`ValueError`,
`TypeError` at once), and the value checks of its parameters and of a state (`Check`s, which
`simulate` applies and a concrete model raises at construction).

Each function takes the model (`jaxrigid.models.rolling_ball.RollingBall`) as its first
argument; the model's methods `check_state_shapes`, `parameter_checks` and `state_checks` are
these functions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ... import _checks
from ..base import Check, finite, spd3_checks
from .controls import AbstractControl
from .rails import AbstractRail, map_over_sweep, rail_checks

__all__ = [
    "check_model_shapes",
    "check_rolling_ball_state",
    "check_state_shapes",
    "parameter_checks",
    "state_checks",
]


def check_model_shapes(model) -> None:
    """`ValueError` (`TypeError` for wrong kinds) unless the model's fields have consistent
    shapes: `inertia (..., 3, 3)`, `chi0`, `external_force (..., 3)`, and one `n` for
    `masses (..., n)`, `rails` and the control's output."""
    shapes = {
        "inertia": (jnp.shape(model.inertia), 2, (3, 3)),
        "chi0": (jnp.shape(model.chi0), 1, (3,)),
        "external_force": (jnp.shape(model.external_force), 1, (3,)),
    }
    for name, (shape, k, want) in shapes.items():
        if shape[len(shape) - k :] != want:
            raise ValueError(f"RollingBall: {name} must have shape (..., {want}), got {shape}")
    for i, rail in enumerate(model.rails):
        if not isinstance(rail, AbstractRail):
            raise TypeError(f"RollingBall: rails[{i}] must be an AbstractRail, got {type(rail)}")
        out = jax.eval_shape(lambda r: map_over_sweep(lambda one: one(0.0), r), rail)
        if out.shape[-1:] != (3,):
            raise ValueError(
                f"RollingBall: rails[{i}] must map θ to a (3,) body vector, got shape {out.shape}"
            )
    if not isinstance(model.control, AbstractControl):
        raise TypeError(
            f"RollingBall: control must be an AbstractControl, got {type(model.control)}"
        )
    n_masses = jnp.shape(model.masses)[-1] if jnp.ndim(model.masses) else None
    n_rails, n_control = len(model.rails), model.control.size
    if n_masses != n_rails or n_control != n_rails:
        raise ValueError(
            f"RollingBall: masses (..., n), rails and control must agree on the number of "
            f"masses n, got masses shape {jnp.shape(model.masses)} (n = {n_masses}), "
            f"{n_rails} rails and a control of size {n_control}"
        )


def check_state_shapes(model, state) -> None:
    """`ValueError` unless the model's fields are consistent (`check_model_shapes`) and
    `state` has `q (..., 4)`, `Omega (..., 3)`, `x (..., 3)` with the same leading axes."""
    check_model_shapes(model)
    q, Omega, x = state
    shapes = (jnp.shape(q), jnp.shape(Omega), jnp.shape(x))
    if (
        shapes[0][-1:] != (4,)
        or shapes[1][-1:] != (3,)
        or shapes[2][-1:] != (3,)
        or len({s[:-1] for s in shapes}) != 1
    ):
        raise ValueError(
            "rolling-ball state needs q (..., 4), Omega (..., 3), x (..., 3) with the same "
            f"leading axes, got {shapes[0]}, {shapes[1]}, {shapes[2]}"
        )


def parameter_checks(model) -> list[Check]:
    """`radius > 0`, `m₀ > 0`, `mᵢ ≥ 0`, `𝕀` SPD (and a rigid body's), `|χ₀| < r`, every
    rail inside the ball (`max_radius(rail) < r`), the control's reach inside a segment's
    ends (`rails.rail_checks`), finite `g`, `F`, the control's own checks."""
    r = model.radius
    checks = [
        Check(~(jnp.isfinite(r) & (r > 0)), "RollingBall: radius must be positive", r),
        Check(
            ~(jnp.isfinite(model.mass) & (model.mass > 0)),
            "RollingBall: shell mass m0 must be positive",
            model.mass,
        ),
        *(Check(c.bad, "RollingBall: " + c.message, c.value) for c in spd3_checks(model.inertia)),
        Check(~finite(model.chi0, 1), "RollingBall: chi0 contains NaN or inf"),
        Check(
            ~(jnp.linalg.norm(model.chi0, axis=-1) < r),
            "RollingBall: the shell's centre of mass chi0 must lie inside the ball (|chi0| < r)",
            jnp.linalg.norm(model.chi0, axis=-1),
        ),
        Check(~jnp.isfinite(model.gravity), "RollingBall: gravity contains NaN or inf"),
        Check(~finite(model.external_force, 1), "RollingBall: external_force contains NaN or inf"),
    ]
    if model.n_masses:
        m = model.masses
        checks.append(
            Check(
                ~jnp.all(jnp.isfinite(m) & (m >= 0), axis=-1),
                "RollingBall: point masses must be non-negative and finite",
                jnp.min(m, axis=-1),
            )
        )
    checks += [  # inside the ball; a segment's θ(t) inside its ends (rails.rail_checks)
        Check(c.bad, "RollingBall: " + c.message, c.value)
        for c in rail_checks(model.rails, model.control, r)
    ]
    checks += [
        Check(c.bad, "RollingBall control: " + c.message, c.value) for c in model.control.checks()
    ]
    return checks


def state_checks(model, state) -> list[Check]:
    """`q`, `Ω`, `x` finite; `||q| − 1| ≤ √eps`; the rolling constraint's height
    `|x₃ − r| ≤ √eps r`."""
    q, Omega, x = state
    tol = float(jnp.finfo(q.dtype).eps) ** 0.5
    q_err = jnp.abs(jnp.linalg.norm(q, axis=-1) - 1.0)
    h_err = jnp.abs(x[..., 2] - model.radius)
    return [
        Check(~finite(q, 1), "q0 contains NaN or inf"),
        Check(~finite(Omega, 1), "Omega0 contains NaN or inf"),
        Check(~finite(x, 1), "x0 contains NaN or inf"),
        Check(q_err > tol, f"q0 is not a unit quaternion: ||q| − 1| > {tol:.2g}", q_err),
        Check(
            h_err > tol * model.radius,
            f"x0 is off the rolling constraint: the geometric centre must be at height "
            f"x3 = radius (|x3 − r| > {tol:.2g} r)",
            h_err,
        ),
    ]


def check_rolling_ball_state(model, state) -> None:
    """`ValueError` unless `state` has the model's shapes and passes `state_checks` (unit
    `q`, `x₃ = r`, finite), naming the first failing ensemble member (concrete states)."""
    model.check_state_shapes(state)
    _checks.raise_at_once(_checks.model_state_checks, model, state)
