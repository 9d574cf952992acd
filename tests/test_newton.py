"""Newton's method (jaxrigid.newton) and the closed-form linear algebra behind it (_linalg).

Solves are wrapped in `jax.jit` with the solver configuration static: eager calls of
`lax.while_loop` and the implicit-derivative rule re-trace and re-compile every time.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxrigid import _linalg
from jaxrigid.newton import Newton, default_tolerance, max_abs
from jaxrigid.results import RESULTS

EPS = float(np.finfo(np.float64).eps)
ROOT = np.full(2, np.sqrt(2.0))
GUESS = np.array([3.0, 1.0])


def circle_line(x):
    """x0² + x1² = 4 and x0 = x1: root (√2, √2)."""
    return jnp.stack([x[0] ** 2 + x[1] ** 2 - 4.0, x[0] - x[1]])


@functools.cache
def _solver(**kw):
    """Jitted `Newton(**kw).solve(circle_line, guess)`."""
    return jax.jit(lambda g: Newton(**kw).solve(circle_line, g))


def _errors(chord, steps):
    errs = []
    for k in steps:
        # rtol = atol = 0: stop only after exactly k updates (or an exactly zero update)
        x, info = _solver(max_steps=k, rtol=0.0, atol=0.0, chord=chord)(jnp.asarray(GUESS))
        assert int(info.iterations) <= k
        errs.append(np.linalg.norm(np.asarray(x) - ROOT))
    return np.array(errs)


def test_newton_converges_quadratically():
    e = _errors(False, range(1, 7))
    # F is quadratic, so exactly x_{k+1} − x* = ½ J(x_k)⁻¹ F''[e_k, e_k] = J(x_k)⁻¹ (|e_k|², 0),
    # and J⁻¹(1, 0) = (1, 1)/(2(x0 + x1)): e_{k+1} = e_k² · √2/(2(x0 + x1)). From (3, 1) the
    # first update gives x0 = x1 = t, then t ← t/2 + 1/t stays ≥ √2, so x0 + x1 ≥ 2√2 and
    # C = √2/(4√2) = 1/4. The additive 4 eps·|x*| is the round-off floor of the iterate.
    C = 0.25
    e_prev = np.concatenate([[np.linalg.norm(GUESS - ROOT)], e[:-1]])
    floor = 4 * EPS * np.linalg.norm(ROOT)
    np.testing.assert_array_less(e, C * e_prev**2 * (1 + 1e-9) + floor)
    # and the rate is not better than quadratic either (it is this Newton, not a lucky guess):
    # while above round-off, e_{k+1} ≥ e_k²·√2/(2·(x0+x1)_max) with (x0+x1)_max = 4 (guess).
    above = e > 1e3 * floor
    np.testing.assert_array_less(e_prev[above] ** 2 * np.sqrt(2) / 8 * (1 - 1e-9), e[above])
    assert e[-1] <= floor  # six steps reach round-off
    # default tolerance: converged, iterate at round-off
    x, info = _solver()(jnp.asarray(GUESS))
    assert bool(info.converged)
    assert 5 <= int(info.iterations) <= 7
    np.testing.assert_allclose(np.asarray(x), ROOT, rtol=4 * EPS)


def test_chord_converges_linearly_to_the_same_root():
    e = _errors(True, range(1, 10))
    ratios = e[1:] / e[:-1]
    # The Jacobian J0 at (3, 1) is exact in its linear row, so after one update x0 = x1 = t and
    # t ← t − (2t² − 4)/8 (8 = the sum of the first row of J0): e_{k+1}/e_k = 1 − (t_k + √2)/4,
    # which tends to ρ = 1 − √2/2 ≈ 0.293. Linear, not quadratic: ratios settle at ρ < 1.
    rho = 1 - np.sqrt(2) / 2
    assert np.all(ratios < 1)
    # Exactly ratio_k = ρ − (t_k − √2)/4 = ρ − e_k/(4√2): from step 6 on e_k < 1e-3, so the
    # ratios are within 2e-4 of ρ; 1e-3 leaves headroom (a quadratic method would give ~0).
    np.testing.assert_allclose(ratios[5:], rho, atol=1e-3)
    assert np.ptp(ratios[5:]) < 1e-3  # roughly constant
    x, info = _solver(chord=True, max_steps=100)(jnp.asarray(GUESS))
    assert bool(info.converged)
    assert 15 <= int(info.iterations) <= 40  # linear at ρ ≈ 0.29: ~22 steps to 1e-12
    # stops when the update < 1.8e-12; the error left is ρ/(1 − ρ) times that (~1e-12)
    np.testing.assert_allclose(np.asarray(x), ROOT, rtol=0, atol=1e-11)


# ---------------------------------------------------------------------------------------------
# derivatives through a solve
# ---------------------------------------------------------------------------------------------


def _residual(p):
    """A nonlinear system in x (3,) that closes over the parameters p (2,)."""

    def r(x):
        return jnp.stack(
            [
                x[0] + 0.3 * jnp.sin(x[1]) - p[0],
                x[1] + 0.2 * x[0] * x[2] - p[1],
                x[2] + 0.1 * x[0] ** 2 - p[0] * p[1],
            ]
        )

    return r


def _solution(p, max_steps=20):
    x, _ = Newton(max_steps=max_steps).solve(_residual(p), jnp.zeros(3, p.dtype))
    return x


def _loss_of_x(x, xp=jnp):
    return xp.sum(x**2) + xp.sin(x[0] * x[2])


def _loss(p, max_steps=20):
    return _loss_of_x(_solution(p, max_steps))


P0 = np.array([0.7, -0.4])  # converges in 5 updates from x = 0


@functools.cache
def _compiled_grad(max_steps):
    """`jax.grad` of the loss through a solve with `max_steps`, jitted and compiled at P0."""
    grad_fn = jax.grad(functools.partial(_loss, max_steps=max_steps))
    return jax.jit(grad_fn).lower(jnp.asarray(P0)).compile()


def _solve_with_info(p):
    x, info = Newton().solve(_residual(p), jnp.zeros(3, p.dtype))
    return x, info.iterations, info.converged


_solve_with_info_jit = jax.jit(_solve_with_info)


def test_gradients_through_the_solve_match_finite_differences():
    p = jnp.asarray(P0)
    x, _, converged = _solve_with_info_jit(p)
    assert bool(converged)
    assert np.abs(np.asarray(_residual(p)(x))).max() < 1e-14
    # central differences of the solution x*(p), and of the loss evaluated on it in numpy
    h = 1e-5
    plus = [np.asarray(_solve_with_info_jit(jnp.asarray(P0 + h * e))[0]) for e in np.eye(2)]
    minus = [np.asarray(_solve_with_info_jit(jnp.asarray(P0 - h * e))[0]) for e in np.eye(2)]
    J_fd = np.stack([(a - b) / (2 * h) for a, b in zip(plus, minus)], axis=-1)
    g_fd = np.array(
        [(_loss_of_x(a, np) - _loss_of_x(b, np)) / (2 * h) for a, b in zip(plus, minus)]
    )
    # h = 1e-5: truncation O(h²) ~ 1e-10 relative, plus round-off of the solution (~1e-16)
    # over h ~ 1e-11: 1e-7 relative has a wide margin, and a wrong derivative misses by O(1).
    g = np.asarray(_compiled_grad(200)(p))  # reverse mode
    np.testing.assert_allclose(g, g_fd, rtol=1e-7)
    J = np.asarray(jax.jit(jax.jacfwd(_solution))(p))  # forward mode
    np.testing.assert_allclose(J, J_fd, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("n", [4, 7])
def test_reverse_mode_through_systems_larger_than_3x3(n):
    # Larger systems go through Gauss–Jordan elimination (`_linalg._gauss_solve`), which JAX
    # must transpose for the implicit-function VJP: it fails if `b` enters the elimination
    # nonlinearly. The gradient of sum(x*) must match central differences.
    target = jnp.arange(1.0, n + 1)

    def loss(theta):
        def residual(x):
            return x + 0.1 * theta * jnp.sin(x) - target

        return Newton().solve(residual, jnp.zeros(n))[0].sum()

    g = float(jax.grad(loss)(1.0))
    h = 1e-5
    fd = (float(loss(1.0 + h)) - float(loss(1.0 - h))) / (2 * h)
    # central differences: O(h²) ~ 1e-10 truncation, round-off ~ 1e-16/h ~ 1e-11
    np.testing.assert_allclose(g, fd, rtol=1e-7)


def test_reverse_mode_uses_the_implicit_function_theorem():
    # A plain lax.while_loop is not reverse-differentiable, and Newton iterates in one: that
    # jax.grad works at all means the implicit-function derivative is used.
    def plain(p):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * p), (0, p))[1]

    with pytest.raises(ValueError, match="[Rr]everse-mode"):
        jax.grad(plain)(1.0)
    # The gradient depends on the root only, not on the iteration budget (both converge).
    p = jnp.asarray(P0)
    np.testing.assert_allclose(
        np.asarray(_compiled_grad(5)(p)), np.asarray(_compiled_grad(200)(p)), rtol=1e-13
    )


def test_gradient_memory_does_not_grow_with_max_steps():
    temps = {}
    for max_steps in (5, 200):
        stats = _compiled_grad(max_steps).memory_analysis()
        if stats is None or getattr(stats, "temp_size_in_bytes", None) is None:
            pytest.skip("compiled memory_analysis() is not available on this backend")
        temps[max_steps] = stats.temp_size_in_bytes
    # Unrolled or checkpointed iterations would store O(max_steps) iterates (≥ 195 × 24 B).
    assert temps[200] <= temps[5], temps


def test_the_residual_is_traced_once_per_solve_forward_and_under_grad():
    # Build cost (issue 31): the residual's Python code runs once per solve; the loop's
    # linearisation and the implicit derivative replay that trace. `lax.custom_root` traced it
    # three times in every forward program (its root, its linearisation, the loop) and a
    # shape check a fourth; a rule traced eagerly would show up here as a second count.
    calls = []

    def residual(p):
        def f(x):
            calls.append(1)
            return circle_line(x) * p

        return f

    jax.make_jaxpr(lambda p: Newton().solve(residual(p), jnp.asarray(GUESS))[0])(2.0)
    assert len(calls) == 1
    calls.clear()
    jax.make_jaxpr(jax.grad(lambda p: jnp.sum(Newton().solve(residual(p), jnp.asarray(GUESS))[0])))(
        2.0
    )
    assert len(calls) == 1


def test_a_batched_mask_closed_over_by_the_residual_survives_vmap_and_grad():
    # The residual closes over a boolean that `vmap` batches (RATTLE's chains do): the
    # implicit-derivative rule takes it as an input. (`jax.closure_convert`, which leaves
    # non-float values in the closure, failed the RATTLE chain's case of
    # tests/test_contracts.py with an escaped tracer; this smaller case did not reproduce that,
    # and checks values and derivatives under both orders of `vmap` and `grad`.)
    # Root of x² = a (where mask) or x = a: √a or a; d/da = 1/(2√a) or 1.
    def root(a, mask):
        def f(x):
            return jnp.where(mask, x * x - a, x - a)

        return Newton().solve(f, jnp.ones(1) * 2.0)[0][0]

    a = jnp.array([4.0, 4.0])
    mask = jnp.array([True, False])
    x = jax.jit(jax.vmap(root))(a, mask)
    g = jax.jit(jax.vmap(jax.grad(root)))(a, mask)
    # and `vmap` inside `grad` (an ensemble inside a loss, as `simulate` runs it)
    g_outer = jax.jit(jax.grad(lambda a: jnp.sum(jax.vmap(root)(a, mask))))(a)
    np.testing.assert_array_equal(np.asarray(g_outer), np.asarray(g))
    # converged to the default tolerance eps^(3/4); the derivative is exact at the root
    np.testing.assert_allclose(np.asarray(x), [2.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g), [0.25, 1.0], rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# failure is reported
# ---------------------------------------------------------------------------------------------


def _scalar_solve(residual, guess, max_steps):
    fn = jax.jit(lambda g: Newton(max_steps=max_steps).solve(residual, g))
    x, info = fn(jnp.asarray([guess]))
    return np.asarray(x), int(info.iterations), RESULTS(int(info.result)), float(info.residual)


def test_too_few_steps_is_max_steps_reached():
    x, info = _solver(max_steps=1)(jnp.asarray([30.0, -20.0]))
    assert not bool(info.converged)
    assert RESULTS(int(info.result)) is RESULTS.max_steps_reached
    assert int(info.iterations) == 1
    assert np.all(np.isfinite(np.asarray(x)))


@pytest.mark.parametrize("chord", [False, True])
def test_fully_peeled_iteration_is_a_fixed_count_of_updates(chord):
    """`peel ≥ max_steps` emits no loop and no masks: exactly `max_steps` updates, converged
    when the last met the tolerance. Checked for a solve that converges within the steps (12:
    chord needs 11 from this guess, Newton 5) and one that runs out of them (2)."""
    guess = jnp.asarray([1.6, 1.5])
    tol = default_tolerance(jnp.float64)
    for max_steps in (12, 2):
        looped = _solver(max_steps=max_steps, chord=chord)(guess)
        peeled = _solver(max_steps=max_steps, peel=max_steps, chord=chord)(guess)
        assert int(peeled[1].iterations) == max_steps
        assert bool(peeled[1].converged) == bool(looped[1].converged) == (max_steps == 12)
        if max_steps == 12:
            # both within the stopping rule's bound of the root: the looped solve stopped on an
            # update ≤ tol (1 + |x|), after which a contraction with rate ≤ 1/2 moves x by at
            # most as much again; the updates made after it only shrink the error.
            np.testing.assert_allclose(
                np.asarray(peeled[0]), np.asarray(looped[0]), rtol=0, atol=4 * tol
            )
        else:  # the same two updates, unmasked or not: a few eps of an O(1) iterate
            np.testing.assert_allclose(np.asarray(peeled[0]), np.asarray(looped[0]), atol=8 * EPS)
    jaxpr = jax.make_jaxpr(lambda g: Newton(max_steps=2, peel=2).solve(circle_line, g))(guess)
    assert "while" not in str(jaxpr)


def test_residual_without_root_diverges_and_stops_early():
    # x² + 1 from 0.5: every update has |Δx| = (x² + 1)/(2|x|) ≥ 1, so it can never stop. The
    # iterates x ← (x² − 1)/(2x) give |Δx| = 1.25, 1.04, 1.86, 1.10, 1.31, 1.01, 2.97: the
    # contraction test (|Δx_k| > 2|Δx_{k−1}|) first fires at the 7th update (2.97 > 2·1.01).
    x, iterations, result, res = _scalar_solve(lambda x: x**2 + 1.0, 0.5, 50)
    assert result is RESULTS.diverged
    assert iterations == 7
    assert res >= 1.0  # |x² + 1| ≥ 1 is reported


def test_contracting_but_slow_solve_is_max_steps_reached_not_diverged():
    # Chord on sin(x) from 1 (J = cos 1 throughout): |Δx| = 1.56, 0.98, 0.76 -- contracting
    # (never more than doubling) but far from the tolerance after 3 updates. The cause
    # separates "not enough updates" from "growing updates" (above).
    fn = jax.jit(lambda g: Newton(max_steps=3, chord=True).solve(lambda x: jnp.sin(x), g))
    _, info = fn(jnp.asarray([1.0]))
    assert RESULTS(int(info.result)) is RESULTS.max_steps_reached


def test_nan_residual_is_nonfinite_and_stops_early():
    # √x + 1 from x = 1: the first update lands at x = −3, where the residual is NaN.
    x, iterations, result, res = _scalar_solve(lambda x: jnp.sqrt(x) + 1.0, 1.0, 50)
    assert result is RESULTS.nonfinite
    assert iterations == 2


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 13])
def test_max_abs_is_the_largest_magnitude_and_propagates_nan(n):
    """Newton's stopping norm `max_abs` (a chain of maxima up to 3 entries, one reduction
    above) is `max |v_i|` exactly, at every size and under `vmap`, an infinity anywhere
    gives inf and a NaN anywhere gives NaN: the solve's `nonfinite` outcome rests on it."""
    v = jnp.asarray(np.random.default_rng(n).normal(size=(5, n)))
    np.testing.assert_array_equal(jax.vmap(max_abs)(v), np.max(np.abs(np.asarray(v)), -1))
    for k in range(n):
        for bad, want in ((np.inf, np.inf), (-np.inf, np.inf)):
            assert float(max_abs(v[0].at[k].set(bad))) == want
        assert np.isnan(float(max_abs(v[0].at[k].set(np.nan))))


