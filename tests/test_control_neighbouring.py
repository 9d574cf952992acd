"""Neighbouring-optimal feedback (`control.neighbouring`): its gains are the first-order
sensitivity of the model's converged re-plan (an independent reference: MPC's SQP, not the
KKT solve), with no disturbance it runs each task's optimum, under small disturbances it
removes most of the open loop's miss, one gain program serves a batch of tasks member by
member, float32 gives float64's gains to its rounding, and bad input is refused; the
gains trained further on model-drawn scenarios (`control.tuning`): their loss's gradient equals
central differences, each rollout runs its own task's member, and training lowers the loss on
scenarios it never saw. float64 (`conftest`) unless stated. Two held-out reach-region tasks
at `dt = 0.25` (20 steps, control intervals of 0.5 = 2 steps) so that each program builds in
seconds."""

from __future__ import annotations

import contextlib
import io
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import nominal_replan_point

from jaxrigid import cli
from jaxrigid.control import mpc, tuning
from jaxrigid.control.closed_loop import PerTask, Tasks, closed_loop_rollout, interval_maps
from jaxrigid.control.neighbouring import _with_features, neighbouring_feedback
from jaxrigid.control.policies import QuadraticFeedback
from jaxrigid.control.region import open_loop_optima, reach_region, replay_optima, sample_tasks
from jaxrigid.control.scenarios import draw_scenarios, kick_steps
from jaxrigid.control.sqp import SQP

DT = 0.25
H = 0.5
M_STEPS, R = 2, 10  # steps per interval, intervals


@pytest.fixture(scope="module")
def setup():
    problem = reach_region(dt=DT, dtype=jnp.dtype("float64"))  # as the command builds it
    tasks = sample_tasks(0, 2, "heldout", 0)
    optima = open_loop_optima(problem, tasks)
    assert float(jnp.max(optima.miss)) < 1e-12  # both reached: the gains' nominal is exact
    policy = neighbouring_feedback(problem, optima.coefficients, tasks, H)
    return problem, tasks, optima, policy


def test_gains_are_the_converged_replans_sensitivity(setup):
    """(N1) against MPC's re-plan: at interval 3 of task 0, the SQP re-plan (30 iterations,
    converged to a miss at rounding) from the nominal features moved by `±ε d` (`d` a random
    unit direction), central differences of its active rows over `2ε`, equal `K d` to 1e-4
    relative. Measured 6.5e-6 for `ε` from 1e-3 to 1e-5: what remains is that the gains are
    taken at the nominal tail, which the re-plan moves by 1.2e-6 (1e-5 of its size; the tail
    may jump the rails' acceleration at `tₖ`, module docstring). The Gauss–Newton gains
    (without `λᵀ∇²c`) or a wrong row or sign differ at O(1)."""
    problem, tasks, optima, policy = setup
    b, k = 0, 3
    pb, plan, state, remaining, rows, start = nominal_replan_point(
        problem, tasks, optima, b, k, M_STEPS, R, H
    )

    @jax.jit
    def replan(phi):
        pl, st = _with_features(plan, state, phi, 2)
        out = mpc.replan_one(pb, SQP(n_iterations=30), pl, st, start, remaining)
        return out[0].coefficients[:rows], out[3]

    phi0 = policy.policy.nominal_features[b, k]
    d = jax.random.normal(jax.random.key(0), phi0.shape, phi0.dtype)
    d = d / jnp.linalg.norm(d)
    predicted = (policy.policy.gains[b, k] @ d).reshape(rows, 2)
    eps = 1e-4
    (plus, miss_plus), (minus, miss_minus) = replan(phi0 + eps * d), replan(phi0 - eps * d)
    assert max(float(miss_plus), float(miss_minus)) < 1e-12  # both re-plans converged
    fd = (plus - minus) / (2 * eps)
    assert float(jnp.linalg.norm(predicted)) > 0.1  # the direction moves the plan
    assert float(jnp.linalg.norm(fd - predicted) / jnp.linalg.norm(predicted)) < 1e-4


