"""`jaxrigid control PROBLEM --feedback policy --policy FILE|neighbouring|tuned|identifying`:
a feedback policy on disturbed scenarios (`jaxrigid.control.closed_loop`) against the open loop
on the same scenarios. The options, families and problems are `control_policy`'s (the module
docstring there describes the report)."""

from __future__ import annotations

import json
import math
import time
from typing import NamedTuple

import numpy as np

from .control_policy import FAMILIES, INTERVAL, REACHED, _open_loop, _problem
from .errors import UsageError, warn
from .output import jsonable

# --policy neighbouring: gains from the re-plan's sensitivity; tuned: those trained further
# per task on model-drawn scenarios (`control.tuning`, --tune-steps)
# identifying: each task's optimum, the plant fitted to the measured states at interval
# --identify-at and every re-plan after it on the fitted plant (`hindsight.identifying_replanner`)
BUILT_IN = ("neighbouring", "tuned", "identifying")
SAVED = BUILT_IN[:2]  # the laws --save-policy writes (the identifying law is no policy file)
IDENTIFYING_AIM = 0.049
"""The identifying law's `r`: its re-plans end on the circle of radius `r` to SQP's rounding,
so aiming at the success radius itself (0.05) would leave about half of them a rounding
outside; 0.049 leaves a margin the kick-free last intervals keep (bench/README)."""


def _region_open_loop(problem, tasks, scenarios, closed, n: int) -> dict:
    """The first `n` held-out tasks' open-loop optima (`region.open_loop_optima`) replayed on
    their scenarios (`region.replay_optima`): medians, and the policy's effort over the
    optimum's per reached target (miss ≤ `REACHED`)."""
    import jax

    from ..control import region
    from ..control.closed_loop import Tasks
    from ..progress import phase

    sample = Tasks(tasks.target[:n], tasks.theta0[:n])
    with phase(f"reach-region: the open-loop optima of {n} held-out target(s)"):
        optima = region.open_loop_optima(problem, sample)
    first = jax.tree_util.tree_map(lambda a: a[:n], scenarios)
    miss = np.asarray(region.replay_optima(problem, sample, optima.coefficients, first))
    effort = np.asarray(optima.effort)
    reached = np.asarray(optima.miss) <= REACHED
    ratio = np.asarray(closed.effort)[:n][reached] / effort[reached]
    return {
        "open_loop_sample": n,
        "open_loop_reached": int(reached.sum()),
        "open_loop_miss": float(np.median(miss)),
        "open_loop_miss_p90": float(np.percentile(miss, 90)),
        "open_loop_effort": float(np.median(effort)),
        "effort_ratio": float(np.median(ratio)) if reached.any() else None,
    }


def _neighbouring(problem, family: str, tasks, args):
    """`--policy neighbouring`: each task's optimum (reach-region: `region.open_loop_optima`
    of the held-out tasks; reach-point: the problem's, once) and the gains (N1) around it
    (`control.neighbouring`), trained further for `--policy tuned`. Returns `(PerTask policy,
    optima or None, the first-order PerTask)`."""
    import jax

    from ..control import region
    from ..control.closed_loop import Tasks
    from ..control.neighbouring import neighbouring_feedback
    from ..progress import phase

    K = tasks.target.shape[0]
    if family == "reach-region":
        with phase(f"reach-region: the open-loop optima of {K} held-out target(s)"):
            optima = region.open_loop_optima(problem, tasks)
        coefficients, gain_tasks = optima.coefficients, tasks
    else:
        optima = None
        coefficients = _open_loop(problem, args).coefficients[None]
        gain_tasks = Tasks(tasks.target[:1], tasks.theta0[:1])  # one task: its gains once
    with phase(f"{family}: the neighbouring-optimal gains of {coefficients.shape[0]} task(s)"):
        policy = neighbouring_feedback(problem, coefficients, gain_tasks, INTERVAL)
    first_order = policy
    if args.policy == "tuned":
        policy = _tuned(problem, family, policy, gain_tasks, optima, args)
    if family != "reach-region":
        each = lambda a: np.broadcast_to(a, (K,) + a.shape[1:])  # noqa: E731
        policy, first_order = jax.tree_util.tree_map(each, (policy, first_order))
    return policy, optima, first_order


