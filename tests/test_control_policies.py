"""Feedback policies trained through the simulator: the reach-region task streams (the disc
distribution, reproducible, held-out disjoint from training), the closed loop (zero gains
reproduce the open-loop replay, the gradient equals central differences), policy files, and
`jaxrigid control train-policy` / `--feedback policy`. float64 (`conftest`) unless stated.
Every rollout uses `dt = 0.25` (20 steps over `T = 5`, control intervals of 0.5 = 2 steps)
so that each program builds in seconds."""

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
from jaxrigid.control import mpc
from jaxrigid.control.closed_loop import (
    LossWeights,
    PerTask,
    Tasks,
    closed_loop_rollout,
    linear_feedback,
    loss_and_grad,
    nominal_tasks,
)
from jaxrigid.control.policies import LinearFeedback, MLPPolicy, QuadraticFeedback, active_rows
from jaxrigid.control.policy_io import MAGIC, load_policy, save_policy
from jaxrigid.control.presets import reach_point
from jaxrigid.control.region import (
    RADIUS,
    open_loop_optima,
    reach_region,
    replay_optima,
    sample_tasks,
)  # fmt: skip
from jaxrigid.control.scenarios import draw_scenarios, replay
from jaxrigid.control.training import TrainSettings, _stages, train_policy

DT = 0.25
H = 0.5


def _ks_uniform(u) -> float:
    """The Kolmogorov–Smirnov statistic of samples `u` against U[0, 1]."""
    u = np.sort(np.asarray(u))
    n = u.size
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - u), np.max(u - (i - 1) / n)))


# --- reach-region tasks ------------------------------------------------------------------


def test_tasks_cover_the_disc_uniformly():
    """(R1): `|x*|²/ρ²` and `φ/2π` are U[0, 1] and the phases U[−π/2 − π, −π/2 + π): the
    Kolmogorov–Smirnov statistic of 4000 draws is below `1.95/√n`, the asymptotic 0.1 % point
    of Kolmogorov's distribution (a correct sampler fails with probability 10⁻³; seeded, so
    never). A sampler uniform in the radius instead (`r = ρu`) has `|x*|²/ρ²` with CDF `√v`,
    a KS distance of 1/4 — far above the bound."""
    n = 4000
    t = sample_tasks(7, n)
    r2 = np.sum(np.asarray(t.target) ** 2, axis=-1) / RADIUS**2
    phi = np.mod(np.arctan2(t.target[:, 1], t.target[:, 0]), 2 * math.pi) / (2 * math.pi)
    phases = (np.asarray(t.theta0).ravel() + math.pi / 2 + math.pi) / (2 * math.pi)
    bound = 1.95 / math.sqrt(n)
    for u in (r2, phi):
        assert _ks_uniform(u) < bound
    assert _ks_uniform(phases) < 1.95 / math.sqrt(phases.size)
    assert np.all(r2 <= 1.0)


def test_tasks_are_reproducible_and_the_heldout_stream_is_disjoint():
    """The same (seed, split, step) gives the same tasks bit for bit; the held-out stream is
    none of the training stream's draws (every training step used by a run of 50 steps), and
    no held-out target equals a training target."""
    a, b = sample_tasks(3, 64, "train", 5), sample_tasks(3, 64, "train", 5)
    np.testing.assert_array_equal(a.target, b.target)
    np.testing.assert_array_equal(a.theta0, b.theta0)
    train = np.concatenate([np.asarray(sample_tasks(3, 64, "train", s).target) for s in range(50)])
    heldout = np.asarray(sample_tasks(3, 1000, "heldout", 0).target)
    distances = np.linalg.norm(heldout[:, None] - train[None], axis=-1)
    assert np.min(distances) > 0
    assert not np.any(np.all(heldout[:64] == np.asarray(sample_tasks(3, 64, "train", 0).target)))


def test_tasks_bad_input():
    with pytest.raises(ValueError, match="split must be one of train, heldout"):
        sample_tasks(0, 4, "test")
    with pytest.raises(ValueError, match="count .* must be a positive integer"):
        sample_tasks(0, 0)


def test_curriculum_stages():
    """Equal stages in order, the last one taking the remainder; a count outside [1, R]
    is refused."""
    assert _stages(TrainSettings(steps=7, curriculum=(2, 5, 10)), 10) == [2, 2, 2, 5, 5, 5, 10]
    assert _stages(TrainSettings(steps=3), 10) == [10, 10, 10]
    with pytest.raises(ValueError, match=r"interval counts must be in \[1, 10\]"):
        _stages(TrainSettings(steps=3, curriculum=(11,)), 10)


