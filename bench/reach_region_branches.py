"""The reach-region optimum's branches: the least-effort optimum over several starts, and
whether it is a smoother function of the task than the optimum SQP finds from rest (issue 35).

A policy fitted to the experts' plans (`control.imitation`) must learn the map from a task
(target `x*`, the rails' starting phases `θ₀`) to its optimum. Fitted to the optimum from rest
(`region.open_loop_optima`) it did not generalise (bench/README, `reach_region_imitation.py`),
and along a line of one rail's phase that optimum jumps between branches. Here, per task:

- the open-loop optimum from each of `--starts` initial coefficient arrays (the first zero,
  i.e. from rest as `region.open_loop_optima`; the others N(0, `--spread`²), the same draws
  for every task), by the same 40 SQP iterations, all tasks × starts in one program;
- `rest`: the optimum from zero; `least`: the reached optimum of least effort (reached: miss ≤
  1e-8, a converged SQP holds the constraint to rounding);
- for both labels: an MLP (tanh, `--width` × 3) fitted by full-batch adam (cosine decay,
  `--fit-steps`) from the task's features (`x*/2`, `cos θ₀ᵢ`, `sin θ₀ᵢ`) to the optimum's
  coefficients (standardised per output), trained on the reached ones of `--train` tasks of
  the training stream (and on their first `--sizes` for a learning curve) and scored on
  `--heldout` tasks of the held-out stream: RMS error over the labels' RMS (1 = predicting
  the mean);
- along a line of one rail's starting phase (64 points on [−π, π), target (1, 0.5), the other
  rail at −π/2): each label's largest step between neighbours over its RMS step.

Writes `results/reach_region_branches_<device>.json`.

    python bench/reach_region_branches.py [--train 512] [--heldout 256] [--starts 6] [--dt 0.1]
                                          [--sizes 128,256,512]
"""

from __future__ import annotations

import math
import time

import _common as common
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import region  # noqa: E402
from jaxrigid.control.closed_loop import Tasks  # noqa: E402
from jaxrigid.control.mpc import Multipliers, replan_one  # noqa: E402

REACHED = 1e-8

p = common.parser(__doc__)
p.add_argument("--train", type=int, default=512)
p.add_argument("--heldout", type=int, default=256)
p.add_argument("--starts", type=int, default=6)
p.add_argument("--spread", type=float, default=0.5)
p.add_argument("--dt", type=float, default=0.1)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--width", type=int, default=128)
p.add_argument("--fit-steps", type=int, default=4000)
p.add_argument("--sizes", default="", help="learning curve: comma list of training-set sizes")
A = p.parse_args()
if A.quick:
    A.train, A.heldout, A.starts, A.fit_steps, A.sizes = 8, 4, 2, 50, "4"
T0 = time.perf_counter()
problem = region.reach_region(dt=A.dt)
settings = region.OPEN_LOOP_SETTINGS


def optimum_from(target, theta0, c0):
    """`region.open_loop_optima`'s SQP for one task, from coefficients `c0` instead of zero."""
    task = eqx.tree_at(lambda q: q.constraints[0].target, problem, target)
    plan = region.task_plan(task, c0, theta0)
    dtype = c0.dtype
    start = Multipliers(jnp.zeros((2,), dtype), jnp.zeros((0,), dtype), jnp.ones((), dtype))
    steps = jnp.asarray(task.n_steps, jnp.int32)
    plan, _, effort, miss, _ = replan_one(task, settings, plan, task.state0, start, steps)
    return plan.coefficients, effort, miss


@jax.jit
def optima(targets, theta0s, starts):
    over_starts = jax.vmap(optimum_from, in_axes=(None, None, 0))
    return jax.vmap(over_starts, in_axes=(0, 0, None))(targets, theta0s, starts)


def labels(tasks, starts):
    """Per task: the optimum from rest and the least-effort reached one, their efforts,
    whether each was reached, the least-effort start's index; per start, the share reached."""
    c, effort, miss = (np.asarray(a) for a in optima(tasks.target, tasks.theta0, starts))
    reached = miss <= REACHED
    masked = np.where(reached, effort, np.inf)
    best = np.argmin(masked, axis=1)
    rows = np.arange(c.shape[0])
    return {
        "rest": c[:, 0],
        "least": c[rows, best],
        "effort_rest": effort[:, 0],
        "effort_least": effort[rows, best],
        "reached_rest": reached[:, 0],
        "reached_any": reached.any(axis=1),
        "best_start": best,
        "reached_per_start": reached.mean(axis=0),
    }


def features(tasks):
    th = np.asarray(tasks.theta0)
    x = np.asarray(tasks.target) / region.RADIUS
    return np.concatenate([x, np.cos(th), np.sin(th)], axis=1)


