"""Parametrised rail controls `θᵢ(t)` with a fixed number of coefficients (issue 14).

The model note (`shared/models/rolling-ball.md`, "Optimal control"; mode 1 "prescribed
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
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import Check
from .._jet import as_float
from ..controls import AbstractControl

__all__ = [
    "AbstractParametrisedControl",
    "BSplineControl",
    "FourierControl",
    "gauss_legendre_intervals",
]


def _check_horizon(t_end) -> float:
    try:
        t_end = float(t_end)
    except TypeError as err:  # a tracer or an array of several values
        raise TypeError(f"t_end must be a concrete positive number, got {t_end!r}") from err
    if not (math.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be positive and finite, got {t_end}")
    return t_end


def gauss_legendre_intervals(edges, points: int):
    """Nodes and weights `(len(edges) − 1)·points` of the `points`-point Gauss–Legendre rule on
    each interval `[edges[k], edges[k+1]]` (exact for polynomials of degree `2·points − 1` on
    each interval), as float64 numpy arrays."""
    x, w = np.polynomial.legendre.leggauss(points)
    edges = np.asarray(edges, float)
    a, b = edges[:-1, None], edges[1:, None]
    nodes = 0.5 * (b - a) * x[None] + 0.5 * (b + a)
    weights = 0.5 * (b - a) * w[None]
    return nodes.ravel(), weights.ravel()


class AbstractParametrisedControl(AbstractControl):
    """`θ(t) = θ₀ + θ̇₀t + φ(t)ᵀc` (P1) for `n` masses.

    **Fields:** `coefficients (M, n)`, `theta0 (n,)`, `theta_dot0 (n,)`; static `t_end`
    (`T > 0`). Subclasses give `n_basis` (`M`, static), `basis(t) -> (M,)` (functions vanishing
    with their derivative at 0) and `quadrature()` (nodes, weights on `[0, T]`, numpy, exact for
    `θ̈²` of this basis). `θ̇`, `θ̈` come from `derivatives` (nested `jax.jvp`, as for every
    `AbstractControl`).

    Shapes are checked at construction (`ValueError` naming the expected shape); values (NaN,
    inf) by `checks()`, which `RollingBall.parameter_checks` and so `simulate` apply.
    """

    coefficients: eqx.AbstractVar[jax.Array]
    theta0: eqx.AbstractVar[jax.Array]
    theta_dot0: eqx.AbstractVar[jax.Array]
    t_end: eqx.AbstractVar[float]

    @property
    @abc.abstractmethod
    def n_basis(self) -> int:
        """`M`, the number of basis functions (rows of `coefficients`)."""

    @abc.abstractmethod
    def basis(self, t):
        """`φ(t) (M,)`, each vanishing with its first derivative at `t = 0`."""

    @abc.abstractmethod
    def quadrature(self):
        """`(nodes, weights)` on `[0, T]` (float64 numpy), exact for `∫₀ᵀ θ̈(t)² dt`."""

    def __check_init__(self):
        c = jnp.shape(self.coefficients)
        n = c[-1] if len(c) >= 2 else None
        if len(c) < 2 or c[-2] != self.n_basis:
            raise ValueError(
                f"{type(self).__name__}: coefficients must have shape (..., {self.n_basis}, n) "
                f"(n_basis = {self.n_basis} rows, one column per mass), got {c}"
            )
        for name in ("theta0", "theta_dot0"):
            s = jnp.shape(getattr(self, name))
            if len(s) < 1 or s[-1] != n:
                raise ValueError(
                    f"{type(self).__name__}: {name} must have shape (..., {n}) (one entry per "
                    f"column of coefficients), got {s}"
                )

    @property
    def size(self) -> int:
        return jnp.shape(self.coefficients)[-1]

    def __call__(self, t):
        t = as_float(t)
        phi = self.basis(t).astype(self.coefficients.dtype)
        return self.theta0 + self.theta_dot0 * t + phi @ self.coefficients

    def with_coefficients(self, coefficients):
        """The same control with new `coefficients` (shape checked)."""
        coefficients = jnp.asarray(coefficients)
        if jnp.shape(coefficients) != jnp.shape(self.coefficients):
            raise ValueError(
                f"{type(self).__name__}: coefficients must have shape "
                f"{jnp.shape(self.coefficients)}, got {jnp.shape(coefficients)}"
            )
        return eqx.tree_at(lambda c: c.coefficients, self, coefficients)

    def zero_coefficients(self):
        """`zeros (M, n)` in the control's dtype: the motion `θ₀ + θ̇₀t`."""
        return jnp.zeros_like(self.coefficients)

    def effort(self):
        """`∫₀ᵀ Σᵢ θ̈ᵢ(t)² dt` by the basis's exact `quadrature()` (independent of any
        integrator's step; the control-penalty term of "Optimal control")."""
        nodes, weights = self.quadrature()
        dtype = self.coefficients.dtype
        nodes, weights = jnp.asarray(nodes, dtype), jnp.asarray(weights, dtype)
        acc = jax.vmap(lambda t: self.derivatives(t)[2])(nodes)
        return jnp.sum(weights * jnp.sum(acc * acc, axis=-1))

    def sample(self, ts):
        """`(θ, θ̇, θ̈)` at the times `ts (k,)`, each `(k, n)`."""
        return jax.vmap(self.derivatives)(jnp.asarray(ts, self.coefficients.dtype))

    def checks(self):
        ok = (
            jnp.all(jnp.isfinite(self.coefficients), axis=(-2, -1))
            & jnp.all(jnp.isfinite(self.theta0), axis=-1)
            & jnp.all(jnp.isfinite(self.theta_dot0), axis=-1)
        )
        return [Check(~ok, f"{type(self).__name__}: coefficients or initial values NaN or inf")]


