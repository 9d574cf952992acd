"""Pool the shards of one `neighbouring_feedback.py --shard` run into the whole run's figures.

Each shard file holds every rollout's miss and effort per controller (`rollouts`), its tasks'
indices and optima's effort; the shards must come from one run (the same `--tasks`, `--seed`,
`--dt`, `--eval-per-task` and tuning settings) and cover disjoint tasks. Per controller over
all pooled rollouts: success (miss ≤ 0.05), failed plants, median and 90th percentile miss,
median effort / the task's optimum; and which tasks of the run are still missing. With
`--identifying FILE` (a `hindsight_effort.py --identifying-only` result on the same run's
rollouts, e.g. all 1000 targets), each identifying re-planner of the file over all its
rollouts (success, median effort / optimum, the share at most 1.5×) and on the pooled ones,
rollout by rollout against each controller (median of its effort over theirs). Writes
`results/neighbouring_feedback_pooled_<device>.json` (`--name` to change).

    python bench/neighbouring_feedback_pool.py SHARD.json [SHARD.json ...] [--name NAME]
        [--identifying FILE]
"""

from __future__ import annotations

import json
import time

import _common as common
import numpy as np

SUCCESS = 0.05
SAME = ("tasks", "seed", "dt", "eval_per_task")
ADDED_LATER = {"miss_tolerance": 0.0}
"""Tuning settings a shard written before they existed ran at: their default (a file without
`miss_tolerance` was tuned by (T1) with no dead zone, `TuneSettings`' default 0)."""

p = common.parser(__doc__)
p.add_argument("shards", nargs="+")
p.add_argument("--name", default=None)
p.add_argument("--identifying", default=None, help="a hindsight_effort.py result, same rollouts")
A = p.parse_args()
T0 = time.perf_counter()
docs = [json.loads(open(f).read()) for f in A.shards]
first = docs[0]
for f, d in zip(A.shards, docs, strict=True):
    for key in SAME:
        if d[key] != first[key]:
            p.error(f"{f}: {key} = {d[key]}, not {first[key]} as in {A.shards[0]}")
    # a file written before `--disturbances` existed is of all of them
    if d.get("disturbances", "all") != first.get("disturbances", "all"):
        p.error(f"{f}: disturbances {d['disturbances']!r}, not those of {A.shards[0]}")
    tune, tune0 = d.get("tune") or {}, first.get("tune") or {}
    for key in ("steps", "scenarios", "sigma", "form", "effort_floor", "miss_tolerance"):
        here, there = (t.get(key, ADDED_LATER.get(key)) for t in (tune, tune0))
        if here != there:
            p.error(f"{f}: tune {key} = {here}, not {there}")
index = np.concatenate([np.asarray(d["task_index"]) for d in docs])
if len(set(index.tolist())) != len(index):
    p.error("the shards overlap")
E = first["eval_per_task"]
optimum = np.concatenate([np.repeat(np.asarray(d["optimum_effort"], float), E) for d in docs])
controllers = {}
for name in first["rollouts"]:
    miss = np.concatenate([np.asarray(d["rollouts"][name]["miss"], float) for d in docs])
    effort = np.concatenate([np.asarray(d["rollouts"][name]["effort"], float) for d in docs])
    controllers[name] = {
        "rollouts": int(miss.size),
        "success": float(np.mean(np.isfinite(miss) & (miss <= SUCCESS))),
        "successes": int(np.sum(np.isfinite(miss) & (miss <= SUCCESS))),
        "failed": int(np.sum(~np.isfinite(miss))),
        "median_miss": float(np.nanmedian(miss)),
        "p90_miss": float(np.nanpercentile(miss, 90)),
        "median_effort_ratio": float(np.median(effort / optimum)),
    }
    common.log(f"{name}: {controllers[name]}")
missing = sorted(set(range(first["tasks"])) - set(index.tolist()))
record = {
    "shards": A.shards,
    **{key: first[key] for key in SAME},
    "tune": {k: v for k, v in (first.get("tune") or {}).items() if k != "history"},
    "targets": int(index.size),
    "targets_missing": len(missing),
    "optima_not_reached": int(
        sum(np.sum(np.asarray(d["optimum_miss"], float) >= 1e-8) for d in docs)
    ),  # fmt: skip
    "training_seconds": float(sum((d.get("tune") or {}).get("seconds") or 0 for d in docs)),
    "controllers": controllers,
}
if A.identifying is not None:
    other = json.loads(open(A.identifying).read())
    for key in SAME:
        if other[key] != first[key]:
            p.error(f"{A.identifying}: {key} = {other[key]}, not {first[key]}")
    E = first["eval_per_task"]
    rows = (index[:, None] * E + np.arange(E)).ravel()  # the pooled rollouts, in its order
    all_optimum = np.asarray(other["rollouts"]["optimum_effort"], float)
    # rtol: a shard's optimum may stop short in its 30 iterations (target 189: 2.2e-5)
    if not np.allclose(all_optimum[rows], optimum, rtol=1e-4):
        p.error(f"{A.identifying}: not the same tasks' optima")
    record["identifying"] = {}
    for key in other["rollouts"]:
        if not (key.startswith("identifying at ") and key.endswith(" effort")):
            continue
        law = key[: -len(" effort")]
        effort = np.asarray(other["rollouts"][key], float)
        miss = np.asarray(other["rollouts"][law + " miss"], float)
        ratio = effort / all_optimum
        record["identifying"][law] = {
            "rollouts": int(miss.size),
            "success": float(np.mean(miss <= SUCCESS)),
            "median_effort_ratio": float(np.median(ratio)),
            "at_most_1.5": float(np.mean(ratio <= 1.5)),
            "on_pooled": {
                "success": float(np.mean(miss[rows] <= SUCCESS)),
                "median_effort_ratio": float(np.median(ratio[rows])),
                **{
                    f"median effort over {c}'s": float(
                        np.median(
                            effort[rows]
                            / np.concatenate(
                                [np.asarray(d["rollouts"][c]["effort"], float) for d in docs]
                            )
                        )
                    )
                    for c in first["rollouts"]
                },
            },
        }
        common.log(f"{law}: {record['identifying'][law]}")
name = A.name or f"neighbouring_feedback_pooled_{common.device_tag()}"
common.log(f"wrote {common.write_results(A.out, name + '.json', record, T0)}")