# ---------------------------------------------------------------------------------------------
# transformations
# ---------------------------------------------------------------------------------------------


def test_vmap_over_parameters_matches_loop():
    rng = np.random.default_rng(0)
    ps = P0 + 0.3 * rng.standard_normal((8, 2))
    xs, its, conv = jax.jit(jax.vmap(_solve_with_info))(jnp.asarray(ps))
    assert np.all(np.asarray(conv))
    for i, p in enumerate(ps):
        x, it, c = _solve_with_info_jit(jnp.asarray(p))
        # Each member iterates on its own data and is frozen once done: the same arithmetic,
        # up to XLA reordering (a few eps of an O(1) solution).
        np.testing.assert_allclose(np.asarray(xs[i]), np.asarray(x), rtol=0, atol=8 * EPS)
        assert int(its[i]) == int(it)
        assert bool(c)


def test_jit_matches_eager():
    p = jnp.asarray(P0)
    x_eager, it_eager, c_eager = _solve_with_info(p)
    x_jit, it_jit, c_jit = _solve_with_info_jit(p)
    # Same operations, possibly fused differently: a few eps of an O(1) solution.
    np.testing.assert_allclose(np.asarray(x_jit), np.asarray(x_eager), rtol=0, atol=8 * EPS)
    assert int(it_jit) == int(it_eager)
    assert bool(c_jit) and bool(c_eager)