def _clamped_knots(t_end: float, n_intervals: int, degree: int) -> np.ndarray:
    inner = np.linspace(0.0, t_end, n_intervals + 1)
    return np.concatenate([np.zeros(degree), inner, np.full(degree, t_end)])


def _safe_reciprocal(x: np.ndarray) -> np.ndarray:
    """`1/x` where `x ≠ 0`, else 0 (repeated knots: the Cox–de Boor convention 0/0 = 0)."""
    out = np.zeros_like(x)
    np.divide(1.0, x, out=out, where=x != 0)
    return out


def _bspline_basis(t, knots: np.ndarray, degree: int, n_intervals: int, h: float):
    """All `len(knots) − degree − 1` B-splines of `degree` at `t` (Cox–de Boor).

    The knot span is found from the uniform spacing `h` and clipped to `[0, T]`'s intervals,
    so outside `[0, T]` the end pieces' polynomials continue (no zero tail, no kink at `T`)."""
    k = jnp.clip(jnp.floor(t / h), 0, n_intervals - 1).astype(jnp.int32)
    span = degree + k  # knots[span] ≤ t < knots[span + 1]
    N = (jnp.arange(len(knots) - 1) == span).astype(t.dtype)
    U = knots
    for d in range(1, degree + 1):
        m = len(U) - 1 - d  # number of degree-d functions
        i = np.arange(m)
        # numpy constants cast to t's dtype: a float32 control stays float32 under x64
        c = lambda a: jnp.asarray(a, t.dtype)  # noqa: E731
        left = c(_safe_reciprocal(U[i + d] - U[i]))
        right = c(_safe_reciprocal(U[i + d + 1] - U[i + 1]))
        N = (t - c(U[i])) * left * N[:m] + (c(U[i + d + 1]) - t) * right * N[1 : m + 1]
    return N