# --- the closed loop ---------------------------------------------------------------------


def test_active_rows_are_the_ones_that_move_the_interval():
    """Rows past `active_rows` leave `θ` on `[0, H)` unchanged; the last active row moves it."""
    plan = reach_region(dt=DT).control
    rows = active_rows(plan, H)
    c = jnp.zeros_like(plan.coefficients)
    ts = jnp.linspace(0.0, H, 33)[:-1]
    base = jax.vmap(plan.with_coefficients(c))(ts)
    later = jax.vmap(plan.with_coefficients(c.at[rows:].set(1.0)))(ts)
    last = jax.vmap(plan.with_coefficients(c.at[rows - 1].set(1.0)))(ts)
    np.testing.assert_array_equal(later, base)
    assert float(jnp.max(jnp.abs(last - base))) > 1e-6


def test_zero_gains_reproduce_the_open_loop_replay(tmp_path):
    """A `LinearFeedback` with zero gains around a control (any control: a seeded smooth one,
    not optimised, to keep the test cheap) is that control: on the same disturbed scenarios
    the closed loop's path, miss and effort equal the open-loop `replay`'s. Tolerances: the
    per-interval plans are least-squares projections of the control's tail (exact up to
    rounding, `mpc.warm_start`) run in local time `t − kH`; a rounding-level difference in the
    rails, grown by 20 steps of the rolling dynamics, stays below 1e-9 (measured 4e-11 at
    dt = 0.05). Saved with reach-point's metadata, `reach-point --feedback policy --policy
    FILE --json` reports the feedback fields, its open loop (zero gains) equal to its closed
    loop here (the same program, the same numbers)."""
    problem = reach_point(dt=DT, n_basis=mpc.basis_size(5.0, H, 8))
    c = 0.3 * jax.random.normal(jax.random.key(1), problem.coefficient_shape)
    policy = linear_feedback(problem, c, H, copies=4)
    assert float(jnp.max(jnp.abs(policy.gains))) == 0.0
    scenarios = draw_scenarios(2, 4, 0.05, 2, problem.t_end)
    closed = closed_loop_rollout(problem, policy, scenarios, nominal_tasks(problem, 4), H)
    opened = replay(problem, c, scenarios)
    assert np.all(np.asarray(closed.ok))
    np.testing.assert_allclose(closed.path, opened.path, rtol=0, atol=1e-9)
    np.testing.assert_allclose(closed.miss, opened.miss, rtol=0, atol=1e-9)
    np.testing.assert_allclose(closed.effort, opened.effort, rtol=1e-9)
    # the disturbance matters: the scenarios' misses differ by far more than the tolerance
    assert float(np.ptp(np.asarray(closed.miss))) > 1e-4
    path = save_policy(tmp_path / "lf.eqx", policy, {"family": "reach-point", "dt": DT})
    rc, stdout, stderr = _control(["reach-point", "--feedback", "policy", "--policy", str(path),
                                   "--scenarios", "4", "--seed", "2", "--json"])  # fmt: skip
    assert rc == 0, stderr
    ev = json.loads(stdout)
    for key in ("feedback", "scenarios", "disturbance", "closed_loop_miss",
                "closed_loop_miss_p90", "open_loop_miss", "closed_loop_effort",
                "open_loop_effort", "seconds"):  # fmt: skip
        assert key in ev
    assert ev["feedback"] == "policy" and ev["scenarios"] == 4 and ev["disturbance"] == 0.05
    # `--seed 2` draws the scenarios above: the command's medians are the closed loop's
    assert ev["closed_loop_miss"] == pytest.approx(float(np.median(closed.miss)), rel=1e-12)
    assert ev["open_loop_miss"] == ev["closed_loop_miss"]
    assert ev["open_loop_effort"] == ev["closed_loop_effort"]