class _Split(NamedTuple):
    head: jax.Array  # x[:1], shape (1, 1)
    tail: jax.Array  # x[1:], shape (2,)


def _split_solve(p):
    """`_residual(p)` on the unknowns split into a NamedTuple of a (1, 1) and a (2,) array."""

    def residual(s):
        x = jnp.concatenate([s.head.reshape(1), s.tail])
        r = _residual(p)(x)
        return _Split(r[:1].reshape(1, 1), r[1:])

    guess = _Split(jnp.zeros((1, 1), p.dtype), jnp.zeros(2, p.dtype))
    return Newton().solve(residual, guess)


def test_pytree_guess_gives_the_flat_root():
    p = jnp.asarray(P0)
    s, info = jax.jit(_split_solve)(p)
    x, iterations, converged = _solve_with_info_jit(p)
    assert isinstance(s, _Split) and s.head.shape == (1, 1) and s.tail.shape == (2,)
    assert bool(info.converged) and bool(converged)
    assert int(info.iterations) == int(iterations)
    # ravelled, the split unknowns are the flat ones in the same order: the same iteration,
    # up to XLA fusing the concatenations differently (a few eps of an O(1) root)
    flat = np.concatenate([np.asarray(s.head).reshape(1), np.asarray(s.tail)])
    np.testing.assert_allclose(flat, np.asarray(x), rtol=0, atol=4 * EPS)

    # and its gradient is the flat solve's (implicit function theorem through the ravel)
    def split_loss(p):
        s = _split_solve(p)[0]
        return _loss_of_x(jnp.concatenate([s.head.reshape(1), s.tail]))

    g_split = jax.jit(jax.grad(split_loss))(p)
    np.testing.assert_allclose(np.asarray(g_split), np.asarray(_compiled_grad(20)(p)), rtol=1e-13)