def test_no_disturbance_runs_each_tasks_optimum(setup):
    """σ = 0: the features never leave the nominal, so each rollout is its task's optimum
    replayed (`replay_optima`), miss and effort to the warm start's rounding (1e-9, as
    `test_zero_gains_reproduce_the_open_loop_replay`), although the gains are not zero."""
    problem, tasks, optima, policy = setup
    assert float(jnp.min(jnp.max(jnp.abs(policy.policy.gains), axis=(1, 2, 3)))) > 1.0
    scenarios = draw_scenarios(0, 2, 0.0, 2, problem.t_end)
    run = closed_loop_rollout(problem, policy, scenarios, tasks, H)
    assert np.all(np.asarray(run.ok))
    np.testing.assert_allclose(run.miss, optima.miss, rtol=0, atol=1e-9)
    np.testing.assert_allclose(run.effort, optima.effort, rtol=1e-9)
    replayed = replay_optima(problem, tasks, optima.coefficients, scenarios)
    np.testing.assert_allclose(run.miss, replayed, rtol=0, atol=1e-9)


def test_small_disturbances_are_corrected(setup):
    """σ = 1e-3 (the linear regime): on each task's own disturbed plant the feedback leaves
    below a quarter of the open loop's miss (measured 0.16 and 0.047 of it: what remains is the
    model's mismatch over the last interval, linear in σ as the miss is), at an effort within
    15 % of the optimum's (measured +13 % and +0.4 %). Zero gains, the same program, are the
    open loop."""
    problem, tasks, optima, policy = setup
    scenarios = draw_scenarios(1, 2, 1e-3, 2, problem.t_end)
    closed = closed_loop_rollout(problem, policy, scenarios, tasks, H)
    zero = eqx.tree_at(lambda p: p.policy.gains, policy, jnp.zeros_like(policy.policy.gains))
    opened = closed_loop_rollout(problem, zero, scenarios, tasks, H)
    replayed = replay_optima(problem, tasks, optima.coefficients, scenarios)
    np.testing.assert_allclose(opened.miss, replayed, rtol=0, atol=1e-9)
    assert np.all(np.asarray(closed.miss) < 0.25 * np.asarray(opened.miss))
    assert np.all(np.asarray(closed.effort) < 1.15 * np.asarray(optima.effort))


def test_each_member_is_its_own_tasks(setup):
    """One program for the batch, each member from its own task alone: the tasks in the
    reverse order (the same program, no rebuild) give the same members reversed, to 1e-12
    relative (the same operations at another position of the batch; rounding only)."""
    problem, tasks, optima, policy = setup
    swapped = neighbouring_feedback(
        problem, optima.coefficients[::-1], Tasks(tasks.target[::-1], tasks.theta0[::-1]), H
    )
    for name in ("gains", "nominal_coefficients", "nominal_features"):
        a, b = getattr(swapped.policy, name)[::-1], getattr(policy.policy, name)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * float(jnp.max(jnp.abs(b))))
    assert float(jnp.max(jnp.abs(b[0] - b[1]))) > 1e-3  # the two tasks' differ


def test_bad_input(setup):
    problem, tasks, optima, policy = setup
    with pytest.raises(ValueError, match=r"coefficients must be \(B, 13, 2\) with one task each"):
        neighbouring_feedback(problem, optima.coefficients[:1], tasks, H)
    with pytest.raises(ValueError, match="a PerTask policy needs one member per rollout: 2 for 3"):
        closed_loop_rollout(problem, policy, draw_scenarios(0, 3, 0.0, 2, 5.0), tasks, H)
    assert isinstance(policy, PerTask) and policy.count == 2


def test_float32_gains_equal_float64s(setup):
    """The same tasks in float32 (the model, the optima and the gains): the gains equal the
    float64 ones to 2e-3 of each interval's largest gain: float32's rounding (6e-8) amplified
    by the second derivatives of the remaining horizon's simulation and by the KKT solve,
    measured 8.6e-5 here and 1.2e-3 at dt = 0.05 (100 steps, 4 tasks; the bound covers
    both). A float32 program that lost precision somewhere (a cancellation in the curvature,
    a solve in the wrong precision) differs at O(1)."""
    problem, tasks, optima, policy = setup
    f32 = jnp.float32
    problem32 = reach_region(dt=DT, dtype=f32)
    tasks32 = Tasks(tasks.target.astype(f32), tasks.theta0.astype(f32))
    optima32 = open_loop_optima(problem32, tasks32)
    assert float(jnp.max(optima32.miss)) < 1e-5  # reached to float32's rounding
    gains32 = neighbouring_feedback(problem32, optima32.coefficients, tasks32, H).policy.gains
    assert gains32.dtype == f32
    g64 = np.asarray(policy.policy.gains)
    scale = np.abs(g64).max(axis=(2, 3))
    error = np.abs(np.asarray(gains32, np.float64) - g64).max(axis=(2, 3)) / scale
    assert error.max() < 2e-3


