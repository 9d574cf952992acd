"""A law told the plant it identified (`policies.PlantInformedFeedback`, (F5)): deployed, the
closed loop fits (I1) at the start of interval `identify_at` and the law drives what it
drives when told the scenario's own plant (the form it trains in); it sees nothing of the
plant before that interval; the gradient of (T1) with respect to its plant gains equals
central differences; (N1)'s plant gains are the converged re-plan's sensitivity to the
plant; `tune_feedback` trains them and hands back the deployed (fitted) form; a policy file
holds the law; bad input is refused. Two held-out reach-region tasks at `dt = 0.25` (20
steps, control intervals of 0.5 = 2 steps), 8 σ = 0.05 scenarios each, as
`test_control_neighbouring`."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import nominal_replan_point

from jaxrigid.control import mpc, policy_io, tuning
from jaxrigid.control.closed_loop import PerTask, Tasks, closed_loop_rollout, interval_maps
from jaxrigid.control.neighbouring import neighbouring_feedback
from jaxrigid.control.policies import (
    Observation,
    PlantInformedFeedback,
    QuadraticFeedback,
)
from jaxrigid.control.region import open_loop_optima, reach_region, sample_tasks
from jaxrigid.control.scenarios import Scenarios, draw_scenarios, kick_steps, plant
from jaxrigid.control.sqp import SQP

DT, H = 0.25, 0.5
M_STEPS, R = 2, 10  # steps per interval, intervals
S = 8  # scenarios per task
K_ID = 3  # the fit at t = 1.5, after the first kick (t = 1.25)


@pytest.fixture(scope="module")
def setup():
    """The tasks' (F5) law with (N1)'s gains, the plant's among them
    (`neighbouring_feedback(..., identify_at=3)`), the second-order term zero and the last
    interval's gains zeroed (as the command's `--policy tuned` starts), the scenarios, and
    (T1) on them, told, as `(params, scenarios, at) -> (loss, (miss, effort ratio, ok))`
    with its gradient (one program)."""
    problem = reach_region(dt=DT, dtype=jnp.dtype("float64"))
    tasks = sample_tasks(0, 2, "heldout", 0)
    optima = open_loop_optima(problem, tasks)
    found = neighbouring_feedback(problem, optima.coefficients, tasks, H, identify_at=K_ID).policy
    linear = eqx.tree_at(lambda p: p.gains, found.base, found.base.gains.at[:, -1].set(0))
    law = dataclasses.replace(
        found,
        base=QuadraticFeedback.from_linear(linear),
        plant_gains=found.plant_gains.at[:, -1].set(0),
    )
    scenarios = draw_scenarios(99, 2 * S, 0.05, 2, problem.t_end)
    settings = tuning.TuneSettings(scenarios=S, interval=H)
    rep = lambda a: jnp.repeat(a, S, axis=0)  # noqa: E731
    scale = rep(tuning.effort_scale(optima.effort, settings.effort_floor))
    batch = Tasks(rep(tasks.target), rep(tasks.theta0))
    maps = interval_maps(problem, H)
    told = PerTask(dataclasses.replace(law, source="told"))

    def loss(params, scenarios, at):
        return tuning._loss(params, told, problem, M_STEPS, R, maps, scenarios, at, batch,
                            scale, settings)  # fmt: skip

    program = jax.jit(jax.value_and_grad(loss, has_aux=True))
    return problem, tasks, optima, law, scenarios, batch, scale, program


def test_plant_gains_are_the_converged_replans_sensitivity(setup):
    """(N1) with the plant among the features against MPC's re-plan on a plant: at interval 4
    of task 0, the SQP re-plan (30 iterations, converged to a miss at rounding) from the
    nominal state on the plant `δϑ = ±ε d` (`d` a random unit direction), central
    differences of its active rows over `2ε`, equal `L d` to 1e-4 relative (measured 5.5e-6
    at ε = 1e-4 and 1e-5: the gains are taken at the nominal tail, as the state's,
    `test_control_neighbouring`). A plant's sign or scale wrong, or its columns mixed with
    the state's, differ at O(1)."""
    problem, tasks, optima, law, *_ = setup
    b, k = 0, 4
    pb, plan, state, remaining, rows, start = nominal_replan_point(
        problem, tasks, optima, b, k, M_STEPS, R, H
    )

    @jax.jit
    def replan(d):
        none = jnp.zeros((0,), d.dtype)
        told = Scenarios(1 + d[:2], 1 + d[2:], none.reshape(0, 3), none)
        on = eqx.tree_at(lambda q: q.model, pb, plant(pb.model, told))
        out = mpc.replan_one(on, SQP(n_iterations=30), plan, state, start, remaining)
        return out[0].coefficients[:rows], out[3]

    d = jax.random.normal(jax.random.key(0), (5,), jnp.float64)
    d = d / jnp.linalg.norm(d)
    predicted = (law.plant_gains[b, k] @ d).reshape(rows, 2)
    eps = 1e-4
    (plus, miss_plus), (minus, miss_minus) = replan(eps * d), replan(-eps * d)
    assert max(float(miss_plus), float(miss_minus)) < 1e-12  # both re-plans converged
    fd = (plus - minus) / (2 * eps)
    assert float(jnp.linalg.norm(predicted)) > 0.1  # the plant moves the plan
    assert float(jnp.linalg.norm(fd - predicted) / jnp.linalg.norm(predicted)) < 1e-4


