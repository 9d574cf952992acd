"""SO(3) maps and unit quaternions (jaxrigid.lie) against scipy, identities and derivatives.

Conventions under test: `hat(w) @ a == cross(w, a)`; `dexp(w)` is Krysl (2007) eq. (9), the
right-trivialised differential `d/dε exp(w + εδ)|₀ = hat(dexp(w) @ δ) @ exp(w)`; `dexpinv` is
its inverse; `cayley(w) = (1 − ŵ/2)⁻¹(1 + ŵ/2)`; quaternions are `(w, x, y, z)`, Hamilton product.

Tolerances are multiples of the working dtype's machine epsilon `eps`; each says why. Every
map is called through a cached `jax.jit` (usually of a `vmap`) on fixed shapes: eager dispatch
of these small maps costs far more than one compile per shape and dtype.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from jaxrigid.lie import quaternion as quat
from jaxrigid.lie import so3

DTYPES = [np.float64, np.float32]
_AXIS = np.array([0.48, -0.6, 0.64]) / np.linalg.norm([0.48, -0.6, 0.64])
_N = 40  # every sample set has this many rows, so one compile serves all of them


@functools.cache
def _jit(fn, *transforms):
    """`jax.jit` of `fn` under `transforms` (applied innermost first), cached."""
    for t in transforms:
        fn = t(fn)
    return jax.jit(fn)


def _v(fn):
    return _jit(fn, jax.vmap)


def _eps(dtype):
    return float(np.finfo(dtype).eps)


def _as(x, dtype):
    return jnp.asarray(np.asarray(x, dtype=dtype))


def _np64(x):
    return np.array(x, dtype=np.float64)  # a writable copy (scipy rejects read-only buffers)


def _unit(rng, n):
    u = rng.standard_normal((n, 3))
    return u / np.linalg.norm(u, axis=-1, keepdims=True)


def _rotvec_samples(seed=0):
    """Rotation vectors (float64), `_N` rows per kind."""
    rng = np.random.default_rng(seed)
    below_1e8 = np.array([1e-9, 3e-9, 9e-9, 1e-10, 1e-12, 1e-15, 1e-20, 5e-9, 2e-11, 7e-13])
    offsets = np.array([0.0, 0.0, 1e-6, -1e-6, 3e-7, -3e-7, 1e-9, -1e-9, 1e-12, -5e-7])
    near_pi = np.concatenate([_unit(rng, 10) * (np.pi + offsets)[:, None], np.pi * np.eye(3)])
    kinds = {
        "uniform": Rotation.random(_N, random_state=seed).as_rotvec(),  # uniform on SO(3)
        "gaussian": rng.standard_normal((_N, 3)),  # exp(randn): |w| up to ~4, beyond π
        "tiny": 1e-7 * rng.standard_normal((_N, 3)),  # exp(1e-7·randn)
        "below_1e-8": _unit(rng, 10) * below_1e8[:, None],  # |w| < 1e-8
        "near_pi": near_pi,  # |w| within 1e-6 of π, exactly π, and π about the axes
    }
    return {k: np.resize(v, (_N, 3)) for k, v in kinds.items()}


SAMPLES = _rotvec_samples()
KINDS = list(SAMPLES)


def _skew_np(w):
    z = np.zeros(w.shape[:-1])
    return np.stack(
        [
            np.stack([z, -w[..., 2], w[..., 1]], -1),
            np.stack([w[..., 2], z, -w[..., 0]], -1),
            np.stack([-w[..., 1], w[..., 0], z], -1),
        ],
        -2,
    )


# ---------------------------------------------------------------------------------------------
# exp / log against scipy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_exp_matches_scipy(kind, dtype):
    eps = _eps(dtype)
    w = np.asarray(SAMPLES[kind], dtype=dtype)
    R = _v(so3.exp)(jnp.asarray(w))
    assert R.dtype == dtype
    # scipy on the same (dtype-rounded) input, evaluated in float64, is the reference.
    R_ref = Rotation.from_rotvec(w.astype(np.float64)).as_matrix()
    # Each entry of 1 + a ŵ + b ŵ² is a sum of a few O(1) terms, each with a few eps of
    # relative error (sin, cos, products): 3 eps observed, 10 eps leaves headroom.
    np.testing.assert_array_less(np.abs(_np64(R) - R_ref).max(), 10 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_log_matches_scipy(kind, dtype):
    eps = _eps(dtype)
    R_in = Rotation.from_rotvec(SAMPLES[kind]).as_matrix().astype(dtype)
    w = _np64(_v(so3.log)(jnp.asarray(R_in)))
    assert _v(so3.log)(jnp.asarray(R_in)).dtype == dtype
    R64 = R_in.astype(np.float64)
    w_ref = Rotation.from_matrix(R64).as_rotvec()
    theta = np.linalg.norm(w_ref, axis=-1)
    # |log R| ≤ π; float32 rounds π up by < eps·π, hence the slack.
    assert np.all(np.linalg.norm(w, axis=-1) <= np.pi * (1 + 2 * eps))
    # Away from π, log is smooth with a bounded derivative, and for small angles the
    # off-diagonal entries it reads carry relative (not absolute) error: so the error is a
    # few eps *relative to |w|*. 2 eps observed; 10 eps leaves headroom.
    away = theta < np.pi - 1e-3
    err = np.linalg.norm(w - w_ref, axis=-1)
    np.testing.assert_array_less(err[away], 10 * eps * theta[away])
    # Near π the vector is defined only up to sign: compare rotations. The angle of
    # exp(w)ᵀ R is a few eps for a correct axis and angle (4 eps observed).
    E = np.swapaxes(Rotation.from_rotvec(w).as_matrix(), -1, -2) @ R64
    np.testing.assert_array_less(Rotation.from_matrix(E).magnitude(), 10 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_exp_of_log_is_identity(kind, dtype):
    eps = _eps(dtype)
    R = jnp.asarray(Rotation.from_rotvec(SAMPLES[kind]).as_matrix().astype(dtype))
    R_back = _v(so3.exp)(_v(so3.log)(R))
    # Composition of two maps, each accurate to a few eps per entry (4 eps observed).
    np.testing.assert_array_less(np.abs(_np64(R_back) - _np64(R)).max(), 10 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_of_exp_is_identity_below_pi(dtype):
    eps = _eps(dtype)
    rng = np.random.default_rng(1)
    # Up to π − 1e-3 (float32) / π − 1e-6 (float64): the sign of the axis is read from
    # sin θ, which must stay well above round-off for w (rather than −w) to come back.
    top = np.pi - (1e-3 if dtype == np.float32 else 1e-6)
    theta = np.concatenate([rng.uniform(0, top, 4 * _N - 4), [top, 1e-9, 1e-30, 0.0]])
    w = (_unit(rng, 4 * _N) * theta[:, None]).astype(dtype)
    w_back = _np64(_v(so3.log)(_v(so3.exp)(jnp.asarray(w))))
    # A few eps relative to |w| (see test_log_matches_scipy), exact at w = 0.
    err = np.linalg.norm(w_back - w.astype(np.float64), axis=-1)
    assert np.all(err <= 10 * eps * np.linalg.norm(w, axis=-1))


def test_log_at_exactly_pi_and_at_identity():
    # R = 2 n nᵀ − 1 is a rotation by exactly π: log must be ±π n (either sign is correct).
    ns = np.array(
        [
            [1.0, 0, 0],
            [0, 1, 0],
            [0, 0, 1],
            _AXIS,
            [0.6, -0.8, 0],
            [0, 0.8, 0.6],
            [1 / np.sqrt(2), 1 / np.sqrt(2), 0],
        ]
    )
    R = np.concatenate([2 * ns[:, :, None] * ns[:, None, :] - np.eye(3), np.eye(3)[None]])
    w = _np64(_v(so3.log)(jnp.asarray(np.resize(R, (_N, 3, 3)))))[: len(R)]
    # Cancellation-free formulas on entries exact to an ulp: a few eps of |w| = π.
    err = np.minimum(np.abs(w[:-1] - np.pi * ns).max(-1), np.abs(w[:-1] + np.pi * ns).max(-1))
    np.testing.assert_array_less(err, 20 * _eps(np.float64))
    assert np.array_equal(w[-1], np.zeros(3))  # log(1) = 0 exactly


# ---------------------------------------------------------------------------------------------
# identities
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_exp_is_a_rotation(kind, dtype):
    eps = _eps(dtype)
    R = _np64(_v(so3.exp)(_as(SAMPLES[kind], dtype)))
    E = np.swapaxes(R, -1, -2) @ R - np.eye(3)
    # RᵀR sums 3 products of entries with a few eps error each: 3 eps observed.
    np.testing.assert_array_less(np.abs(E).max(), 10 * eps)
    np.testing.assert_array_less(np.abs(np.linalg.det(R) - 1).max(), 10 * eps)
    # orthogonality_error is the Frobenius norm of RᵀR − 1 (float64 arithmetic here).
    got = _np64(_v(so3.orthogonality_error)(jnp.asarray(R)))
    np.testing.assert_allclose(got, np.sqrt(np.sum(E * E, axis=(-2, -1))), rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_is_equivariant(dtype):
    eps = _eps(dtype)
    rng = np.random.default_rng(2)
    w = rng.standard_normal((_N, 3))
    Q = Rotation.random(_N, random_state=3).as_matrix()
    lhs = Q @ _np64(_v(so3.exp)(_as(w, dtype))) @ np.swapaxes(Q, -1, -2)
    rhs = _np64(_v(so3.exp)(_as(np.einsum("nij,nj->ni", Q, w), dtype)))
    # Both sides are few-eps-accurate rotations with O(1) entries, plus rounding of Q w.
    np.testing.assert_array_less(np.abs(lhs - rhs).max(), 20 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hat_vee(dtype):
    eps = _eps(dtype)
    rng = np.random.default_rng(4)
    w = _as(rng.standard_normal((_N, 3)), dtype)
    a = _as(rng.standard_normal((_N, 3)), dtype)
    W = _v(so3.hat)(w)
    assert W.dtype == dtype
    # Pure data movement and negation: exact.
    assert np.array_equal(_np64(_v(so3.vee)(W)), _np64(w))
    assert np.array_equal(_np64(W), -np.swapaxes(_np64(W), -1, -2))
    # hat(w) a = w × a: the same two products per entry, at most one rounding apart.
    np.testing.assert_allclose(
        _np64(W) @ _np64(a)[..., None], _np64(jnp.cross(w, a))[..., None], rtol=0, atol=20 * eps
    )
    S = rng.standard_normal((_N, 3, 3))
    S = _as(S - np.swapaxes(S, -1, -2), dtype)
    assert np.array_equal(_np64(_v(so3.hat)(_v(so3.vee)(S))), _np64(S))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_rotate_exp_and_dexpinv_apply(kind, dtype):
    eps = _eps(dtype)
    rng = np.random.default_rng(5)
    w = _as(SAMPLES[kind], dtype)
    v = _as(rng.standard_normal((_N, 3)), dtype)
    # The matrix-free forms use the same coefficients: a few eps of |v| ≲ 4.
    got = _np64(_v(so3.rotate_exp)(w, v))
    ref = _np64(_v(so3.exp)(w)) @ _np64(v)[..., None]
    np.testing.assert_allclose(got, ref[..., 0], rtol=0, atol=40 * eps)
    got = _np64(_v(so3.dexpinv_apply)(w, v))
    ref = _np64(_v(so3.dexpinv)(w)) @ _np64(v)[..., None]
    np.testing.assert_allclose(got, ref[..., 0], rtol=0, atol=40 * eps)


# ---------------------------------------------------------------------------------------------
# max_angle: Rodrigues series cut for a promised bound on the angle
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_angle", [np.pi, 1.0, 0.1, 0.01])
def test_cut_series_equal_the_full_ones_up_to_their_angle(max_angle):
    """For θ ≤ max_angle the cut series give the coefficients of every angle to round-off: the
    first term left out is below eps/8 of each coefficient's smallest value, and both
    evaluations round a few times in Horner's rule (all terms below 1): 4 eps absolute, the
    coefficients being at most 1 (absolute: a = sin θ/θ vanishes at π). Checked on a grid up to
    and including the bound, where truncation is largest."""
    eps = _eps(np.float64)
    x = jnp.asarray((np.linspace(0.0, 1.0, 2001) * max_angle) ** 2)
    full = _jit(so3._rodrigues_coefficients)(x)
    cut = _jit(functools.partial(so3._rodrigues_coefficients, max_angle=max_angle))(x)
    for f, c in zip(full, cut):
        np.testing.assert_allclose(_np64(c), _np64(f), rtol=0, atol=4 * eps)


def test_cut_series_are_wrong_beyond_their_angle():
    """The bound matters: the series cut for 0.1 rad are off by far more than round-off
    (1e-12, thousands of eps) at 1 rad, so the integrators must report a step that breaks
    the promise."""
    x = jnp.asarray([1.0])
    full = so3._rodrigues_coefficients(x)
    cut = so3._rodrigues_coefficients(x, max_angle=0.1)
    assert max(abs(float(f[0] - c[0])) for f, c in zip(full, cut)) > 1e-12


@pytest.mark.parametrize("bad", [0.0, -0.1, 3.2, float("nan"), True, "0.1", jnp.asarray(0.1)])
def test_max_angle_must_be_a_number_in_0_pi(bad):
    with pytest.raises(ValueError, match="max_angle"):
        so3.rotate_exp(jnp.zeros(3), jnp.ones(3), max_angle=bad)


def test_maps_with_max_angle_equal_the_maps_without():
    """exp, expm1, compose_exp, rotate_exp, dexp and their forward derivatives, for rotation
    vectors within the bound (|w| ≤ 0.5): the same coefficients to 4 eps, so O(1) results
    agree to a few eps (10 eps: a handful of roundings more)."""
    eps, m = _eps(np.float64), 0.5
    rng = np.random.default_rng(11)
    w = jnp.asarray(_unit(rng, _N) * rng.uniform(0.0, m, (_N, 1)))
    v = jnp.asarray(rng.standard_normal((_N, 3)))
    R = _v(so3.exp)(jnp.asarray(rng.standard_normal((_N, 3))))
    pairs = [
        (so3.exp, (w,)),
        (so3.expm1, (w,)),
        (so3.dexp, (w,)),
        (so3.rotate_exp, (w, v)),
        (so3.compose_exp, (R, w)),
    ]
    for fn, args in pairs:
        cut = functools.partial(fn, max_angle=m)
        w_arg = len(args) - 1  # the rotation vector is the last argument
        for got, ref in [(cut, fn), (jax.jacfwd(cut, w_arg), jax.jacfwd(fn, w_arg))]:
            np.testing.assert_allclose(
                _np64(_v(got)(*args)),
                _np64(_v(ref)(*args)),
                rtol=0,
                atol=10 * eps,
                err_msg=fn.__name__,
            )


@pytest.mark.parametrize("dtype", DTYPES)
def test_rotate_exp_derivatives_in_each_argument_alone(dtype):
    """`rotate_exp`'s JVP drops the term of an argument whose tangent is a symbolic zero:
    differentiating in `v` alone gives exp(w), in `w` alone the derivative of `exp(w) @ v`
    through `exp`'s own JVP (an independent path). O(1) entries, a few eps each: 40 eps as
    for the values above."""
    eps = _eps(dtype)
    rng = np.random.default_rng(12)
    w = _as(SAMPLES["gaussian"], dtype)
    v = _as(rng.standard_normal((_N, 3)), dtype)
    d_v = _np64(_v(jax.jacfwd(so3.rotate_exp, argnums=1))(w, v))
    np.testing.assert_allclose(d_v, _np64(_v(so3.exp)(w)), rtol=0, atol=40 * eps)
    d_w = _np64(_v(jax.jacfwd(so3.rotate_exp, argnums=0))(w, v))
    ref = _np64(_v(jax.jacfwd(lambda w, v: so3.exp(w) @ v))(w, v))
    np.testing.assert_allclose(d_w, ref, rtol=0, atol=40 * eps)


# ---------------------------------------------------------------------------------------------
# dexp, dexpinv, gradients
# ---------------------------------------------------------------------------------------------

DEXP_ANGLES = np.array(
    [
        0.0,
        1e-12,
        1e-9,
        0.05,
        0.1,
        0.11,
        1.0,
        2.0,
        3.0 - 1e-4,
        3.0,
        3.0 + 1e-4,
        np.pi - 1e-6,
        np.pi,
        np.pi + 1e-6,
        4.0,
    ]
)


def _exp_jacobian_over_exp(w):
    """`M[k] = (∂exp/∂w_k)(w) exp(w)ᵀ`; by the convention it is `hat(dexp(w) e_k)`."""
    J = jax.jacfwd(so3.exp)(w)  # J[i, j, k] = ∂exp(w)_ij / ∂w_k
    return jnp.einsum("ijk,lj->kil", J, so3.exp(w))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dexp_is_the_derivative_of_exp(dtype):
    eps = _eps(dtype)
    w = _as(DEXP_ANGLES[:, None] * _AXIS, dtype)
    M = _np64(_v(_exp_jacobian_over_exp)(w))
    D = _v(so3.dexp)(w)
    assert D.dtype == dtype
    D = _np64(D)
    # Entries of the Jacobian, of exp and of dexp are O(1) with a few eps error each
    # (≤ 3.5 eps observed), also where the series branch (θ² < 1e-2) takes over.
    skew = np.abs(M + np.swapaxes(M, -1, -2)).max(axis=(-3, -2, -1))
    np.testing.assert_array_less(skew, 10 * eps)
    got = np.swapaxes(
        _np64(_v(so3.vee)(jnp.asarray(M.reshape(-1, 3, 3)))).reshape(-1, 3, 3), -1, -2
    )  # column k is vee(M[k])
    np.testing.assert_array_less(np.abs(got - D).max(axis=(-2, -1)), 10 * eps)
    # dexpinv is its inverse (θ < 2π): products of O(1) matrices, ≤ 2 eps observed.
    Dinv = _np64(_v(so3.dexpinv)(w))
    np.testing.assert_array_less(np.abs(Dinv @ D - np.eye(3)).max(axis=(-2, -1)), 10 * eps)
    np.testing.assert_array_less(np.abs(D @ Dinv - np.eye(3)).max(axis=(-2, -1)), 10 * eps)


def test_dexp_closed_form_at_a_known_angle():
    # θ = π/2 about z: (1 − cos θ)/θ² = 4/π², (1 − sin θ/θ)/θ² = (1 − 2/π)·4/π².
    th = np.pi / 2
    W = _skew_np(np.array([0.0, 0.0, th]))
    ref = np.eye(3) + 4 / np.pi**2 * W + (1 - 2 / np.pi) * 4 / np.pi**2 * W @ W
    # Closed forms in float64 on O(1) entries: a few eps.
    np.testing.assert_allclose(_np64(_jit(so3.dexp)(jnp.array([0, 0, th]))), ref, atol=1e-15)


def _finite(x):
    return bool(np.all(np.isfinite(_np64(x))))


_SMOOTH_MAPS = {
    "exp": so3.exp,
    "dexp": so3.dexp,
    "dexpinv": so3.dexpinv,
    "cayley": so3.cayley,
    "quat.from_rotation_vector": quat.from_rotation_vector,
}


def _all_smooth_maps(w):
    return {name: fn(w) for name, fn in _SMOOTH_MAPS.items()}  # one compile for all of them


@pytest.mark.parametrize("jac", [jax.jacfwd, jax.jacrev], ids=["jacfwd", "jacrev"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_finite_at_zero_and_pi(dtype, jac):
    w = _as(np.array([0.0, np.pi])[:, None] * _AXIS, dtype)  # |w| = 0 exactly, |w| = π
    J = _jit(_all_smooth_maps, jac, jax.vmap)(w)
    bad = [name for name, Jn in J.items() if not _finite(Jn)]
    assert not bad, f"non-finite derivatives of {bad}"
    # The derivative of exp at 0 is hat(e_k) exactly (the series coefficients are exact there).
    generators = np.moveaxis(_skew_np(np.eye(3)), 0, -1)  # [..., k] = hat(e_k)
    np.testing.assert_array_equal(_np64(J["exp"][0]), generators)
    # q(w) = (1 − |w|²/8 + …, w/2 + …): its Jacobian at 0 is [0; ½·1] exactly.
    np.testing.assert_array_equal(
        _np64(J["quat.from_rotation_vector"][0]),
        np.concatenate([np.zeros((1, 3)), 0.5 * np.eye(3)]),
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_gradient_finite_and_inverse_of_exp_derivative(dtype):
    eps = _eps(dtype)
    thetas = np.array([0.0, 1e-6, 1e-3, np.pi / 2, 2.5, 3.1])  # small angles and π/2
    w = _as(thetas[:, None] * _AXIS, dtype)
    R = _v(so3.exp)(w)
    J_log = _jit(so3.log, jax.jacrev, jax.vmap)(R)  # reverse mode: (n, 3, 3, 3)
    assert _finite(J_log)
    # Chain rule: Σ_ij ∂log/∂R_ij ∂exp_ij/∂w = d/dw log(exp(w)) = 1 for |w| < π. Entries
    # O(1) with a few eps error (≤ 2 eps observed).
    J_exp = _np64(_jit(so3.exp, jax.jacfwd, jax.vmap)(w))
    J = np.einsum("nmij,nijk->nmk", _np64(J_log), J_exp)
    np.testing.assert_array_less(np.abs(J - np.eye(3)).max(axis=(-2, -1)), 10 * eps)


# ---------------------------------------------------------------------------------------------
# Cayley map
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_cayley(dtype):
    eps = _eps(dtype)
    rng = np.random.default_rng(6)
    w = np.concatenate(
        [3 * rng.standard_normal((_N - 6, 3)), SAMPLES["tiny"][:5], np.zeros((1, 3))]
    ).astype(dtype)
    C = _v(so3.cayley)(jnp.asarray(w))
    assert C.dtype == dtype
    C = _np64(C)
    # Entries are O(1) sums of a few terms with a few eps error each.
    E = np.swapaxes(C, -1, -2) @ C - np.eye(3)
    np.testing.assert_array_less(np.abs(E).max(), 10 * eps)
    np.testing.assert_array_less(np.abs(np.linalg.det(C) - 1).max(), 10 * eps)
    W = _skew_np(w.astype(np.float64))
    ref = np.linalg.solve(np.eye(3) - W / 2, np.eye(3) + W / 2)
    # 1 − W/2 has singular values 1, √(1 + |w|²/4), |w| ≲ 15: a well-conditioned solve,
    # so a few eps on O(1) entries.
    np.testing.assert_array_less(np.abs(C - ref).max(), 10 * eps)


def test_cayley_is_exp_to_second_order():
    rng = np.random.default_rng(7)
    hs = 0.02 * 2.0 ** -np.arange(6)
    hw = jnp.asarray(hs[:, None] * rng.standard_normal(3))
    errs = np.linalg.norm(_np64(_v(so3.cayley)(hw) - _v(so3.exp)(hw)), axis=(-2, -1))
    slopes = np.diff(np.log(errs)) / np.diff(np.log(hs))
    # cay(hŵ) − exp(hŵ) = h³ŵ³/12 + O(h⁴), the O(h⁴) part symmetric hence Frobenius-
    # orthogonal to the skew h³ part: slope 3 + O(h²). Errors ≥ 1e-11 ≫ round-off.
    assert min(errs) > 1e-12
    np.testing.assert_allclose(slopes, 3.0, atol=0.1)


# ---------------------------------------------------------------------------------------------
# quaternions
# ---------------------------------------------------------------------------------------------


def _random_quats(seed):
    q_xyzw = Rotation.random(_N - 7, random_state=seed).as_quat()
    q = np.concatenate([q_xyzw[:, 3:], q_xyzw[:, :3]], axis=-1)
    # every Shepperd pivot: identity, π about each axis, w ≈ 0, a generic w < 0
    special = np.array(
        [
            [1, 0, 0, 0],
            [0, 1, 0, 0],
            [0, 0, 1, 0],
            [0, 0, 0, 1],
            [1e-9, 0.6, 0.8, 0],
            [0, 0.6, 0, -0.8],
            [-0.5, 0.5, 0.5, -0.5],
        ]
    )
    return np.concatenate([q, special / np.linalg.norm(special, axis=-1, keepdims=True)])


def _to_xyzw(q):
    return np.concatenate([q[..., 1:], q[..., :1]], axis=-1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_quaternion_to_matrix_matches_scipy(dtype):
    eps = _eps(dtype)
    q = _random_quats(8).astype(dtype)
    R = _v(quat.to_matrix)(jnp.asarray(q))
    assert R.dtype == dtype
    R_ref = Rotation.from_quat(_to_xyzw(q.astype(np.float64))).as_matrix()
    # Quadratic polynomials in unit-size entries (scipy renormalises q, |q| = 1 ± eps):
    # a few eps each.
    np.testing.assert_array_less(np.abs(_np64(R) - R_ref).max(), 10 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_quaternion_from_matrix_round_trip(dtype):
    eps = _eps(dtype)
    q = _random_quats(9)
    R = Rotation.from_quat(_to_xyzw(q)).as_matrix().astype(dtype)
    q_back = _np64(_v(quat.from_matrix)(jnp.asarray(R)))
    assert np.all(q_back[:, 0] >= 0)  # documented sign convention, w ≥ 0
    # q and −q are one rotation. Shepperd's method divides by the largest pivot (≥ 1: the four
    # pivots sum to 4), so the error is a few eps of the entries of R.
    err = np.minimum(np.abs(q_back - q).max(-1), np.abs(q_back + q).max(-1))
    np.testing.assert_array_less(err, 10 * eps)
    # and it is the rotation of R (scipy's as_quat, also up to sign)
    ref = Rotation.from_matrix(R.astype(np.float64)).as_quat()
    ref = np.concatenate([ref[:, 3:], ref[:, :3]], axis=-1)
    err = np.minimum(np.abs(q_back - ref).max(-1), np.abs(q_back + ref).max(-1))
    np.testing.assert_array_less(err, 10 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_quaternion_multiply_and_conjugate(dtype):
    eps = _eps(dtype)
    p = jnp.asarray(_random_quats(10).astype(dtype))
    q = jnp.asarray(_random_quats(11).astype(dtype))
    to_m = _v(quat.to_matrix)
    mul = _v(quat.multiply)
    # Products and sums of unit-size entries: a few eps. Composition order: p q ↦ R_p R_q.
    np.testing.assert_array_less(
        np.abs(_np64(to_m(mul(p, q))) - _np64(to_m(p)) @ _np64(to_m(q))).max(), 10 * eps
    )
    qc = _v(quat.conjugate)(q)
    one = np.array([1.0, 0, 0, 0])
    np.testing.assert_array_less(np.abs(_np64(mul(q, qc)) - one).max(), 10 * eps)
    np.testing.assert_array_less(np.abs(_np64(mul(qc, q)) - one).max(), 10 * eps)
    RqT = np.swapaxes(_np64(to_m(q)), -1, -2)
    np.testing.assert_array_less(np.abs(_np64(to_m(qc)) - RqT).max(), 10 * eps)
    # Hamilton convention on basis elements: i j = k, j i = −k (exact).
    i, j = np.array([0.0, 1, 0, 0]), np.array([0.0, 0, 1, 0])
    ij = _np64(mul(jnp.asarray(np.stack([i, j])), jnp.asarray(np.stack([j, i]))))
    np.testing.assert_array_equal(ij, [[0, 0, 0, 1], [0, 0, 0, -1]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_conjugate_product_imag_is_the_product_to_the_bit(dtype):
    """`conjugate_product_imag(p, q)` is `multiply(conjugate(p), q)[..., 1:]` exactly, not
    to a tolerance (a negation is exact and `a + (−b)` is `a − b`), on quaternions of any
    norm, under `jit` and `vmap`, and so are its first and second derivatives: it replaces the
    product inside `2 Im(q* q̇)` without changing a bit of the value."""
    p = jnp.asarray(3.0 * _random_quats(12).astype(dtype))
    q = jnp.asarray(0.5 * _random_quats(13).astype(dtype))
    full = jax.jit(jax.vmap(lambda a, b: quat.multiply(quat.conjugate(a), b)[1:]))(p, q)
    np.testing.assert_array_equal(jax.jit(jax.vmap(quat.conjugate_product_imag))(p, q), full)

    def f(a, b):
        return jnp.sum(jnp.sin(quat.conjugate_product_imag(a, b)))

    def g(a, b):
        return jnp.sum(jnp.sin(quat.multiply(quat.conjugate(a), b)[1:]))

    for d in (jax.grad, jax.hessian):
        np.testing.assert_array_equal(d(f)(p[0], q[0]), d(g)(p[0], q[0]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_quaternion_from_rotation_vector_matches_exp(kind, dtype):
    eps = _eps(dtype)
    w = np.concatenate([SAMPLES[kind][1:], np.zeros((1, 3))]).astype(dtype)  # and w = 0
    q = _v(quat.from_rotation_vector)(jnp.asarray(w))
    assert q.dtype == dtype
    q = _np64(q)
    # |q| = 1 and R(q) = exp(w): O(1) entries with a few eps each.
    np.testing.assert_array_less(np.abs(np.linalg.norm(q, axis=-1) - 1).max(), 10 * eps)
    R = _np64(_v(quat.to_matrix)(jnp.asarray(q.astype(dtype))))
    np.testing.assert_array_less(np.abs(R - _np64(_v(so3.exp)(jnp.asarray(w)))).max(), 10 * eps)
    # Vector part sin(θ/2)/θ · w to a few eps *relative* (no cancellation at small θ).
    w64 = w.astype(np.float64)
    theta = np.linalg.norm(w64, axis=-1, keepdims=True)
    half_sinc = np.where(theta > 0, np.sin(theta / 2) / np.where(theta > 0, theta, 1), 0.5)
    np.testing.assert_allclose(q[:, 1:], half_sinc * w64, rtol=4 * eps, atol=0)


def _with_big_angles(w):
    """`w` with its last three rows turned into turns of 7, 13 and 40 rad (past π and 2π)."""
    w = np.array(w)
    w[-3:] = _unit(np.random.default_rng(5), 3) * np.array([7.0, 13.0, 40.0])[:, None]
    return w


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_quaternion_increments_match_so3_expm1(kind, dtype):
    """`so3.reduce_rotation_vector`, `quat.expm1`, `quat.compose_increments` and
    `quat.increment_to_matrix` (LP-split's free flow) against `so3.exp`/`expm1`."""
    eps = _eps(dtype)
    w = _with_big_angles(SAMPLES[kind]).astype(dtype)
    theta = np.linalg.norm(w.astype(np.float64), axis=-1)
    wr = _v(so3.reduce_rotation_vector)(jnp.asarray(w))
    assert wr.dtype == dtype
    # the same rotation, turning by at most π: the reduction θ − 2πn rounds at eps·θ
    assert np.all(np.linalg.norm(_np64(wr), axis=-1) <= np.pi * (1 + 4 * eps))
    R, R_reduced = _np64(_v(so3.exp)(jnp.asarray(w))), _np64(_v(so3.exp)(wr))
    np.testing.assert_array_less(np.abs(R - R_reduced).max((-2, -1)), 10 * eps * (1 + theta))
    # Q − 1 from the quaternion increment is so3.expm1's, to a few eps *relative* to its size
    # (entries O(θ) for small θ: no 1 + … rounded); past π within eps·θ (the reduction)
    D = _np64(_v(quat.increment_to_matrix)(_v(quat.expm1)(wr)))
    E = _np64(_v(so3.expm1)(jnp.asarray(w)))
    size = np.abs(E).max((-2, -1))
    np.testing.assert_array_less(np.abs(D - E).max((-2, -1)), 10 * eps * (size + theta) + 1e-300)
    # orthogonal to one rounding of its entries, as so3.expm1: (1 + D)ᵀ(1 + D) − 1 =
    # D + Dᵀ + DᵀD = O(eps θ) (evaluated in float64 without forming 1 + D, whose rounding
    # would hide it at small θ)
    DT = np.swapaxes(D, -1, -2)
    defect = np.abs(D + DT + DT @ D).max((-2, -1))
    np.testing.assert_array_less(defect, 10 * eps * np.minimum(theta, np.pi) + 1e-300)
    # (1 + d)(1 + e) − 1 composes the rotations: R(d ∘ e) = R(d) R(e), O(1) entries
    d = _v(quat.expm1)(wr)
    e = jnp.roll(d, 1, axis=0)
    DE = _np64(_v(quat.increment_to_matrix)(_v(quat.compose_increments)(d, e)))
    I3 = np.eye(3)
    np.testing.assert_array_less(
        np.abs(I3 + DE - (I3 + D) @ np.roll(I3 + D, 1, axis=0)).max(), 20 * eps
    )


def test_reduce_rotation_vector_derivative():
    """Identity below π (derivative 1 at 0, no NaN from |w|); past π, `exp(reduce(w))` is
    `exp(w)`, so their forward derivatives agree (here at 4 rad)."""
    J0 = jax.jacfwd(so3.reduce_rotation_vector)(jnp.zeros(3))
    np.testing.assert_array_equal(_np64(J0), np.eye(3))
    w = jnp.asarray(4.0 * _AXIS)
    Jr = jax.jacfwd(lambda w: so3.exp(so3.reduce_rotation_vector(w)))(w)
    Jw = jax.jacfwd(so3.exp)(w)
    np.testing.assert_allclose(_np64(Jr), _np64(Jw), atol=1e-14)


# ---------------------------------------------------------------------------------------------
# (..., 3) batches and vmap
# ---------------------------------------------------------------------------------------------

_BATCH = (4, 5)
_rng = np.random.default_rng(12)
_W = _rng.standard_normal(_BATCH + (3,))
_V = _rng.standard_normal(_BATCH + (3,))
_R = Rotation.random(20, random_state=13).as_matrix().reshape(_BATCH + (3, 3))
_Q = _random_quats(14)[:20].reshape(_BATCH + (4,))

BATCHED = {  # name -> (function, arguments with batch shape _BATCH)
    "hat": (so3.hat, (_W,)),
    "vee": (so3.vee, (_R,)),
    "exp": (so3.exp, (_W,)),
    "log": (so3.log, (_R,)),
    "dexp": (so3.dexp, (_W,)),
    "dexpinv": (so3.dexpinv, (_W,)),
    "cayley": (so3.cayley, (_W,)),
    "rotate_exp": (so3.rotate_exp, (_W, _V)),
    "dexpinv_apply": (so3.dexpinv_apply, (_W, _V)),
    "orthogonality_error": (so3.orthogonality_error, (_R,)),
    "quat.multiply": (quat.multiply, (_Q, _Q[::-1])),
    "quat.conjugate": (quat.conjugate, (_Q,)),
    "quat.normalize": (quat.normalize, (_Q,)),
    "quat.to_matrix": (quat.to_matrix, (_Q,)),
    "quat.from_matrix": (quat.from_matrix, (_R,)),
    "quat.from_rotation_vector": (quat.from_rotation_vector, (_W,)),
}


def _loop(fn, args):
    f = _jit(fn)
    rows = [
        [np.asarray(f(*[jnp.asarray(a[i, j]) for a in args])) for j in range(_BATCH[1])]
        for i in range(_BATCH[0])
    ]
    return np.array(rows)


@pytest.mark.parametrize("name", list(BATCHED))
def test_batched_inputs_match_loop(name):
    fn, args = BATCHED[name]
    got = np.asarray(_jit(fn)(*[jnp.asarray(a) for a in args]))
    ref = _loop(fn, args)
    assert got.shape == ref.shape
    # Same arithmetic per element; XLA may fuse or reorder it: a few float64 eps.
    np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("name", list(BATCHED))
def test_vmap_matches_loop(name):
    fn, args = BATCHED[name]
    got = np.asarray(_jit(fn, jax.vmap, jax.vmap)(*[jnp.asarray(a) for a in args]))
    ref = _loop(fn, args)
    assert got.shape == ref.shape
    # As above: same arithmetic, possibly reordered by XLA.
    np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-14)