def _command(args):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["control", "reach-region", "--feedback", "policy", *args])
    return rc, stdout.getvalue(), stderr.getvalue()


def test_command_with_the_built_in_policy(setup, tmp_path):
    """`reach-region --feedback policy --policy neighbouring --dt 0.25 --scenarios 2 --seed 0`
    evaluates the fixture's tasks (the held-out stream of seed 0) on the scenarios of seed 0:
    its medians equal the library's closed loop and open loop (each optimum replayed) on them
    to rounding (the same programs), and it compares with every task's optimum. The law it
    saves (`--save-policy`), evaluated from the file (`--policy FILE`), runs on the same
    tasks and gives the same report (the same arrays and programs: 1e-12); `--scenarios`
    other than its task count is refused."""
    problem, tasks, optima, policy = setup
    law = tmp_path / "law.eqx"
    args = ["--dt", "0.25", "--disturbance", "0.001", "--seed", "0", "--json"]
    rc, stdout, stderr = _command(
        ["--policy", "neighbouring", "--scenarios", "2", "--save-policy", str(law), *args]
    )
    assert rc == 0, stderr
    report = json.loads(stdout)
    scenarios = draw_scenarios(0, 2, 0.001, 2, problem.t_end)
    closed = closed_loop_rollout(problem, policy, scenarios, tasks, H)
    replayed = replay_optima(problem, tasks, optima.coefficients, scenarios)
    assert report["policy"] == "neighbouring" and report["scenarios"] == 2
    assert report["closed_loop_miss"] == pytest.approx(float(np.median(closed.miss)), rel=1e-9)
    assert report["open_loop_miss"] == pytest.approx(float(np.median(replayed)), rel=1e-9)
    assert report["open_loop_reached"] == 2 and report["open_loop_sample"] == 2
    ratio = np.median(np.asarray(closed.effort) / np.asarray(optima.effort))
    assert report["effort_ratio"] == pytest.approx(float(ratio), rel=1e-9)
    assert report["saved_policy"] == str(law)

    rc, stdout, stderr = _command(["--policy", str(law), *args])
    assert rc == 0, stderr
    again = json.loads(stdout)
    assert again["kind"] == "LinearFeedback" and again["scenarios"] == 2
    assert again["heldout_targets"] == report["heldout_targets"]
    for key in ("closed_loop_miss", "closed_loop_effort", "open_loop_miss", "effort_ratio"):
        assert again[key] == pytest.approx(report[key], rel=1e-12), key
    rc, _, stderr = _command(["--policy", str(law), "--scenarios", "3", *args])
    assert rc == 2
    assert "a law for 2 task(s) runs one scenario on each of its tasks, not --scenarios 3" in stderr


def _tuning_loss(problem, tasks, optima, start, S: int):
    """(T1) of `start`'s members with trainable arrays `params` (`tuning._trainable`) on
    scenarios (`S` per task) and their kick steps `at`, as a function of `(params, scenarios,
    at)`: `(loss, (miss, effort ratio))`; one program for every set of scenarios of a count."""
    settings = tuning.TuneSettings(scenarios=S, interval=H)
    rep = lambda a: jnp.repeat(a, S, axis=0)  # noqa: E731
    scale = rep(tuning.effort_scale(optima.effort, settings.effort_floor))
    batch = Tasks(rep(tasks.target), rep(tasks.theta0))
    maps = interval_maps(problem, H)

    def loss(params, scenarios, at):
        return tuning._loss(params, start, problem, M_STEPS, R, maps, scenarios, at, batch,
                            scale, settings)  # fmt: skip

    return loss


