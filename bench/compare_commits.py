"""No-regression check between two commits: compile seconds and run seconds of the same jitted
`simulate` (IMIDM or `--method`, torque-free body, 10⁴ members, 1000 steps at Δt = 0.01, final
state only; `--case`: that case's model and state, the members' Δt spread over 0.9-1.1× its
default),
each commit in its own fresh process, interleaved (old, new, old, new, ...) so that a change of
machine load favours neither.

A fresh process is what a user pays for the first call: `lower` + `compile` of the first jit,
then the best and the median of 7 timed calls after one warm-up. The older commit is checked out
into a temporary `git worktree` (removed afterwards) and imported from there by `PYTHONPATH`;
only public API that both commits have is used. Writes `results/compare_commits_<device>.json`.

    python bench/compare_commits.py --old 259c734 [--rounds 3] [--members 10000]
    python bench/compare_commits.py --old e916bec --method LP-split:kahan-li8 --members 4096 \
        --steps 400    # writes compare_commits_cpu_LP-split_kahan-li8.json
    python bench/compare_commits.py --old 4ef4bcd --gradient --steps 200   # *_gradient.json

`--gradient`: `jax.jit(jax.grad(...))` of one torque-free trajectory w.r.t. Π₀ with
`simulate`'s default checks and `throw` (what a user's first gradient builds). `--direct`: the
ensemble's `simulate` called directly, as the README's examples do (it builds its own
programs); its `lower_s` and `compile_s` are JAX's trace + lowering and compile events in the
first call, `first_call_s` that call's wall time.

    python bench/compare_commits.py --old 039e699 --direct --members 1024 --rounds 4
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import device_tag, log, parser, worktree, write_results

CHILD = r"""
import json, sys, time
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import jaxrigid
from jaxrigid.models import RigidBody, RigidBodyState
n, steps, method, case_name, family = int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:6]
gradient, direct = sys.argv[6] == "1", sys.argv[7] == "1"
if gradient:  # one trajectory; jax.grad w.r.t. Pi0 with simulate's default checks and throw
    model = RigidBody(inertia=jnp.diag(jnp.array([0.9144, 1.098, 1.66])))
    integ = jaxrigid.integrators.get_method(method)
    args = (jnp.array([0.3, 1.0, -0.2]),)
    w = jnp.array([1.0, -2.0, 3.0])
    run = jax.grad(lambda Pi: jaxrigid.simulate(
        integ, model, RigidBodyState(jnp.eye(3), Pi), 0.01, steps, save_every=steps
    ).final_state.Pi @ w)
elif case_name:  # the case's model and state, the members differing in their step
    from jaxrigid.cases import get_case
    case = get_case(case_name)
    model, state0 = case.build(case.resolve())
    integ = jaxrigid.integrators.get_method(method, family or case.family)
    args = (case.default_dt * jnp.linspace(0.9, 1.1, n),)
    run = jax.vmap(lambda h: jaxrigid.simulate(
        integ, model, state0, h, steps, save_every=steps).final_state)
else:
    model = RigidBody(inertia=jnp.diag(jnp.array([0.9144, 1.098, 1.66])))
    Pi = jax.random.normal(jax.random.PRNGKey(0), (n, 3))
    args = (jnp.broadcast_to(jnp.eye(3), (n, 3, 3)), Pi)
    integ = jaxrigid.integrators.get_method(method)
    run = lambda R, Pi: jaxrigid.simulate(
        integ, model, RigidBodyState(R, Pi), 0.01, steps, save_every=steps).final_state
if direct:  # simulate builds its own programs: JAX's events of the first call
    import collections
    ev = collections.Counter()
    jax.monitoring.register_event_duration_secs_listener(
        lambda e, d, **k: ev.__setitem__(e, ev[e] + d))
    t = time.perf_counter(); jax.block_until_ready(run(*args)); first = time.perf_counter() - t
    key = "/jax/core/compile/"
    out = {"lower_s": ev[key + "jaxpr_trace_duration"] + ev[key + "jaxpr_to_mlir_module_duration"],
           "compile_s": ev[key + "backend_compile_duration"], "first_call_s": first}
    compiled = run
else:
    t = time.perf_counter(); lowered = jax.jit(run).lower(*args)
    t1 = time.perf_counter(); compiled = lowered.compile(); t2 = time.perf_counter()
    out = {"lower_s": t1 - t, "compile_s": t2 - t1}
    jax.block_until_ready(compiled(*args))
runs = []
for _ in range(7):
    s = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    runs.append(time.perf_counter() - s)