def test_scalar_and_matrix_guesses_are_pytrees_too():
    # a 0-d guess and an (n, 1) guess are ravelled like any pytree
    x, info = jax.jit(lambda g: Newton().solve(lambda x: x**2 - 2.0, g))(jnp.float64(1.0))
    assert x.shape == () and bool(info.converged)
    np.testing.assert_allclose(float(x), np.sqrt(2.0), rtol=4 * EPS)
    x, info = jax.jit(lambda g: Newton().solve(lambda x: circle_line(x[:, 0])[:, None], g))(
        jnp.asarray(GUESS)[:, None]
    )
    assert x.shape == (2, 1) and bool(info.converged)
    np.testing.assert_allclose(np.asarray(x[:, 0]), ROOT, rtol=4 * EPS)


def test_residual_of_another_structure_raises():
    with pytest.raises(ValueError, match="structure and shapes of the guess"):
        Newton().solve(lambda x: x[:1], jnp.zeros(2))
    with pytest.raises(ValueError, match="structure and shapes of the guess"):
        Newton().solve(lambda s: s.tail, _Split(jnp.zeros((1, 1)), jnp.zeros(2)))


# ---------------------------------------------------------------------------------------------
# _linalg
# ---------------------------------------------------------------------------------------------


def _well_conditioned(rng, n, count):
    """Random `Q1 diag(s) Q2` with singular values in [1, 10] (condition ≤ 10)."""
    out = []
    for _ in range(count):
        q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
        q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
        out.append(q1 @ np.diag(rng.uniform(1, 10, n)) @ q2)
    return np.array(out)


