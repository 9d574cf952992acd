"""Parametrised rail controls (`jaxrigid.control.parametrisations`, issue 14).

- The initial conditions `θ(0) = θ₀`, `θ̇(0) = θ̇₀` hold for random coefficients (P1).
- `θ, θ̇, θ̈` against independent implementations: scipy's `BSpline` (de Boor, its own
  derivative formulas) on the same knots and control points; the Fourier series of `θ̈`
  written out and its closed-form double integral; and central finite differences of `θ`.
- The effort quadrature against Parseval (Fourier) and adaptive quadrature (B-spline).
- `jit` = eager, `vmap` = loop, `grad` of the effort = finite differences; errors.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import quad_by_interval
from scipy.interpolate import BSpline

from jaxrigid import _checks
from jaxrigid.control.parametrisations import BSplineControl, FourierControl

T = 5.0
THETA0 = np.array([-np.pi / 2, -np.pi / 2 + 0.3])
THETA_DOT0 = np.array([0.2, -0.4])


def _random(control, seed=0):
    rng = np.random.default_rng(seed)
    return control.with_coefficients(jnp.asarray(rng.normal(size=control.coefficients.shape)))


def _controls():
    return [
        _random(BSplineControl.zeros(T, 6, THETA0, THETA_DOT0, degree=5)),
        _random(BSplineControl.zeros(T, 4, THETA0, THETA_DOT0, degree=3), 1),
        _random(FourierControl.zeros(T, 3, THETA0, THETA_DOT0), 2),
    ]


@pytest.mark.parametrize("control", _controls(), ids=["bspline5", "bspline3", "fourier"])
def test_initial_conditions_hold_by_construction(control):
    """`θ(0) = θ₀` to the bit (every basis function is a product with a factor `t`);
    `θ̇(0) = θ̇₀` to round-off of the basis's derivative (1e-14 absolute)."""
    th, thd, _ = control.derivatives(0.0)
    np.testing.assert_array_equal(th, THETA0)
    np.testing.assert_allclose(thd, THETA_DOT0, rtol=0, atol=1e-14)


def _scipy_spline(control):
    """scipy's clamped spline with control points `θ₀ + θ̇₀ξₖ + c_{k−2}` (Greville `ξₖ`)."""
    p, U = control.degree, control.knots
    n_all = len(U) - p - 1
    greville = np.array([U[k + 1 : k + p + 1].mean() for k in range(n_all)])
    c = np.zeros((n_all, 2))
    c[2:] = np.asarray(control.coefficients)
    points = THETA0 + np.outer(greville, THETA_DOT0) + c
    return BSpline(U, points, p, extrapolate=True)


@pytest.mark.parametrize("control", _controls()[:2], ids=["bspline5", "bspline3"])
def test_bspline_equals_scipy_bspline(control):
    """θ, θ̇, θ̈ = scipy's `BSpline` and its derivatives on `[0, T]` (and 0.3 past each end,
    where both extrapolate the end pieces), to 1e-12 relative to the largest value: two
    evaluations of the same polynomials, round-off apart."""
    ref = _scipy_spline(control)
    ts = np.linspace(-0.3, T + 0.3, 61)
    got = control.sample(ts)
    for k, g in enumerate(got):
        want = ref.derivative(k)(ts) if k else ref(ts)
        scale = np.max(np.abs(want))
        np.testing.assert_allclose(g, want, rtol=0, atol=1e-12 * scale, err_msg=f"derivative {k}")


def test_fourier_acceleration_is_the_series():
    """`θ̈ = a₀ + Σ aₖ cos ωₖt + bₖ sin ωₖt` written out, and `θ` its double integral with the
    initial conditions in closed form, to 1e-12 relative (round-off)."""
    control = _controls()[2]
    c = np.asarray(control.coefficients)
    ts = np.linspace(0.0, T, 41)
    w = 2 * np.pi * np.arange(1, 4) / T
    a, b = c[1::2], c[2::2]
    acc = c[0] + np.cos(np.outer(ts, w)) @ a + np.sin(np.outer(ts, w)) @ b
    theta = (
        THETA0
        + np.outer(ts, THETA_DOT0)
        + np.outer(ts**2 / 2, c[0])
        + ((1 - np.cos(np.outer(ts, w))) / w**2) @ a
        + (np.outer(ts, 1 / w) - np.sin(np.outer(ts, w)) / w**2) @ b
    )
    th, _, thdd = control.sample(ts)
    np.testing.assert_allclose(thdd, acc, rtol=0, atol=1e-12 * np.max(np.abs(acc)))
    np.testing.assert_allclose(th, theta, rtol=0, atol=1e-12 * np.max(np.abs(theta)))