print(json.dumps(out | {"run_s": sorted(runs)}))
"""


def child(
    tree: str,
    members: int,
    steps: int,
    method: str,
    case: str,
    family: str,
    gradient: bool,
    direct: bool,
) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(members),
            str(steps),
            method,
            case,
            family,
            str(int(gradient)),
            str(int(direct)),
        ],  # fmt: skip
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(rows: list[dict]) -> dict:
    first_call = [r["lower_s"] + r["compile_s"] for r in rows]
    wall = {}  # a direct call's first-call wall time (`--direct`)
    if "first_call_s" in rows[0]:
        wall["first_call_s_median"] = statistics.median(r["first_call_s"] for r in rows)
    return wall | {
        "lower_plus_compile_s_median": statistics.median(first_call),
        "compile_s_median": statistics.median(r["compile_s"] for r in rows),
        "lower_s_median": statistics.median(r["lower_s"] for r in rows),
        "run_s_best": min(r["run_s"][0] for r in rows),
        "run_s_median_of_medians": statistics.median(r["run_s"][3] for r in rows),
        "rounds": rows,
    }


def main():
    p = parser(__doc__)
    p.add_argument("--old", required=True, help="the older commit (e.g. 259c734)")
    p.add_argument("--new", default=None, help="the newer commit (default: the working tree)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--members", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--method", default="IMIDM", help="a method name (get_method)")
    p.add_argument(
        "--case", default="", help="a case (its model and state, members over 0.9-1.1 x its dt)"
    )
    p.add_argument(
        "--family",
        default="",
        help="the method's family, where not the case's (lagrange_d_alembert_system)",
    )
    p.add_argument(
        "--gradient",
        action="store_true",
        help="jax.jit(jax.grad) of one torque-free trajectory w.r.t. Pi0 (simulate's defaults)",
    )
    p.add_argument(
        "--direct",
        action="store_true",
        help="the ensemble's simulate called directly (not under a jit of its caller)",
    )
    A = p.parse_args()
    if A.gradient and A.case:
        p.error("--gradient runs the torque-free body: no --case")
    if A.direct and (A.gradient or A.case):
        p.error("--direct runs the torque-free ensemble: no --gradient or --case")
    if A.quick:
        A.rounds, A.members, A.steps = 1, 100, 20
    t_start = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        worktree(A.old, os.path.join(tmp, "old")) as old_tree,
        worktree(A.new, os.path.join(tmp, "new")) as new_tree,
    ):
        trees = {"old": old_tree, "new": new_tree}
        rows = {"old": [], "new": []}
        for k in range(A.rounds):
            for label in ("old", "new"):
                rows[label].append(
                    child(
                        trees[label],
                        A.members,
                        A.steps,
                        A.method,
                        A.case,
                        A.family,
                        A.gradient,
                        A.direct,
                    )
                )
                r = rows[label][-1]
                log(
                    f"round {k} {label}: lower {r['lower_s']:.2f} s, compile "
                    f"{r['compile_s']:.2f} s, run best {r['run_s'][0]:.3f} s"
                )
    old, new = summary(rows["old"]), summary(rows["new"])
    ratios = {
        "first_call_lower_plus_compile": new["lower_plus_compile_s_median"]
        / old["lower_plus_compile_s_median"],
        "compile": new["compile_s_median"] / old["compile_s_median"],
        "run_best": new["run_s_best"] / old["run_s_best"],
        "run_median": new["run_s_median_of_medians"] / old["run_s_median_of_medians"],
    }
    for k, v in ratios.items():
        print(f"new / old {k:32s} {v:.3f}")
    record = {
        "commits": {"old": A.old, "new": A.new or "working tree"},
        "problem": {
            "method": A.method,
            "case": A.case or "torque-free body (diagonal inertia), random Pi",
            "members": 1 if A.gradient else A.members,
            "program": "jax.jit(jax.grad(final Pi . w)) w.r.t. Pi0"
            if A.gradient
            else "simulate called directly, final state"
            if A.direct
            else "jax.jit(jax.vmap(simulate)) final state",
            "steps": A.steps,
            "dt": "0.9-1.1 x the case's default" if A.case else 0.01,
        },
        "old": old,
        "new": new,
        "ratios_new_over_old": ratios,
    }
    parts = ([] if A.method == "IMIDM" else [A.method]) + ([A.case] if A.case else [])
    parts += ["gradient"] if A.gradient else []
    parts += ["direct"] if A.direct else []
    suffix = "".join("_" + p.replace(":", "_") for p in parts)
    path = write_results(
        A.out, f"compare_commits_{device_tag(quick=A.quick)}{suffix}.json", record, t_start
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
