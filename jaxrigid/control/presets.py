"""Named trajectory-optimisation problems on the `rolling-ball-two-circles` ball.

Each builder returns a `ControlProblem` (`problem`). Every problem uses the ball of
`jaxrigid.models.rolling_ball.two_circles_ball` (its shell, masses, rails and inertia), the
masses starting at rest at `θᵢ(0) = −π/2` (the bottom of their rails), the ball at rest with
its contact point at the origin; `mode="dynamic"` (`two_circles_start`) makes the masses
degrees of freedom driven by forces `u(t)`.

`PROBLEMS` maps names to builders; `get_problem(name, **options)` builds one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import is_integer, real_number
from .._suggest import did_you_mean
from ..integrators.rkmk import RKMK4
from ..models.rolling_ball import two_circles_ball
from ..models.rolling_ball.unreduced import RollingBallUnreduced, RollingBallUnreducedState
from ..runs.planning import whole_steps
from .costs import (
    CirclePath,
    DiscObstacles,
    Effort,
    FinalPosition,
    GeronoPath,
    Tracking,
)
from .optimise import AugmentedLagrangian
from .parametrisations import (
    BSplineActuation,
    BSplineControl,
    FourierActuation,
    FourierControl,
)
from .problem import ControlProblem, ParametrisedSlot, checked_step, parametrised_slot

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
        q, Omega, x = state0
        state0 = RollingBallUnreducedState(q, Omega, x, theta0, jnp.zeros_like(theta0))
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
    """`dt` checked (before anything is built): a real number (`TypeError` for a boolean or
    a string), positive and finite (`ValueError`); `DEFAULT_STEP[mode]` for None."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'prescribed' or 'dynamic', got {mode!r}")
    if dt is None:
        return DEFAULT_STEP[mode]
    return checked_step(dt)


def _effort(mode: str) -> str:
    return "∫Σuᵢ² dt (dynamic masses)" if mode == "dynamic" else "∫Σθ̈² dt"


def _steps(t_end: float, dt: float) -> int:
    """The steps of `dt` that make `t_end`: a whole number up to decimal round-off (the
    command's and sweeps' rule, `runs.whole_steps`), else `ValueError`."""
    try:
        return whole_steps(t_end, dt)
    except ValueError:
        raise ValueError(f"dt must divide T = {t_end}, got {dt}") from None


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


# n_inner counts evaluations of the gradient (`control.lbfgs`): reach-point's 10 × 40 (412
# evaluations in all) reaches SLSQP's least effort 0.238041, where optax's L-BFGS took 385
# evaluations for its 10 × 25 iterations and stopped at 0.238155 (design note 34); the others
# were tuned with optax's iterations and pass their tests unchanged
_SETTINGS = {
    "reach-point": dict(n_outer=10, n_inner=40),
    "follow-circle": dict(n_outer=1, n_inner=600),
    "figure-eight": dict(n_outer=1, n_inner=600),
    "avoid-obstacles": dict(n_outer=12, n_inner=30),
}


_SETTINGS_DYNAMIC = {
    # measured (with optax's L-BFGS) on dynamic reach-point (RKMK4, dt = 0.05): its inner
    # problems need many more L-BFGS steps than the prescribed one's (10×25 stopped at
    # effort 0.600, 12×40 at 0.554, 6×100 at 0.5207 with the last three outer iterations
    # within 0.5 %); at the default
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
        raise ValueError(
            f"unknown control problem {name!r}; known: {', '.join(PROBLEMS)}"
            + did_you_mean(name, PROBLEMS)
        )
    if mode not in MODES:
        raise ValueError(f"mode must be 'prescribed' or 'dynamic', got {mode!r}")
    if mode == "dynamic" and key in _SETTINGS_DYNAMIC:
        return AugmentedLagrangian(**_SETTINGS_DYNAMIC[key])
    return AugmentedLagrangian(**_SETTINGS[key])


def initial_guesses(problem: ControlProblem, k: int, seed: int = 0, scale: float = 0.5):
    """`(k, M, n)` starts for `multi_start`: the problem's own guess (zero: masses at rest)
    first, then `k − 1` normal draws of standard deviation `scale` (seeded). `k` a positive
    integer (`TypeError` for a boolean, a float or a string; `ValueError` below 1), `scale`
    a finite number ≥ 0."""
    if not is_integer(k):
        raise TypeError(f"k (the number of starts) must be an integer, got {k!r}")
    if k < 1:
        raise ValueError(f"k (the number of starts) must be ≥ 1, got {k}")
    if not (math.isfinite(real_number("scale", scale)) and scale >= 0):
        raise ValueError(f"scale must be a finite number ≥ 0, got {scale!r}")
    p0 = problem.initial_coefficients()
    rng = np.random.default_rng(seed)
    draws = scale * rng.normal(size=(k - 1,) + tuple(p0.shape))
    return jnp.concatenate([p0[None], jnp.asarray(draws, p0.dtype)])


def get_problem(name: str, **options) -> ControlProblem:
    """Build the named problem; `ValueError` listing the names for an unknown one."""
    key = name.lower()
    if key not in PROBLEMS:
        raise ValueError(
            f"unknown control problem {name!r}; known: {', '.join(PROBLEMS)}"
            + did_you_mean(name, PROBLEMS)
        )
    return PROBLEMS[key](**options)
