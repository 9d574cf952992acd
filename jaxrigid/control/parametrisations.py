"""Parametrised rail controls `θᵢ(t)` with a fixed number of coefficients.

The model note (`docs/rolling-ball-model.md`, "Optimal control"; mode 1 "prescribed
(kinematic) actuation") steers the ball by choosing the rail positions `θᵢ(t)`; the ball's
equation (B.8) needs `θ, θ̇, θ̈`, so `θ̈` must exist everywhere. Every parametrisation here is

    θ(t) = θ₀ + θ̇₀ t + Σⱼ φⱼ(t) cⱼ,     φⱼ(0) = φⱼ′(0) = 0,                             (P1)

with `c (M, n)` the `coefficients` (one column per mass) and `φ (M,)` a basis of functions that
vanish with their first derivative at `t = 0`: the initial conditions `θ(0) = θ₀`,
`θ̇(0) = θ̇₀` hold by construction, for every coefficient value (no constraint for the
optimiser to keep). `c = 0` is the motion `θ₀ + θ̇₀t` (rest when `θ̇₀ = 0`).

Two bases, pluggable through `AbstractParametrisedControl` (a new basis is `basis(t)` and a
`quadrature()` exact for `θ̈²`):
- `BSplineControl`: the clamped uniform B-spline of degree `p` (default 5) on `[0, T]`.
  With clamped knots only `B₀` is nonzero at 0 and only `B₀, B₁` have nonzero slope there, so
  `φⱼ = B_{j+2}` satisfy (P1), and `θ₀ + θ̇₀ t = Σ ξₖ-weighted B's` (Greville abscissae) is in
  the span: (P1) is exactly the clamped spline with its first two control points fixed by
  `(θ₀, θ̇₀)`. Degree 5 gives `θ ∈ C⁴`, `θ̈ ∈ C²` (piecewise cubic), so the integrators
  see a C² vector field.
- `FourierControl`: `θ̈(t) = a₀ + Σₖ aₖ cos ωₖt + bₖ sin ωₖt`, `ωₖ = 2πk/T`, `k = 1..J`,
  integrated twice with (P1): `φ = (t²/2, (1 − cos ωₖt)/ωₖ², (t/ωₖ − sin ωₖt/ωₖ²))`. The
  coefficients are the Fourier coefficients of `θ̈` (`M = 2J + 1`), in the order
  `(a₀, a₁, b₁, …, a_J, b_J)`.

`T` (`t_end`) and the basis sizes are static (they fix the knots and the quadrature);
`coefficients`, `theta0`, `theta_dot0` are array fields, traced and differentiable. Outside
`[0, T]` each control continues smoothly (the end B-spline pieces are extrapolated; the
Fourier series is periodic in `θ̈`), so an integrator's stage slightly past `T` is harmless.

Mode 2 of the note ("dynamic masses") drives the rail coordinates, now degrees of freedom of
`RollingBallUnreduced(..., control=None, actuation=u)`, by generalised forces `u(t) (n,)`;
`θ(0)`, `θ̇(0)` are part of the state, so an actuation has no initial-value constraint:

    u(t) = ψ(t)ᵀ c,     c (M, n),                                                       (P2)

with `ψ` the whole basis (`AbstractParametrisedActuation`, called as the model's `actuation`,
`u(t) -> (n,)`):
- `BSplineActuation`: all `n_intervals + degree` clamped uniform B-splines of `degree`
  (default 3: `u ∈ C²`, so `θ ∈ C⁴`); the coefficients are the spline's control points.
- `FourierActuation`: `u = a₀ + Σₖ aₖ cos ωₖt + bₖ sin ωₖt` (rows `(a₀, a₁, b₁, …)`).
Each basis is written once (`bases`: `BSplineBasis`, `FourierBasis`: knots, Cox–de Boor,
harmonics, quadrature) and shared by the control and the actuation on it; what controls and
actuations share about coefficients (shape checks, `with_coefficients`, the quadrature of a
square) is `bases.LinearInCoefficients`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import Check
from .._jet import as_float
from ..models.rolling_ball.controls import AbstractControl
from .bases import (
    BSplineBasis,
    FourierBasis,
    LinearInCoefficients,
    bspline_sizes,
    check_horizon,
    fourier_harmonics,
    gauss_legendre_intervals,
)

__all__ = [
    "AbstractParametrisedActuation",
    "AbstractParametrisedControl",
    "BSplineActuation",
    "BSplineControl",
    "FourierActuation",
    "FourierControl",
    "gauss_legendre_intervals",
]


class AbstractParametrisedControl(AbstractControl, LinearInCoefficients):
    """`θ(t) = θ₀ + θ̇₀t + φ(t)ᵀc` (P1) for `n` masses.

    **Fields:** `coefficients (M, n)`, `theta0 (n,)`, `theta_dot0 (n,)`; static `t_end`
    (`T > 0`). Subclasses give `n_basis` (`M`, static), `basis(t) -> (M,)` (functions vanishing
    with their derivative at 0) and `quadrature()` (nodes, weights on `[0, T]`, numpy, exact for
    `θ̈²` of this basis). `θ̇`, `θ̈` come from `derivatives` (nested `jax.jvp`, as for every
    `AbstractControl`).

    Shapes are checked at construction (`ValueError` naming the expected shape); values (NaN,
    inf) by `checks()`, which `RollingBall.parameter_checks` and so `simulate` apply.
    `zero_coefficients()` is the motion `θ₀ + θ̇₀t`.
    """

    coefficients: eqx.AbstractVar[jax.Array]
    theta0: eqx.AbstractVar[jax.Array]
    theta_dot0: eqx.AbstractVar[jax.Array]
    t_end: eqx.AbstractVar[float]

    def __check_init__(self):
        n = self._check_coefficient_shape()
        for name in ("theta0", "theta_dot0"):
            s = jnp.shape(getattr(self, name))
            if len(s) < 1 or s[-1] != n:
                raise ValueError(
                    f"{type(self).__name__}: {name} must have shape (..., {n}) (one entry per "
                    f"column of coefficients), got {s}"
                )

    size = LinearInCoefficients.size  # not `AbstractControl`'s (which evaluates θ)

    def __call__(self, t):
        t = as_float(t)
        return self.theta0 + self.theta_dot0 * t + self._phi(t) @ self.coefficients

    def effort(self):
        """`∫₀ᵀ Σᵢ θ̈ᵢ(t)² dt` by the basis's exact `quadrature()` (independent of any
        integrator's step; the control-penalty term of "Optimal control")."""
        return self._integral_of_square(lambda t: self.derivatives(t)[2])

    def sample(self, ts):
        """`(θ, θ̇, θ̈)` at the times `ts (k,)`, each `(k, n)`."""
        return jax.vmap(self.derivatives)(jnp.asarray(ts, self.coefficients.dtype))

    def checks(self):
        ok = (
            self._coefficients_finite()
            & jnp.all(jnp.isfinite(self.theta0), axis=-1)
            & jnp.all(jnp.isfinite(self.theta_dot0), axis=-1)
        )
        return [Check(~ok, f"{type(self).__name__}: coefficients or initial values NaN or inf")]