def _pivoting_needed(rng, n):
    """Matrices whose natural pivots are zero or tiny (n ≥ 2)."""
    mats = [np.eye(n)[::-1]]  # anti-identity: zero diagonal (centre 1 for odd n)
    A = rng.standard_normal((n, n)) + n * np.eye(n)[::-1]
    A[np.diag_indices(n)] = 0.0  # zero diagonal, dominated anti-diagonal: well conditioned
    mats.append(A)
    B = _well_conditioned(rng, n, 1)[0]
    B[0, 0] = 1e-14  # tiny first pivot: elimination without pivoting loses ~14 digits
    mats.append(B)
    return np.array(mats)


_batched_solve = jax.jit(jax.vmap(_linalg.solve))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 9])
def test_solve_matches_numpy(n):
    rng = np.random.default_rng(n)
    A = _well_conditioned(rng, n, 20)
    if n > 1:
        A = np.concatenate([A, _pivoting_needed(rng, n)])
    b = rng.standard_normal((len(A), n))
    x = np.asarray(_batched_solve(jnp.asarray(A), jnp.asarray(b)))
    x_ref = np.linalg.solve(A, b[..., None])[..., 0]
    cond = np.linalg.cond(A)
    # Backward-stable solves (pivoted elimination; cofactors for n ≤ 3) have relative forward
    # error ≲ c(n)·cond·eps; 50·cond·eps covers the growth factors at these sizes.
    err = np.linalg.norm(x - x_ref, axis=-1) / np.linalg.norm(x_ref, axis=-1)
    np.testing.assert_array_less(err, 50 * cond * EPS)
    # a residual check independent of numpy: |A x − b| ≲ cond·eps·|b| for a stable solve
    res = np.linalg.norm(np.einsum("nij,nj->ni", A, x) - b, axis=-1)
    np.testing.assert_array_less(res, 50 * cond * EPS * np.linalg.norm(b, axis=-1))
    if n <= 4:  # one unbatched system as well (compiles are costly for the unrolled n > 4)
        x0 = np.asarray(jax.jit(_linalg.solve)(jnp.asarray(A[-1]), jnp.asarray(b[-1])))
        np.testing.assert_allclose(x0, x[-1], rtol=0, atol=4 * cond[-1] * EPS)


