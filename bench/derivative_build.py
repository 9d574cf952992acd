"""Build time of derivatives between two commits (issue 31): trace, lower and compile seconds
of `jit(value_and_grad(loss))` with respect to a model scale `p` and `dt`, a concrete initial
state (the contract tests' program, 20 steps), and of one ensemble forward program (default
`IMIDM()`, 1024 torque-free members × 1000 steps), each commit in its own fresh process,
interleaved (old, new, old, new, ...) so that a change of machine load favours neither.

Design notes 36 and 46: a loop's derivative and batching rules find which carry leaves have a
tangent (are batched) by a fixpoint that transforms the body once more for each leaf that gains
one; a run's carry, and since note 46 every loop's (Newton's, the compositions' stages, the
control programs' intervals, SQP's and Levenberg–Marquardt's iterations), starts with every
leaf having one. With `--control also` (`only`: alone), the first call of two control programs on
the reach-region ball, 2 tasks at Δt = 0.25: `region.open_loop_optima` and
`hindsight.hindsight_optima` (r = 0.05, σ = 0.05 plants), their seconds of tracing, lowering
and compiling summed from JAX's compile events (the small eager programs around them included;
a jit traced inside another's trace reports its own event too, so nested seconds count twice),
and the first call's wall time.
The older commit is checked out into a temporary `git worktree` and imported from there by
`PYTHONPATH`. Writes `results/derivative_build_<device>.json` (with `--control also|only`,
`results/derivative_build_control_<device>.json`).

    python bench/derivative_build.py --old 09a4ce8 [--rounds 2]     # ≈ 10 min
    python bench/derivative_build.py --old f0cd705 --control also   # ≈ 14 min
    python bench/derivative_build.py --old f0cd705 --control only --rounds 2   # ≈ 5 min
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import ROOT, device_tag, log, parser, worktree, write_results

PROGRAMS = (  # (method, family, case)
    ("IMIDM", "rigid_body", "krysl-slow-top"),
    ("MKRK", "rigid_body", "krysl-slow-top"),
    ("LP-split:yoshida6", "rigid_body", "krysl-coulomb-wall"),
    ("RKMK4", "rolling_ball", "rolling-ball-two-circles"),
    ("DLA", "rolling_ball", "rolling-ball-two-circles"),
    ("gauss2", "chain", "chain-tetrahedra-c1c2"),
)

CHILD = r"""
import json, sys, time
import equinox as eqx, jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.integrators import get_method

def timed(f, *args):
    t = time.perf_counter(); traced = f.trace(*args)
    t1 = time.perf_counter(); lowered = traced.lower()
    t2 = time.perf_counter(); lowered.compile()
    t3 = time.perf_counter()
    return {"trace_s": t1 - t, "lower_s": t2 - t1, "compile_s": t3 - t2}

def gradient(name, family, case_name):
    case = get_case(case_name)
    method = get_method(name, family)
    model, state0 = case.build_for(method)(case.resolve())
    params, static = eqx.partition(model, eqx.is_inexact_array)
    def scaled(p):  # a rolling ball's radius stays: its state's height must equal it
        keep = lambda path, x: x if jax.tree_util.keystr(path) == ".radius" else x * p
        return eqx.combine(jax.tree_util.tree_map_with_path(keep, params), static)
    def loss(p, h):
        sol = jr.simulate(method, scaled(p), state0, h, 20, save_every=20)
        leaves = jax.tree_util.tree_leaves(sol.final_state)
        return sum(jnp.sum(jnp.sin(1.0 + k + x)) for k, x in enumerate(leaves))
    return timed(jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), 1.0, case.default_dt)

def forward():
    case = get_case("krysl-torque-free")
    model, state0 = case.build(case.resolve())
    ens = case.perturb(state0, np.random.default_rng(0), 0.05, 1024)
    run = lambda s: jr.simulate(jr.IMIDM(), model, s, 0.01, 1000, save_every=1000).final_state
    return timed(jax.jit(run), ens)

