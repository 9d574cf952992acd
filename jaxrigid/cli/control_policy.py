"""`jaxrigid control train-policy FAMILY` and `jaxrigid control PROBLEM --feedback policy`:
train a feedback policy through the simulator (`jaxrigid.control.training`) and evaluate a
saved one on disturbed scenarios (`jaxrigid.control.closed_loop`; `control_policy_eval`).

    jaxrigid control train-policy reach-region [--batch N] [--steps S] [--seed S]
                                  [--disturbance SIGMA] [--curriculum R1,R2,..] [--clip C]
                                  [--learning-rate LR] [--effort-weight W] [--init FILE]
                                  [--dtype float32|float64] [--dt H] [--out FILE] [--json]
    jaxrigid control train-policy reach-point ...      (a LinearFeedback around the optimum)
    jaxrigid control reach-region --feedback policy --policy FILE [--scenarios K] ...
    jaxrigid control reach-point --feedback policy --policy FILE [--scenarios K] ...
    jaxrigid control PROBLEM --feedback policy --policy neighbouring [--dt H] [--dtype D] ...
    jaxrigid control reach-region --feedback policy --policy identifying [--identify-at K] ...

`reach-region` trains an `MLPPolicy` on the family's training stream (`control.region`) and
evaluates on its held-out stream (`--seed` picks both streams; held-out tasks are never
drawn in training). `reach-point` optimises the open loop, then trains a `LinearFeedback`
around it; its evaluation compares with the open loop replayed on the same scenarios (the
policy's nominal plan: zero gains); `reach-region`'s with the first `--open-loop-sample`
(50) held-out targets' own open-loop optima (`region.open_loop_optima`) replayed on their
scenarios, and the policy's effort over the optimum's per target (`effort_ratio`, the
median). `--policy neighbouring` is no file: each task's optimum (reach-region: every
held-out task's, so the comparison covers all `--scenarios`) and around it the gains of
`control.neighbouring` (MPC's re-plan to first order), at `--dt` and `--dtype`; `--policy
tuned` trains those gains further per task; `--save-policy FILE` writes either law with its
tasks, which `--policy FILE` then evaluates on the same tasks (one scenario each). `--policy
identifying` learns the plant online instead (`hindsight.identifying_replanner`): each
task's optimum until interval `--identify-at`, where it fits the plant's masses, inertia and
kicks so far to the states it measured, then re-plans the rest on the fitted plant from the
measured state, again after each kick; the law that meets issue 35's two bars. `--out` for
training is the policy file (a path without a suffix is a directory, the file
`FAMILY-policy.eqx` in it). Progress: a line on stderr every `--log-every` steps. With
`--json` one object on stdout.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from .errors import UsageError
from .output import jsonable

FAMILIES = ("reach-region", "reach-point")
DTYPES = ("float64", "float32")
INTERVAL = 0.5  # the control interval H = T/10 of both families
OPEN_LOOP_SAMPLE = 50  # the sample of targets for the effort against the optimum
REACHED = 5e-4  # an optimum reaches its target: a hundredth of the policies' success (0.05)


def add_policy_arguments(p) -> None:
    """The options of `train-policy` and `--feedback policy`."""
    g = p.add_argument_group("feedback policies (train-policy FAMILY; --feedback policy)")
    g.add_argument("family", nargs="?", help="train-policy: the problem family (reach-region)")
    g.add_argument(
        "--policy",
        help="--feedback policy: the policy file (train-policy --out), 'neighbouring': "
        "each task's optimum with the gains of MPC's re-plan sensitivity, 'tuned': those "
        "gains trained further per task on model-drawn scenarios (--tune-steps), or "
        "'identifying': each task's optimum, re-planned on the plant fitted to the measured "
        "states at --identify-at and after each kick",
    )
    g.add_argument(
        "--identify-at",
        type=int,
        help="--policy identifying: the interval (of ten) at whose start the plant is fitted "
        "(default 3: t = 1.5, after the first kick)",
    )
    g.add_argument(
        "--save-policy",
        metavar="FILE",
        help="--policy neighbouring|tuned: also write the law (one member per evaluated task, "
        "the tasks in its metadata) to FILE; --policy FILE evaluates it on those tasks again",
    )
    g.add_argument(
        "--tune-steps",
        type=int,
        default=1000,
        help="--policy tuned: training steps per batch of tasks (16 scenarios per task a step)",
    )
    g.add_argument("--batch", type=int, default=64, help="rollouts per training step")
    g.add_argument("--steps", type=int, default=200, help="training steps")
    g.add_argument("--learning-rate", type=float, default=3e-3, help="adam's learning rate")
    g.add_argument("--clip", type=float, default=1.0, help="gradient global-norm clip (0: off)")
    g.add_argument("--curriculum", help="interval counts per stage, e.g. 4,7,10 (default: all)")
    g.add_argument("--dtype", choices=DTYPES, default="float64", help="training precision")
    g.add_argument("--log-every", type=int, default=10, help="a progress line every N steps")
    g.add_argument(
        "--effort-weight", type=float, default=1e-2, help="w in the loss (miss/0.1)² + w·effort"
    )
    g.add_argument("--init", help="train-policy: continue from this policy file (same family)")
    g.add_argument(
        "--open-loop-sample",
        type=int,
        default=OPEN_LOOP_SAMPLE,
        help="--feedback policy on reach-region: the first N held-out targets' open-loop optima "
        f"(default {OPEN_LOOP_SAMPLE}; 0: none)",
    )


def _family(name) -> str:
    if name is None or name.lower() not in FAMILIES:
        raise UsageError(f"train-policy needs a problem family: {', '.join(FAMILIES)}")
    return name.lower()


def _problem(family: str, dt, dtype):
    import jax.numpy as jnp

    from ..control import mpc, presets, region

    dt_kw = {} if dt is None else {"dt": dt}
    try:
        if family == "reach-region":
            return region.reach_region(dtype=jnp.dtype(dtype), interval=INTERVAL, **dt_kw)
        n = mpc.basis_size(5.0, INTERVAL, 8)
        return presets.reach_point(n_basis=n, dtype=jnp.dtype(dtype), **dt_kw)
    except (TypeError, ValueError) as err:
        raise UsageError(f"problem {family}: {err}") from None


def _curriculum(text) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"--curriculum must be comma-separated integers, got {text!r}") from None


def _open_loop(problem, args):
    """The open-loop optimum of reach-point (the problem's settings)."""
    import jax

    from ..control.optimise import optimise
    from ..progress import OptimiserProgress
    from . import control_setup

    settings = control_setup.settings("reach-point", args.iterations)
    with OptimiserProgress(settings, starts=1, desc="reach-point", file=sys.stderr) as bar:
        res = optimise(problem, problem.initial_coefficients(), settings, callback=bar)
    return jax.block_until_ready(res)


def _initial_policy(path, family: str, dtype: str, kind: type):
    """The policy in `path` to continue training (`--init`): same family, kind and dtype."""
    from ..control.policy_io import load_policy

    try:
        policy, header = load_policy(path)
    except (OSError, ValueError) as err:
        raise UsageError(f"--init: {err}") from None
    found = (header["metadata"].get("family"), type(policy), header["dtype"])
    if found != (family, kind, dtype):
        raise UsageError(
            f"--init {path}: a {header['kind']} ({header['dtype']}) for "
            f"{header['metadata'].get('family')!r}, not a {kind.__name__} ({dtype}) for {family!r}"
        )
    return policy


def cmd_train_policy(args) -> int:
    """`jaxrigid control train-policy FAMILY`."""
    import jax

    from ..control import region
    from ..control.closed_loop import LossWeights, linear_feedback, nominal_tasks
    from ..control.policies import MLPPolicy, active_rows
    from ..control.policy_io import save_policy
    from ..control.training import TrainSettings, train_policy

    family = _family(args.family)
    sigma = 0.05 if args.disturbance is None else args.disturbance
    for flag, value in (("--batch", args.batch), ("--steps", args.steps)):
        if value < 1:
            raise UsageError(f"{flag} must be a positive integer, got {value}")
    if not (math.isfinite(sigma) and sigma >= 0):
        raise UsageError(f"--disturbance must be a finite number ≥ 0, got {sigma}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    out = Path(args.out)
    if not out.suffix:
        out = out / f"{family}-policy.eqx"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {str(out)!r}: {err}") from None
    started = time.perf_counter()
    problem = _problem(family, args.dt, args.dtype)
    settings = TrainSettings(
        steps=args.steps, batch=args.batch, sigma=sigma, learning_rate=args.learning_rate,
        clip=args.clip or None, curriculum=_curriculum(args.curriculum), interval=INTERVAL,
        seed=args.seed, weights=LossWeights(effort_weight=args.effort_weight),
    )  # fmt: skip
    policy: Any
    if family == "reach-region":
        rows = active_rows(problem.control, INTERVAL)
        policy = MLPPolicy(
            rows, problem.model.n_masses, problem.t_end, region.RADIUS,
            key=jax.random.key(args.seed), dtype=problem.model.inertia.dtype,
        )  # fmt: skip

        def tasks(step, fraction):
            t = region.sample_tasks(args.seed, args.batch, "train", step)
            return t._replace(target=fraction * t.target)
    else:
        res = _open_loop(problem, args)
        policy = linear_feedback(problem, res.coefficients, INTERVAL)

        def tasks(step, fraction):  # one fixed target (no curriculum scaling of it)
            return nominal_tasks(problem, args.batch)

    if args.init:
        policy = _initial_policy(args.init, family, args.dtype, type(policy))
    every = max(1, args.log_every)
    t0 = time.perf_counter()

    def progress(i, r):
        if i == 0 or (i + 1) % every == 0 or i + 1 == args.steps:
            print(
                f"train-policy {family}: step {i + 1}/{args.steps} loss {r['loss']:.4g} "
                f"|grad| {r['grad_norm']:.3g} median miss {r['median_miss']:.3g} "
                f"failed {r['failed']:.2f} (R = {r['intervals']}, "
                f"{time.perf_counter() - t0:.1f} s)",
                file=sys.stderr,
                flush=True,
            )

    policy, history = train_policy(problem, policy, tasks, settings, progress)
    seconds = time.perf_counter() - t0
    metadata = {
        "family": family,
        "dt": problem.dt,
        "interval": INTERVAL,
        "seed": args.seed,
        "settings": jsonable(settings._asdict()),
        "init": args.init,
    }
    save_policy(out, policy, metadata)
    report = jsonable(
        {
            "family": family,
            "policy": str(out),
            "kind": type(policy).__name__,
            "dtype": args.dtype,
            "dt": problem.dt,
            "batch": args.batch,
            "steps": args.steps,
            "disturbance": sigma,
            "seed": args.seed,
            "curriculum": list(settings.curriculum),
            "clip": settings.clip,
            "learning_rate": settings.learning_rate,
            "loss": history.loss.tolist(),
            "grad_norm": history.grad_norm.tolist(),
            "median_miss": history.median_miss.tolist(),
            "failed": history.failed.tolist(),
            "final_loss": float(history.loss[-1]),
            "final_median_miss": float(history.median_miss[-1]),
            "rollouts_per_second": args.batch * args.steps / seconds,
            "seconds": seconds,
            "total_seconds": time.perf_counter() - started,
        }
    )
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        print(f"{family}: trained {report['kind']} in {seconds:.1f} s; wrote {out}")
    return 0