def fit_score(x_train, y_train, x_test, y_test, key):
    """Held-out and training RMS error over the labels' RMS, standardised per output."""
    mean, std = y_train.mean(0), y_train.std(0) + 1e-12
    yt, ye = (y_train - mean) / std, (y_test - mean) / std
    mlp = eqx.nn.MLP(x_train.shape[1], yt.shape[1], A.width, 3, jax.nn.tanh, key=key)
    opt = optax.adam(optax.cosine_decay_schedule(3e-3, A.fit_steps))
    state = opt.init(eqx.filter(mlp, eqx.is_array))

    def loss(model, x, y):
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    params, static = eqx.partition(mlp, eqx.is_array)

    @jax.jit
    def run(params, state):
        def step(carry, _):
            params, state = carry
            g = jax.grad(lambda q: loss(eqx.combine(q, static), x_train, yt))(params)
            updates, state = opt.update(g, state, params)
            return (optax.apply_updates(params, updates), state), None

        (params, _), _ = jax.lax.scan(step, (params, state), None, length=A.fit_steps)
        return params

    mlp = eqx.combine(run(params, state), static)
    rel = lambda x, y: float(jnp.sqrt(loss(mlp, x, y) / jnp.mean(y**2)))  # noqa: E731
    return {"heldout": rel(x_test, ye), "train": rel(x_train, yt)}


def line_jumps(c):
    """The largest step between neighbours along the line over the steps' RMS, and over the
    labels' RMS about their mean."""
    flat = c.reshape(c.shape[0], -1)
    steps = np.linalg.norm(np.diff(flat, axis=0), axis=1)
    spread = math.sqrt(np.mean(np.sum((flat - flat.mean(0)) ** 2, axis=1)))
    return {"max_step_over_rms_step": float(steps.max() / math.sqrt(np.mean(steps**2))),
            "max_step_over_spread": float(steps.max() / spread),
            "median_step_over_spread": float(np.median(steps) / spread)}  # fmt: skip


shape = problem.control.coefficients.shape
key = jax.random.key(A.seed)
starts = jnp.concatenate(
    [jnp.zeros((1,) + shape), A.spread * jax.random.normal(key, (A.starts - 1,) + shape)]
)
train = region.sample_tasks(A.seed, A.train, "train", 0)
heldout = region.sample_tasks(A.seed, A.heldout, "heldout", 0)
n_line = 8 if A.quick else 64
phase = -math.pi + 2 * math.pi * np.arange(n_line) / n_line
line = Tasks(
    jnp.broadcast_to(jnp.asarray([1.0, 0.5]), (n_line, 2)),
    jnp.stack([jnp.asarray(phase), jnp.full((n_line,), -math.pi / 2)], axis=1),
)
t = time.perf_counter()
L = {name: labels(tasks, starts) for name, tasks in (("train", train), ("heldout", heldout))}
L["line"] = labels(line, starts)
optima_seconds = time.perf_counter() - t
n_tasks = A.train + A.heldout + n_line
common.log(f"optima of {n_tasks} tasks x {A.starts} starts: {optima_seconds:.0f} s")

record = {
    "dt": problem.dt,
    "starts": A.starts,
    "spread": A.spread,
    "sqp_iterations": settings.n_iterations,
    "optima_seconds": optima_seconds,
    "reached_per_start": {k: L[k]["reached_per_start"] for k in L},
}
for split in ("train", "heldout"):
    lab = L[split]
    ok = lab["reached_rest"] & lab["reached_any"]
    record[split] = {
        "tasks": int(lab["rest"].shape[0]),
        "reached_from_rest": int(lab["reached_rest"].sum()),
        "reached_from_any": int(lab["reached_any"].sum()),
        "least_is_rest": float(np.mean(lab["best_start"][ok] == 0)),
        "median_effort_rest_over_least": float(np.median(
            lab["effort_rest"][ok] / lab["effort_least"][ok])),
        "p90_effort_rest_over_least": float(np.percentile(
            lab["effort_rest"][ok] / lab["effort_least"][ok], 90)),
    }  # fmt: skip
ok_train = L["train"]["reached_rest"] & L["train"]["reached_any"]
ok_held = L["heldout"]["reached_rest"] & L["heldout"]["reached_any"]
xf, xh = features(train)[ok_train], features(heldout)[ok_held]
record["fit"] = {}
sizes = sorted({int(n) for n in A.sizes.split(",") if n} | {int(ok_train.sum())})
for kind in ("rest", "least"):
    y_train = L["train"][kind][ok_train].reshape(int(ok_train.sum()), -1)
    y_held = L["heldout"][kind][ok_held].reshape(int(ok_held.sum()), -1)
    record["fit"][kind] = {}
    for n in sizes:  # the first n reached training tasks
        score = fit_score(xf[:n], y_train[:n], xh, y_held, jax.random.key(A.seed + 1))
        record["fit"][kind][n] = score
        common.log(f"fit to the {kind} labels, {n} tasks: {score}")
record["line"] = {
    kind: line_jumps(L["line"][kind]) | {"effort": L["line"][f"effort_{kind}"]}
    for kind in ("rest", "least")
}
record["line"]["best_start"] = L["line"]["best_start"]
jumps = [record["line"][k]["max_step_over_spread"] for k in ("rest", "least")]
common.log(f"line: {jumps[0]:.2f} (rest) against {jumps[1]:.2f} (least) of the spread")
name = f"reach_region_branches_{common.device_tag(quick=A.quick)}.json"
path = common.write_results(A.out, name, record, T0)
common.log(f"wrote {path}")
