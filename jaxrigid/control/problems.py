"""Named trajectory-optimisation problems on the `rolling-ball-two-circles` ball (issue 14).

A `ControlProblem` binds a model whose control is an `AbstractParametrisedControl`, the
initial state, an integrator and step, a cost and equality constraints; called on the
coefficients it returns `(f, c)` (what `optimise` minimises). Every problem uses the ball of
`jaxrigid.models.rolling_ball.two_circles_ball` (its shell, masses, rails and inertia), the
masses starting at rest at `θᵢ(0) = −π/2` (the bottom of their rails), the ball at rest with
its contact point at the origin.

`PROBLEMS` maps names to builders; `get_problem(name, **options)` builds one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ..integrators.quaternion_rkmk import RKMK4
from ..models.rolling_ball import RollingBall, two_circles_ball
from .costs import (
    AbstractCost,
    CirclePath,
    DiscObstacles,
    Effort,
    FinalPosition,
    Tracking,
    Trajectory,
    needs_contact,
    rollout,
)
from .parametrisations import AbstractParametrisedControl, BSplineControl, FourierControl

__all__ = [
    "PROBLEMS",
    "ControlProblem",
    "avoid_obstacles",
    "follow_circle",
    "get_problem",
    "reach_point",
    "two_circles_start",
]


class ControlProblem(eqx.Module):
    """`min cost(p)` subject to `c(p) = 0`, `c` the constraints' residuals concatenated.

    **Fields:** `model` (a `RollingBall` whose `control` is an `AbstractParametrisedControl`;
    its coefficients are replaced by `p`); `state0`; `integrator`; `cost` (an
    `AbstractCost`); `constraints` (a tuple of terms with `residual`); static: `name`,
    `dt`, `n_steps`, `save_every`, `tolerance` (the constraint tolerance that counts as
    solved, on `|c|`), `description`."""

    model: RollingBall
    state0: Any
    integrator: Any
    cost: AbstractCost
    constraints: tuple
    name: str = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    n_steps: int = eqx.field(static=True)
    save_every: int = eqx.field(static=True, default=1)
    tolerance: float = eqx.field(static=True, default=1e-3)
    description: str = eqx.field(static=True, default="")

    def __check_init__(self):
        if not isinstance(self.model.control, AbstractParametrisedControl):
            raise TypeError(
                "ControlProblem: the model's control must be an AbstractParametrisedControl, "
                f"got {type(self.model.control).__name__}"
            )
        if not (self.dt > 0 and self.n_steps >= 1):
            raise ValueError(f"ControlProblem: needs dt > 0, n_steps ≥ 1, got {self.dt}")

    @property
    def control(self) -> AbstractParametrisedControl:
        return self.model.control

    @property
    def coefficient_shape(self) -> tuple[int, ...]:
        return tuple(jnp.shape(self.control.coefficients))

    @property
    def t_end(self) -> float:
        return self.dt * self.n_steps

    def initial_coefficients(self):
        """The problem's own guess: the model control's coefficients (zero: masses at rest)."""
        return self.control.coefficients

    def with_coefficients(self, p) -> RollingBall:
        """The model driven by the control with coefficients `p`."""
        return eqx.tree_at(lambda m: m.control, self.model, self.control.with_coefficients(p))

    def trajectory(self, p, *, integrator=None, refine: int = 1, contact=None) -> Trajectory:
        """Simulate with coefficients `p`; `integrator` and a step `dt/refine` (saved at the
        problem's times) to re-simulate with another method or a finer step."""
        integrator = self.integrator if integrator is None else integrator
        contact = needs_contact(self.cost, *self.constraints) if contact is None else contact
        return rollout(
            integrator,
            self.with_coefficients(p),
            self.state0,
            self.dt / refine,
            self.n_steps * refine,
            save_every=self.save_every * refine,
            contact=contact,
        )

    def evaluate(self, trajectory: Trajectory, p):
        """`(f, c)` on a computed trajectory."""
        control = self.control.with_coefficients(p)
        f = self.cost(trajectory, control)
        if not self.constraints:
            return f, jnp.zeros((0,), f.dtype)
        c = jnp.concatenate([k.residual(trajectory, control) for k in self.constraints])
        return f, c

    def __call__(self, p):
        """`(f (), c (k,))` at coefficients `p`, through `simulate` (checkpointed)."""
        return self.evaluate(self.trajectory(p), p)

    def with_integrator(self, integrator, refine: int = 1) -> ControlProblem:
        """The same problem discretised by `integrator` at step `dt/refine` (saved at the
        same times)."""
        return dataclasses.replace(
            self,
            integrator=integrator,
            dt=self.dt / refine,
            n_steps=self.n_steps * refine,
            save_every=self.save_every * refine,
        )


def _cast(tree, dtype):
    return jax.tree_util.tree_map(
        lambda x: (
            x.astype(dtype)
            if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating)
            else x
        ),
        tree,
    )


def two_circles_start(
    t_end: float,
    basis: str = "bspline",
    n_basis: int = 8,
    dtype=None,
):
    """`(model, state0)`: the `rolling-ball-two-circles` ball (`two_circles_ball()`'s shell,
    masses, rails, inertia) driven by a parametrised control on `[0, t_end]` with masses at
    rest at `θᵢ(0) = −π/2`; ball at rest, contact point at the origin. `basis`: `"bspline"`
    (quintic, `n_basis` knot intervals) or `"fourier"` (`n_basis` harmonics). `dtype`:
    cast every floating array (default: keep the ball's, jax's default float)."""
    model, state0 = two_circles_ball()
    theta0 = jnp.full((2,), -math.pi / 2)
    if basis == "bspline":
        control = BSplineControl.zeros(t_end, n_basis, theta0, degree=5)
    elif basis == "fourier":
        control = FourierControl.zeros(t_end, n_basis, theta0)
    else:
        raise ValueError(f"basis must be 'bspline' or 'fourier', got {basis!r}")
    model = eqx.tree_at(lambda m: m.control, model, control)
    if dtype is None:  # the ball's own (jax's default float: float64 under x64)
        return model, state0
    return _cast(model, dtype), _cast(state0, dtype)


