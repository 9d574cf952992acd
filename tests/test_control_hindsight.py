"""The hindsight optimum (H1) of a disturbed plant (`control.hindsight`): a KKT point of least
effort within `r` of the target, run again by the closed loop's own rollout to the same miss
and effort; the undisturbed plant gives back the task's open-loop optimum, and a task that the
rails kept at rest already reach costs nothing; bad input is refused. `dt = 0.25` (20 steps)
and the same three tasks as `test_control_region_optima` (its optima program is reused), on
an undisturbed and a σ = 0.05 plant each: one program for both radii and all three
references (hindsight, informed, identifying)."""

from __future__ import annotations

import contextlib
import io
import json
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid import cli
from jaxrigid.control import hindsight, identification, region, replan
from jaxrigid.control.closed_loop import PerTask, Tasks, closed_loop_rollout, interval_maps
from jaxrigid.control.policies import LinearFeedback
from jaxrigid.control.scenarios import draw_scenarios, kick_steps

DT = 0.25
SUCCESS = 0.05


@pytest.fixture(scope="module")
def solved():
    """Two held-out tasks and the start itself (rails at rest at the bottom), each on the
    undisturbed plant (rollouts 0–2) and on a σ = 0.05 one (3–5); (H1) for r = 0 and 0.05."""
    problem = region.reach_region(dt=DT)
    held = region.sample_tasks(0, 2, "heldout", 0)
    rest = Tasks(jnp.zeros((1, 2)), jnp.full((1, 2), -math.pi / 2))
    tasks = Tasks(*(jnp.concatenate([a, b]) for a, b in zip(held, rest)))
    optima = region.open_loop_optima(problem, tasks)
    twice = lambda a: jnp.concatenate([a, a])  # noqa: E731
    tasks6 = Tasks(*map(twice, tasks))
    coefficients, e_star = twice(optima.coefficients), twice(optima.effort)
    plants = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a, b]),
        draw_scenarios(0, 3, 0.0, 2, problem.t_end),
        draw_scenarios(1, 3, 0.05, 2, problem.t_end),
    )
    found = {
        r: hindsight.hindsight_optima(problem, tasks6, coefficients, plants, r)
        for r in (0.0, SUCCESS)
    }
    return problem, tasks6, coefficients, e_star, plants, found


@pytest.fixture(scope="module")
def informed(solved):
    """The informed re-planner on the same rollouts (r = 0 and 0.05), and (r = 0.05) on the
    same plants with other kicks."""
    problem, tasks, coefficients, _, plants, _ = solved
    runs = {
        r: hindsight.informed_replanner(problem, tasks, coefficients, plants, r)
        for r in (0.0, SUCCESS)
    }
    other = draw_scenarios(7, 6, 0.05, 2, problem.t_end).kicks
    kicked = eqx.tree_at(lambda s: s.kicks, plants, other)
    moved = hindsight.informed_replanner(problem, tasks, coefficients, kicked, SUCCESS)
    late = hindsight.informed_replanner(
        problem, tasks, coefficients, plants, SUCCESS, identified_at=3
    )
    return runs, moved, late


def test_undisturbed_plant_gives_back_the_optimum(solved):
    """With no disturbance the task's own optimum is (H1)'s r = 0 solution, up to what the
    interval form adds (`θ̈` may jump at the 9 interval boundaries): `E_h(0)` within 1e-3 of
    `E*` below it (measured 2.4e-5 at most) and not above it by more than rounding; the rest task
    costs nothing (to rounding), and the rails at rest end within r = 0.05 (`zero`)."""
    _, _, _, e_star, _, found = solved
    exact, ring = found[0.0], found[SUCCESS]
    for b in range(2):
        assert e_star[b] * (1 - 1e-3) <= exact.effort[b] <= e_star[b] * (1 + 1e-12)
    # the rest task from its zero optimum: SQP's steps answer a rounding residual (~1e-16),
    # the effort is their square
    assert float(exact.effort[2]) <= 1e-24 and float(exact.miss[2]) <= 1e-12
    assert bool(ring.zero[2]) and float(ring.effort[2]) == 0.0
    assert not np.any(np.asarray(ring.zero[:2]))