def test_gradient_equals_central_differences():
    """The loss (C2) of an `MLPPolicy` over 4 intervals (2 s, 8 steps) of 3 disturbed
    reach-region rollouts, kicks included: its gradient with respect to the policy's weights
    along 3 random directions `v` equals `(L(p + hv) − L(p − hv))/2h`. `h = 1e-5` (|v| = 1):
    the truncation error `h²|L'''|/6` and the rounding error `ε|L|/h` (`ε = 2.2e-16`) are both
    about 1e-10 relative for these O(1)–O(100) quantities, so agreement to 1e-6 relative is
    demanded: a wrong gradient (a dropped term, a checkpoint that loses a dependence) differs
    at O(1)."""
    problem = reach_region(dt=DT)
    policy = MLPPolicy(active_rows(problem.control, H), 2, 5.0, RADIUS, key=jax.random.key(3),
                       width=8, depth=1, last_layer_scale=0.3)  # fmt: skip
    scenarios = draw_scenarios(4, 3, 0.05, 2, problem.t_end)
    tasks = sample_tasks(4, 3)
    step = loss_and_grad(problem, policy, scenarios, tasks, interval=H, intervals=4)
    params, static = eqx.partition(policy, eqx.is_inexact_array)
    leaves, tree = jax.tree_util.tree_flatten(params)
    g = jnp.concatenate([x.ravel() for x in jax.tree_util.tree_leaves(step.grads)])
    assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.linalg.norm(g)) > 0
    h = 1e-5
    for k in range(3):
        v = jax.random.normal(jax.random.key(10 + k), g.shape, g.dtype)
        v = v / jnp.linalg.norm(v)

        def shifted(sign):
            flat, at = [], 0
            for x in leaves:
                flat.append(x + sign * h * v[at : at + x.size].reshape(x.shape))
                at += x.size
            moved = eqx.combine(jax.tree_util.tree_unflatten(tree, flat), static)
            return float(loss_and_grad(problem, moved, scenarios, tasks, interval=H,
                                       intervals=4).loss)  # fmt: skip

        fd = (shifted(1) - shifted(-1)) / (2 * h)
        exact = float(g @ v)
        assert abs(fd - exact) <= 1e-6 * max(abs(exact), 1e-3 * float(jnp.linalg.norm(g)))


# --- policy files ------------------------------------------------------------------------


def _policies():
    mlp = MLPPolicy(4, 2, 5.0, RADIUS, key=jax.random.key(0), width=8, depth=2)
    lf = LinearFeedback.zeros(jnp.ones((10, 4, 2)), jnp.ones((10, 13)))
    lf = eqx.tree_at(lambda p: p.gains, lf, jax.random.normal(jax.random.key(1), lf.gains.shape))
    return mlp, lf


def _per_task_quadratic(B: int = 3):
    """`B` members of a `QuadraticFeedback` with random arrays (a `PerTask`, as `tuning`
    trains them)."""
    _, lf = _policies()
    q = QuadraticFeedback.from_linear(lf)
    keys = iter(jax.random.split(jax.random.key(2), 4))
    return PerTask(jax.tree_util.tree_map(
        lambda a: jax.random.normal(next(keys), (B,) + a.shape, a.dtype), q
    ))  # fmt: skip


def test_policy_file_round_trip(tmp_path):
    """Every kind, and a per-task law (one member per task), comes back with every array bit
    for bit, the header self-describing."""
    for policy in (*_policies(), _per_task_quadratic()):
        path = save_policy(tmp_path / "p.eqx", policy, {"family": "reach-region", "step": 3})
        loaded, header = load_policy(path)
        per_task = isinstance(policy, PerTask)
        inner, saved = (loaded.policy, policy.policy) if per_task else (loaded, policy)
        assert type(loaded) is type(policy) and type(inner) is type(saved)
        assert header["kind"] == type(saved).__name__
        assert header.get("per_task") == (3 if per_task else None)
        assert header["metadata"] == {"family": "reach-region", "step": 3}
        assert header["dtype"] == "float64"
        a, b = eqx.filter(policy, eqx.is_array), eqx.filter(loaded, eqx.is_array)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
            np.testing.assert_array_equal(x, y)
    mlp32 = MLPPolicy(4, 2, 5.0, RADIUS, key=jax.random.key(0), width=8, depth=1,
                      dtype=jnp.float32)  # fmt: skip
    loaded, header = load_policy(save_policy(tmp_path / "q.eqx", mlp32))
    assert header["dtype"] == "float32" and loaded.mlp.layers[0].weight.dtype == jnp.float32