def test_solve_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"solve needs A of shape \(n, n\).*got \(3, 2\), \(3,\)"):
        _linalg.solve(jnp.zeros((3, 2)), jnp.zeros(3))


def test_inv3_det3_match_numpy():
    rng = np.random.default_rng(3)
    A = np.concatenate(
        [_well_conditioned(rng, 3, 30), _pivoting_needed(rng, 3), rng.standard_normal((10, 3, 3))]
    )
    cond = np.linalg.cond(A)
    inv = np.asarray(jax.jit(_linalg.inv3)(jnp.asarray(A)))
    det = np.asarray(jax.jit(_linalg.det3)(jnp.asarray(A)))
    # Cofactor inverse: relative error ≲ cond·eps per entry, 50× for the constant.
    err = np.abs(inv - np.linalg.inv(A)).max(axis=(-2, -1)) / np.abs(np.linalg.inv(A)).max(
        axis=(-2, -1)
    )
    np.testing.assert_array_less(err, 50 * cond * EPS)
    # Determinant: six triple products of entries ≤ max|A|; absolute error ~ 6·3 eps·max|A|³.
    scale = np.abs(A).max(axis=(-2, -1)) ** 3
    np.testing.assert_array_less(np.abs(det - np.linalg.det(A)), 50 * EPS * scale)
    # batch shapes (4, 5, 3, 3) are accepted and agree with the flat batch
    B = jnp.asarray(A[:20].reshape(4, 5, 3, 3))
    np.testing.assert_array_equal(np.asarray(jax.jit(_linalg.inv3)(B)).reshape(20, 3, 3), inv[:20])
    np.testing.assert_array_equal(np.asarray(jax.jit(_linalg.det3)(B)).reshape(20), det[:20])