def test_each_rollout_is_a_kkt_point_on_its_plant(solved):
    """r = 0: miss ≤ 1e-10 (the constraint holds to rounding once SQP converges: measured ≤
    6e-15); r = 0.05: miss = 0.05 to 1e-10, where the rails at rest do not already end within
    it. Both: `|∇f + Jᵀλ| ≤ 1e-6 |∇f|` at the least-squares `λ` (`J` of `e` or of `|e|²`,
    by `jax.jacrev` of the plant's run; a point that stopped short of the optimum fails it:
    the nominal plan on the disturbed plant has a residual of order 1), and the relaxed
    optimum costs no more than the exact one."""
    problem, tasks, coefficients, _, plants, found = solved
    maps = interval_maps(problem, 2 * DT)  # m = 2 steps per interval
    at = kick_steps(plants, DT)

    @jax.jit
    def derivatives(C):
        """Per rollout: `∇f`, `e` and `∂e/∂C` (every rollout in one program)."""

        def one(C, scenario, at, target, theta0):
            def e(C):
                return replan.sequence_error(problem, 2, maps, scenario, at, target, theta0, C)[0]

            g = jax.grad(lambda C: replan.sequence_effort(maps, C))(C)
            return g, e(C), jax.jacrev(e)(C)

        return jax.vmap(one)(C, plants, at, tasks.target, tasks.theta0)

    for r, res in found.items():
        assert res.coefficients.shape == (6, 10, 4, 2)  # R = 10 intervals, 4 rows, 2 masses
        gs, es, Js = (np.asarray(a) for a in derivatives(res.coefficients))
        for b in (0, 1, 3, 4):
            g, J = np.ravel(gs[b]), Js[b].reshape(2, -1)
            if r > 0:  # the gradient of |e|²
                J = 2 * es[b] @ J
            lam, *_ = np.linalg.lstsq(np.atleast_2d(J).T, -g, rcond=None)
            assert np.linalg.norm(g + np.atleast_2d(J).T @ lam) <= 1e-6 * np.linalg.norm(g), (r, b)
            assert abs(float(res.miss[b]) - r) <= 1e-10, (r, b)
    assert np.all(np.asarray(found[SUCCESS].effort) <= np.asarray(found[0.0].effort) + 1e-12)


def test_closed_loop_runs_the_sequence_to_the_same_miss_and_effort(solved):
    """Each sequence `C` as a policy (the zero-gain `LinearFeedback` around it, `PerTask`) run
    by `closed_loop_rollout` on the same plants, kicks included: the same miss to 1e-12 (the
    same steps in another program: rounding) and effort to 1e-12 relative."""
    problem, tasks, _, _, plants, found = solved
    for res in found.values():
        C = res.coefficients
        B, R, rows, n = C.shape
        F = 9 + 2 * n
        policy = PerTask(LinearFeedback(jnp.zeros((B, R, rows * n, F)), C, jnp.zeros((B, R, F))))
        run = closed_loop_rollout(problem, policy, plants, tasks)
        np.testing.assert_allclose(run.miss, res.miss, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.effort, res.effort, rtol=1e-12, atol=1e-15)