class BSplineControl(AbstractParametrisedControl):
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
        if not isinstance(degree, (int, np.integer)) or degree < 2:
            raise ValueError(f"BSplineControl: degree must be an integer ≥ 2, got {degree!r}")
        if not isinstance(n_intervals, (int, np.integer)) or n_intervals < 1:
            raise ValueError(
                f"BSplineControl: n_intervals must be a positive integer, got {n_intervals!r}"
            )
        if n_intervals + degree - 2 < 1:
            raise ValueError("BSplineControl: needs n_intervals + degree − 2 ≥ 1 basis functions")
        self.t_end = _check_horizon(t_end)
        self.n_intervals = int(n_intervals)
        self.degree = int(degree)
        self.coefficients = jnp.asarray(coefficients)
        self.theta0 = jnp.asarray(theta0)
        self.theta_dot0 = jnp.asarray(theta_dot0)

    @classmethod
    def zeros(cls, t_end, n_intervals, theta0, theta_dot0=None, degree=5):
        """`c = 0` (the motion `θ₀ + θ̇₀t`), in `theta0`'s dtype."""
        theta0 = jnp.asarray(theta0)
        theta0 = theta0 if jnp.issubdtype(theta0.dtype, jnp.inexact) else theta0 * 1.0
        td = jnp.zeros_like(theta0) if theta_dot0 is None else jnp.asarray(theta_dot0)
        M = n_intervals + degree - 2
        c = jnp.zeros((M, theta0.shape[-1]), theta0.dtype)
        return cls(c, theta0, td, t_end, n_intervals, degree)

    @property
    def n_basis(self) -> int:
        return self.n_intervals + self.degree - 2

    @property
    def knots(self) -> np.ndarray:
        return _clamped_knots(self.t_end, self.n_intervals, self.degree)

    def basis(self, t):
        h = self.t_end / self.n_intervals
        B = _bspline_basis(t, self.knots, self.degree, self.n_intervals, h)
        return B[2:]

    def quadrature(self):
        edges = np.linspace(0.0, self.t_end, self.n_intervals + 1)
        return gauss_legendre_intervals(edges, self.degree - 1)


class FourierControl(AbstractParametrisedControl):
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
        if not isinstance(n_harmonics, (int, np.integer)) or n_harmonics < 0:
            raise ValueError(
                f"FourierControl: n_harmonics must be a non-negative integer, got {n_harmonics!r}"
            )
        self.t_end = _check_horizon(t_end)
        self.n_harmonics = int(n_harmonics)
        self.coefficients = jnp.asarray(coefficients)
        self.theta0 = jnp.asarray(theta0)
        self.theta_dot0 = jnp.asarray(theta_dot0)

    @classmethod
    def zeros(cls, t_end, n_harmonics, theta0, theta_dot0=None):
        """`c = 0` (the motion `θ₀ + θ̇₀t`), in `theta0`'s dtype."""
        theta0 = jnp.asarray(theta0)
        theta0 = theta0 if jnp.issubdtype(theta0.dtype, jnp.inexact) else theta0 * 1.0
        td = jnp.zeros_like(theta0) if theta_dot0 is None else jnp.asarray(theta_dot0)
        c = jnp.zeros((2 * n_harmonics + 1, theta0.shape[-1]), theta0.dtype)
        return cls(c, theta0, td, t_end, n_harmonics)

    @property
    def n_basis(self) -> int:
        return 2 * self.n_harmonics + 1

    def basis(self, t):
        J = self.n_harmonics
        w = jnp.asarray(2.0 * np.pi * np.arange(1, J + 1) / self.t_end, t.dtype)
        wt = w * t
        cos_part = (1.0 - jnp.cos(wt)) / w**2
        sin_part = t / w - jnp.sin(wt) / w**2
        pairs = jnp.stack([cos_part, sin_part], axis=-1).reshape((2 * J,))
        return jnp.concatenate([jnp.reshape(0.5 * t * t, (1,)), pairs])

    def quadrature(self):
        m = 2 * self.n_harmonics + 1
        nodes = self.t_end * np.arange(m) / m
        return nodes, np.full(m, self.t_end / m)