def test_tuning(setup, tmp_path):
    """`tune_feedback` of (F4) from the neighbouring law (the last interval's gains zeroed,
    the second-order term zero: the command's `--policy tuned`), checked on 64 σ = 0.05
    scenarios per task from a key the training never draws:
    - on 8 of them per task (all plants alive: a failed plant's (T1) has no derivative) the
      gradient of (T1) with respect to the gains and the second-order term, along a random
      direction, equals central differences to 1e-6 relative (measured 3.9e-9 at ε =
      1e-5: the differences' truncation, O(ε²));
    - with σ = 0 each rollout is its own task's optimum: each effort ratio is `E*/max(E*,
      E_f)` to 1e-9 (task 0's optimum, 0.2, is below the floor 1: less than 1 there), and
      (T1) is the effort weight times their mean (tasks and members paired wrongly, or the
      floor not applied, leave a miss and another effort);
    - 200 steps of training (16 scenarios per task and step) lower (T1) on those unseen
      scenarios below half of the start's (measured 208 → 6.6 at dt = 0.25, 88 of the 6400
      training rollouts' plants failed and were dropped. When a failed plant made its whole
      task skip the step, task 0 could stop training for good after about 25 steps: (T1)
      rose to 388 here, and without the effort floor, built with XLA's defaults, half its
      unseen plants failed): a wrong gradient or pairing would not;
    - the command's `--policy tuned` evaluates those trained arrays (rounding: 1e-9; after
      20 steps, not 200, some of its σ = 0.05 plants still fail), and the law it saves
      evaluates, from the file, to the same report (1e-12)."""
    problem, tasks, optima, policy = setup
    linear = eqx.tree_at(lambda p: p.gains, policy.policy, policy.policy.gains.at[:, -1].set(0))
    start = PerTask(QuadraticFeedback.from_linear(linear))
    S = 64
    unseen = draw_scenarios(99, 2 * S, 0.05, 2, problem.t_end)
    loss = jax.jit(_tuning_loss(problem, tasks, optima, start, S))
    p0 = tuning._trainable(start)
    few = jax.tree_util.tree_map(
        lambda a: a.reshape(2, S, *a.shape[1:])[:, :8].reshape(16, *a.shape[1:]), unseen
    )
    small_loss = _tuning_loss(problem, tasks, optima, start, 8)
    at_few = kick_steps(few, problem.dt)
    # the differences from the same program as the gradient (its value): one build
    small = jax.jit(jax.value_and_grad(lambda x: small_loss(x, few, at_few)[0]))
    grad = small(p0)[1]
    keys = jax.random.split(jax.random.key(1), len(p0))
    d = [jax.random.normal(k, a.shape, a.dtype) for k, a in zip(keys, p0, strict=True)]
    norm = jnp.sqrt(sum(jnp.sum(x * x) for x in d))
    d = tuple(x / norm for x in d)
    eps = 1e-5
    shifted = lambda t: tuple(a + t * x for a, x in zip(p0, d, strict=True))  # noqa: E731
    fd = (small(shifted(eps))[0] - small(shifted(-eps))[0]) / (2 * eps)
    exact = sum(jnp.vdot(g, x) for g, x in zip(grad, d, strict=True))
    assert float(jnp.abs(fd - exact)) < 1e-6 * float(jnp.abs(fd))

    still = draw_scenarios(0, 2 * S, 0.0, 2, problem.t_end)
    value, (miss, ratio, alive) = loss(p0, still, kick_steps(still, problem.dt))
    e = np.asarray(optima.effort)
    expected = np.repeat(e / np.maximum(e, tuning.TuneSettings().effort_floor), S)
    assert np.min(expected) < 0.5  # the floor matters for one of the two tasks
    assert bool(jnp.all(alive))
    np.testing.assert_allclose(ratio, expected, rtol=1e-9)
    weight = tuning.TuneSettings().effort_weight
    assert float(value) == pytest.approx(weight * np.mean(expected), rel=1e-9)

    settings = tuning.TuneSettings(steps=200, scenarios=16, interval=H)
    tuned, history = tuning.tune_feedback(problem, start, tasks, optima.effort, settings)
    assert history.loss.shape == (200,) and np.all(np.isfinite(history.loss))
    assert float(jnp.max(jnp.abs(tuned.policy.quad))) > 0  # the second-order term trained
    at = kick_steps(unseen, problem.dt)
    before = float(loss(p0, unseen, at)[0])
    after = float(loss(tuning._trainable(tuned), unseen, at)[0])
    assert after < 0.5 * before

    # σ and the other numbers are the step program's inputs: another value builds nothing.
    # With σ = 0 every rollout is its task's optimum (all within 0.05, no plant failed),
    # which a program still drawing σ = 0.05 would not give (measured: 2 of its 32 succeed)
    built = []
    listen = lambda event, duration, **kw: built.append(event)  # noqa: E731
    other = settings._replace(steps=1, sigma=0.0, learning_rate=1e-3, effort_weight=0.2)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        _, still_history = tuning.tune_feedback(problem, start, tasks, optima.effort, other)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert [e for e in built if e.startswith("/jax/core/compile")] == []
    assert still_history.success[0] == 1.0 and still_history.skipped[0] == 0.0

    # the command's `--policy tuned`: the same tasks, start and training (the same programs);
    # the law it saves, evaluated from the file, is the same law on the same tasks
    law = tmp_path / "tuned.eqx"
    args = ["--dt", "0.25", "--disturbance", "0.05", "--seed", "0", "--json"]
    rc, stdout, stderr = _command(["--policy", "tuned", "--tune-steps", "200", "--scenarios", "2",
                                   "--save-policy", str(law), *args])  # fmt: skip
    assert rc == 0, stderr
    report = json.loads(stdout)
    closed = closed_loop_rollout(problem, tuned, draw_scenarios(0, 2, 0.05, 2, 5.0), tasks, H)
    assert report["kind"] == "tuned"
    assert report["closed_loop_miss"] == pytest.approx(float(np.median(closed.miss)), rel=1e-9)
    rc, stdout, stderr = _command(["--policy", str(law), *args])
    assert rc == 0, stderr
    again = json.loads(stdout)
    assert again["kind"] == "QuadraticFeedback"
    for key in ("closed_loop_miss", "open_loop_miss", "effort_ratio"):
        assert again[key] == pytest.approx(report[key], rel=1e-12), key