def _fitted(problem, law, scenarios, batch):
    each = jax.tree_util.tree_map(lambda a: jnp.repeat(a, S, axis=0), PerTask(law))
    return closed_loop_rollout(problem, each, scenarios, batch, H)


def test_fitted_law_drives_the_told_law(setup):
    """Deployed (the fit at `t = 1.5`) the law drives what it drives told the plant: every
    rollout's miss to 1e-7 and effort to 1e-7 relative (measured 6.6e-11 and 5.8e-10; with
    random plant gains of 0.1, 8e-9 and 4.6e-10: (I1) from exact measurements finds the
    plant's scales to ≤ 6.6e-11 here, measured with a one-off script, and the seven
    intervals after the fit amplify that up to a hundredfold through the gains). The plant
    gains matter here: told the model instead (zero gains), every rollout's miss is more
    than 1e-4 away (measured ≥ 7.3e-3)."""
    problem, tasks, optima, law, scenarios, batch, scale, program = setup
    fitted = _fitted(problem, law, scenarios, batch)
    (_, (miss, ratio, ok)), _ = program(
        tuning._trainable(PerTask(law)), scenarios, kick_steps(scenarios, DT)
    )
    assert bool(jnp.all(ok)) and bool(jnp.all(fitted.ok))
    np.testing.assert_allclose(fitted.miss, miss, rtol=0, atol=1e-7)
    np.testing.assert_allclose(fitted.effort / scale, ratio, rtol=1e-7)
    unaware = _fitted(problem, dataclasses.replace(law, plant_gains=0 * law.plant_gains),
                      scenarios, batch)  # fmt: skip
    assert float(jnp.min(jnp.abs(unaware.miss - fitted.miss))) > 1e-4


def test_nothing_of_the_plant_before_the_fit(setup):
    """Causal: with and without plant gains the law drives the same first `identify_at`
    intervals bit for bit (the same program; a law that read the plant earlier would already
    differ there), and different ones from the fit on."""
    problem, tasks, optima, law, scenarios, batch, scale, program = setup
    fitted = _fitted(problem, law, scenarios, batch)
    unaware = _fitted(problem, dataclasses.replace(law, plant_gains=0 * law.plant_gains),
                      scenarios, batch)  # fmt: skip
    split = K_ID * M_STEPS + 1  # the centre at every step up to the fit, the start included
    np.testing.assert_array_equal(fitted.path[:, :split], unaware.path[:, :split])
    assert float(jnp.min(jnp.max(jnp.abs(fitted.path[:, split:] - unaware.path[:, split:]),
                                 axis=(1, 2)))) > 1e-9  # fmt: skip