def test_policy_file_errors(tmp_path):
    """Not a policy file, a damaged header, truncated arrays, arrays of another structure, a
    kind no class answers to: `ValueError` naming the file and the fault."""
    mlp, _ = _policies()
    good = save_policy(tmp_path / "p.eqx", mlp).read_bytes()
    cases = {
        "other.eqx": (b"PK\x03\x04 not a policy", "not a jaxrigid policy file"),
        "header.eqx": (MAGIC + b"{kind: broken\n" + good[len(MAGIC) :], "unreadable header"),
        "truncated.eqx": (good[: len(good) - 100], "its arrays do not match the header"),
        "trailing.eqx": (good + b"\x00" * 8, "trailing data after the arrays"),
    }
    head, _, rest = good[len(MAGIC) :].partition(b"\n")
    header = json.loads(head)
    header["sizes"]["width"] = 9
    cases["sizes.eqx"] = (
        MAGIC + json.dumps(header).encode() + b"\n" + rest,
        "its arrays do not match the header",
    )
    header["kind"] = "TreePolicy"
    cases["kind.eqx"] = (
        MAGIC + json.dumps(header).encode() + b"\n" + rest,
        (
            "unknown policy kind 'TreePolicy' \\(MLPPolicy or LinearFeedback or "
            "QuadraticFeedback or PlantInformedFeedback\\)"
        ),
    )
    per_task = save_policy(tmp_path / "q.eqx", _per_task_quadratic()).read_bytes()
    head, _, rest = per_task[len(MAGIC) :].partition(b"\n")
    header = json.loads(head)
    header["per_task"] = 0
    cases["tasks.eqx"] = (
        MAGIC + json.dumps(header).encode() + b"\n" + rest,
        "bad sizes in the header \\(per_task must be a positive integer, got 0\\)",
    )
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ValueError, match=f"{name}: .*{message}"):
            load_policy(path)


# --- the command -------------------------------------------------------------------------


def _control(args):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["control", *args])
    return rc, stdout.getvalue(), stderr.getvalue()