def test_tuning_bad_input(setup):
    problem, tasks, optima, policy = setup
    with pytest.raises(TypeError, match="tune_feedback trains a PerTask of LinearFeedback"):
        tuning.tune_feedback(problem, policy.policy, tasks, optima.effort)
    with pytest.raises(ValueError, match=r"one task and one optimum effort per policy: 2 polic"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort[:1])
    with pytest.raises(ValueError, match="optimum_effort must be positive"):
        tuning.tune_feedback(problem, policy, tasks, -optima.effort)
    with pytest.raises(ValueError, match="steps and scenarios must be positive integers"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort, tuning.TuneSettings(steps=0))
    bad = tuning.TuneSettings(effort_floor=-1.0)
    with pytest.raises(ValueError, match="effort_floor must be a finite number ≥ 0, got -1.0"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort, bad)
    word = tuning.TuneSettings(effort_floor="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"effort_floor must be a number, got '1' \(str\)"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort, word)
    bad = tuning.TuneSettings(miss_tolerance=-0.01)
    with pytest.raises(ValueError, match="miss_tolerance must be a finite number ≥ 0, got -0.01"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort, bad)
    bad = tuning.TuneSettings(learning_rate=0.0)
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0, got 0.0"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort, bad)
    bad = tuning.TuneSettings(disturbances="kick")
    with pytest.raises(ValueError, match="disturbances must be one of all, kicks, plant"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort, bad)
    bad = tuning.TuneSettings(sigma=float("nan"))
    with pytest.raises(ValueError, match=r"sigma \(the disturbance\) must be a finite number ≥ 0"):
        tuning.tune_feedback(problem, policy, tasks, optima.effort, bad)


def test_miss_cost_tolerance():
    """(T1)'s miss term: zero for a miss within the tolerance `d`, `((miss − d)/s_m)²` past
    it, and `(miss/s_m)²` with `d = 0` (the default)."""
    miss = jnp.asarray([0.0, 0.01, 0.02, 0.03, 0.1])
    plain = tuning.miss_cost(miss, tuning.TuneSettings())
    np.testing.assert_allclose(plain, (miss / 0.05) ** 2, rtol=1e-15)
    tolerant = tuning.miss_cost(miss, tuning.TuneSettings(miss_tolerance=0.02))
    np.testing.assert_allclose(tolerant, [0, 0, 0, 0.2**2, 1.6**2], rtol=1e-12, atol=1e-15)
