"""A run as a library object (`jaxrigid.runs`, issue 33): its step plan, its chunks, and the
chunked continuation, which equals one `simulate` call bit for bit."""

from __future__ import annotations

import re
from typing import NamedTuple

import jax
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid import integrators, runs, simulation
from jaxrigid.cases import CASES
from jaxrigid.observers import InvariantDrift
from jaxrigid.results import Outcome
from jaxrigid.runs import planning

# ----------------------------------------------------------------------------------------
# Steps


@pytest.mark.parametrize(
    "t_end, dt, n",
    [
        ("1", "0.1", 10),
        ("0.3", "0.1", 3),
        ("5", "0.005", 1000),
        ("0.7", "0.7", 1),
        ("157.08", "0.01", 15708),
        ("2147.483647", "1e-6", 2**31 - 1),
    ],
)
def test_whole_number_of_steps_is_accepted(t_end, dt, n):
    """Decimal multiples whose doubles are not exact multiples (0.3 / 0.1 = 2.9999999999999996)
    are whole numbers of steps up to round-off."""
    assert runs.whole_steps(float(t_end), float(dt)) == n


@pytest.mark.parametrize(
    "t_end, dt, message",
    [
        (1, 0.3, "t_end 1 is not a whole number of steps of dt 0.3; nearest valid: 0.9 or 1.2"),
        (0.30000001, 0.1, "nearest valid: 0.3 or 0.4"),
        (1 + 1e-12, 0.1, "nearest valid: 1 or 1.1"),  # a misfit far above round-off
        (0.001, 0.01, "t_end 0.001 is shorter than one step of dt 0.01; nearest valid: 0.01"),
        (0.0099, 0.01, "shorter than one step"),
        (1e4, 1e-6, "t_end / dt = 1e+10 steps; at most 2147483647 are supported"),
    ],
)
def test_partial_step_is_refused(t_end, dt, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        runs.whole_steps(t_end, dt)
    assert "\n" not in str(err.value)


def test_the_messages_name_t_end_and_dt_as_asked():
    """The command names them by its flags (`names`), a sweep spec by its keys (default)."""
    case = CASES["krysl-torque-free"]
    with pytest.raises(ValueError, match=r"^--t-end 1 is not a whole number of steps of --dt 0\.3"):
        runs.step_plan(case, 1.0, 0.3, ("--t-end", "--dt"))
    with pytest.raises(ValueError, match=r"^dt must be a positive finite number, got -1$"):
        runs.step_plan(case, None, -1)
    with pytest.raises(ValueError, match=r"^the default t_end \S+ of case krysl-torque-free is"):
        runs.step_plan(case, None, case.default_dt * 1.37)


@pytest.mark.parametrize("name", list(CASES))
def test_every_case_runs_its_defaults(name):
    """Each case's own (t_end, dt) gives a run; a default t_end that is not whole in its dt
    (the harmonic oscillator's 50π) runs the nearest whole number of steps, and the t_end
    planned is one that a given t_end accepts for the same run."""
    case = CASES[name]
    dt, t_end, n = runs.step_plan(case, None, None)
    assert dt == case.default_dt and n >= 1
    assert abs(n * dt - case.default_t_end) <= dt / 2
    assert t_end == pytest.approx(n * dt, rel=1e-14, abs=0)
    assert runs.step_plan(case, t_end, dt) == (dt, t_end, n)
    assert runs.step_plan(case, t_end, None) == (dt, t_end, n)


# ----------------------------------------------------------------------------------------
# Chunks


@pytest.mark.parametrize("n_steps", [1, 7, 2001, 40000, 40001, 999983])
def test_plan_chunks_covers_the_run(n_steps):
    chunks = runs.plan_chunks(n_steps)
    assert sum(steps for steps, _ in chunks) == n_steps
    assert all(steps % every == 0 for steps, every in chunks)
    assert len(set(chunks[:-1])) <= 1  # equal chunks, then at most one different tail
    assert sum(steps // every for steps, every in chunks) <= 1.05 * planning.MAX_SAVES


def test_large_ensembles_save_fewer_states():
    """A large ensemble's saved states stay bounded: ≤ MAX_SAVED_STATES in all (and at least
    MIN_SAVES per member)."""
    assert runs.saves_for(None) == planning.MAX_SAVES
    assert runs.saves_for(1000) * 1000 <= planning.MAX_SAVED_STATES
    assert runs.saves_for(10**7) == planning.MIN_SAVES
    plan = runs.plan_chunks(10_000, runs.saves_for(1000))
    assert sum(steps // every for steps, every in plan) <= 1.05 * runs.saves_for(1000)


def test_run_chunks_needs_a_chunk():
    case, integrator = CASES["krysl-slow-top"], integrators.get_method("MKRK-gauss4")
    model, state0 = case.build_for(integrator)(case.resolve())
    with pytest.raises(ValueError, match=r"^run_chunks: no chunks to run$"):
        runs.run_chunks(integrator, model, state0, 0.01, [])


# ----------------------------------------------------------------------------------------
# The chunked continuation


def _gauss4(case: str):
    """MKRK-gauss4 (its solver state: the stage slopes, Newton's warm start) on `case`."""
    integrator = integrators.get_method("MKRK-gauss4")
    model, state0 = CASES[case].build_for(integrator)(CASES[case].resolve())
    return integrator, model, state0


@pytest.mark.xla_defaults
def test_a_chunked_run_is_one_simulate_call():
    """Three chunks continued by `run_chunks` equal one `simulate` call of all their steps
    bit for bit: the saved and final states, each step's Newton iteration count (3 or 4
    here), the outcome, the observer's carry and the solver state (the saved times to
    round-off: see below). The boundaries matter: restarting the solver state at them
    changes the iteration counts.
    (The chunks' programs are shaped differently from the one call's, which the suite's fast
    build rounds differently: XLA's defaults, as users' programs.)"""
    integrator, model, state0 = _gauss4("krysl-fast-top")
    dt, chunks = 0.05, [(20, 1)] * 3  # one chunk program (a shorter tail: one more)
    n = sum(steps for steps, _ in chunks)
    ss0 = integrator.init(model, state0, 0.0, dt)
    assert jax.tree_util.tree_leaves(ss0) and np.any(np.asarray(ss0) != 0)  # it has one
    one = jr.simulate(integrator, model, state0, dt, n, observer=InvariantDrift())
    run = runs.run_chunks(integrator, model, state0, dt, chunks, observer=InvariantDrift())
    iterations = np.asarray(one.outcome_per_save.max_iterations)
    assert set(iterations) == {3, 4}
    equal = np.testing.assert_array_equal
    # a chunk's times are its t0 = steps done · dt plus its own k · dt: round-off from k · dt
    np.testing.assert_allclose(run.ts, np.asarray(one.ts), rtol=1e-15, atol=0)
    jax.tree_util.tree_map(equal, run.states, jax.tree_util.tree_map(np.asarray, one.states))
    jax.tree_util.tree_map(equal, run.final_state, one.final_state)
    jax.tree_util.tree_map(equal, run.outcome_per_save, one.outcome_per_save)
    jax.tree_util.tree_map(equal, run.outcome, one.outcome)
    jax.tree_util.tree_map(equal, run.observations, one.observations)
    equal(run.solver_state, np.asarray(one.solver_state))
    assert not run.restarted.any() and run.first_failure() == (-1, 0)

    # the second chunk from the method's own initial solver state (the first chunk's program)
    first = jr.simulate(integrator, model, state0, dt, 20, observer=InvariantDrift())
    restarted = jr.simulate(
        integrator, model, first.final_state, dt, 20, t0=20 * dt, observer=InvariantDrift()
    )
    assert not np.array_equal(restarted.outcome_per_save.max_iterations, iterations[20:40])


def test_run_chunks_hands_each_chunk_the_last_ones_carry(monkeypatch):
    """Each chunk's `simulate` gets the last chunk's final state, solver state and observer
    carry (the first: `state0`, `solver_state0` and `observations0`), at its own `t0`;
    `on_chunk` hears the steps done after each."""
    integrator, model, state0 = _gauss4("krysl-slow-top")
    calls, done = [], []

    def recording(*args, **kwargs):
        sol = jr.simulate(*args, **kwargs)
        calls.append((args[2], kwargs, sol))
        return sol

    monkeypatch.setattr(simulation, "simulate", recording)
    chunks = [(6, 2), (3, 1), (9, 3)]  # as many saves each: one program after the first
    run = runs.run_chunks(
        integrator, model, state0, 0.01, chunks, observer=InvariantDrift(), on_chunk=done.append
    )
    assert done == [6, 9, 18]
    assert [c[1]["t0"] for c in calls] == [0.0, 0.06, 0.09]
    assert [c[1]["check_state"] for c in calls] == [True, False, False]  # state0's alone
    assert calls[0][1]["solver_state0"] is None and calls[0][1]["observations0"] is None
    same = np.testing.assert_array_equal
    for (_, _, before), (state, kwargs, _) in zip(calls[:-1], calls[1:]):
        jax.tree_util.tree_map(same, state, before.final_state)
        same(kwargs["solver_state0"], before.solver_state)
        jax.tree_util.tree_map(same, kwargs["observations0"], before.observations)
    assert run.outcome_per_save.result.shape == (9,)
    expected = [0.0, 0.02, 0.04, 0.06, 0.07, 0.08, 0.09, 0.12, 0.15, 0.18]
    np.testing.assert_allclose(run.ts, expected, rtol=1e-15)


def test_the_run_continues_states_that_only_an_initial_state_must_meet():
    """Chain Gauss2 does not keep the quaternions unit (`jaxrigid methods`: it keeps no
    invariant): within 10 steps they drift past the √eps an initial state must meet. One
    `simulate` call of 20 steps runs on, and so does the run in two chunks (the second
    chunk's state is checked only for being finite): it equals the one call bit for bit. The
    drifted state as a run's input is refused with the message it was refused with before,
    and a non-finite one as a continued state."""
    case = CASES["chain-tetrahedra-c1c2"]
    integrator = integrators.get_method("gauss2", "chain")
    model, state0 = case.build_for(integrator)(case.resolve({"n_bodies": 3}))
    # one saved state per call, inputs on one device as the chunks': one program for all
    state0 = jax.device_put(state0, jax.devices()[0])
    one = jr.simulate(integrator, model, state0, 0.0025, 20, save_every=20)
    run = runs.run_chunks(integrator, model, state0, 0.0025, [(10, 10), (10, 10)])
    middle = jax.tree_util.tree_map(lambda x: x[1], run.states)
    drift = np.abs(np.linalg.norm(middle.q, axis=-1) - 1).max()
    tol = np.finfo(np.float64).eps ** 0.5
    assert drift > 10 * tol  # the second chunk starts from a state an input may not be
    assert run.outcome.result == jr.RESULTS.successful and not run.restarted
    # the one call and the chunks run one program (one save each, the steps traced)
    jax.tree_util.tree_map(
        np.testing.assert_array_equal,
        run.final_state,
        jax.tree_util.tree_map(np.asarray, one.final_state),
    )

    with pytest.raises(
        ValueError, match=r"chain quaternions must be unit: \| \|q_j\| − 1 \| > √eps"
    ):
        jr.simulate(integrator, model, middle, 0.0025, 10, save_every=10)
    broken = middle._replace(p=np.where(np.arange(3)[:, None] == 0, np.nan, middle.p))
    broken = jax.device_put(broken, jax.devices()[0])
    with pytest.raises(ValueError, match=r"^state0 contains NaN or inf$"):
        jr.simulate(integrator, model, broken, 0.0025, 10, save_every=10, check_state=False)


def test_a_non_finite_member_is_restarted_and_masked(monkeypatch):
    """A member whose state turns non-finite in a chunk is restarted for the next from its
    initial state with a fresh solver state; its later states, final state and observations
    are NaN, its outcomes after the restart do not count, and the others run on."""
    case = CASES["krysl-slow-top"]
    integrator, model, state0 = _gauss4("krysl-slow-top")
    states0 = case.perturb(state0, np.random.default_rng(0), 0.05, 3)
    handed = []

    def poisoning(integrator, model, state, *args, **kwargs):
        handed.append((state, kwargs["solver_state0"]))
        sol = jr.simulate(integrator, model, state, *args, **kwargs)
        if len(handed) == 1:  # member 1 ends the first chunk non-finite
            bad = jax.tree_util.tree_map(lambda x: x.at[1].set(np.nan), sol.final_state)
            sol = sol._replace(final_state=bad)
        return sol

    monkeypatch.setattr(simulation, "simulate", poisoning)
    run = runs.run_chunks(integrator, model, states0, 0.01, [(5, 5), (5, 5)])
    np.testing.assert_array_equal(run.restarted, [False, True, False])
    restart, fresh = handed[1]
    np.testing.assert_array_equal(np.asarray(restart.Pi)[1], np.asarray(states0.Pi)[1])
    one = jax.tree_util.tree_map(lambda x: x[1], states0)
    expected = integrator.init(model, one, np.float64(0.05), np.float64(0.01))
    np.testing.assert_array_equal(np.asarray(fresh)[1], np.asarray(expected))
    assert np.isnan(run.final_state.Pi[1]).all() and np.isfinite(run.final_state.Pi[[0, 2]]).all()
    assert np.isnan(run.states.Pi[1, 2]).all() and np.isfinite(run.states.Pi[1, :2]).all()
    assert run.outcome_per_save.max_iterations[1, 1] == 0
    assert (run.outcome_per_save.max_iterations[[0, 2]] > 0).all()


def test_a_restarted_member_gets_a_fresh_solver_state():
    """A member restarted between chunks (non-finite) starts again from its method's initial
    solver state for the restart state; the others keep theirs."""
    case = CASES["krysl-slow-top"]
    integrator, model, state0 = _gauss4("krysl-slow-top")
    states = case.perturb(state0, np.random.default_rng(0), 0.05, 3)
    sol = jr.simulate(integrator, model, states, 0.01, 10, save_every=10)
    masked = np.array([False, True, False])
    ndims = model.state_event_ndims()
    fresh = runs.fresh_solver_state(integrator, model, states, 0.1, 0.01, ndims)
    mixed = runs.where_members(masked, fresh, sol.solver_state)
    one = jax.tree_util.tree_map(lambda x: x[1], states)
    expected = integrator.init(model, one, np.float64(0.1), np.float64(0.01))
    np.testing.assert_array_equal(np.asarray(mixed)[1], np.asarray(expected))
    for k in (0, 2):
        np.testing.assert_array_equal(np.asarray(mixed)[k], np.asarray(sol.solver_state)[k])
    assert not np.array_equal(np.asarray(sol.solver_state)[1], np.asarray(expected))


def test_chunks_keep_the_first_failure_and_its_cause():
    """Across chunks and members, the run's first failed step is the earliest one (the lowest
    member on a tie), with that member's cause; restarted (masked) members do not count."""
    from jaxrigid.runs.chunked import _Joined

    class Sol(NamedTuple):
        ts: np.ndarray
        states: np.ndarray
        outcome: Outcome
        outcome_per_save: Outcome

    def sol(first, result):
        n = len(first)
        outcome = Outcome(np.ones(n, int), np.zeros(n), np.array(result), np.array(first))
        per_save = Outcome(*(x[:, None] for x in outcome))
        return Sol(np.arange(2.0), np.zeros((n, 2, 2)), outcome, per_save)

    def first_failure(joined):
        run = runs.ChunkedRun(*([None] * 3), joined.outcome, *([None] * 4))
        return run.first_failure()

    none = np.zeros(4, bool)
    for masked, cause in [(none, 3), (np.array([0, 0, 1, 0], bool), 2)]:
        joined = _Joined(1)
        joined.add(sol([-1] * 4, [0] * 4), none, 0)
        assert first_failure(joined) == (-1, 0)
        joined.add(sol([-1, 4, 2, 2], [0, 1, 3, 2]), masked, 10)
        assert first_failure(joined) == (12, cause)
        joined.add(sol([0, 0, 0, 0], [5] * 4), none, 20)  # later failures do not replace it
        assert first_failure(joined) == (12, cause)
        np.testing.assert_array_equal(
            joined.outcome.first_failure, [20, 14, 20 if cause == 2 else 12, 12]
        )
        per_save = joined.outcome_per_save().first_failure
        np.testing.assert_array_equal(per_save[:, 1], [-1, 14, -1 if cause == 2 else 12, 12])