@pytest.mark.parametrize(
    "settings, error, message",
    [
        ({"max_steps": 0}, ValueError, r"max_steps >= 1 and peel >= 0, got max_steps=0, peel=0"),
        ({"peel": -1}, ValueError, r"max_steps >= 1 and peel >= 0, got max_steps=20, peel=-1"),
        ({"max_steps": 2.5}, TypeError, r"Newton\(max_steps=...\) must be an integer, got 2.5"),
        ({"max_steps": True}, TypeError, r"Newton\(max_steps=...\) must be an integer, got True"),
        ({"rtol": -1e-9}, ValueError, r"Newton\(rtol=...\) must be a finite tolerance >= 0"),
        ({"atol": float("nan")}, ValueError, r"Newton\(atol=...\) must be a finite tolerance"),
        ({"atol": float("inf")}, ValueError, r"Newton\(atol=...\) must be a finite tolerance"),
    ],
)
def test_settings_that_could_never_converge_are_refused(settings, error, message):
    """A zero budget or a negative/NaN tolerance is refused when the settings are made, not
    reported as every step failing at run time (issue 32)."""
    with pytest.raises(error, match=message):
        Newton(**settings)
    Newton(max_steps=1, peel=1, rtol=0.0, atol=1e-12)  # the edges are valid
