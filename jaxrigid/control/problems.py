"""Named trajectory-optimisation problems on the `rolling-ball-two-circles` ball (issue 14).

A `ControlProblem` binds a model carrying a parametrised object, the initial state, an
integrator and step, a cost and equality constraints; called on the coefficients it returns
`(f, c)` (what `optimise` minimises). The two modes of the model note:

- prescribed rail positions: a `RollingBall` (or a prescribed `RollingBallUnreduced`) whose
  `control` is an `AbstractParametrisedControl` `θ(t)`;
- dynamic masses: a `RollingBallUnreduced(..., control=None, actuation=u)` whose `actuation`
  is an `AbstractParametrisedActuation` `u(t)`, the masses' `θ`, `θ̇` in the state.

Which field holds the coefficients is decided once, from the model (`parametrised_slot`).
Every problem uses the ball of `jaxrigid.models.rolling_ball.two_circles_ball` (its shell,
masses, rails and inertia), the masses starting at rest at `θᵢ(0) = −π/2` (the bottom of
their rails), the ball at rest with its contact point at the origin; `mode="dynamic"`
(`two_circles_start`) makes the masses degrees of freedom driven by forces `u(t)`.

`PROBLEMS` maps names to builders; `get_problem(name, **options)` builds one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from ..integrators.quaternion_rkmk import RKMK4
from ..lie.quaternion import to_matrix
from ..models.rolling_ball import two_circles_ball
from ..models.rolling_ball_unreduced import RollingBallUnreduced, RollingBallUnreducedState
from .costs import (
    AbstractCost,
    CirclePath,
    DiscObstacles,
    Effort,
    FinalPosition,
    GeronoPath,
    Tracking,
    Trajectory,
    WeightedSum,
    needs_contact,
    rollout,
)
from .optimise import AugmentedLagrangian
from .parametrisations import (
    AbstractParametrisedActuation,
    AbstractParametrisedControl,
    BSplineActuation,
    BSplineControl,
    FourierActuation,
    FourierControl,
)

__all__ = [
    "DEFAULT_STEP",
    "MODES",
    "PROBLEMS",
    "ControlProblem",
    "ParametrisedSlot",
    "avoid_obstacles",
    "default_settings",
    "figure_eight",
    "follow_circle",
    "get_problem",
    "initial_guesses",
    "parametrised_slot",
    "reach_point",
    "two_circles_start",
]


class ParametrisedSlot(NamedTuple):
    """Where a model keeps the object the optimiser's coefficients parametrise: `mode`
    (`"prescribed"` or `"dynamic"`), `field` (the model's field holding it: `"control"` or
    `"actuation"`), `kind` (the class it must be), `model_checks` (whether the model's own
    `parameter_checks`, and so `simulate`, already check its values)."""

    mode: str
    field: str
    kind: type
    model_checks: bool

    def get(self, model):
        """The parametrised object of `model` (also `eqx.tree_at`'s selector)."""
        return getattr(model, self.field)


_PRESCRIBED = ParametrisedSlot("prescribed", "control", AbstractParametrisedControl, True)
_DYNAMIC = ParametrisedSlot("dynamic", "actuation", AbstractParametrisedActuation, False)


def parametrised_slot(model) -> ParametrisedSlot:
    """The model's slot: the `actuation` of a `RollingBallUnreduced` with dynamic masses, the
    `control` of any other model (`RollingBall`, prescribed `RollingBallUnreduced`; only
    `RollingBall.parameter_checks` includes its control's value checks)."""
    if isinstance(model, RollingBallUnreduced):
        if model.dynamic:
            return _DYNAMIC
        return _PRESCRIBED._replace(model_checks=False)
    return _PRESCRIBED


class ControlProblem(eqx.Module):
    """`min cost(p)` subject to `c(p) = 0` and `g(p) ≤ 0`: `c` the `constraints'` residuals
    concatenated, `g` the `inequalities'` pointwise values (e.g. `DiscObstacles.inequality`,
    one per saved time and disc).

    **Fields:** `model` (a `RollingBall` whose `control` is an `AbstractParametrisedControl`,
    or a dynamic-mass `RollingBallUnreduced` whose `actuation` is an
    `AbstractParametrisedActuation` (`parametrised_slot`); its coefficients are replaced by
    `p`); `state0`; `integrator`; `cost` (an `AbstractCost`); `constraints` (a tuple of
    terms with `residual`); `inequalities` (a tuple of terms with `inequality`, default
    none); static: `name`, `dt`, `n_steps`, `save_every`, `tolerance` (the constraint
    tolerance that counts as solved, on `|c|`), `description`.

    The cost terms get the parametrised object as their `control` argument (`Effort` is its
    `effort()`: `∫Σθ̈²` or `∫Σu²`)."""

    model: Any
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
    inequalities: tuple = ()

    def __check_init__(self):
        slot = self.slot
        if not isinstance(slot.get(self.model), slot.kind):
            raise TypeError(
                f"ControlProblem ({slot.mode} mode): the model's {slot.field} must be an "
                f"{slot.kind.__name__}, got {type(slot.get(self.model)).__name__}"
            )
        if not (self.dt > 0 and self.n_steps >= 1):
            raise ValueError(f"ControlProblem: needs dt > 0, n_steps ≥ 1, got {self.dt}")

    @property
    def slot(self) -> ParametrisedSlot:
        return parametrised_slot(self.model)

    @property
    def mode(self) -> str:
        """`"prescribed"` (rail positions `θ(t)`) or `"dynamic"` (forces `u(t)`)."""
        return self.slot.mode

    @property
    def control(self) -> AbstractParametrisedControl | AbstractParametrisedActuation:
        """The parametrised object: the model's control `θ(t)` or its actuation `u(t)`."""
        return self.slot.get(self.model)

    @property
    def coefficient_shape(self) -> tuple[int, ...]:
        return tuple(jnp.shape(self.control.coefficients))

    @property
    def t_end(self) -> float:
        return self.dt * self.n_steps

    def initial_coefficients(self):
        """The problem's own guess: the parametrised object's coefficients (zero: masses at
        rest)."""
        return self.control.coefficients

    def with_coefficients(self, p):
        """The model driven by the control (or actuation) with coefficients `p` (shape
        checked)."""
        return eqx.tree_at(self.slot.get, self.model, self.control.with_coefficients(p))

    def trajectory(self, p, *, integrator=None, refine: int = 1, contact=None) -> Trajectory:
        """Simulate with coefficients `p`; `integrator` and a step `dt/refine` (saved at the
        problem's times) to re-simulate with another method or a finer step."""
        integrator = self.integrator if integrator is None else integrator
        if contact is None:
            contact = needs_contact(self.cost, *self.constraints, *self.inequalities)
        model = self.with_coefficients(p)
        if not self.slot.model_checks:  # NaN/inf coefficients: what `simulate` would not see
            _checks.apply(self.slot.get(model).checks())
        return rollout(
            integrator,
            model,
            self.state0,
            self.dt / refine,
            self.n_steps * refine,
            save_every=self.save_every * refine,
            contact=contact,
        )

    def evaluate(self, trajectory: Trajectory, p):
        """`(f, c, g)` on a computed trajectory (`c`, `g` empty `(0,)` when there are none)."""
        control = self.control.with_coefficients(p)
        f = self.cost(trajectory, control)
        empty = jnp.zeros((0,), f.dtype)
        c = [k.residual(trajectory, control) for k in self.constraints]
        g = [k.inequality(trajectory, control) for k in self.inequalities]
        return f, jnp.concatenate([empty, *c]), jnp.concatenate([empty, *g])

    def __call__(self, p):
        """`(f (), c (k,), g (m,))` at coefficients `p`, through `simulate` (checkpointed)."""
        return self.evaluate(self.trajectory(p), p)

    def _terms(self):
        cost = self.cost.terms if isinstance(self.cost, WeightedSum) else (self.cost,)
        return cost + tuple(self.constraints) + tuple(self.inequalities)

    def target_path(self):
        """The tracked path `t -> (2,)` (a `Tracking` term's), or None."""
        return next((k.path for k in self._terms() if isinstance(k, Tracking)), None)

    def target_point(self):
        """The final-position target `(2,)` (a `FinalPosition` term's), or None."""
        return next((k.target for k in self._terms() if isinstance(k, FinalPosition)), None)

    def miss(self, trajectory: Trajectory):
        """What "solved" is measured by: the distance `|x(T)[:2] − x*|` to the target point,
        or, for a tracking problem, the largest tracking error `max |x(tⱼ)[:2] − x*(tⱼ)|` over
        the saved times."""
        path = self.target_path()
        if path is not None:
            target = jax.vmap(path)(trajectory.ts)
            return jnp.max(jnp.linalg.norm(trajectory.x[:, :2] - target, axis=-1))
        return jnp.linalg.norm(trajectory.x[-1, :2] - self.target_point())

    def obstacle_clearance(self, trajectory: Trajectory):
        """`(at_saves, guaranteed)` for the `DiscObstacles` terms (None without): the least
        `|x(tⱼ)[:2] − cₖ| − ρₖ` over saved times and discs, and that minus `v_max·Δt/2`, a
        lower bound of the clearance of the continuous path between the saved times (up to
        the integrator's error and to `v_max` being sampled at the saved times): the contact
        point's speed is `|ẋ| = r|(ω₁, −ω₀)|` (`ω = ΛΩ`, (B.8)'s rolling constraint), `Δt` the
        save interval, and a point between two saves is within `v_max·Δt/2` of one of them."""
        discs = [k for k in self._terms() if isinstance(k, DiscObstacles)]
        if not discs:
            return None
        at_saves = jnp.min(jnp.stack([jnp.min(k.clearance(trajectory)) for k in discs]))
        omega = jnp.einsum("tij,tj->ti", jax.vmap(to_matrix)(trajectory.q), trajectory.Omega)
        v_max = self.model.radius * jnp.max(jnp.linalg.norm(omega[:, :2], axis=-1))
        step = jnp.max(jnp.diff(trajectory.ts))
        return at_saves, at_saves - 0.5 * v_max * step

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


MODES = ("prescribed", "dynamic")
"""The two ways to drive the masses (the model note's modes 1 and 2)."""


def _zero_parametrised(mode: str, basis: str, t_end: float, n_basis: int, theta0):
    """The zero-coefficient control `θ(t) = θ₀` (prescribed: quintic B-spline, `θ̈ ∈ C²`) or
    actuation `u = 0` (dynamic: cubic B-spline, `u ∈ C²`, so `θ̈ ∈ C²` as well)."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'prescribed' or 'dynamic', got {mode!r}")
    if basis not in ("bspline", "fourier"):
        raise ValueError(f"basis must be 'bspline' or 'fourier', got {basis!r}")
    if mode == "prescribed":
        if basis == "bspline":
            return BSplineControl.zeros(t_end, n_basis, theta0, degree=5)
        return FourierControl.zeros(t_end, n_basis, theta0)
    n = theta0.shape[-1]
    if basis == "bspline":
        return BSplineActuation.zeros(t_end, n_basis, n, degree=3, dtype=theta0.dtype)
    return FourierActuation.zeros(t_end, n_basis, n, dtype=theta0.dtype)


def two_circles_start(
    t_end: float,
    basis: str = "bspline",
    n_basis: int = 8,
    dtype=None,
    mode: str = "prescribed",
):
    """`(model, state0)`: the `rolling-ball-two-circles` ball (`two_circles_ball()`'s shell,
    masses, rails, inertia) on `[0, t_end]` with masses at rest at `θᵢ(0) = −π/2`; ball at
    rest, contact point at the origin. `mode="prescribed"`: a `RollingBall` driven by a
    parametrised control `θ(t)` (`basis` `"bspline"`: quintic, `n_basis` knot intervals;
    `"fourier"`: `n_basis` harmonics of `θ̈`). `mode="dynamic"`: a `RollingBallUnreduced`
    whose masses are degrees of freedom driven by a parametrised actuation `u(t)` (`"bspline"`:
    cubic, `n_basis` knot intervals; `"fourier"`: `n_basis` harmonics of `u`), its state a
    `RollingBallUnreducedState` with `θ = −π/2`, `θ̇ = 0`. Zero coefficients keep everything
    at rest in both modes. `dtype`: cast every floating array (default: keep the ball's,
    jax's default float)."""
    model, state0 = two_circles_ball()
    theta0 = jnp.full((2,), -math.pi / 2)
    parametrised = _zero_parametrised(mode, basis, t_end, n_basis, theta0)
    if mode == "prescribed":
        model = eqx.tree_at(lambda m: m.control, model, parametrised)
    else:
        model = RollingBallUnreduced.from_rolling_ball(model, dynamic=True, actuation=parametrised)
        state0 = RollingBallUnreducedState(*state0, theta0, jnp.zeros_like(theta0))
    if dtype is None:  # the ball's own (jax's default float: float64 under x64)
        return model, state0
    return _cast(model, dtype), _cast(state0, dtype)


def reach_point(
    dt: float | None = None,
    basis: str = "bspline",
    n_basis: int = 8,
    integrator=None,
    dtype=None,
    target=(1.0, 0.5),
    mode: str = "prescribed",
) -> ControlProblem:
    """`reach-point`: `T = 5`, reach `x(T)[:2] = (1.0, 0.5)` (constraint, solved when the
    miss is ≤ 1e-3), minimising the effort `∫₀ᵀ Σᵢ θ̈ᵢ² dt` (`mode="dynamic"`: the masses
    are degrees of freedom and the effort is `∫₀ᵀ Σᵢ uᵢ² dt` of the actuator forces; the
    integrator must take a `RollingBallUnreduced`: `RKMK2/4/8`, `MidpointDLA`). `dt`: default
    `DEFAULT_STEP[mode]` (0.05 prescribed, 0.025 dynamic)."""
    t_end = 5.0
    dt = _default_step(dt, mode)
    n_steps = _steps(t_end, dt)
    model, state0 = two_circles_start(t_end, basis, n_basis, dtype, mode)
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
        description=f"T = 5: reach x(T) = (1.0, 0.5) within 1e-3 with least {_effort(mode)}",
    )


DEFAULT_STEP = {"prescribed": 0.05, "dynamic": 0.025}
"""Each mode's default step `dt` (RKMK4). Dynamic masses swing freely (the optimal dynamic
reach-point's reach θ up to 1.5 and |θ̇| up to 7 rad/s; the pendulum frequency of a mass on its
rail is √(g/ρ) ≈ 4.4 rad/s), faster than the prescribed optima move: there, measured against
RKMK8 at dt = 0.0125, RKMK4's final contact point errs by 2.9e-3 at dt = 0.05 (more than the
1e-3 tolerance) and by 1.4e-4 at 0.025."""


def _default_step(dt, mode: str) -> float:
    if mode not in MODES:
        raise ValueError(f"mode must be 'prescribed' or 'dynamic', got {mode!r}")
    return DEFAULT_STEP[mode] if dt is None else dt


def _effort(mode: str) -> str:
    return "∫Σuᵢ² dt (dynamic masses)" if mode == "dynamic" else "∫Σθ̈² dt"


def _steps(t_end: float, dt: float) -> int:
    n_steps = round(t_end / dt)
    if n_steps < 1 or abs(n_steps * dt - t_end) > 1e-9 * t_end:
        raise ValueError(f"dt must divide T = {t_end}, got {dt}")
    return n_steps


def _tracking_problem(
    name, t_end, make_path, description, dt, basis, n_basis, integrator, dtype, effort_weight, mode
) -> ControlProblem:
    """A tracking problem on the two-circles start: `∫|x − x*|² dt + effort_weight·effort`
    (`∫Σθ̈²`, or `∫Σu²` in dynamic mode), no constraint, the path `make_path(as_dtype, t_end)`
    in the model's dtype."""
    dt = _default_step(dt, mode)
    model, state0 = two_circles_start(t_end, basis, n_basis, dtype, mode)
    dtype = model.inertia.dtype
    path = make_path(lambda v: jnp.asarray(v, dtype), t_end)
    return ControlProblem(
        model=model,
        state0=state0,
        integrator=RKMK4() if integrator is None else integrator,
        cost=Tracking(path) + effort_weight * Effort(),
        constraints=(),
        name=name,
        dt=dt,
        n_steps=_steps(t_end, dt),
        save_every=1,
        tolerance=float("inf"),
        description=description,
    )


def follow_circle(
    dt: float | None = None,
    basis: str = "bspline",
    n_basis: int = 20,
    integrator=None,
    dtype=None,
    effort_weight: float = 1e-5,
    mode: str = "prescribed",
) -> ControlProblem:
    """`follow-circle`: track the circle of radius 1 centred at (0, 1), through the origin,
    once in `T = 10` at uniform speed (`CirclePath`, counter-clockwise from the origin):
    minimise `∫|x − x*|² dt + effort_weight·∫Σθ̈²` (the small effort term regularises the
    coefficients; no constraint). The ball starts at rest while the path starts at speed
    2π/10, so the tracking error cannot vanish near `t = 0`."""
    return _tracking_problem(
        "follow-circle",
        10.0,
        lambda f, t_end: CirclePath(f([0.0, 1.0]), f(1.0), f(t_end)),
        "T = 10: track the unit circle centred at (0, 1) once at uniform speed",
        dt,
        basis,
        n_basis,
        integrator,
        dtype,
        effort_weight,
        mode,
    )


OBSTACLE_CENTRES = ((0.7, 0.0), (1.4, 0.1))
OBSTACLE_RADIUS = 0.3


def avoid_obstacles(
    dt: float | None = None,
    basis: str = "bspline",
    n_basis: int = 12,
    integrator=None,
    dtype=None,
    margin: float | None = None,
    mode: str = "prescribed",
) -> ControlProblem:
    """`avoid-obstacles`: `T = 8`, reach `x(T)[:2] = (2, 0)` (within 1e-3) with least effort,
    the contact point never entering the discs of radius 0.3 at (0.7, 0) and (1.4, 0.1).

    The target is an equality constraint; the discs are pointwise inequality constraints
    `0.3 + margin − |x(tⱼ)[:2] − cₖ| ≤ 0` at every step `tⱼ` (saved every step), each with
    its own multiplier (PHR, `optimise`). Between saved times the contact point moves at most
    `v_max·dt/2` from the nearer saved point (`|ẋ| = r|(ω₁, −ω₀)|`, `ω = ΛΩ`), so a
    `margin` above `v_max·dt/2` keeps the whole continuous path out of the discs. The
    optimised paths peak at `v_max ≈ 1.2–1.3` (measured), so the default margin is `0.8·dt`
    (`v_max` up to 1.6; 0.04 at dt = 0.05); `ControlProblem.obstacle_clearance` gives the
    guaranteed clearance of any computed path."""
    t_end = 8.0
    dt = _default_step(dt, mode)
    n_steps = _steps(t_end, dt)
    model, state0 = two_circles_start(t_end, basis, n_basis, dtype, mode)
    dtype = model.inertia.dtype
    f = lambda v: jnp.asarray(v, dtype)  # noqa: E731
    margin = 0.8 * dt if margin is None else margin
    discs = DiscObstacles(f(OBSTACLE_CENTRES), f([OBSTACLE_RADIUS] * 2), f(margin))
    return ControlProblem(
        model=model,
        state0=state0,
        integrator=RKMK4() if integrator is None else integrator,
        cost=Effort(),
        constraints=(FinalPosition(f([2.0, 0.0])),),
        inequalities=(discs,),
        name="avoid-obstacles",
        dt=dt,
        n_steps=n_steps,
        save_every=1,
        tolerance=1e-3,
        description="T = 8: reach (2, 0) around two discs of radius 0.3, least effort",
    )


def figure_eight(
    dt: float | None = None,
    basis: str = "bspline",
    n_basis: int = 32,
    integrator=None,
    dtype=None,
    effort_weight: float = 1e-5,
    mode: str = "prescribed",
) -> ControlProblem:
    """`figure-eight`: track the lemniscate of Gerono `x*(t) = (sin φ, ½ sin 2φ)`,
    `φ = 2πt/16` (`GeronoPath(a = 1, b = 1, period = 16)`), once in `T = 16`: a figure eight
    through the origin, lobes reaching `x₁ = ±1`, `|x₂| ≤ 1/2`, speed between 0.26 and 0.56
    (the circle's 0.63 at most). Cost `∫|x − x*|² dt + effort_weight·∫Σθ̈²`, no constraint;
    like the circle, the path starts moving while the ball starts at rest."""
    return _tracking_problem(
        "figure-eight",
        16.0,
        lambda f, t_end: GeronoPath(f(1.0), f(1.0), f(t_end)),
        "T = 16: track the Gerono figure eight (sin φ, ½ sin 2φ) once",
        dt,
        basis,
        n_basis,
        integrator,
        dtype,
        effort_weight,
        mode,
    )


PROBLEMS: dict[str, Callable[..., ControlProblem]] = {
    "reach-point": reach_point,
    "follow-circle": follow_circle,
    "figure-eight": figure_eight,
    "avoid-obstacles": avoid_obstacles,
}
"""Named problems: name -> builder (keyword options: `dt`, `basis`, `n_basis`, `integrator`,
`dtype`, `mode` (`"prescribed"` rail positions, the default, or `"dynamic"` masses driven by
forces); `dt` defaults to `DEFAULT_STEP[mode]`)."""


_SETTINGS = {
    "reach-point": dict(n_outer=10, n_inner=25),
    "follow-circle": dict(n_outer=1, n_inner=600),
    "figure-eight": dict(n_outer=1, n_inner=600),
    "avoid-obstacles": dict(n_outer=12, n_inner=30),
}


_SETTINGS_DYNAMIC = {
    # measured on dynamic reach-point (RKMK4, dt = 0.05): its inner problems need many more
    # L-BFGS steps than the prescribed one's (10×25 stopped at effort 0.600, 12×40 at 0.554,
    # 6×100 at 0.5207 with the last three outer iterations within 0.5 %); at the default
    # dt = 0.025, 6×100 reaches 0.520587 (miss 2.8e-5), 1.1e-4 above 20×100's 0.520530
    "reach-point": dict(n_outer=6, n_inner=100),
}


def default_settings(name: str, mode: str = "prescribed") -> AugmentedLagrangian:
    """The optimiser settings each named problem is solved with (`ValueError` if unknown):
    tracking problems have no constraint, so one outer iteration of many L-BFGS steps.
    `mode="dynamic"`: the settings tuned for the dynamic-mass problem where there are (else
    the prescribed problem's)."""
    key = name.lower()
    if key not in _SETTINGS:
        raise ValueError(f"unknown control problem {name!r}; known: {', '.join(PROBLEMS)}")
    if mode not in MODES:
        raise ValueError(f"mode must be 'prescribed' or 'dynamic', got {mode!r}")
    if mode == "dynamic" and key in _SETTINGS_DYNAMIC:
        return AugmentedLagrangian(**_SETTINGS_DYNAMIC[key])
    return AugmentedLagrangian(**_SETTINGS[key])


def initial_guesses(problem: ControlProblem, k: int, seed: int = 0, scale: float = 0.5):
    """`(k, M, n)` starts for `multi_start`: the problem's own guess (zero: masses at rest)
    first, then `k − 1` normal draws of standard deviation `scale` (seeded)."""
    p0 = problem.initial_coefficients()
    rng = np.random.default_rng(seed)
    draws = scale * rng.normal(size=(k - 1,) + tuple(p0.shape))
    return jnp.concatenate([p0[None], jnp.asarray(draws, p0.dtype)])


def get_problem(name: str, **options) -> ControlProblem:
    """Build the named problem; `ValueError` listing the names for an unknown one."""
    key = name.lower()
    if key not in PROBLEMS:
        raise ValueError(f"unknown control problem {name!r}; known: {', '.join(PROBLEMS)}")
    return PROBLEMS[key](**options)