def test_train_policy_command_float32(tmp_path):
    """`train-policy reach-region --dtype float32 --json` on a tiny configuration (4 rollouts,
    3 steps, the whole T = 5 horizon at dt = 0.25): one JSON object with the training history
    (every loss and gradient norm finite in float32 over the whole horizon), progress on
    stderr, a policy file that loads as a float32 `MLPPolicy`; `reach-region --feedback policy
    --policy FILE --json` evaluates it on the held-out targets of `--seed`."""
    out = tmp_path / "policy.eqx"
    rc, stdout, stderr = _control(["train-policy", "reach-region", "--batch", "4", "--steps",
                                   "3", "--dt", str(DT), "--dtype", "float32", "--log-every",
                                   "1", "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0, stderr
    report = json.loads(stdout)
    for key in ("family", "policy", "kind", "dtype", "batch", "steps", "loss", "grad_norm",
                "median_miss", "final_loss", "rollouts_per_second", "seconds"):  # fmt: skip
        assert key in report
    assert report["kind"] == "MLPPolicy" and report["dtype"] == "float32"
    assert len(report["loss"]) == len(report["grad_norm"]) == 3
    assert all(math.isfinite(v) and v > 0 for v in report["loss"] + report["grad_norm"])
    assert stderr.count("train-policy reach-region: step") == 3
    policy, header = load_policy(out)
    assert header["metadata"]["family"] == "reach-region"
    assert policy.mlp.layers[0].weight.dtype == jnp.float32
    # σ, the learning rate, the clip and (C2)'s weights are the step program's inputs: a
    # second training of this policy with other values traces no step program (the command's
    # serves; the tasks' and scenarios' small eager operations aside)
    built = []
    listen = lambda event, duration, **kw: built.append((event, kw.get("fun_name")))  # noqa: E731
    other = TrainSettings(steps=1, batch=4, sigma=0.01, learning_rate=1e-4, clip=2.0,
                          interval=0.5, weights=LossWeights(0.2, 0.05))  # fmt: skip
    f32_problem = reach_region(dt=DT, dtype=jnp.float32)
    f32_tasks = lambda i, fraction: sample_tasks(0, 4, "train", i, dtype=jnp.float32)  # noqa: E731
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        again, history = train_policy(f32_problem, policy, f32_tasks, other)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert ("/jax/core/compile/jaxpr_trace_duration", "_train_step") not in built
    # adam's first step moves each parameter by lr·|m̂/(√v̂ + ε)| ≤ lr (m̂ = g, v̂ = g²):
    # this learning rate, not the command's 3e-3, and a step taken
    moved = jax.tree_util.tree_leaves(
        jax.tree_util.tree_map(lambda a, b: jnp.max(jnp.abs(a - b)), eqx.filter(again,
                               eqx.is_inexact_array), eqx.filter(policy, eqx.is_inexact_array))
    )  # fmt: skip
    largest = max(float(jnp.max(jnp.abs(a))) for a in jax.tree_util.tree_leaves(
        eqx.filter(policy, eqx.is_inexact_array)))  # fmt: skip
    # (plus the float32 rounding of a parameter of that size, updated and subtracted)
    rounding = 2 * float(jnp.finfo(jnp.float32).eps) * largest
    assert 0.5e-4 < max(float(x) for x in moved) <= 1e-4 + rounding
    assert np.isfinite(history.loss[0])
    rc, stdout, stderr = _control(["reach-region", "--feedback", "policy", "--policy", str(out),
                                   "--scenarios", "4", "--seed", "5", "--open-loop-sample", "2",
                                   "--json"])  # fmt: skip
    assert rc == 0, stderr
    ev = json.loads(stdout)
    assert ev["feedback"] == "policy" and ev["scenarios"] == 4
    # the first 2 targets' own open-loop optima (float32, as the policy), replayed on their
    # scenarios; recomputed here by the same programs on the same inputs, so equal exactly
    f32 = jnp.float32
    problem = reach_region(dt=DT, dtype=f32)
    tasks = sample_tasks(5, 4, "heldout", 0, dtype=f32)
    first = Tasks(tasks.target[:2], tasks.theta0[:2])
    scenarios = draw_scenarios(5, 4, 0.05, 2, problem.t_end, f32)
    optima = open_loop_optima(problem, first)
    reached = np.asarray(optima.miss) <= 5e-4
    two = jax.tree_util.tree_map(lambda a: a[:2], scenarios)
    opened = np.asarray(replay_optima(problem, first, optima.coefficients, two))
    closed = np.asarray(closed_loop_rollout(problem, policy, scenarios, tasks, 0.5).effort)[:2]
    assert ev["open_loop_sample"] == 2 and ev["open_loop_reached"] == int(reached.sum())
    assert ev["open_loop_effort"] == float(np.median(optima.effort))
    assert ev["open_loop_miss"] == float(np.median(opened))
    ratio = float(np.median(closed[reached] / np.asarray(optima.effort)[reached]))
    assert ev["effort_ratio"] == (ratio if reached.any() else None)
    # evaluated on the held-out stream of `--seed`, never a training draw
    heldout = np.asarray(sample_tasks(5, 4, "heldout", 0, dtype=jnp.float32).target)
    np.testing.assert_array_equal(np.asarray(ev["heldout_targets"], np.float32), heldout)
    assert 0 < ev["closed_loop_miss"] <= ev["closed_loop_miss_p90"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["train-policy"], "train-policy needs a problem family"),
        (["train-policy", "reach-region", "--batch", "0"], "--batch must be a positive"),
        (["train-policy", "reach-region", "--init", "nowhere.eqx"], "--init: "),
        (["reach-region", "--feedback", "policy"], "--feedback policy needs --policy FILE"),
        (["reach-region", "--feedback", "policy", "--policy", "nowhere.eqx"], "--policy: "),
        (["follow-circle", "--feedback", "policy"], "problem must be one of reach-region"),
        (
            ["reach-region", "--feedback", "policy", "--policy", "tuned", "--tune-steps", "0"],
            "--tune-steps must be a positive integer, got 0",
        ),
        (
            ["reach-region", "--feedback", "policy", "--policy", "p.eqx", "--save-policy", "q.eqx"],
            "--save-policy writes a built-in law (--policy neighbouring or tuned)",
        ),
        (
            [
                "reach-region",
                "--feedback",
                "policy",
                "--policy",
                "p.eqx",
                "--open-loop-sample",
                "-1",
            ],
            "--open-loop-sample must be ≥ 0, got -1",
        ),  # fmt: skip
    ],
)
def test_policy_command_bad_input(args, message, tmp_path):
    rc, _, stderr = _control([*args, "--out", str(tmp_path / "x")])
    assert rc == 2
    assert message in stderr