def control():
    from jax import monitoring
    from jaxrigid.control import hindsight, region
    from jaxrigid.control.scenarios import draw_scenarios
    phases = {"jaxpr_trace_duration": "trace_s", "jaxpr_to_mlir_module_duration": "lower_s",
              "backend_compile_duration": "compile_s"}
    seconds = dict.fromkeys(phases.values(), 0.0)
    def listen(event, secs, **kwargs):
        name = event.rsplit("/", 1)[-1]
        if name in phases:
            seconds[phases[name]] += secs
    monitoring.register_event_duration_secs_listener(listen)
    def first_call(f):
        for k in seconds:
            seconds[k] = 0.0
        t = time.perf_counter()
        out = jax.block_until_ready(f())
        return dict(seconds, wall_s=time.perf_counter() - t), out
    problem = region.reach_region(dt=0.25)
    tasks = region.sample_tasks(0, 2, "heldout", 0)
    plants = draw_scenarios(1, 2, 0.05, 2, problem.t_end)
    a, optima = first_call(lambda: region.open_loop_optima(problem, tasks))
    b, _ = first_call(lambda: hindsight.hindsight_optima(
        problem, tasks, optima.coefficients, plants, 0.05))
    return {"control open_loop_optima reach-region 2 tasks": a,
            "control hindsight_optima reach-region 2 rollouts": b}

jax.jit(lambda x: x + 1).lower(1.0).compile()  # XLA's start-up, paid by no entry
out = {}
if sys.argv[2] != "only":
    out["forward IMIDM krysl-torque-free 1024x1000"] = forward()
    for name, family, case_name in json.loads(sys.argv[1]):
        out[f"gradient {name} {case_name}"] = gradient(name, family, case_name)
if sys.argv[2] != "no":
    out.update(control())
print(json.dumps(out))
"""


def child(tree: str, control: str) -> dict:
    # no persistent cache: each child compiles everything it measures
    env = dict(os.environ, PYTHONPATH=tree, JAXRIGID_NO_COMPILATION_CACHE="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(PROGRAMS), control],
        env=env,
        cwd=tempfile.gettempdir(),  # not the checkout: `-c` puts the cwd first on sys.path
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the child in {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = parser(__doc__)
    p.add_argument("--old", required=True, help="the older commit")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--control", choices=["no", "also", "only"], default="no", help="two control programs"
    )
    A = p.parse_args()
    t_start = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        worktree(A.old, os.path.join(tmp, "old")) as old_tree,
    ):
        trees = {"old": old_tree, "new": str(ROOT)}
        rows = {"old": [], "new": []}
        for k in range(A.rounds):
            for label in ("old", "new"):
                rows[label].append(child(trees[label], A.control))
                log(f"round {k} {label} done")
    table = {}
    for program in rows["new"][0]:
        entry = {}
        for label in ("old", "new"):
            for phase in ("trace_s", "lower_s", "compile_s"):
                values = [r[program][phase] for r in rows[label]]
                entry[f"{label}_{phase}"] = statistics.median(values)
        for phase in ("trace_s", "lower_s", "compile_s"):
            entry[f"ratio_{phase}"] = entry[f"new_{phase}"] / entry[f"old_{phase}"]
        phases = ("trace_s", "lower_s", "compile_s")
        build = {lab: sum(entry[f"{lab}_{ph}"] for ph in phases) for lab in ("old", "new")}
        entry["ratio_build"] = build["new"] / build["old"]
        wall = ""
        if "wall_s" in rows["new"][0][program]:  # a control program's whole first call
            for label in ("old", "new"):
                entry[f"{label}_wall_s"] = statistics.median(
                    r[program]["wall_s"] for r in rows[label]
                )
            wall = f"  wall {entry['old_wall_s']:6.2f} -> {entry['new_wall_s']:6.2f} s"
        table[program] = entry
        print(
            f"{program:60s} trace {entry['old_trace_s']:6.2f} -> {entry['new_trace_s']:6.2f} s"
            f"  build {build['old']:6.2f} -> {build['new']:6.2f} s ({entry['ratio_build']:.2f})"
            + wall
        )
    record = {
        "commits": {"old": A.old, "new": "working tree"},
        "rounds": A.rounds,
        "control": A.control,
        "programs": table,
        "raw": rows,
    }
    name = "derivative_build" if A.control == "no" else "derivative_build_control"
    path = write_results(A.out, f"{name}_{device_tag()}.json", record, t_start)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
