"""S² maps (Gebhardt & Romero §2.1, eqs. 6–11) against their defining properties."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.lie import so3, sphere

EPS = np.finfo(np.float64).eps


def _points(n, seed=0):
    rng = np.random.default_rng(seed)
    d0 = rng.standard_normal((n, 3))
    d0 /= np.linalg.norm(d0, axis=-1, keepdims=True)
    v = rng.standard_normal((n, 3))
    v -= np.sum(v * d0, axis=-1, keepdims=True) * d0
    return jnp.asarray(d0), jnp.asarray(v)


def _scaled(v, lengths):
    return v / jnp.linalg.norm(v, axis=-1, keepdims=True) * lengths[:, None]


def test_exp_lands_on_sphere_and_log_inverts_it():
    d0, v = _points(200)
    # lengths across (0, π): the series branch, the closed form, and close to the antipode
    lengths = jnp.concatenate([jnp.geomspace(1e-9, 0.09, 50), jnp.linspace(0.11, 3.1, 150)])
    v = _scaled(v, lengths)
    d = sphere.exp(d0, v)
    # unit length and log∘exp = id to a few ulps (atan2 angle; θ/sinθ loses ~1/(π−θ) near π)
    np.testing.assert_allclose(jnp.linalg.norm(d, axis=-1), 1.0, atol=4 * EPS)
    np.testing.assert_allclose(sphere.log(d0, d), v, atol=200 * EPS)
    # exp∘log = id on points
    np.testing.assert_allclose(sphere.exp(d0, sphere.log(d0, d)), d, atol=20 * EPS)


def test_log_is_tangent_and_has_the_geodesic_length():
    d0, v = _points(50, seed=1)
    d = sphere.exp(d0, _scaled(v, jnp.linspace(0.2, 3.0, 50)))
    a = sphere.log(d0, d)
    # round-off of (I − d0⊗d0)d, amplified by θ/sin θ ≤ 21 at θ = 3
    np.testing.assert_allclose(jnp.sum(a * d0, axis=-1), 0.0, atol=50 * EPS)
    cos = jnp.clip(jnp.sum(d0 * d, axis=-1), -1, 1)
    np.testing.assert_allclose(jnp.linalg.norm(a, axis=-1), jnp.arccos(cos), rtol=1e-12)


def test_exp_and_log_are_nan_safe_at_zero_with_finite_gradients():
    d0 = jnp.array([0.0, 0.0, 1.0])
    g = jax.jacfwd(lambda v: sphere.exp(d0, v))(jnp.zeros(3))
    assert np.isfinite(np.asarray(g)).all()
    np.testing.assert_allclose(g, jnp.eye(3), atol=0)  # d exp at 0 is the identity (tangent)
    assert np.isfinite(np.asarray(jax.jacfwd(lambda d: sphere.log(d0, d))(d0))).all()
    np.testing.assert_array_equal(sphere.log(d0, d0), jnp.zeros(3))


def test_geodesic_solves_eq8():
    """∇_{d'} d' = (I − d⊗d) d'' = 0 along d_G(s), and d_G(0) = d0, d_G'(0) = v0."""
    d0, v = _points(20, seed=2)
    v = _scaled(v, jnp.linspace(0.1, 3.0, 20))
    for i in (0, 19):
        f = lambda s, i=i: sphere.geodesic(d0[i], v[i], s)  # noqa: E731
        ds = jax.jacfwd(f)
        dds = jax.jacfwd(ds)
        np.testing.assert_allclose(f(0.0), d0[i], atol=0)
        np.testing.assert_allclose(ds(0.0), v[i], atol=4 * EPS)
        for s in (0.0, 0.3, 0.7, 1.0):
            d = f(s)
            # |d''| = |v0|² ≤ 9: covariant acceleration zero to round-off of that size
            np.testing.assert_allclose(sphere.project(d, dds(s)), 0.0, atol=100 * EPS)
            # constant speed |v0|
            np.testing.assert_allclose(jnp.linalg.norm(ds(s)), jnp.linalg.norm(v[i]), rtol=1e-14)


def test_parallel_transport_keeps_vectors_tangent_with_their_length():
    d0, v = _points(100, seed=3)
    d = sphere.exp(d0, _scaled(v, jnp.linspace(0.01, 3.0, 100)))
    _, w0 = _points(100, seed=4)
    w0 = sphere.project(d0, w0)
    w = sphere.parallel_transport(d0, d, w0)
    np.testing.assert_allclose(jnp.sum(w * d, axis=-1), 0.0, atol=200 * EPS)  # round-off
    np.testing.assert_allclose(
        jnp.linalg.norm(w, axis=-1), jnp.linalg.norm(w0, axis=-1), rtol=1e-13
    )
    # inner products are kept too (an isometry), and transporting back is the identity
    _, u0 = _points(100, seed=5)
    u0 = sphere.project(d0, u0)
    u = sphere.parallel_transport(d0, d, u0)
    np.testing.assert_allclose(jnp.sum(w * u, -1), jnp.sum(w0 * u0, -1), atol=1e-13)
    np.testing.assert_allclose(sphere.parallel_transport(d, d0, w), w0, atol=1e-13)


def test_parallel_transport_equals_eq10_and_the_rotation_along_the_arc():
    d0, v = _points(100, seed=6)
    d = sphere.exp(d0, _scaled(v, jnp.linspace(0.05, 3.0, 100)))
    _, w0 = _points(100, seed=7)
    w0 = sphere.project(d0, w0)
    w = sphere.parallel_transport(d0, d, w0)
    np.testing.assert_allclose(sphere.parallel_transport_eq10(d0, d, w0), w, atol=1e-12)
    # the rotation about d0 × d by the angle θ takes d0 to d and w0 to w
    axis = jnp.cross(d0, d)
    axis = axis / jnp.linalg.norm(axis, axis=-1, keepdims=True)
    rot = axis * sphere.angle(d0, d)[:, None]
    np.testing.assert_allclose(so3.rotate_exp(rot, d0), d, atol=1e-14)
    np.testing.assert_allclose(so3.rotate_exp(rot, w0), w, atol=1e-13)


def test_parallel_transport_solves_eq11_along_the_geodesic():
    """w(s) = P_{d0→d_G(s)} w0 has (I − d⊗d) w' = 0 (eq. 11)."""
    d0, v = _points(5, seed=8)
    _, w0 = _points(5, seed=9)
    w0 = sphere.project(d0, w0)
    for i in range(2):
        w = lambda s, i=i: sphere.parallel_transport(  # noqa: E731
            d0[i], sphere.geodesic(d0[i], v[i], s), w0[i]
        )
        for s in (0.0, 0.4, 1.0):
            d = sphere.geodesic(d0[i], v[i], s)
            np.testing.assert_allclose(sphere.project(d, jax.jacfwd(w)(s)), 0.0, atol=1e-13)


@pytest.mark.parametrize("fn", ["exp", "log", "parallel_transport"])
def test_batched_equals_unbatched(fn):
    d0, v = _points(6, seed=10)
    d = sphere.exp(d0, v)
    args = {"exp": (d0, v), "log": (d0, d), "parallel_transport": (d0, d, v)}[fn]
    f = getattr(sphere, fn)
    batched = f(*args)
    for i in range(6):
        np.testing.assert_array_equal(batched[i], f(*(a[i] for a in args)))