class AbstractParametrisedActuation(LinearInCoefficients):
    """`u(t) = ψ(t)ᵀc` (P2): generalised forces on the rail coordinates of `n` dynamic masses,
    the `actuation` of a `RollingBallUnreduced` (called `u(t) -> (n,)`).

    **Fields:** `coefficients (M, n)`; static `t_end` (`T > 0`). Subclasses give `n_basis`,
    `basis(t) -> (M,)` and `quadrature()` exact for `u²`. No initial-value constraint: the
    masses' `θ(0)`, `θ̇(0)` are part of the state.

    The coefficients' shape is checked at construction (`ValueError` naming `(..., M, n)`),
    values by `checks()` (`RollingBallUnreduced.parameter_checks` does not include them;
    `ControlProblem` applies them).
    """

    coefficients: eqx.AbstractVar[jax.Array]
    t_end: eqx.AbstractVar[float]

    def __check_init__(self):
        self._check_coefficient_shape()

    def __call__(self, t):
        """`u(t) (n,)`."""
        return self._phi(t) @ self.coefficients

    def effort(self):
        """`∫₀ᵀ Σᵢ uᵢ(t)² dt` by the basis's exact `quadrature()`."""
        return self._integral_of_square(self)

    def sample(self, ts):
        """`u` at the times `ts (k,)`, `(k, n)`."""
        return jax.vmap(self)(jnp.asarray(ts, self.coefficients.dtype))

    def checks(self):
        ok = self._coefficients_finite()
        return [Check(~ok, f"{type(self).__name__}: coefficients NaN or inf")]