def _tuned(problem, family: str, policy, tasks, optima, args):
    """`--policy tuned`: the neighbouring law, the last interval's gains zeroed (at σ = 0.05
    a plant fails under them), with a second-order term (`QuadraticFeedback`, zero to start)
    trained by `tuning.tune_feedback` for `--tune-steps` steps on model-drawn σ =
    `--disturbance` scenarios (their own stream: never the evaluation's)."""
    import equinox as eqx

    from ..control.closed_loop import PerTask, closed_loop_rollout
    from ..control.policies import QuadraticFeedback
    from ..control.scenarios import draw_scenarios
    from ..control.tuning import TuneSettings, tune_feedback
    from ..progress import phase

    B = policy.count
    if optima is not None:
        effort = optima.effort
    else:  # reach-point: the optimum's effort is its nominal run's (zero disturbance)
        still = draw_scenarios(0, B, 0.0, problem.model.n_masses, problem.t_end)
        effort = closed_loop_rollout(problem, policy, still, tasks, INTERVAL).effort
    linear = eqx.tree_at(lambda p: p.gains, policy.policy, policy.policy.gains.at[:, -1].set(0))
    start = PerTask(QuadraticFeedback.from_linear(linear))
    sigma = 0.05 if args.disturbance is None else args.disturbance
    settings = TuneSettings(steps=args.tune_steps, sigma=sigma, interval=INTERVAL, seed=args.seed)
    with phase(f"{family}: the gains of {B} task(s) trained for {args.tune_steps} steps"):
        tuned, _ = tune_feedback(problem, start, tasks, effort, settings)
    return tuned


class _Run(NamedTuple):
    """A closed loop's per-scenario outcome as the report reads it."""

    miss: np.ndarray
    effort: np.ndarray
    ok: np.ndarray


def _identifying(problem, tasks, scenarios, args):
    """`--policy identifying` (reach-region): each held-out task's optimum driven by the
    identifying re-planner (`hindsight.identifying_replanner`: the plant fitted at interval
    `--identify-at` to the states measured so far, the rest re-planned on it from the measured
    state, again after each kick; aiming `IDENTIFYING_AIM` inside the success radius).
    Returns `(closed loop, optima, the optima replayed, seconds of the closed loop)`."""
    from ..control import region
    from ..control.closed_loop import interval_sizes
    from ..control.hindsight import identifying_replanner
    from ..progress import phase

    K = tasks.target.shape[0]
    _, R = interval_sizes(problem, INTERVAL, None)  # checked here: before the optima are built
    if not 0 <= args.identify_at < R:
        raise UsageError(f"--identify-at must be an interval in [0, {R}), got {args.identify_at}")
    with phase(f"reach-region: the open-loop optima of {K} held-out target(s)"):
        optima = region.open_loop_optima(problem, tasks)
    t0 = time.perf_counter()
    with phase(f"reach-region: the identifying re-planner on {K} scenario(s)"):
        run = identifying_replanner(
            problem, tasks, optima.coefficients, scenarios, IDENTIFYING_AIM, interval=INTERVAL,
            identify_at=args.identify_at,
        )  # fmt: skip
        miss = np.asarray(run.miss)
    seconds = time.perf_counter() - t0
    closed = _Run(miss, np.asarray(run.effort), np.isfinite(miss))
    # each optimum's plan unchanged on its plant, at its own effort
    replayed = np.asarray(region.replay_optima(problem, tasks, optima.coefficients, scenarios))
    opened = _Run(replayed, np.asarray(optima.effort), np.isfinite(replayed))
    return closed, optima, opened, seconds


def _without_feedback(law):
    """A per-task feedback law with its correction terms (the arrays `tuning` trains) zero:
    each task's nominal plan (its optimum), replayed."""
    import equinox as eqx
    import jax.numpy as jnp

    from ..control.tuning import _trainable

    return eqx.tree_at(_trainable, law, tuple(jnp.zeros_like(a) for a in _trainable(law)))


def _save_path(text: str):
    """`--save-policy`'s file, its folder made (a usage error where it cannot be)."""
    from pathlib import Path

    path = Path(text)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--save-policy {text!r}: {err}") from None
    return path