def test_plant_gains_gradient_and_training(setup):
    """(T1)'s gradient with respect to the plant gains alone, along a random unit direction,
    equals central differences to 1e-6 relative (measured 1.8e-7 at ε = 1e-5: their
    truncation, O(ε²)); 100 steps of `tune_feedback` (16 scenarios per task and step, its own
    stream) move the plant gains and lower (T1) on these scenarios, which it never drew,
    below half the start's (measured 204.5 → 8.6; a wrong gradient or pairing would not);
    the trained law comes back deployed (`"fitted"`)."""
    problem, tasks, optima, law, scenarios, batch, scale, program = setup
    at = kick_steps(scenarios, DT)
    p0 = tuning._trainable(PerTask(law))
    (value, (_, _, ok)), grad = program(p0, scenarios, at)
    assert bool(jnp.all(ok))  # a failed plant's (T1) has no derivative
    d = jax.random.normal(jax.random.key(5), p0[-1].shape, p0[-1].dtype)
    d = d / jnp.linalg.norm(d)
    eps = 1e-5

    def along(t):
        return program((*p0[:-1], p0[-1] + t * d), scenarios, at)[0][0]

    fd = (along(eps) - along(-eps)) / (2 * eps)
    exact = jnp.vdot(grad[-1], d)
    assert float(jnp.abs(fd)) > 1e-3  # the plant gains move (T1)
    assert float(jnp.abs(fd - exact)) < 1e-6 * float(jnp.abs(fd))

    start = PerTask(dataclasses.replace(law, plant_gains=0 * law.plant_gains))
    settings = tuning.TuneSettings(steps=100, scenarios=16, interval=H)
    tuned, history = tuning.tune_feedback(problem, start, tasks, optima.effort, settings)
    assert np.all(np.isfinite(history.loss))
    assert tuned.policy.source == "fitted"
    assert float(jnp.max(jnp.abs(tuned.policy.plant_gains))) > 0
    before = float(program(tuning._trainable(start), scenarios, at)[0][0])
    after = float(program(tuning._trainable(tuned), scenarios, at)[0][0])
    assert after < 0.5 * before


def test_policy_file_round_trip(setup, tmp_path):
    """`save_policy` / `load_policy` give back the law: every array equal, its base's kind,
    `identify_at` and the deployed (fitted) form."""
    law = setup[3]
    path = policy_io.save_policy(tmp_path / "law.eqx", PerTask(law), {"note": "test"})
    back, header = policy_io.load_policy(path)
    assert header["kind"] == "PlantInformedFeedback" and header["per_task"] == 2
    assert isinstance(back.policy.base, QuadraticFeedback)
    assert back.policy.identify_at == K_ID and back.policy.source == "fitted"
    for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(PerTask(law))):
        np.testing.assert_array_equal(a, b)


def test_bad_input(setup):
    """An `identify_at` outside the horizon's intervals after the first, a `source` other
    than `"fitted"` or `"told"`, and an observation without the plant, are refused with
    their message."""
    _, _, _, law, *_ = setup
    for k in (0, R):
        with pytest.raises(ValueError, match=r"identify_at must be in \[1, 9\]"):
            PlantInformedFeedback.from_base(law.base, k)
    with pytest.raises(ValueError, match="source must be 'fitted' or 'told', got 'fit'"):
        dataclasses.replace(law, source="fit")
    member = jax.tree_util.tree_map(lambda a: a[0], law)
    obs = Observation(jnp.zeros(2), jnp.zeros(3), jnp.array([1.0, 0, 0, 0]), jnp.zeros(2),
                      jnp.zeros(2), jnp.zeros(2), jnp.asarray(5.0), jnp.asarray(0))  # fmt: skip
    with pytest.raises(ValueError, match="needs the observation's plant deviation"):
        member(obs)