@pytest.mark.parametrize("control", _controls(), ids=["bspline5", "bspline3", "fourier"])
def test_derivatives_equal_finite_differences(control):
    """θ̇ and θ̈ (nested forward mode) = central differences of θ and θ̇ with step 1e-4: the
    truncation error h²/6·|θ'''| ≲ 1e-7 dominates round-off (eps/h ≈ 1e-12), so 1e-6 relative
    to the largest value."""
    h = 1e-4
    # off the knots (multiples of T/6 and T/4): the cubic's θ̈ has kinks there, and a
    # difference across a kink is not a derivative
    ts = np.linspace(0.13, T - 0.11, 17)
    th = lambda t: control.sample(t)[0]  # noqa: E731
    thd = lambda t: control.sample(t)[1]  # noqa: E731
    _, d1, d2 = control.sample(ts)
    fd1 = (th(ts + h) - th(ts - h)) / (2 * h)
    fd2 = (thd(ts + h) - thd(ts - h)) / (2 * h)
    np.testing.assert_allclose(d1, fd1, rtol=0, atol=1e-6 * np.max(np.abs(d1)))
    np.testing.assert_allclose(d2, fd2, rtol=0, atol=1e-6 * np.max(np.abs(d2)))


def test_effort_quadrature_is_exact():
    """Fourier: Parseval `T(a₀² + ½Σ(aₖ² + bₖ²))` per mass; B-splines: scipy's adaptive
    `quad` of `θ̈²` per knot interval (its own tolerance 1e-13). Both to 1e-12 relative:
    the rules are exact for these integrands, so only round-off remains."""
    bs5, bs3, fo = _controls()
    c = np.asarray(fo.coefficients)
    parseval = T * np.sum(c[0] ** 2 + 0.5 * np.sum(c[1:] ** 2, axis=0))
    np.testing.assert_allclose(fo.effort(), parseval, rtol=1e-12)
    for control in (bs5, bs3):
        acc = _scipy_spline(control).derivative(2)
        edges = np.linspace(0, T, control.n_intervals + 1)
        want = quad_by_interval(lambda t: np.sum(acc(t) ** 2), edges)
        np.testing.assert_allclose(control.effort(), want, rtol=1e-12)


def test_jit_vmap_grad():
    """`jit` = eager (1e-14: the same operations, fused); `vmap` over coefficient sets = a
    loop (1e-14); `grad` of the effort (a quadratic form) = central differences (exact for a
    quadratic up to round-off: 1e-8 relative with step 1e-3)."""
    control = _controls()[0]
    t = jnp.asarray(1.7)
    eager = control.derivatives(t)
    jitted = jax.jit(lambda c, t: c.derivatives(t))(control, t)
    for a, b in zip(eager, jitted):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)

    rng = np.random.default_rng(3)
    cs = jnp.asarray(rng.normal(size=(4,) + control.coefficients.shape))
    batched = jax.vmap(lambda c: control.with_coefficients(c).derivatives(t))(cs)
    for k in range(4):
        one = control.with_coefficients(cs[k]).derivatives(t)
        for a, b in zip(batched, one):
            np.testing.assert_allclose(a[k], b, rtol=1e-14, atol=1e-14)

    effort = lambda c: control.with_coefficients(c).effort()  # noqa: E731
    c0 = control.coefficients
    g = jax.grad(effort)(c0)
    fd = np.zeros(c0.shape)
    h = 1e-3
    for idx in np.ndindex(c0.shape):
        e = np.zeros(c0.shape)
        e[idx] = h
        fd[idx] = (effort(c0 + e) - effort(c0 - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=0, atol=1e-8 * np.max(np.abs(fd)))


def test_bad_input_raises():
    """Wrong coefficient shape, wrong initial-value shape, T ≤ 0, bad sizes: `ValueError`
    naming what is allowed; NaN coefficients: the control's value check."""
    with pytest.raises(ValueError, match=r"coefficients must have shape \(\.\.\., 9, n\)"):
        BSplineControl(jnp.zeros((8, 2)), THETA0, THETA_DOT0, T, 6)
    with pytest.raises(ValueError, match=r"theta0 must have shape \(\.\.\., 2\)"):
        FourierControl(jnp.zeros((5, 2)), THETA0[:1], THETA_DOT0, T, 2)
    with pytest.raises(ValueError, match="t_end must be positive"):
        BSplineControl.zeros(0.0, 6, THETA0)
    with pytest.raises(ValueError, match="t_end must be positive"):
        FourierControl.zeros(-1.0, 2, THETA0)
    with pytest.raises(ValueError, match="degree must be an integer ≥ 2"):
        BSplineControl.zeros(T, 6, THETA0, degree=1)
    control = BSplineControl.zeros(T, 6, THETA0)
    with pytest.raises(ValueError, match=r"coefficients must have shape \(9, 2\)"):
        control.with_coefficients(jnp.zeros((9, 3)))
    bad = control.with_coefficients(control.coefficients.at[0, 0].set(jnp.nan))
    with pytest.raises(ValueError, match="NaN or inf"):
        _checks.raise_now(bad.checks())
