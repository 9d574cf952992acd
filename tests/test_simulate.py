"""The driver: batched runs equal unbatched ones member by member, parameter sweeps by
`model_axes`, saving, jit = eager, dtype kept, and the boundary errors."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import method, one_step, problem

import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.integrators import LiePoissonSplitting, compose
from jaxrigid.lie import so3


def _ensemble(case_name, n, seed=0):
    case = get_case(case_name)
    model, state0 = case.build(case.resolve())
    return model, case.perturb(state0, np.random.default_rng(seed), 0.05, n)


@pytest.mark.parametrize("name", ["IMIDM", "fEM", "BBTRAPWD"])
@pytest.mark.parametrize("case_name", ["krysl-torque-free", "krysl-slow-top"])
def test_batched_run_equals_single_runs(name, case_name):
    model, states = _ensemble(case_name, 5)
    batched = jr.simulate(method(name), model, states, 0.01, 200, save_every=50)
    for m in range(5):
        single = jr.simulate(
            method(name),
            model,
            jax.tree_util.tree_map(lambda x: x[m], states),
            0.01,
            200,
            save_every=50,
        )
        # ≤ 1e-14 relative (issue): the same arithmetic, vectorised; only the order of
        # floating-point reductions may differ.
        for a, b in zip(single.states, batched.states):
            scale = float(jnp.max(jnp.abs(a)))
            assert float(jnp.max(jnp.abs(a - b[m]))) <= 1e-14 * scale
    assert batched.states.R.shape == (5, 5, 3, 3) and batched.ts.shape == (5,)


def test_sweep_over_inertia_tensors_equals_single_runs():
    model, state0 = problem("krysl-torque-free")
    rng = np.random.default_rng(1)
    # full (non-diagonal) tensors of real bodies: rotated principal moments in [1, 1.5],
    # which obey the triangle inequality (max ≤ 1.5 < 1 + 1)
    Q = np.linalg.qr(rng.standard_normal((4, 3, 3)))[0]
    moments = 1.0 + 0.5 * rng.random((4, 3))
    inertias = jnp.asarray(Q @ (moments[:, :, None] * np.swapaxes(Q, -1, -2)))
    sweep = jr.RigidBody(inertias)
    sol = jr.simulate(jr.IMIDM(), sweep, state0, 0.01, 100, model_axes=0)
    assert sol.final_state.Pi.shape == (4, 3)
    for m in range(4):
        single = jr.simulate(jr.IMIDM(), jr.RigidBody(inertias[m]), state0, 0.01, 100)
        assert float(jnp.max(jnp.abs(single.final_state.Pi - sol.final_state.Pi[m]))) <= 1e-14


def test_sweep_over_a_potential_parameter_with_a_pytree_prefix():
    model, state0 = problem("krysl-slow-top")
    # 5 members: no axis of the 3×3 inertia or the 3-vectors has that size, so a misaligned
    # model_axes cannot pass by coincidence
    weights = jnp.array([10.0, 20.0, 30.0, 15.0, 25.0])
    pot = model.potential
    sweep = jr.RigidBody(
        model.inertia, type(pot)(jnp.outer(weights, pot.weighted_com) / 20.0, pot.up)
    )
    axes = jr.RigidBody(None, type(pot)(0, None))
    sol = jr.simulate(jr.IMIDM(), sweep, state0, 0.01, 100, model_axes=axes)
    single = jr.simulate(jr.IMIDM(), model, state0, 0.01, 100)
    assert float(jnp.max(jnp.abs(single.final_state.Pi - sol.final_state.Pi[1]))) <= 1e-13
    assert sol.final_state.Pi.shape == (5, 3)
    assert float(jnp.max(jnp.abs(sol.final_state.Pi[0] - sol.final_state.Pi[2]))) > 1e-3


def test_saving_and_times():
    model, state0 = problem("krysl-torque-free")
    every = jr.simulate(jr.IMID(), model, state0, 0.01, 100, save_every=1)
    sparse = jr.simulate(jr.IMID(), model, state0, 0.01, 100, save_every=25, t0=3.0)
    assert every.states.Pi.shape == (101, 3) and sparse.states.Pi.shape == (5, 3)
    np.testing.assert_allclose(sparse.ts, 3.0 + np.arange(5) * 0.25, rtol=1e-15)
    np.testing.assert_array_equal(every.states.Pi[::25], sparse.states.Pi)
    np.testing.assert_array_equal(sparse.final_state.Pi, sparse.states.Pi[-1])


def test_jit_equals_eager_step():
    model, state0 = problem("krysl-fast-top")
    step = functools.partial(one_step, jr.IMIDM())
    eager = step(model, state0, 0.0, 0.001)[0]
    jitted = jax.jit(step)(model, state0, 0.0, 0.001)[0]
    np.testing.assert_allclose(eager.Pi, jitted.Pi, rtol=1e-14)


@pytest.mark.parametrize("name", ["IMIDM", "TRAP", "fE"])
def test_float32_in_float32_out(name):
    model, state0 = problem("krysl-torque-free")
    m32 = jr.RigidBody(model.inertia.astype(jnp.float32))
    s32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), state0)
    sol = jr.simulate(method(name), m32, s32, 0.01, 100)
    assert sol.final_state.Pi.dtype == jnp.float32 and sol.final_state.R.dtype == jnp.float32
    assert bool(sol.outcome.all_converged)
    ref = jr.simulate(method(name), model, state0, 0.01, 100).final_state
    # float32 round-off over 100 steps: ~100 · 6e-8 relative
    assert float(jnp.max(jnp.abs(sol.final_state.Pi - ref.Pi))) < 1e-5


def test_bad_inputs_raise_clear_errors():
    model, s0 = problem("krysl-torque-free")
    with pytest.raises(ValueError, match="positive definite"):
        jr.simulate(jr.IMIDM(), jr.RigidBody(jnp.diag(jnp.array([1.0, -1.0, 2.0]))), s0, 0.01, 10)
    with pytest.raises(ValueError, match="symmetric"):
        jr.simulate(
            jr.IMIDM(), jr.RigidBody(jnp.array([[1.0, 0.1, 0], [0, 1, 0], [0, 0, 1]])), s0, 0.01, 10
        )
    with pytest.raises(ValueError, match="not orthonormal"):
        jr.simulate(jr.IMIDM(), model, s0._replace(R=1.001 * s0.R), 0.01, 10)
    with pytest.raises(ValueError, match="reflection"):
        jr.simulate(jr.IMIDM(), model, s0._replace(R=-s0.R), 0.01, 10)
    with pytest.raises(ValueError, match="NaN"):
        jr.simulate(jr.IMIDM(), model, s0._replace(Pi=s0.Pi.at[1].set(jnp.nan)), 0.01, 10)
    with pytest.raises(ValueError, match="NaN"):
        jr.simulate(jr.IMIDM(), jr.RigidBody(model.inertia.at[0, 0].set(jnp.nan)), s0, 0.01, 10)
    with pytest.raises(ValueError, match=r"R \(\.\.\., 3, 3\) and Pi"):
        jr.simulate(jr.IMIDM(), model, s0._replace(Pi=jnp.zeros(4)), 0.01, 10)
    with pytest.raises(ValueError, match="inertia must have shape"):
        jr.simulate(jr.IMIDM(), jr.RigidBody(jnp.eye(2)), s0, 0.01, 10)
    with pytest.raises(ValueError, match="dt must be a finite nonzero"):
        jr.simulate(jr.IMIDM(), model, s0, 0.0, 10)
    with pytest.raises(ValueError, match="dt must be a finite nonzero"):
        jr.simulate(jr.IMIDM(), model, s0, float("nan"), 10)
    with pytest.raises(ValueError, match="t0 must be a finite scalar"):
        jr.simulate(jr.IMIDM(), model, s0, 0.01, 10, t0=float("inf"))
    with pytest.raises(ValueError, match=r"t0 must be a finite scalar, got shape \(2,\)"):
        jr.simulate(jr.IMIDM(), model, s0, 0.01, 10, t0=jnp.zeros(2))
    with pytest.raises(ValueError, match="n_steps"):
        jr.simulate(jr.IMIDM(), model, s0, 0.01, 0)
    with pytest.raises(ValueError, match="n_steps must be a positive integer, got True"):
        jr.simulate(jr.IMIDM(), model, s0, 0.01, True)
    with pytest.raises(
        ValueError, match="save_every must be a positive divisor of n_steps=10, got True"
    ):
        jr.simulate(jr.IMIDM(), model, s0, 0.01, 10, save_every=True)
    with pytest.raises(ValueError, match="save_every"):
        jr.simulate(jr.IMIDM(), model, s0, 0.01, 10, save_every=3)
    with pytest.raises(ValueError, match="share their leading"):
        jr.simulate(
            jr.IMIDM(), model, jr.RigidBodyState(jnp.zeros((2, 3, 3)), jnp.zeros((3, 3))), 0.01, 10
        )


def test_bad_member_is_named():
    model, states = _ensemble("krysl-torque-free", 4)
    R = states.R.at[2].set(so3.exp(jnp.array([0.1, 0.2, 0.3])) * 1.01)
    with pytest.raises(ValueError, match=r"ensemble member 2"):
        jr.simulate(jr.IMIDM(), model, states._replace(R=R), 0.01, 10)


def test_absurd_step_is_reported_not_hidden():
    model, s0 = problem("krysl-fast-top")
    sol = jr.simulate(jr.IMIDM(), model, s0, 5.0, 10)
    assert not bool(sol.outcome.all_converged)
    assert int(sol.outcome.first_failure) >= 0
    model, states = _ensemble("krysl-fast-top", 3)
    dts = 0.001
    ok = jr.simulate(jr.IMIDM(), model, states, dts, 10)
    assert bool(jnp.all(ok.outcome.all_converged)) and bool(jnp.all(ok.outcome.first_failure == -1))
    with pytest.raises(
        jr.StepFailedError,
        match=r"step \d+ \(t = .*\) of ensemble member 0 failed: "
        r"(diverged|max_steps_reached|off_branch)",
    ):
        jr.simulate(jr.IMIDM(), model, states, 5.0, 10, throw=True)


class _SignChangesAndPeak(jr.AbstractObserver):
    """Counts sign changes of Π₃ and keeps the peak kinetic energy, every step."""

    def init(self, model, state0, t0):
        return (jnp.int32(0), model.kinetic_energy(state0.Pi))

    def update(self, model, carry, state, next_state, t, dt):
        count, peak = carry
        flips = (state.Pi[2] * next_state.Pi[2] < 0).astype(jnp.int32)
        return count + flips, jnp.maximum(peak, model.kinetic_energy(next_state.Pi))


def test_observer_sees_every_step_and_continues_across_calls():
    """The observer's result equals the same quantity from every-step saved states, for one
    trajectory and an ensemble, and a run split in two (observations0 = first part's carry)
    equals the whole run exactly."""
    model, states = _ensemble("krysl-torque-free", 3)
    obs = _SignChangesAndPeak()
    whole = jr.simulate(jr.IMIDM(), model, states, 0.05, 800, save_every=1, observer=obs)
    Pi1 = np.asarray(whole.states.Pi[..., 2])
    flips = np.sum(Pi1[:, 1:] * Pi1[:, :-1] < 0, axis=1)
    assert flips.min() >= 2  # the momentum tumbles: the count is not trivially zero
    np.testing.assert_array_equal(whole.observations[0], flips)
    K = np.asarray(model.kinetic_energy(whole.states.Pi))
    # the same K = ½Π·Ω, compiled inside the scan and outside it: XLA may contract products and
    # sums into FMAs differently in the two programs, so equal to an ulp or two, not bitwise
    np.testing.assert_allclose(whole.observations[1], K.max(axis=1), rtol=4e-16, atol=0)
    first = jr.simulate(jr.IMIDM(), model, states, 0.05, 400, observer=obs)
    second = jr.simulate(
        jr.IMIDM(),
        model,
        first.final_state,
        0.05,
        400,
        t0=20.0,
        observer=obs,
        observations0=first.observations,
    )
    np.testing.assert_array_equal(second.observations[0], whole.observations[0])
    one = jr.simulate(
        jr.IMIDM(), model, jax.tree_util.tree_map(lambda x: x[1], states), 0.05, 800, observer=obs
    )
    assert int(one.observations[0]) == int(flips[1])
    assert (
        whole.observations is not None
        and jr.simulate(jr.IMIDM(), model, states, 0.05, 10).observations is None
    )


@pytest.mark.parametrize(
    "case_name", ["symmetric-top-rattle", "nontwisting-case1", "dmv-coupled-right-angle"]
)
def test_simulate_validates_the_initial_state_of_every_model(case_name):
    """A hand-built initial state off its constraint manifold (attitude or directors scaled by
    1.1: ‖XᵀX − 1‖ ≈ 0.2 ≫ √eps) is refused by `simulate` itself, not only by the case's
    builder, whatever the model."""
    from jaxrigid.cases import get_case
    from jaxrigid.integrators import get_method

    case = get_case(case_name)
    model, state0 = case.build(case.resolve())
    integrator = get_method(case.default_method, case.family)
    jr.simulate(integrator, model, state0, case.default_dt, 2)  # the valid state runs
    bad = state0._replace(**{state0._fields[0]: 1.1 * state0[0]})
    with pytest.raises(ValueError, match=r"(R0|R|directors) (is|are) not orthonormal"):
        jr.simulate(integrator, model, bad, case.default_dt, 2)


# LP-split's compensated composition split after its first step is the slowest case (≈ 50 s
# of compiling four fused programs) and adds no mechanism the split at 37 and IMIDM's split at
# 1 do not test: slow suite.
CONTINUATION_CASES = [
    pytest.param(
        which,
        split,
        marks=pytest.mark.slow if (which.startswith("LP-split") and split == 1) else (),
        id=f"{which}-{split}",
    )
    for which in ("IMIDM-compensated", "LP-split:yoshida6-compensated", "gauss6-warm-start")
    for split in (1, 37)
]


@pytest.mark.parametrize("which, split", CONTINUATION_CASES)
def test_a_run_continued_from_its_solver_state_equals_the_unsplit_run(which, split):
    """`Solution.solver_state` carries what a method reuses between steps; continuing from it
    (with `final_state`) gives the unsplit run bit for bit, for a compensated method (the
    rounding error) and a warm-started implicit one (the extrapolated stages), also for an
    ensemble. For the compensated method a restart without it is not equal (the rounding
    error is dropped); Gauss6's Newton may land on the same bits from either start, so there
    the Newton iterations per step are compared: the unsplit run's, and fewer than a restart's
    on its first step (warm 2, predictor 3)."""
    compensated = which.endswith("-compensated")
    if compensated:
        integrator = (
            jr.IMIDM(compensated=True)
            if which == "IMIDM-compensated"
            else compose(LiePoissonSplitting(compensated=True), "yoshida6")
        )
        model, state0 = _ensemble("krysl-torque-free", 3)
        dt = 0.05
    else:
        integrator = jr.integrators.get_method("gauss6", "hamiltonian")
        case = get_case("kepler")
        model, one = case.build(case.resolve())
        state0 = jax.tree_util.tree_map(lambda x: jnp.stack([x, 1.01 * x, 0.99 * x]), one)
        dt = 0.05
    n = 80
    # the compensated runs compare final states only: saving just the end, every run has one
    # save and the four share two programs (with and without `solver_state0`); Gauss6's
    # comparison needs every step's Newton iterations
    every = (lambda k: k) if compensated else (lambda k: 1)  # noqa: E731
    whole = jr.simulate(integrator, model, state0, dt, n, save_every=every(n))
    first = jr.simulate(integrator, model, state0, dt, split, save_every=every(split))
    # the same continuation with its solver state, and without (a restart from `init`)
    continued = functools.partial(
        jr.simulate,
        integrator,
        model,
        first.final_state,
        dt,
        n - split,
        t0=split * dt,
        save_every=every(n - split),
    )
    rest = continued(solver_state0=first.solver_state)
    for a, b in zip(
        jax.tree_util.tree_leaves(whole.final_state), jax.tree_util.tree_leaves(rest.final_state)
    ):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(
        jax.tree_util.tree_leaves(whole.solver_state), jax.tree_util.tree_leaves(rest.solver_state)
    ):
        np.testing.assert_array_equal(a, b)
    restart = continued()
    if not compensated:
        # Gauss6: each step's Newton iterations are the unsplit run's, and a restart from
        # `init` (predictor start) takes more on its first step, so the warm start was used
        iterations = whole.outcome_per_save.max_iterations[..., split:]
        np.testing.assert_array_equal(rest.outcome_per_save.max_iterations, iterations)
        if split > 1:  # after one step the extrapolated start still needs 3 (measured)
            first_restart = restart.outcome_per_save.max_iterations[..., 0]
            assert np.all(np.asarray(first_restart) > np.asarray(iterations[..., 0]))
        return
    # and the solver state is not trivial: a restart from `init` differs
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(
            jax.tree_util.tree_leaves(whole.final_state),
            jax.tree_util.tree_leaves(restart.final_state),
        )
    )


def test_a_foreign_solver_state_is_refused():
    model, states = _ensemble("krysl-torque-free", 3)
    sol = jr.simulate(jr.IMIDM(compensated=True), model, states, 0.01, 4)
    with pytest.raises(ValueError, match="solver_state0 is not a solver state of IMIDM"):
        jr.simulate(
            jr.IMIDM(compensated=True),
            model,
            states,
            0.01,
            4,
            solver_state0=jax.tree_util.tree_map(lambda x: x[..., :2], sol.solver_state),
        )


def test_the_runs_outcome_is_its_first_failed_intervals():
    """`results.summarize`: per member, the cause and step of the earliest failed step over
    the saved intervals (steps counted from the run's start, so a later interval's are
    larger), −1 and success where none failed, and the worst iterations and residual, against
    a loop over the intervals; under `jit`, for a (2, 3) ensemble. Four of the six members
    fail in two intervals, three of them with different causes (one with the smaller cause
    first): a reduction that took the last failure, the largest cause or the largest step
    would differ."""
    from jaxrigid import results

    rng = np.random.default_rng(0)
    n_save, every = 5, 10
    failed = rng.random((2, 3, n_save)) < 0.4
    failed[0, 0] = False  # a member with no failure
    failed[1, :] = [True, False, True, False, False]  # failures in intervals 0 and 2
    cause = rng.integers(1, 8, (2, 3, n_save)) * failed
    first = np.where(failed, np.arange(n_save) * every + rng.integers(0, every, n_save), -1)
    per_save = results.Outcome(
        rng.integers(0, 9, (2, 3, n_save)).astype(np.int32),
        rng.random((2, 3, n_save)),
        cause.astype(np.int32),
        first.astype(np.int32),
    )
    got = jax.jit(results.summarize, static_argnums=1)(per_save, (2, 3))
    for i in range(2):
        for j in range(3):
            hits = [k for k in range(n_save) if failed[i, j, k]]
            k = hits[0] if hits else None
            assert int(got.result[i, j]) == (0 if k is None else cause[i, j, k])
            assert int(got.first_failure[i, j]) == (-1 if k is None else first[i, j, k])
            assert int(got.max_iterations[i, j]) == per_save.max_iterations[i, j].max()
            assert float(got.max_residual[i, j]) == per_save.max_residual[i, j].max()
    assert got.result.dtype == got.first_failure.dtype == jnp.int32