def test_bad_input_is_refused(solved):
    problem, tasks, coefficients, _, plants, _ = solved
    with pytest.raises(ValueError, match=r"tolerance must be a finite number ≥ 0, got -0\.1"):
        hindsight.hindsight_optima(problem, tasks, coefficients, plants, -0.1)
    with pytest.raises(ValueError, match=r"tolerance must be a finite number ≥ 0, got nan"):
        hindsight.hindsight_optima(problem, tasks, coefficients, plants, float("nan"))
    with pytest.raises(ValueError, match=r"tolerance must be a number, got '0\.05' \(str\)"):
        hindsight.hindsight_optima(problem, tasks, coefficients, plants, "0.05")
    with pytest.raises(ValueError, match=r"one per rollout: got coefficients \(5, 13, 2\)"):
        hindsight.hindsight_optima(problem, tasks, coefficients[:5], plants, 0.0)
    with pytest.raises(TypeError, match="settings must be control.sqp.SQP, got dict"):
        hindsight.hindsight_optima(problem, tasks, coefficients, plants, 0.0, {})


def test_informed_replanner(solved, informed):
    """The causal reference: with no disturbance it is (H1) itself (its re-plans start at the
    optimum: effort and miss to 1e-9); on the σ = 0.05 plants it ends within r (to 1e-10:
    its last re-plan knows every kick) and costs at least (H1)'s least effort (it drives one
    of (H1)'s feasible sequences: less would mean a failed solve); and it is causal: with
    other kicks on the same plants it drives the same first three intervals, bit for bit (the
    first kick, before step 5 of 2 per interval, is seen at the start of interval 3), and
    other ones after."""
    _, _, _, _, plants, found = solved
    runs, moved, _ = informed
    for r, run in runs.items():
        h = found[r]
        np.testing.assert_allclose(run.effort[:3], h.effort[:3], rtol=1e-9, atol=1e-24)
        np.testing.assert_allclose(run.miss[:3], h.miss[:3], rtol=0, atol=1e-9)
        assert np.all(np.asarray(run.miss[3:]) <= r + 1e-10), r
        assert np.all(np.asarray(run.effort[3:]) >= np.asarray(h.effort[3:]) * (1 - 1e-9)), r
    assert hindsight.replan_intervals(kick_steps(plants, DT), 2, 10) == [3, 6]
    same = np.asarray(moved.coefficients[3:, :3] == runs[SUCCESS].coefficients[3:, :3])
    assert same.all()
    assert not np.allclose(moved.coefficients[3:, 3:], runs[SUCCESS].coefficients[3:, 3:])


def test_informed_replanner_needs_one_kick_schedule(solved):
    problem, tasks, coefficients, _, plants, _ = solved
    late = eqx.tree_at(lambda s: s.kick_times, plants, plants.kick_times.at[0, 1].set(3.0))
    with pytest.raises(ValueError, match="needs the same kick times in every scenario"):
        hindsight.informed_replanner(problem, tasks, coefficients, late, SUCCESS)
    with pytest.raises(ValueError, match=r"identified_at must be an interval in \[0, 10\), got 10"):
        hindsight.informed_replanner(problem, tasks, coefficients, plants, identified_at=10)


def test_informed_replanner_identified_later(informed):
    """`identified_at = 3`: the first three intervals are planned on the model, so on the
    σ = 0.05 plants they are those driven on the undisturbed plants of the same tasks (the
    same stages and the model's masses and inertia: equal to 1e-12, measured 4.7e-14, the
    same computation in another member of the batch); after that it knows the plant, and
    still ends within r (to 1e-10). (It spends more than knowing the plant from the start,
    1.3× and 6.3× here: not asserted, SQP's solutions being local.)"""
    runs, _, late = informed
    np.testing.assert_allclose(
        late.coefficients[3:, :3], runs[SUCCESS].coefficients[:3, :3], rtol=1e-12, atol=1e-15
    )
    assert np.all(np.asarray(late.miss[3:]) <= SUCCESS + 1e-10)


# ------------------------------------------------------------------------------------------
# The identifying re-planner (`control.identification`): told nothing of the plant.


