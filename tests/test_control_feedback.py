"""Feedback control of the rolling ball: disturbed scenarios (`control.scenarios`: seeded,
the stated distributions, σ = 0 the nominal model) and receding-horizon control
(`control.mpc`: warm start against cold, σ = 0 reproducing the open loop, disturbed scenarios
far better than the open loop). float64 (`conftest`). The MPC tests share one small problem
(reach-point at dt = 0.25: 20 steps, re-plans every 1.0 = 4 steps) and `K = 4` scenarios, so
that the re-plan, start and segment programs are built once for the module."""

from __future__ import annotations

import contextlib
import io
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid import cli
from jaxrigid.cli.control import NOT_CONVERGED
from jaxrigid.control import get_problem, mpc
from jaxrigid.control.scenarios import draw_scenarios, plant, replay, restricted
from jaxrigid.program_store import call_filtered

SIGMA = 0.05
K = 4
H = 1.0  # re-plan interval of the MPC tests: 4 steps of 0.25, 5 plans


# --- scenarios --------------------------------------------------------------------------


def test_scenarios_reproducible_from_the_seed():
    """The same seed draws the same scenarios, bit for bit; another seed others."""
    a = draw_scenarios(3, 8, 0.1, 2, 5.0)
    b = draw_scenarios(3, 8, 0.1, 2, 5.0)
    c = draw_scenarios(4, 8, 0.1, 2, 5.0)
    for name in ("mass_scale", "inertia_scale", "kicks", "kick_times"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name in ("mass_scale", "inertia_scale", "kicks"):  # the kick times are the same
        assert not np.any(np.asarray(getattr(a, name)) == np.asarray(getattr(c, name)))
    assert a.count == 8 and a.mass_scale.shape == (8, 2) and a.kicks.shape == (8, 2, 3)


def test_scenario_distributions():
    """(S1): `(scale − 1)/σ` are N(0, 1): over 4·10⁴ draws their mean is within 5 standard
    errors (`1/√N`) of 0 and their standard deviation within 5 of 1 (`1/√(2N)`); (S2): every
    kick has norm σ to float64 rounding, at T/4 and T/2, and the directions are isotropic:
    their mean within 5 standard errors (`√(1/3N)`) of 0 and `E[eeᵀ]` within 5 (`√(4/45N)`,
    the variance of `eᵢ²` on the sphere being `1/5 − 1/9`) of `I/3`. Five standard errors:
    a correct generator fails with probability below 10⁻⁵ per statistic (seeded, so never)."""
    sigma, n = 0.1, 20_000
    s = draw_scenarios(0, n, sigma, 2, 5.0)
    for scales in (s.mass_scale, s.inertia_scale):
        z = np.ravel((np.asarray(scales) - 1) / sigma)
        assert abs(z.mean()) < 5 / np.sqrt(z.size)
        assert abs(z.std() - 1) < 5 / np.sqrt(2 * z.size)
    kicks = np.asarray(s.kicks).reshape(-1, 3)
    np.testing.assert_allclose(np.linalg.norm(kicks, axis=-1), sigma, rtol=1e-14)
    np.testing.assert_array_equal(s.kick_times, np.broadcast_to([1.25, 2.5], (n, 2)))
    e = kicks / sigma
    N = e.shape[0]
    assert np.all(np.abs(e.mean(axis=0)) < 5 * np.sqrt(1 / (3 * N)))
    second = e.T @ e / N
    assert np.all(np.abs(second - np.eye(3) / 3) < 5 * np.sqrt(4 / (45 * N)))


def test_sigma_zero_is_the_nominal_model():
    """σ = 0: the plant is the model bit for bit (scales exactly 1, the inertia's update
    exactly 0), the kicks are zero."""
    model = get_problem("reach-point").model
    s = draw_scenarios(1, 3, 0.0, 2, 5.0)
    np.testing.assert_array_equal(s.kicks, 0.0)
    for i in range(3):
        p = plant(model, s.member(i))
        np.testing.assert_array_equal(p.masses, model.masses)
        np.testing.assert_array_equal(p.inertia, model.inertia)


def test_plant_scales_the_principal_moments():
    """The plant's inertia has the model's principal axes and moments `λⱼ s'ⱼ`, to
    rounding, also for an inertia that is not diagonal in the body axes."""
    model = get_problem("reach-point").model
    R = jnp.asarray(np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0])
    model = eqx.tree_at(lambda m: m.inertia, model, R @ model.inertia @ R.T)
    s = draw_scenarios(2, 1, 0.2, 2, 5.0).member(0)
    p = plant(model, s)
    lam, V = np.linalg.eigh(np.asarray(model.inertia))
    np.testing.assert_allclose(V.T @ np.asarray(p.inertia) @ V, np.diag(lam * s.inertia_scale),
                               atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(p.masses, model.masses * s.mass_scale, rtol=1e-15)


def test_restricted_keeps_one_part_of_the_same_draws():
    """`restricted(s, "kicks")` keeps the kicks and sets the plant to the model (its scales
    exactly 1, so `plant` returns the model bit for bit); `"plant"` keeps the scales and no
    kick; `"all"` is the draw itself; anything else is refused by name."""
    model = get_problem("reach-point").model
    s = draw_scenarios(5, 3, 0.1, 2, 5.0)
    kicks, only_plant = restricted(s, "kicks"), restricted(s, "plant")
    np.testing.assert_array_equal(kicks.kicks, s.kicks)
    np.testing.assert_array_equal(kicks.mass_scale, 1.0)
    np.testing.assert_array_equal(kicks.inertia_scale, 1.0)
    np.testing.assert_array_equal(plant(model, kicks.member(0)).inertia, model.inertia)
    np.testing.assert_array_equal(only_plant.kicks, 0.0)
    for name in ("mass_scale", "inertia_scale", "kick_times"):
        np.testing.assert_array_equal(getattr(only_plant, name), getattr(s, name))
    assert restricted(s, "all") is s
    with pytest.raises(ValueError, match="parts must be one of all, kicks, plant, got 'kick'"):
        restricted(s, "kick")


# --- MPC ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def setup():
    """The small problem and its open-loop optimum, computed by the re-plan program itself
    from a cold start at t = 0 (`remaining` = the whole horizon): one call, 8 SQP iterations
    (`test_the_open_loop_is_a_kkt_point`)."""
    problem = get_problem("reach-point", dt=0.25, n_basis=mpc.basis_size(5.0, H, 8))
    plans = mpc._batched(problem.control, K)
    states = mpc._batched(problem.state0, K)
    zero = jnp.zeros((2,))
    mult = mpc._batched(mpc.Multipliers(zero, jnp.zeros((0,)), jnp.asarray(10.0)), K)
    plans, mult, effort, miss = mpc.replan(problem, plans, states, mult, problem.n_steps)
    p = plans.coefficients[0]
    return problem, p, jax.tree_util.tree_map(lambda a: a[0], mult), float(effort[0])


def test_the_open_loop_is_a_kkt_point(setup):
    """The fixture's open loop satisfies the first-order conditions of min effort subject to
    `x(T)[:2] = x*`, computed here from the objective's own derivatives (not the solver's):
    the miss below 1e-10, and `∇f + Jᵀλ` below 1e-5 of `|∇f|` at the least-squares `λ`, which
    is the solver's `λ` to 1e-5 (relative; measured 1.8e-6 and 4e-7 after the call's 8
    iterations, 2e-12 after a second call). A plan short of the optimum fails the second:
    the augmented Lagrangian's after 12 calls of 2 × 20 iterations (the fixture before,
    effort 0.461 against 0.238) has `|∇f + Jᵀλ|` at 0.27 of `|∇f|`."""
    problem, p, mult, _ = setup
    objective = mpc._Remaining(problem, problem.control, problem.state0, problem.n_steps)

    @jax.jit
    def derivatives(p):
        g = jax.grad(lambda q: objective(q)[0])(p).ravel()
        J = jax.jacrev(lambda q: objective.miss(q.reshape(p.shape)))(p.ravel())
        return objective(p)[1], g, J

    c, g, J = (np.asarray(a) for a in derivatives(p))
    lam, *_ = np.linalg.lstsq(J.T, -g, rcond=None)
    assert np.linalg.norm(c) <= 1e-10
    assert np.linalg.norm(g + J.T @ lam) <= 1e-5 * np.linalg.norm(g)
    np.testing.assert_allclose(mult.lam, lam, rtol=1e-5)


def test_replay_with_sigma_zero_is_the_nominal_simulation(setup):
    """σ = 0: the replayed open loop's miss is the nominal `simulate` run's to 1e-12 (the
    same steps in another program: XLA may round differently) and its effort the control's."""
    problem, p, _, effort = setup
    result = replay(problem, p, draw_scenarios(0, K, 0.0, 2, problem.t_end))
    nominal = float(problem.miss(problem.trajectory(p)))
    np.testing.assert_allclose(result.miss, nominal, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(result.effort, effort, rtol=1e-12)
    assert nominal < problem.tolerance  # the open loop is a solution of the model


def test_a_plant_that_fails_reports_no_miss(setup):
    """A plant whose state stops being finite (here a kick of infinite size in scenario 1)
    has NaN as its miss, never a finite number; the other scenarios are untouched (the same
    program as the test above: the scenarios are its inputs), and their miss is the nominal
    run's to the test above's tolerance (the same steps in another program)."""
    problem, p, _, _ = setup
    scenarios = draw_scenarios(0, K, 0.0, 2, problem.t_end)
    scenarios = eqx.tree_at(lambda s: s.kicks, scenarios, scenarios.kicks.at[1].set(jnp.inf))
    result = replay(problem, p, scenarios)
    nominal = float(problem.miss(problem.trajectory(p)))
    assert np.isnan(result.miss[1])
    others = np.delete(np.asarray(result.miss), 1)
    np.testing.assert_allclose(others, nominal, rtol=1e-12, atol=1e-15)


def test_replan_objective_ignores_a_plan_diverging_past_the_horizon(setup):
    """A re-plan with 4 of the 20 steps left reads the model's state after those 4 (t = 1.0).
    A plan whose tail (the coefficients of the basis functions that vanish on [0, 1]) drives
    the model to overflow after t = 1.0 (the whole horizon's miss is not finite) has the
    re-plan objective `f + λ·c` and gradient of the same plan with the tail zero, bit for bit
    (the taken steps see the same numbers; the tail's gradient is exactly 0). Fails when the
    steps past the remaining horizon are taken: the reverse pass multiplies their non-finite
    derivatives by zero, and the gradient is NaN. One program for the three calls."""
    problem, p, _, _ = setup
    plan = problem.control.with_coefficients(p)
    t = jnp.linspace(0.0, 4 * problem.dt, 41)
    tail = np.all(np.asarray(jax.vmap(plan._phi)(t)) == 0.0, axis=0)
    assert tail.sum() >= 3, tail
    lam = jnp.asarray([1.0, 1.0])

    @jax.jit
    def objective(coefficients, remaining):
        def lagrangian(c):
            f, miss = mpc._Remaining(problem, plan, problem.state0, remaining)(c)
            return f + lam @ miss

        return jax.value_and_grad(lagrangian)(coefficients)

    calm = jnp.where(tail[:, None], 0.0, p)
    wild = jnp.where(tail[:, None], 1e3, p)
    whole, _ = objective(wild, jnp.asarray(problem.n_steps))
    assert not np.isfinite(whole)
    value, grad = objective(calm, jnp.asarray(4))
    value_wild, grad_wild = objective(wild, jnp.asarray(4))
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    np.testing.assert_array_equal(value_wild, value)
    np.testing.assert_array_equal(grad_wild, grad)
    np.testing.assert_array_equal(grad[tail], 0.0)


def test_warm_start_needs_fewer_iterations_than_cold(setup):
    """At the first re-plan of disturbed plants, the SQP iterations until the model's miss is
    within the tolerance (1e-3): fewer from the warm start (the shifted open loop with its λ)
    than from the cold one (zero coefficients, λ = 0) in every scenario, and both end at the
    same optimum (efforts equal to 1e-8, relative: each converged to rounding, its miss below
    1e-10). One re-plan program, the run's."""
    problem, p, mult, _ = setup
    scenarios = draw_scenarios(0, K, SIGMA, 2, problem.t_end)
    m = mpc.replan_steps(problem, H)
    plans0 = mpc._batched(problem.control.with_coefficients(p), K)
    states = mpc._batched(problem.state0, K)
    at = mpc.kick_steps(scenarios, problem.dt)
    states, _, _, ok = mpc._segment_program(
        problem, plans0, states, scenarios, at, jnp.asarray(0, jnp.int32), m
    )
    assert bool(jnp.all(ok))
    remaining = jnp.asarray(problem.n_steps - m, jnp.int32)
    out = {}
    for warm in (True, False):
        plans = mpc._start_program(plans0, states, H, warm)
        mu = mpc.restart(mpc._batched(mult, K), warm)
        args = (problem, mpc.DEFAULT_REPLAN_SETTINGS, plans, states, mu, remaining)
        _, _, effort, miss, by_iteration = call_filtered(mpc._replan_program, *args)
        first = np.argmax(np.asarray(by_iteration) <= problem.tolerance, axis=1)
        assert np.all(np.asarray(miss) <= 1e-10)
        out[warm] = (np.asarray(effort), first + 1)
    (warm_effort, warm), (cold_effort, cold) = out[True], out[False]
    assert np.all(warm < cold), (warm, cold)
    np.testing.assert_allclose(warm_effort, cold_effort, rtol=1e-8)


@pytest.fixture(scope="module")
def runs(setup):
    problem, p, mult, _ = setup
    out = {}
    for sigma in (0.0, SIGMA):
        scenarios = draw_scenarios(0, K, sigma, 2, problem.t_end)
        out[sigma] = (replay(problem, p, scenarios), mpc.run_mpc(problem, p, mult, scenarios, H))
    return out


def test_mpc_without_disturbance_reproduces_the_open_loop(setup, runs):
    """σ = 0: every re-plan starts at the open-loop optimum's tail (exact warm start) with
    its λ, and the plant is the model, so MPC reproduces the open loop: its miss below 1e-10
    (the open loop's own: 5e-12) and its effort within 1e-6 of the open loop's, never above
    it (a re-plan may lower it: its plan may jump in θ̈ at the re-plan time, which the
    open-loop spline cannot; measured −4e-8, the open loop being a KKT point to 2e-6,
    `test_the_open_loop_is_a_kkt_point`)."""
    problem, _, _, effort = setup
    opened, closed = runs[0.0]
    assert np.all(np.asarray(opened.miss) <= 1e-10)
    assert np.all(np.asarray(closed.miss) <= 1e-10)
    np.testing.assert_allclose(closed.effort, effort, rtol=1e-6)
    assert np.all(np.asarray(closed.effort) <= effort * (1 + 1e-12))  # never worse


def test_mpc_beats_the_open_loop_on_disturbed_scenarios(runs):
    """σ = 0.05: every re-plan converges (the model's predicted miss below 1e-8; measured
    7e-10), MPC's median miss is at most 0.2× the open loop's (the issue's criterion;
    measured 0.12 at this coarse step with 4 re-plans, and 0.21 and 0.17 on the scenarios of
    seeds 1 and 2: a margin of this seed's, not a property of the coarse problem, whose
    closed-loop miss is the model's mismatch over the last re-plan interval of 1.0 s; the
    criterion proper is the command's at dt = 0.05, 0.095×; bench/README.md,
    `mpc_replan_convergence.py`) and its worst miss below the open loop's median (a scenario
    whose open loop already lands within 5e-3 gains nothing)."""
    opened, closed = runs[SIGMA]
    ol, cl = np.asarray(opened.miss), np.asarray(closed.miss)
    assert np.max(np.asarray(closed.predicted_miss)) <= 1e-8
    assert np.median(cl) <= 0.2 * np.median(ol), (cl, ol)
    assert np.max(cl) < np.median(ol), (cl, ol)


# --- the command ------------------------------------------------------------------------------


def _control(args):
    """`main(["control", *args])`: (exit status, stdout, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["control", *args])
    return rc, stdout.getvalue(), stderr.getvalue()


def test_command_json(tmp_path):
    """`--feedback mpc --json`: one object with the fields of the closed loop against the
    open loop on the same scenarios, the medians and 90th percentile those of the misses and
    efforts written to the npz. The MPC programs are the module's (same problem, K, budget);
    the open loop gets 40 iterations only, so its target may be missed (exit status 3)."""
    args = ["reach-point", "--feedback", "mpc", "--scenarios", str(K), "--disturbance",
            str(SIGMA), "--dt", "0.25", "--replan-every", str(H), "--iterations", "40",
            "--seed", "0", "--out", str(tmp_path), "--json"]  # fmt: skip
    rc, stdout, stderr = _control(args)
    assert rc in (0, NOT_CONVERGED), stderr
    report = json.loads(stdout)
    keys = {"feedback", "scenarios", "disturbance", "closed_loop_miss", "closed_loop_miss_p90",
            "open_loop_miss", "closed_loop_effort", "open_loop_effort", "seconds"}  # fmt: skip
    assert keys <= set(report)
    assert (report["feedback"], report["scenarios"], report["disturbance"]) == ("mpc", K, SIGMA)
    assert report["replans"] == 4 and report["open_loop_converged"] == (rc == 0)
    arrays = np.load(tmp_path / "reach-point-mpc.npz")
    cl, ol = arrays["closed_loop_miss"], arrays["open_loop_miss"]
    assert cl.shape == ol.shape == (K,)
    assert report["closed_loop_miss"] == pytest.approx(np.median(cl), rel=1e-12)
    assert report["closed_loop_miss_p90"] == pytest.approx(np.percentile(cl, 90), rel=1e-12)
    assert report["open_loop_miss"] == pytest.approx(np.median(ol), rel=1e-12)
    assert report["closed_loop_effort"] == pytest.approx(
        np.median(arrays["closed_loop_effort"]), rel=1e-12
    )
    assert arrays["closed_loop_x"].shape == arrays["open_loop_x"].shape == (K, 21, 3)
    assert (tmp_path / "reach-point-mpc.png").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--feedback", "policy"], "--feedback policy needs --policy FILE"),
        (["--scenarios", "4"], "--scenarios need --feedback mpc"),
        (["--feedback", "mpc", "--scenarios", "0"], "--scenarios must be a positive integer"),
        (["--feedback", "mpc", "--disturbance", "-1"], "--disturbance must be a finite number"),
        (["--feedback", "mpc", "--replan-every", "0.3"], "does not divide T = 5"),
        (["follow-circle", "--feedback", "mpc"], "feedback needs a final-position constraint"),
    ],
)
def test_command_bad_input(args, message, tmp_path):
    """Feedback's bad input: exit status 2 and one line saying what is wrong, before any
    program is built."""
    if args[0] != "follow-circle":
        args = ["reach-point", *args]
    rc, _, stderr = _control([*args, "--out", str(tmp_path)])
    assert rc == 2
    assert message in stderr