def _save(path, policy, family: str, problem, tasks, optima, sigma: float, args) -> None:
    """Write the built-in law with what evaluates it again: its tasks, step and interval,
    the tasks' optima (reach-region) and how it was trained (`--policy tuned`)."""
    from ..control.policy_io import save_policy

    metadata = {
        "family": family,
        "policy": args.policy,
        "dt": problem.dt,
        "interval": INTERVAL,
        "seed": args.seed,
        "targets": np.asarray(tasks.target).tolist(),
        "theta0": np.asarray(tasks.theta0).tolist(),
    }
    if optima is not None:
        metadata["optimum_effort"] = np.asarray(optima.effort).tolist()
        metadata["optimum_miss"] = np.asarray(optima.miss).tolist()
    if args.policy == "tuned":
        from ..control.tuning import TuneSettings

        floor = TuneSettings().effort_floor  # (T1)'s, as `_tuned` trained with it
        metadata |= {"tune_steps": args.tune_steps, "tune_disturbance": sigma,
                     "tune_effort_floor": floor}  # fmt: skip
    save_policy(path, policy, jsonable(metadata))


def _saved_tasks(path, metadata: dict, count: int, n_masses: int, dtype):
    """The tasks a saved per-task law belongs to (its metadata's)."""
    import jax.numpy as jnp

    from ..control.closed_loop import Tasks

    try:
        targets = jnp.asarray(metadata["targets"], dtype)
        theta0 = jnp.asarray(metadata["theta0"], dtype)
        if targets.shape != (count, 2) or theta0.shape != (count, n_masses):
            raise ValueError(f"targets {targets.shape} and theta0 {theta0.shape}")
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(
            f"--policy {path}: corrupt policy file: its {count} tasks are not in the metadata "
            f"({err})"
        ) from None
    return Tasks(targets, theta0)