def _zeros_like_float(theta0):
    theta0 = jnp.asarray(theta0)
    return theta0 if jnp.issubdtype(theta0.dtype, jnp.inexact) else theta0 * 1.0


class BSplineControl(BSplineBasis, AbstractParametrisedControl):
    """(P1) with `φⱼ = B_{j+2}`, `j = 0..M−1`: the clamped uniform B-splines of `degree` on
    `n_intervals` equal intervals of `[0, T]` (`M = n_intervals + degree − 2`).

    `θ` is the clamped spline whose control points are `θ₀ + θ̇₀ξₖ + c_{k−2}` (`ξₖ` the
    Greville abscissae; `c₋₂ = c₋₁ = 0`), so the coefficients are offsets of control points
    from the initial motion. `θ̈` is a spline of degree `p − 2` (C^{p−3}); the default `p = 5`
    makes it C². The effort quadrature is Gauss–Legendre with `p − 1` points per knot interval,
    exact for `θ̈²` (degree `2p − 4`).

    Build with `BSplineControl.zeros(t_end, n_intervals, theta0, theta_dot0, degree=5)` or with
    explicit `coefficients (M, n)`.
    """

    coefficients: jax.Array
    theta0: jax.Array
    theta_dot0: jax.Array
    t_end: float = eqx.field(static=True)
    n_intervals: int = eqx.field(static=True)
    degree: int = eqx.field(static=True, default=5)

    def __init__(self, coefficients, theta0, theta_dot0, t_end, n_intervals, degree=5):
        self.n_intervals, self.degree = bspline_sizes(
            "BSplineControl", n_intervals, degree, 2, lambda k, p: k + p - 2
        )
        self.t_end = check_horizon(t_end)
        self.coefficients = jnp.asarray(coefficients)
        self.theta0 = jnp.asarray(theta0)
        self.theta_dot0 = jnp.asarray(theta_dot0)

    @classmethod
    def zeros(cls, t_end, n_intervals, theta0, theta_dot0=None, degree=5):
        """`c = 0` (the motion `θ₀ + θ̇₀t`), in `theta0`'s dtype."""
        theta0 = _zeros_like_float(theta0)
        td = jnp.zeros_like(theta0) if theta_dot0 is None else jnp.asarray(theta_dot0)
        M = n_intervals + degree - 2
        c = jnp.zeros((M, theta0.shape[-1]), theta0.dtype)
        return cls(c, theta0, td, t_end, n_intervals, degree)

    @property
    def n_basis(self) -> int:
        return self.n_intervals + self.degree - 2

    def basis(self, t):
        return self.bsplines(t)[2:]

    def quadrature(self):
        return self._interval_rule(self.degree - 1)


class FourierControl(FourierBasis, AbstractParametrisedControl):
    """(P1) with `θ̈ = a₀ + Σₖ₌₁ᴶ aₖ cos ωₖt + bₖ sin ωₖt`, `ωₖ = 2πk/T` (`M = 2J + 1`;
    coefficient rows `(a₀, a₁, b₁, …, a_J, b_J)`). `θ̈` is analytic; `∫₀ᵀ θ̈² = T(a₀² +
    ½Σ(aₖ² + bₖ²))` (Parseval), which the quadrature (the periodic trapezoid rule on `2J + 1`
    points, exact for trigonometric polynomials of degree `≤ 2J`) reproduces exactly.

    Build with `FourierControl.zeros(t_end, n_harmonics, theta0, theta_dot0)` or with explicit
    `coefficients (2J + 1, n)`.
    """

    coefficients: jax.Array
    theta0: jax.Array
    theta_dot0: jax.Array
    t_end: float = eqx.field(static=True)
    n_harmonics: int = eqx.field(static=True)

    def __init__(self, coefficients, theta0, theta_dot0, t_end, n_harmonics):
        self.n_harmonics = fourier_harmonics("FourierControl", n_harmonics)
        self.t_end = check_horizon(t_end)
        self.coefficients = jnp.asarray(coefficients)
        self.theta0 = jnp.asarray(theta0)
        self.theta_dot0 = jnp.asarray(theta_dot0)

    @classmethod
    def zeros(cls, t_end, n_harmonics, theta0, theta_dot0=None):
        """`c = 0` (the motion `θ₀ + θ̇₀t`), in `theta0`'s dtype."""
        theta0 = _zeros_like_float(theta0)
        td = jnp.zeros_like(theta0) if theta_dot0 is None else jnp.asarray(theta_dot0)
        c = jnp.zeros((2 * n_harmonics + 1, theta0.shape[-1]), theta0.dtype)
        return cls(c, theta0, td, t_end, n_harmonics)

    def basis(self, t):
        """The series of `θ̈` integrated twice from zero:
        `(t²/2, (1 − cos ωₖt)/ωₖ², t/ωₖ − sin ωₖt/ωₖ²)`."""
        w, cos, sin = self.harmonics(t)
        return self._rows(0.5 * t * t, (1.0 - cos) / w**2, t / w - sin / w**2)