def reach_point(
    dt: float = 0.05,
    basis: str = "bspline",
    n_basis: int = 8,
    integrator=None,
    dtype=None,
    target=(1.0, 0.5),
) -> ControlProblem:
    """`reach-point`: `T = 5`, reach `x(T)[:2] = (1.0, 0.5)` (constraint, solved when the
    miss is ≤ 1e-3), minimising the effort `∫₀ᵀ Σᵢ θ̈ᵢ² dt`."""
    t_end = 5.0
    n_steps = _steps(t_end, dt)
    model, state0 = two_circles_start(t_end, basis, n_basis, dtype)
    dtype = model.inertia.dtype
    return ControlProblem(
        model=model,
        state0=state0,
        integrator=RKMK4() if integrator is None else integrator,
        cost=Effort(),
        constraints=(FinalPosition(jnp.asarray(target, dtype)),),
        name="reach-point",
        dt=dt,
        n_steps=n_steps,
        save_every=n_steps,
        tolerance=1e-3,
        description="T = 5: reach x(T) = (1.0, 0.5) within 1e-3 with least ∫Σθ̈² dt",
    )


def _steps(t_end: float, dt: float) -> int:
    n_steps = round(t_end / dt)
    if n_steps < 1 or abs(n_steps * dt - t_end) > 1e-9 * t_end:
        raise ValueError(f"dt must divide T = {t_end}, got {dt}")
    return n_steps


def follow_circle(
    dt: float = 0.05,
    basis: str = "bspline",
    n_basis: int = 20,
    integrator=None,
    dtype=None,
    effort_weight: float = 1e-4,
) -> ControlProblem:
    """`follow-circle`: track the circle of radius 1 centred at (0, 1), through the origin,
    once in `T = 10` at uniform speed (`CirclePath`, counter-clockwise from the origin):
    minimise `∫|x − x*|² dt + effort_weight·∫Σθ̈²` (the small effort term regularises the
    coefficients; no constraint). The ball starts at rest while the path starts at speed
    2π/10, so the tracking error cannot vanish near `t = 0`."""
    t_end = 10.0
    n_steps = _steps(t_end, dt)
    model, state0 = two_circles_start(t_end, basis, n_basis, dtype)
    dtype = model.inertia.dtype
    f = lambda v: jnp.asarray(v, dtype)  # noqa: E731
    path = CirclePath(f([0.0, 1.0]), f(1.0), f(t_end))
    return ControlProblem(
        model=model,
        state0=state0,
        integrator=RKMK4() if integrator is None else integrator,
        cost=Tracking(path) + effort_weight * Effort(),
        constraints=(),
        name="follow-circle",
        dt=dt,
        n_steps=n_steps,
        save_every=1,
        tolerance=float("inf"),
        description="T = 10: track the unit circle centred at (0, 1) once at uniform speed",
    )


OBSTACLE_CENTRES = ((0.7, 0.0), (1.4, 0.1))
OBSTACLE_RADIUS = 0.3


def avoid_obstacles(
    dt: float = 0.05,
    basis: str = "bspline",
    n_basis: int = 12,
    integrator=None,
    dtype=None,
    margin: float = 0.02,
) -> ControlProblem:
    """`avoid-obstacles`: `T = 8`, reach `x(T)[:2] = (2, 0)` (within 1e-3) with least effort,
    the contact point never entering the discs of radius 0.3 at (0.7, 0) and (1.4, 0.1):
    both as equality constraints of the augmented Lagrangian, the discs through the
    penetration integral with a `margin` (so that the saved path, sampled every step, keeps
    out of the discs themselves)."""
    t_end = 8.0
    n_steps = _steps(t_end, dt)
    model, state0 = two_circles_start(t_end, basis, n_basis, dtype)
    dtype = model.inertia.dtype
    f = lambda v: jnp.asarray(v, dtype)  # noqa: E731
    discs = DiscObstacles(f(OBSTACLE_CENTRES), f([OBSTACLE_RADIUS] * 2), f(margin))
    return ControlProblem(
        model=model,
        state0=state0,
        integrator=RKMK4() if integrator is None else integrator,
        cost=Effort(),
        constraints=(FinalPosition(f([2.0, 0.0])), discs),
        name="avoid-obstacles",
        dt=dt,
        n_steps=n_steps,
        save_every=1,
        tolerance=1e-3,
        description="T = 8: reach (2, 0) around two discs of radius 0.3, least effort",
    )


PROBLEMS: dict[str, Callable[..., ControlProblem]] = {
    "reach-point": reach_point,
    "follow-circle": follow_circle,
    "avoid-obstacles": avoid_obstacles,
}
"""Named problems: name -> builder (keyword options: `dt`, `basis`, `n_basis`, `integrator`,
`dtype`)."""


def get_problem(name: str, **options) -> ControlProblem:
    """Build the named problem; `ValueError` listing the names for an unknown one."""
    key = name.lower()
    if key not in PROBLEMS:
        raise ValueError(f"unknown control problem {name!r}; known: {', '.join(PROBLEMS)}")
    return PROBLEMS[key](**options)
