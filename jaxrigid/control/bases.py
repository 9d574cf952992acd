"""The bases of the parametrised controls and actuations: each written once and
shared by the control `θ(t)` and the actuation `u(t)` on it (`parametrisations`).

- `LinearInCoefficients`: a function of `t` linear in `coefficients (M, n)` through `M` basis
  functions on `[0, T]`, with a `quadrature()` exact for the square of what is integrated;
- `BSplineBasis`: clamped uniform B-splines (Cox–de Boor, extrapolated past `[0, T]`) and
  Gauss–Legendre rules per knot interval;
- `FourierBasis`: the harmonics `ωₖ = 2πk/T` and the periodic trapezoid rule.
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._jet import as_float

__all__ = ["gauss_legendre_intervals"]


def check_horizon(t_end) -> float:
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


class LinearInCoefficients(eqx.Module):
    """What a parametrised control and a parametrised actuation share: a function of `t`
    linear in `coefficients (M, n)` (one column per mass) through `M` basis functions on
    `[0, T]` (`basis(t) -> (M,)`), and a `quadrature()` on `[0, T]` (nodes, weights; float64
    numpy) exact for the square of what the subclass integrates."""

    coefficients: eqx.AbstractVar[jax.Array]
    t_end: eqx.AbstractVar[float]

    @property
    @abc.abstractmethod
    def n_basis(self) -> int:
        """`M`, the number of basis functions (rows of `coefficients`)."""

    @abc.abstractmethod
    def basis(self, t):
        """The `M` basis functions at `t`, `(M,)`."""

    @abc.abstractmethod
    def quadrature(self):
        """`(nodes, weights)` on `[0, T]` (float64 numpy), exact for the effort's integrand."""

    def _check_coefficient_shape(self) -> int:
        """`n` (the columns); `ValueError` naming the expected shape `(..., M, n)`."""
        c = jnp.shape(self.coefficients)
        if len(c) < 2 or c[-2] != self.n_basis:
            raise ValueError(
                f"{type(self).__name__}: coefficients must have shape (..., {self.n_basis}, n) "
                f"(n_basis = {self.n_basis} rows, one column per mass), got {c}"
            )
        return c[-1]

    @property
    def size(self) -> int:
        return jnp.shape(self.coefficients)[-1]

    def _phi(self, t):
        """`basis(t)` in the coefficients' dtype (`t` made a float first)."""
        return self.basis(as_float(t)).astype(self.coefficients.dtype)

    def with_coefficients(self, coefficients):
        """The same object with new `coefficients` (shape checked)."""
        coefficients = jnp.asarray(coefficients)
        if jnp.shape(coefficients) != jnp.shape(self.coefficients):
            raise ValueError(
                f"{type(self).__name__}: coefficients must have shape "
                f"{jnp.shape(self.coefficients)}, got {jnp.shape(coefficients)}"
            )
        return eqx.tree_at(lambda c: c.coefficients, self, coefficients)

    def zero_coefficients(self):
        """`zeros (M, n)` in the coefficients' dtype."""
        return jnp.zeros_like(self.coefficients)

    def _integral_of_square(self, f):
        """`∫₀ᵀ |f(t)|² dt` by `quadrature()` (`f(t) -> (n,)`)."""
        nodes, weights = self.quadrature()
        dtype = self.coefficients.dtype
        nodes, weights = jnp.asarray(nodes, dtype), jnp.asarray(weights, dtype)
        values = jax.vmap(f)(nodes)
        return jnp.sum(weights * jnp.sum(values * values, axis=-1))

    def _coefficients_finite(self):
        return jnp.all(jnp.isfinite(self.coefficients), axis=(-2, -1))


# --- the bases: each written once, shared by the control and the actuation on it -----------


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


def bspline_sizes(name: str, n_intervals, degree, min_degree: int, n_basis) -> tuple[int, int]:
    """`(n_intervals, degree)` as ints; `ValueError` for a degree below `min_degree`, no
    interval, or `n_basis(n_intervals, degree) < 1`."""
    if not isinstance(degree, (int, np.integer)) or degree < min_degree:
        raise ValueError(f"{name}: degree must be an integer ≥ {min_degree}, got {degree!r}")
    if not isinstance(n_intervals, (int, np.integer)) or n_intervals < 1:
        raise ValueError(f"{name}: n_intervals must be a positive integer, got {n_intervals!r}")
    if n_basis(int(n_intervals), int(degree)) < 1:
        raise ValueError(f"{name}: needs at least one basis function")
    return int(n_intervals), int(degree)


class BSplineBasis(eqx.Module):
    """The clamped uniform B-splines of `degree` on `n_intervals` equal intervals of `[0, T]`
    (`n_intervals + degree` of them), and Gauss–Legendre rules per knot interval."""

    t_end: eqx.AbstractVar[float]
    n_intervals: eqx.AbstractVar[int]
    degree: eqx.AbstractVar[int]

    @property
    def knots(self) -> np.ndarray:
        return _clamped_knots(self.t_end, self.n_intervals, self.degree)

    def bsplines(self, t):
        """All `n_intervals + degree` B-splines at `t`, `(n_intervals + degree,)`."""
        h = self.t_end / self.n_intervals
        return _bspline_basis(t, self.knots, self.degree, self.n_intervals, h)

    def _interval_rule(self, points: int):
        """`points`-point Gauss–Legendre on each knot interval (exact to degree
        `2·points − 1` per interval)."""
        edges = np.linspace(0.0, self.t_end, self.n_intervals + 1)
        return gauss_legendre_intervals(edges, points)


def fourier_harmonics(name: str, n_harmonics) -> int:
    if not isinstance(n_harmonics, (int, np.integer)) or n_harmonics < 0:
        raise ValueError(f"{name}: n_harmonics must be a non-negative integer, got {n_harmonics!r}")
    return int(n_harmonics)


class FourierBasis(eqx.Module):
    """The harmonics `ωₖ = 2πk/T`, `k = 1..J` (`J = n_harmonics`), and the periodic trapezoid
    rule on `2J + 1` points, exact for trigonometric polynomials of degree `≤ 2J` (the square
    of a series of degree `J`)."""

    t_end: eqx.AbstractVar[float]
    n_harmonics: eqx.AbstractVar[int]

    @property
    def n_basis(self) -> int:
        return 2 * self.n_harmonics + 1

    def harmonics(self, t):
        """`(ω (J,), cos ωt (J,), sin ωt (J,))` in `t`'s dtype."""
        J = self.n_harmonics
        w = jnp.asarray(2.0 * np.pi * np.arange(1, J + 1) / self.t_end, t.dtype)
        return w, jnp.cos(w * t), jnp.sin(w * t)

    @staticmethod
    def _rows(first, cos_part, sin_part):
        """`(first, cos₁, sin₁, …, cos_J, sin_J)`: the coefficient rows' order."""
        pairs = jnp.stack([cos_part, sin_part], axis=-1).reshape((2 * cos_part.shape[0],))
        return jnp.concatenate([jnp.reshape(first, (1,)), pairs])

    def quadrature(self):
        m = 2 * self.n_harmonics + 1
        nodes = self.t_end * np.arange(m) / m
        return nodes, np.full(m, self.t_end / m)
