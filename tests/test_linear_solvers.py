"""Newton's linear solvers (jaxrigid.linear_solvers): same roots, exact gradients, the
block-diagonal solver's convergence rates, transformations and configuration errors."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid.linear_solvers import (
    Auto,
    BlockDiagonal,
    DenseLU,
    Krylov,
    StageJacobian,
    StructureDefault,
    body_blocks,
    value_and_jacobian,
)
from jaxrigid.newton import Newton, default_tolerance

EPS = float(np.finfo(np.float64).eps)
TOL = default_tolerance(jnp.float64)

# ---------------------------------------------------------------------------------------------
# Newton's Jacobian: one `jacfwd` at every size
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_value_and_jacobian_is_the_residual_and_its_jacobian(n):
    """`value_and_jacobian(f, x)` is `(f(x), ∂f/∂x)` with `J[i, j] = ∂fᵢ/∂xⱼ` (not its
    transpose: the matrix is non-symmetric), the residual traced once, under `jit` and for
    each member under `vmap`, at the sizes of the closed-form solve (n ≤ 3) and above. For
    `f(x) = A x + x³/2` the exact Jacobian is `A + diag(3x²/2)`. Tolerances: forward mode
    forms column j as `A eⱼ + (3x²/2) eⱼ`, sums with one nonzero term, so an entry is off by
    at most the diagonal's one rounding (2 eps relative, allowing a fused multiply-add); the
    residual `f(x)` is a sum of n + 1 products, within (n + 1)·eps·Σ|terms| of NumPy's value
    in any order (n additions and the products' own roundings)."""
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    xs = rng.uniform(-1, 1, (4, n))
    calls = []

    def f(x):
        calls.append(1)
        return A @ x + 0.5 * x**3

    r, J = jax.jit(lambda x: value_and_jacobian(f, x))(jnp.asarray(xs[0]))
    assert len(calls) == 1
    rs, Js = jax.jit(jax.vmap(lambda x: value_and_jacobian(f, x)))(jnp.asarray(xs))
    for got_r, got_J, x in [(r, J, xs[0]), *zip(rs, Js, xs)]:
        np.testing.assert_allclose(np.asarray(got_J), A + np.diag(1.5 * x**2), rtol=2 * EPS)
        bound = (n + 1) * EPS * (np.abs(A) @ np.abs(x) + 0.5 * np.abs(x) ** 3)
        assert np.all(np.abs(np.asarray(got_r) - (A @ x + 0.5 * x**3)) <= bound)


# ---------------------------------------------------------------------------------------------
# a coupled nonlinear system of 20 unknowns: dense solvers and Krylov agree, gradients exact
# ---------------------------------------------------------------------------------------------

N20 = 20
_rng = np.random.default_rng(20)
A20 = np.eye(N20) + 0.2 * _rng.standard_normal((N20, N20)) / np.sqrt(N20)  # cond ≈ 1.5
B20 = _rng.uniform(-1, 1, N20)


def _residual20(p):
    """Fully coupled (`A20` dense, non-symmetric), nonlinear, closing over the parameter p."""

    def r(x):
        return A20 @ x + 0.1 * x**3 + 0.2 * jnp.sin(jnp.roll(x, 1)) - p * B20

    return r


def _solve20(p, solver):
    x, info = Newton(linear_solver=solver).solve(_residual20(p), jnp.zeros(N20))
    return x, info


def _loss20(p, solver):
    x, _ = _solve20(p, solver)
    return jnp.sum(x**2) + jnp.sin(x[0])


SOLVERS20 = {"auto": Auto(), "dense_lu": DenseLU(), "krylov": Krylov()}


@functools.cache
def _jitted20(name):
    solver = SOLVERS20[name]
    solve = jax.jit(functools.partial(_solve20, solver=solver))
    loss = jax.jit(functools.partial(_loss20, solver=solver))
    grad = jax.jit(jax.grad(functools.partial(_loss20, solver=solver)))
    return solve, loss, grad


def test_dense_lu_krylov_and_auto_find_the_same_root():
    p = 0.8
    roots = {}
    for name in SOLVERS20:
        x, info = _jitted20(name)[0](p)
        assert bool(info.converged), name
        roots[name] = np.asarray(x)
    # Each stopped on an update ≤ TOL(1 + |x|) of a quadratically converging iteration (GMRES
    # to relative residual eps^(3/4) leaves a relative error ~1e-12 of that last update), so
    # what is left is the root's round-off: cond(J) ≈ 2 times a few eps of |x| ≤ 2.
    scale = np.abs(roots["dense_lu"]).max()
    for name in ("auto", "krylov"):
        np.testing.assert_allclose(roots[name], roots["dense_lu"], rtol=0, atol=16 * EPS * scale)
    assert np.abs(np.asarray(_residual20(p)(roots["krylov"]))).max() < 16 * EPS * scale


def test_gradients_match_finite_differences_and_each_other():
    p, h = 0.8, 1e-5
    grads = {}
    for name in SOLVERS20:
        _, loss, grad = _jitted20(name)
        fd = (float(loss(p + h)) - float(loss(p - h))) / (2 * h)
        grads[name] = float(grad(p))
        # central differences: truncation O(h²) ~ 1e-10 relative, round-off eps/h ~ 1e-11;
        # a derivative that skipped the implicit solve (or used a wrong Jacobian) misses by O(1)
        np.testing.assert_allclose(grads[name], fd, rtol=1e-6, err_msg=name)
    # The same implicit-function formula; the solves differ by round-off (LU) or by GMRES's
    # relative residual 1.8e-12 times cond(J) ≈ 2: 1e-9 has a wide margin.
    for name in ("auto", "krylov"):
        np.testing.assert_allclose(grads[name], grads["dense_lu"], rtol=1e-9, err_msg=name)


# ---------------------------------------------------------------------------------------------
# block diagonal: 10³ weakly coupled bodies
# ---------------------------------------------------------------------------------------------

N_BODIES = 1000
C = np.random.default_rng(3).uniform(-1, 1, (N_BODIES, 3))


def chain_residual(eps, p=1.0, n=N_BODIES):
    """Body i (3 unknowns, a row of y (N, 3)): a nonlinear equation of its own, plus ε times
    its neighbours' difference y_{i+1} − y_{i−1} (a periodic chain). The colouring's column
    sums of the coupling cancel, so BlockDiagonal's blocks are the exact diagonal blocks D_i,
    and near the root its error contracts by the iteration matrix −D⁻¹·ε(S₊ − S₋)."""

    def r(y):
        own = y + 0.1 * y**3 + 0.2 * jnp.sin(jnp.roll(y, 1, axis=1)) - p * C[:n]
        return own + eps * (jnp.roll(y, -1, axis=0) - jnp.roll(y, 1, axis=0))

    return r


@functools.cache
def _chain_solver(eps, solver, **kw):
    return jax.jit(lambda y: Newton(linear_solver=solver, **kw).solve(chain_residual(eps), y))


@functools.cache
def _dense_root(eps):
    y, info = _chain_solver(eps, DenseLU())(jnp.zeros((N_BODIES, 3)))
    return y, info


def _iterate_errors(eps, solver, root, n):
    """Max-norm errors of the first n Newton iterates from 0: one update per call (a
    Newton update depends on the iterate only, so this is the loop's sequence)."""
    one = _chain_solver(eps, solver, max_steps=1, rtol=0.0, atol=0.0)
    y, errs = jnp.zeros((N_BODIES, 3)), []
    for _ in range(n):
        y = one(y)[0]
        errs.append(float(jnp.abs(y - root).max()))
    return np.array(errs)


@pytest.mark.parametrize("eps", [1e-3, 0.0])
def test_block_diagonal_converges_to_the_dense_root(eps):
    y0 = jnp.zeros((N_BODIES, 3))
    dense, dense_info = _dense_root(eps)
    block, block_info = _chain_solver(eps, BlockDiagonal())(y0)
    assert bool(dense_info.converged) and bool(block_info.converged)
    # Block: linear at rate ρ ≈ 2e-3 (below), stopped on an update ≤ TOL(1 + |y|), leaving
    # ρ/(1 − ρ) of it (~1e-14); dense: quadratic, left (TOL)² . Both then sit on the root to
    # its round-off: D_i ≈ I (cond ≲ 2), a few eps of |y| ≤ 1.5. 64 eps ≈ 1.4e-14 covers it.
    np.testing.assert_allclose(np.asarray(block), np.asarray(dense), rtol=0, atol=64 * EPS)
    if eps:
        # an inexact Newton needs more updates than full Newton for the same tolerance
        assert int(block_info.iterations) > int(dense_info.iterations)
    else:  # exactly block diagonal: the same Newton iteration, the same number of updates
        assert int(block_info.iterations) == int(dense_info.iterations)


def test_block_diagonal_is_linear_when_coupled_and_quadratic_when_not():
    root_c = _dense_root(1e-3)[0]
    e_block = _iterate_errors(1e-3, BlockDiagonal(), root_c, 7)
    e_dense = _iterate_errors(1e-3, DenseLU(), root_c, 5)
    # Coupled: error ratio → spectral radius of −εD⁻¹(S₊ − S₋), at most
    # ρ_max = ε‖S₊ − S₋‖∞·max‖D_i⁻¹‖∞ = 2ε·max‖D_i⁻¹‖∞ (D_i at the root), plus the quadratic
    # term C·e_k ≤ e_k. In the window e_k ≤ 1e-4 (and e_{k+1} above round-off) full Newton's
    # ratio is ≤ C·e_k ≤ 1e-4/4 (C ≈ 0.25, measured below), while a linear rate ≈ 2ε is not:
    # every ratio there must exceed ε/10 = 1e-4.
    D = jax.jacfwd(chain_residual(0.0))(root_c)  # (N, 3, N, 3), exactly block diagonal
    blocks = np.asarray(D)[np.arange(N_BODIES), :, np.arange(N_BODIES), :]
    rho_max = 2e-3 * np.abs(np.linalg.inv(blocks)).sum(axis=-1).max()
    window = (e_block[:-1] <= 1e-4) & (e_block[1:] > 1e3 * EPS)
    assert window.sum() >= 2
    ratios = e_block[1:][window] / e_block[:-1][window]
    np.testing.assert_array_less(ratios, rho_max + e_block[:-1][window])
    np.testing.assert_array_less(1e-4, ratios)
    d_window = (e_dense[:-1] <= 1e-4) & (e_dense[1:] > 1e3 * EPS)
    assert d_window.any()
    np.testing.assert_array_less(e_dense[1:][d_window] / e_dense[:-1][d_window], 1e-4)

    # Not coupled: the block Jacobian is the Jacobian, so the iterates are full Newton's (to
    # round-off: the same arithmetic per block, elimination order aside) and quadratic:
    # e_{k+1} ≤ C e_k² with C = ½ max|F''|·‖J⁻¹‖ ≲ ½·0.8·1.3 < 1 (|F''| ≤ 0.6|y| + 0.2).
    root_0 = _dense_root(0.0)[0]
    e_block = _iterate_errors(0.0, BlockDiagonal(), root_0, 5)
    e_dense = _iterate_errors(0.0, DenseLU(), root_0, 5)
    np.testing.assert_allclose(e_block, e_dense, rtol=1e-9, atol=8 * EPS)
    above = e_block[1:] > 1e3 * EPS
    assert above.sum() >= 3
    np.testing.assert_array_less(e_block[1:][above], e_block[:-1][above] ** 2)


def test_block_diagonal_gradient_is_exact():
    # BlockDiagonal's tangent solve uses the true Jacobian (preconditioned GMRES), so the
    # implicit gradient is exact although its Newton updates used only the diagonal blocks.
    def loss(p, solver):
        residual = chain_residual(1e-3, p, n=50)
        y, _ = Newton(linear_solver=solver).solve(residual, jnp.zeros((50, 3)))
        return jnp.sum(y**2) + jnp.sum(jnp.sin(y[:, 0]))

    grads, h = {}, 1e-5
    for solver in (BlockDiagonal(), DenseLU()):
        f = jax.jit(functools.partial(loss, solver=solver))
        fd = (float(f(1.0 + h)) - float(f(1.0 - h))) / (2 * h)
        grads[type(solver)] = float(jax.jit(jax.grad(functools.partial(loss, solver=solver)))(1.0))
        # central differences: O(h²) ~ 1e-10 relative truncation, eps/h ~ 1e-11 round-off
        np.testing.assert_allclose(grads[type(solver)], fd, rtol=1e-6)
    # GMRES to relative residual 1.8e-12 on cond ≈ 2 against LU: 1e-9 has a wide margin, and a
    # block-diagonal tangent solve misses the true gradient by 3e-5 relative (measured).
    np.testing.assert_allclose(grads[BlockDiagonal], grads[DenseLU], rtol=1e-9)


def test_a_tangent_solve_that_runs_out_of_gmres_iterations_gives_nan_not_a_wrong_gradient():
    # one restart of a 2-dimensional Krylov space cannot solve the fully coupled 20-unknown
    # system to eps^(3/4): the gradient must be NaN (loud), where it used to be an inexact
    # number; the forward Newton solve itself still converges (inexact steps, Newton's rule)
    starved = Krylov(restart=2, maxiter=1)
    x, info = jax.jit(functools.partial(_solve20, solver=starved))(1.0)
    assert bool(info.converged)
    g = jax.jit(jax.grad(functools.partial(_loss20, solver=starved)))(1.0)
    assert np.isnan(float(g))
    blocky = BlockDiagonal(tangent=starved)

    def loss(p):
        # weak coupling: Newton converges; two preconditioned GMRES iterations leave a
        # relative residual near ε² = 1e-6, far above the tangent's eps^(3/4)
        y, info = Newton(linear_solver=blocky).solve(
            chain_residual(1e-3, p, n=50), jnp.zeros((50, 3))
        )
        return jnp.sum(y**2), info.converged

    assert bool(jax.jit(loss)(1.0)[1])
    assert np.isnan(float(jax.jit(jax.grad(lambda p: loss(p)[0]))(1.0)))


# ---------------------------------------------------------------------------------------------
# pytrees, transformations, configuration errors
# ---------------------------------------------------------------------------------------------


def _split_residual(p):
    """The chain of 40 bodies with each body's unknowns split over two leaves, `u (N, 2)` and
    `v (N,)`: BlockDiagonal lays body i out as (u_i, v_i)."""
    residual = chain_residual(1e-3, p, n=40)

    def r(x):
        out = residual(jnp.concatenate([x["u"], x["v"][:, None]], axis=1))
        return {"u": out[:, :2], "v": out[:, 2]}

    return r


STRUCTURED = [BlockDiagonal(), Krylov(), DenseLU()]
SPLIT_GUESS = {"u": jnp.zeros((40, 2)), "v": jnp.zeros(40)}


def _split_solve(p, solver):
    x, info = Newton(linear_solver=solver).solve(_split_residual(p), SPLIT_GUESS)
    return x, info.iterations, info.converged


@pytest.mark.parametrize("solver", STRUCTURED, ids=lambda s: type(s).__name__)
def test_pytree_unknowns_match_the_array_solve(solver):
    x, _, converged = jax.jit(functools.partial(_split_solve, solver=solver))(1.0)
    y, info = _chain_solver_n40(solver)
    assert bool(converged) and bool(info.converged)
    # The same iteration on the same unknowns, laid out differently; BlockDiagonal's blocks are
    # the same, ravelled solvers see a permutation of the unknowns (LU's pivots, GMRES's sums
    # in another order): each at the root to its round-off, a few eps of |y| ≤ 1.5.
    np.testing.assert_allclose(np.asarray(x["u"]), np.asarray(y[:, :2]), rtol=0, atol=16 * EPS)
    np.testing.assert_allclose(np.asarray(x["v"]), np.asarray(y[:, 2]), rtol=0, atol=16 * EPS)


@functools.cache
def _chain_solver_n40_jit(solver):
    residual = chain_residual(1e-3, 1.0, n=40)
    return jax.jit(lambda y: Newton(linear_solver=solver).solve(residual, y))


def _chain_solver_n40(solver):
    return _chain_solver_n40_jit(solver)(jnp.zeros((40, 3)))


@pytest.mark.parametrize("solver", STRUCTURED, ids=lambda s: type(s).__name__)
def test_vmap_matches_loop_and_jit_matches_eager(solver):
    ps = np.array([0.6, 1.0, 1.3])
    solve = functools.partial(_split_solve, solver=solver)
    xs, its, conv = jax.jit(jax.vmap(solve))(jnp.asarray(ps))
    assert np.all(np.asarray(conv))
    single = jax.jit(solve)
    for i, p in enumerate(ps):
        x, it, _ = single(p)
        # Each member iterates on its own data and is frozen once done (while_loop under
        # vmap selects): the same arithmetic up to XLA's batched reordering, a few eps.
        for k in x:
            np.testing.assert_allclose(np.asarray(xs[k][i]), np.asarray(x[k]), atol=8 * EPS)
        assert int(its[i]) == int(it)
    x_eager, it_eager, _ = solve(1.0)
    x_jit, it_jit, _ = single(1.0)
    for k in x_jit:  # same operations, fused differently: a few eps
        np.testing.assert_allclose(np.asarray(x_eager[k]), np.asarray(x_jit[k]), atol=8 * EPS)
    assert int(it_eager) == int(it_jit)


def test_bad_configurations_raise():
    residual = _split_residual(1.0)
    with pytest.raises(ValueError, match="same leading \\(body\\) axis N"):
        Newton(linear_solver=BlockDiagonal()).solve(
            lambda x: x, {"u": jnp.zeros((40, 2)), "v": jnp.zeros(39)}
        )
    with pytest.raises(ValueError, match="same leading \\(body\\) axis N"):
        Newton(linear_solver=BlockDiagonal()).solve(lambda x: x, (jnp.zeros(3), jnp.float64(1.0)))
    with pytest.raises(ValueError, match="structure and shapes of the guess"):
        Newton(linear_solver=BlockDiagonal()).solve(lambda x: residual(x)["u"], SPLIT_GUESS)
    with pytest.raises(ValueError, match="structure and shapes of the guess"):
        Newton().solve(lambda x: x[:2], jnp.zeros(3))
    with pytest.raises(ValueError, match="at least one unknown"):
        Newton().solve(lambda x: x, {})
    with pytest.raises(TypeError, match="linear_solver"):
        Newton(linear_solver="lu")
    # a structure's default stands for a solver, resolved by the Runge–Kutta methods only
    with pytest.raises(TypeError, match="StructureDefault"):
        Newton(linear_solver=StructureDefault()).solve(lambda x: x, jnp.zeros(3))
    assert StructureDefault().resolve(Krylov()) == Krylov()
    assert BlockDiagonal().resolve(Krylov()) == BlockDiagonal()


@pytest.mark.parametrize("reach", [1, 2])
def test_body_blocks_by_colouring_are_the_jacobians_diagonal_blocks(reach):
    """`body_blocks` of a map whose body `n` depends on bodies `n − reach … n + reach` equals
    the diagonal blocks of its dense Jacobian (to round-off: the same JVP products)."""
    n, w = 9, 3
    c = jnp.asarray(np.random.default_rng(reach).uniform(-1, 1, (n, w)))

    def shift(y, k):  # body n gets body n − k's row (zero past the ends: a chain, no ring)
        pad = jnp.zeros((abs(k), w), y.dtype)
        return jnp.concatenate([pad, y[:-k]]) if k > 0 else jnp.concatenate([y[-k:], pad])

    def f(y):  # nonlinear in each body, coupled to the neighbours within reach
        out = jnp.sin(y) * c + y**2
        for k in range(1, reach + 1):
            out = out + 0.3 * shift(y, k) * y + 0.2 * shift(y, -k) ** 2
        return out

    y = c + 0.5
    J = jax.jacfwd(f)(y).reshape(n * w, n * w)
    dense = np.stack([np.asarray(J[i * w : (i + 1) * w, i * w : (i + 1) * w]) for i in range(n)])
    np.testing.assert_allclose(np.asarray(body_blocks(f, y, reach)), dense, rtol=0, atol=4 * EPS)


def test_stage_jacobian_without_a_body_axis_solves_the_same_stages():
    """On a flat canonical system `StageJacobian` preconditions the stage residual with the
    whole Jacobian at the step's start (one block): the simplified Newton iteration, which
    finds full Newton's (`Auto`) stages to its tolerance; 20 Gauss6 steps of the pendulum
    agree to 1e-11 (Newton's tolerance eps^(3/4) ≈ 2e-12, times the steps)."""
    from jaxrigid import Gauss6, simulate
    from jaxrigid.cases import get_case

    case = get_case("pendulum")
    method = Gauss6(newton=Newton(linear_solver=StageJacobian()))
    model, s0 = case.build_for(method)(case.resolve())
    assert Gauss6().newton_for(model).linear_solver == Auto()
    simplified = simulate(method, model, s0, case.default_dt, 20, save_every=20)
    full = simulate(Gauss6(), model, s0, case.default_dt, 20, save_every=20)
    assert bool(simplified.outcome.all_converged)
    for a, b in zip(jax.tree.leaves(simplified.final_state), jax.tree.leaves(full.final_state)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-11)


@pytest.mark.parametrize("b", [1, 2, 4, 7])
def test_block_sizes_closed_form_lu_and_vmapped_columns(b):
    # b ≤ 3 closed form and a JVP per block column; b > 3 batched LU and one vmapped JVP.
    # On an exactly block-diagonal system BlockDiagonal is full Newton: DenseLU's iteration.
    c = jnp.asarray(np.random.default_rng(b).uniform(-1, 1, (20, b)))

    def residual(y):
        return y + 0.1 * y**3 + 0.2 * jnp.sin(jnp.roll(y, 1, axis=1)) - c

    def solve(solver):
        return jax.jit(lambda y: Newton(linear_solver=solver).solve(residual, y))(c * 0)

    (yb, ib), (yd, id_) = solve(BlockDiagonal()), solve(DenseLU())
    assert bool(ib.converged) and int(ib.iterations) == int(id_.iterations)
    # the same updates up to the elimination's round-off: a few eps of |y| ≤ 1.5
    np.testing.assert_allclose(np.asarray(yb), np.asarray(yd), rtol=0, atol=8 * EPS)