@pytest.fixture(scope="module")
def identified(solved):
    """The identifying re-planner (r = 0.05, identified at interval 3) on the rollouts, and
    on the same plants with only the second kick (t = 2.5, seen at interval 6) changed."""
    problem, tasks, coefficients, _, plants, _ = solved
    run = hindsight.identifying_replanner(problem, tasks, coefficients, plants, SUCCESS)
    other = draw_scenarios(7, 6, 0.05, 2, problem.t_end).kicks
    second = eqx.tree_at(lambda s: s.kicks, plants, plants.kicks.at[:, 1].set(other[:, 1]))
    moved = hindsight.identifying_replanner(problem, tasks, coefficients, second, SUCCESS)
    return run, moved


def test_identifying_replanner_finds_the_plant(solved, informed, identified):
    """From exact measurements (I1) has a zero residual at the plant, where Gauss–Newton
    converges quadratically: on every rollout whose rails move (tasks 0, 1; the rest task's
    rails never move, so its masses excite nothing) the last fit's scales and kicks equal the
    plant's to 1e-9 (measured ≤ 4e-15) and its residual is ≤ 1e-12 (measured ≤ 4e-16). Then
    it drives the informed re-planner's sequence (told the plant at the same interval, the
    same re-plans in the same program): its coefficients to 1e-8 of their largest (measured
    6.5e-11: the fit's rounding, through SQP's last steps on the ring), its effort to 1e-8
    relative (measured 1e-10) and miss to 1e-12; every rollout ends within r."""
    _, _, _, _, plants, _ = solved
    _, _, late = informed
    run, _ = identified
    moving = [0, 1, 3, 4]
    leaves = jax.tree_util.tree_leaves
    for fitted, true in zip(leaves(run.plant), leaves(plants)):
        np.testing.assert_allclose(np.asarray(fitted)[moving], np.asarray(true)[moving], atol=1e-9)
    assert np.all(np.asarray(run.residual)[moving] <= 1e-12)
    C, C_told = np.asarray(run.coefficients), np.asarray(late.coefficients)
    largest = np.abs(C_told).max(axis=(1, 2, 3))
    assert np.all(np.abs(C - C_told).max(axis=(1, 2, 3)) <= 1e-8 * largest)
    np.testing.assert_allclose(run.effort, late.effort, rtol=1e-8, atol=1e-24)
    np.testing.assert_allclose(run.miss, late.miss, rtol=0, atol=1e-12)
    assert np.all(np.asarray(run.miss) <= SUCCESS + 1e-10)


def test_identifying_replanner_is_causal(identified):
    """It sees the plant only through what it measured: with another second kick (in
    interval 5, before step 10 of 2 per interval, observed at the start of interval 6) it
    drives the same first six intervals bit for bit (a fit that read an interval not yet
    observed would differ at interval 3), and other ones after."""
    run, moved = identified
    assert np.all(np.asarray(moved.coefficients[:, :6] == run.coefficients[:, :6]))
    assert not np.allclose(moved.coefficients[3:, 6:], run.coefficients[3:, 6:])


def test_fit_plant_levenberg_marquardt():
    """`fit_plant` on a zero-residual least-squares problem with a known answer (`y = a·e^{bt}
    + c` at 8 points, from 30 % off in each unknown): the answer to 1e-12 in 8 iterations (a
    zero-residual problem, where Gauss–Newton's steps converge quadratically; 1e-12 is rounding
    of unknowns of order 1), and an unknown no residual depends on keeps its start exactly."""
    t = jnp.linspace(0.0, 1.0, 8)
    truth = jnp.asarray([2.0, -1.5, 0.5])
    y = truth[0] * jnp.exp(truth[1] * t) + truth[2]

    def residual(p):  # p[3] appears nowhere: no residual moves it
        return p[0] * jnp.exp(p[1] * t) + p[2] - y

    p0 = jnp.asarray([1.4, -1.05, 0.65, 0.3])
    p, rho = jax.jit(lambda p0: identification.fit_plant(residual, p0))(p0)
    np.testing.assert_allclose(p[:3], truth, rtol=0, atol=1e-12)
    assert float(p[3]) == 0.3 and float(rho) <= 1e-12