def _coefficients(n_basis: int, n, dtype):
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (the number of masses) must be a positive integer, got {n!r}")
    return jnp.zeros((n_basis, int(n)), jnp.result_type(float) if dtype is None else dtype)


class BSplineActuation(BSplineBasis, AbstractParametrisedActuation):
    """(P2) with `ψ` all `M = n_intervals + degree` clamped uniform B-splines of `degree` on
    `[0, T]`: `u` is the clamped spline whose control points are the coefficient rows
    (`u(0) = c₀`, `u(T) = c_{M−1}`), `C^{p−1}` (the default `p = 3` gives `u ∈ C²`). The
    effort quadrature is Gauss–Legendre with `p + 1` points per knot interval, exact for `u²`
    (degree `2p`).

    Build with `BSplineActuation.zeros(t_end, n_intervals, n, degree=3, dtype=None)` (`u = 0`)
    or with explicit `coefficients (M, n)`.
    """

    coefficients: jax.Array
    t_end: float = eqx.field(static=True)
    n_intervals: int = eqx.field(static=True)
    degree: int = eqx.field(static=True, default=3)

    def __init__(self, coefficients, t_end, n_intervals, degree=3):
        self.n_intervals, self.degree = bspline_sizes(
            "BSplineActuation", n_intervals, degree, 0, lambda k, p: k + p
        )  # every clamped B-spline: M = n_intervals + degree
        self.t_end = check_horizon(t_end)
        self.coefficients = jnp.asarray(coefficients)

    @classmethod
    def zeros(cls, t_end, n_intervals, n, degree=3, dtype=None):
        """`u = 0` for `n` masses (`dtype`: jax's default float unless given)."""
        n_intervals, degree = bspline_sizes(
            cls.__name__, n_intervals, degree, 0, lambda k, p: k + p
        )
        return cls(_coefficients(n_intervals + degree, n, dtype), t_end, n_intervals, degree)

    @property
    def n_basis(self) -> int:
        return self.n_intervals + self.degree

    def basis(self, t):
        return self.bsplines(t)

    def quadrature(self):
        return self._interval_rule(self.degree + 1)


class FourierActuation(FourierBasis, AbstractParametrisedActuation):
    """(P2) with `u = a₀ + Σₖ₌₁ᴶ aₖ cos ωₖt + bₖ sin ωₖt`, `ωₖ = 2πk/T` (`M = 2J + 1`; rows
    `(a₀, a₁, b₁, …, a_J, b_J)`, as `FourierControl`'s for `θ̈`). `∫₀ᵀ u² = T(a₀² +
    ½Σ(aₖ² + bₖ²))` (Parseval), reproduced exactly by the periodic trapezoid rule.

    Build with `FourierActuation.zeros(t_end, n_harmonics, n, dtype=None)` (`u = 0`) or with
    explicit `coefficients (2J + 1, n)`.
    """

    coefficients: jax.Array
    t_end: float = eqx.field(static=True)
    n_harmonics: int = eqx.field(static=True)

    def __init__(self, coefficients, t_end, n_harmonics):
        self.n_harmonics = fourier_harmonics("FourierActuation", n_harmonics)
        self.t_end = check_horizon(t_end)
        self.coefficients = jnp.asarray(coefficients)

    @classmethod
    def zeros(cls, t_end, n_harmonics, n, dtype=None):
        """`u = 0` for `n` masses (`dtype`: jax's default float unless given)."""
        n_harmonics = fourier_harmonics(cls.__name__, n_harmonics)
        return cls(_coefficients(2 * n_harmonics + 1, n, dtype), t_end, n_harmonics)

    def basis(self, t):
        _, cos, sin = self.harmonics(t)
        return self._rows(jnp.ones_like(t), cos, sin)