def cmd_policy(args) -> int:
    """`jaxrigid control PROBLEM --feedback policy --policy FILE`."""
    import jax

    from ..control import region
    from ..control.closed_loop import closed_loop_rollout, nominal_tasks
    from ..control.policies import LinearFeedback
    from ..control.policy_io import load_policy
    from ..control.scenarios import draw_scenarios

    family = args.problem.lower()
    if family not in FAMILIES:
        raise UsageError(f"--feedback policy: problem must be one of {', '.join(FAMILIES)}")
    if not args.policy:
        raise UsageError(
            f"--feedback policy needs --policy FILE (from train-policy), {' or '.join(BUILT_IN)}"
        )
    if args.open_loop_sample < 0:
        raise UsageError(f"--open-loop-sample must be ≥ 0, got {args.open_loop_sample}")
    built_in = args.policy in BUILT_IN
    if args.policy == "tuned" and args.tune_steps < 1:
        raise UsageError(f"--tune-steps must be a positive integer, got {args.tune_steps}")
    if args.identify_at is None:
        args.identify_at = 3  # t = 1.5: the first kick (t = T/4) seen
    elif args.policy != "identifying":
        raise UsageError("--identify-at needs --policy identifying")
    if args.policy == "identifying" and family != "reach-region":
        raise UsageError("--policy identifying runs on reach-region (each held-out optimum)")
    if args.save_policy and args.policy not in SAVED:
        raise UsageError("--save-policy writes a built-in law (--policy neighbouring or tuned)")
    save_to = _save_path(args.save_policy) if args.save_policy else None
    if built_in:
        header = {"kind": args.policy, "dtype": args.dtype, "metadata": {"dt": args.dt}}
    else:
        try:
            policy, header = load_policy(args.policy)
        except (OSError, ValueError) as err:
            raise UsageError(f"--policy: {err}") from None
        if header["metadata"].get("family") != family:
            raise UsageError(
                f"--policy {args.policy}: a policy for {header['metadata'].get('family')!r}, "
                f"not {family!r}"
            )
    per_task = header.get("per_task")  # a saved built-in law: evaluated on its own tasks
    if per_task is not None and args.scenarios not in (None, per_task):
        raise UsageError(
            f"--policy {args.policy}: a law for {per_task} task(s) runs one scenario on each of "
            f"its tasks, not --scenarios {args.scenarios}"
        )
    K = per_task or (16 if args.scenarios is None else args.scenarios)
    sigma = 0.05 if args.disturbance is None else args.disturbance
    if K < 1:
        raise UsageError(f"--scenarios must be a positive integer, got {K}")
    if not (math.isfinite(sigma) and sigma >= 0):
        raise UsageError(f"--disturbance must be a finite number ≥ 0, got {sigma}")
    dt = header["metadata"].get("dt")
    problem = _problem(family, dt, header["dtype"])
    dtype = problem.model.inertia.dtype
    # the scenarios' stream is `--seed`'s; the held-out tasks' too (never a training draw)
    scenarios = draw_scenarios(args.seed, K, sigma, problem.model.n_masses, problem.t_end, dtype)
    if per_task is not None:
        masses = problem.model.n_masses
        tasks = _saved_tasks(args.policy, header["metadata"], per_task, masses, dtype)
    elif family == "reach-region":
        tasks = region.sample_tasks(args.seed, K, "heldout", 0, dtype=dtype)
    else:
        tasks = nominal_tasks(problem, K)
    optima = None
    if args.policy == "identifying":
        closed, optima, opened, seconds = _identifying(problem, tasks, scenarios, args)
    else:
        if built_in:
            policy, optima, first_order = _neighbouring(problem, family, tasks, args)
            if save_to is not None:
                _save(save_to, policy, family, problem, tasks, optima, sigma, args)
        t0 = time.perf_counter()
        closed = closed_loop_rollout(problem, policy, scenarios, tasks, INTERVAL)
        closed = jax.block_until_ready(closed)
        seconds = time.perf_counter() - t0
        opened = None
        if isinstance(policy, LinearFeedback):  # zero gains: the open-loop optimum replayed
            nominal = LinearFeedback.zeros(policy.nominal_coefficients, policy.nominal_features)
            opened = closed_loop_rollout(problem, nominal, scenarios, tasks, INTERVAL)
        elif built_in or per_task is not None:  # each task's optimum replayed: no feedback
            law = _without_feedback(first_order if built_in else policy)
            opened = closed_loop_rollout(problem, law, scenarios, tasks, INTERVAL)
    if failed := int(np.sum(~np.asarray(closed.ok))):
        warn(f"{failed} of {K} scenario(s) failed in closed loop: their miss is NaN")
    miss = np.asarray(closed.miss)
    ok = np.isfinite(miss)
    report = {
        "problem": family,
        "feedback": "policy",
        "policy": str(args.policy),
        "kind": header["kind"],
        "dt": problem.dt,
        "t_end": problem.t_end,
        "scenarios": K,
        "disturbance": sigma,
        "seed": args.seed,
        "closed_loop_miss": float(np.median(miss)),
        "closed_loop_miss_p90": float(np.percentile(miss, 90)),
        "closed_loop_success": float(np.mean(ok & (miss <= 0.05))),
        "open_loop_miss": None if opened is None else float(np.median(opened.miss)),
        "open_loop_miss_p90": None
        if opened is None
        else float(np.percentile(np.asarray(opened.miss), 90)),
        "closed_loop_effort": float(np.median(np.asarray(closed.effort))),
        "open_loop_effort": None if opened is None else float(np.median(opened.effort)),
        "seconds": seconds,
    }
    if save_to is not None:
        report["saved_policy"] = str(save_to)
    if args.policy == "identifying":
        report |= {"identify_at": args.identify_at, "aim": IDENTIFYING_AIM}
    if family == "reach-region":
        report["heldout_targets"] = np.asarray(tasks.target).tolist()
        n = min(K, args.open_loop_sample)
        optimum = None if optima is None else (optima.effort, optima.miss)
        saved = header["metadata"]
        if per_task is not None and "optimum_effort" in saved:  # saved with the law
            optimum = (saved["optimum_effort"], saved.get("optimum_miss"))
        if optimum is not None:  # every task's optimum is at hand: the comparison on all
            effort, optimum_miss = (np.asarray(a, float) for a in optimum)
            reached = optimum_miss <= REACHED
            ratio = np.asarray(closed.effort)[reached] / effort[reached]
            report |= {
                "open_loop_sample": K,
                "open_loop_reached": int(reached.sum()),
                "effort_ratio": float(np.median(ratio)) if reached.any() else None,
            }
        elif n > 0:
            report.update(_region_open_loop(problem, tasks, scenarios, closed, n))
    report = jsonable(report)
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        print(
            f"{family}: policy on {K} scenario(s), σ = {sigma:g}: median miss "
            f"{report['closed_loop_miss']:.3e} (90th percentile "
            f"{report['closed_loop_miss_p90']:.3e}), success (miss ≤ 0.05) "
            f"{report['closed_loop_success']:.1%}; open loop {report['open_loop_miss']}"
        )
    return 0