def test_identifying_replanner_bad_input(solved):
    problem, tasks, coefficients, _, plants, _ = solved
    with pytest.raises(ValueError, match=r"identify_at must be an interval in \[0, 10\), got 10"):
        hindsight.identifying_replanner(
            problem, tasks, coefficients, plants, SUCCESS, identify_at=10
        )
    with pytest.raises(ValueError, match="fit_iterations must be an integer ≥ 1, got 0"):
        hindsight.identifying_replanner(
            problem, tasks, coefficients, plants, SUCCESS, fit_iterations=0
        )


def _command(args, problem="reach-region"):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["control", problem, "--feedback", "policy", *args])
    return rc, stdout.getvalue(), stderr.getvalue()


def test_command_runs_the_identifying_replanner(solved):
    """`reach-region --feedback policy --policy identifying --dt 0.25 --scenarios 6
    --disturbance 0.05 --seed 0 --json` drives the held-out tasks of seed 0 on the scenarios
    of seed 0 by the library's identifying re-planner aiming at 0.049: its medians of miss,
    effort, the optima replayed and the effort ratio equal the library's call on the same
    arrays (six rollouts, so the fixture's jitted program) to 1e-12 relative: the command runs
    the same computation through its stored (exported) program, the same StableHLO, so only
    a different fusion of the same operations could move a rounding. Every rollout ends within
    the success radius 0.05, where the open loop (each optimum replayed) misses by more at
    the median (measured 0.14). Bad input is refused with its message."""
    problem = solved[0]
    args = ["--dt", "0.25", "--disturbance", "0.05", "--seed", "0", "--json"]
    rc, stdout, stderr = _command(["--policy", "identifying", "--scenarios", "6", *args])
    assert rc == 0, stderr
    report = json.loads(stdout)
    tasks = region.sample_tasks(0, 6, "heldout", 0)
    scenarios = draw_scenarios(0, 6, 0.05, 2, problem.t_end)
    optima = region.open_loop_optima(problem, tasks)
    run = hindsight.identifying_replanner(problem, tasks, optima.coefficients, scenarios, 0.049)
    miss, effort = np.asarray(run.miss), np.asarray(run.effort)
    replayed = np.asarray(region.replay_optima(problem, tasks, optima.coefficients, scenarios))
    assert report["kind"] == "identifying" and report["identify_at"] == 3
    assert report["aim"] == 0.049 and report["scenarios"] == 6
    assert report["closed_loop_miss"] == pytest.approx(float(np.median(miss)), rel=1e-12)
    assert report["closed_loop_effort"] == pytest.approx(float(np.median(effort)), rel=1e-12)
    assert report["open_loop_miss"] == pytest.approx(float(np.median(replayed)), rel=1e-12)
    ratio = np.median(effort / np.asarray(optima.effort))
    assert report["effort_ratio"] == pytest.approx(float(ratio), rel=1e-12)
    assert report["closed_loop_success"] == 1.0 and np.all(miss <= SUCCESS)
    assert report["open_loop_miss"] > SUCCESS  # the open loop fails at the median

    for bad, message in (
        (["--identify-at", "10"], r"--identify-at must be an interval in [0, 10), got 10"),
        (["--save-policy", "law.eqx"], "--save-policy writes a built-in law"),
    ):
        rc, _, stderr = _command(["--policy", "identifying", *bad, *args])
        assert rc == 2 and message in stderr, stderr
    rc, _, stderr = _command(["--policy", "neighbouring", "--identify-at", "2", *args])
    assert rc == 2 and "--identify-at needs --policy identifying" in stderr
    rc, _, stderr = _command(["--policy", "identifying"], "reach-point")
    assert rc == 2 and "--policy identifying runs on reach-region (each held-out optimum)" in stderr
