"""Two commits' build of the same program in ONE process: the direct `simulate` runner (the
program a concrete call builds: `--members` members of `--case` (default the torque-free
body) × `--steps` steps, 1024 × 1000, at `--dt` 0.01, the final state only or every
`--save-every` steps' state) of each commit, rebuilt alternately (`jax.clear_caches()`, then
trace, lower, compile), the minimum and median of `--rounds` each.

Separate processes (`compare_commits.py`) see this machine's load change between them: two
runs of the same commit differed by 20–30 % in compile seconds on 2026-12-04. Alternating in
one process, both commits see the same load, so a change of a few percent shows. Each commit's
`jaxrigid` package is copied into a temporary folder under its own name (`jaxrigid_old`,
`jaxrigid_new`; the package imports itself relatively) and imported from there. Writes
`results/build_in_one_process_<device>.json` (`..._every<N>_<device>.json` with `--save-every`,
`..._<case>_<method>_<device>.json` with another `--case`).

    python bench/build_in_one_process.py --old 85abc01 [--method IMIDM] [--rounds 8]
    python bench/build_in_one_process.py --old 4f83662 --members 16 --steps 100 --save-every 1
    python bench/build_in_one_process.py --old 5a5df34 --case krysl-slow-top --method IMIDM
"""

from __future__ import annotations

import importlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import device_tag, log, parser, worktree, write_results


def _runner(package: str, args, members: int, steps: int, save_every: int):
    """`(runner, args)`: the jitted runner `package`'s `simulate` builds for a concrete call,
    caught as it is called."""
    jr = importlib.import_module(package)
    run_program = importlib.import_module(f"{package}._run_program")
    cases = importlib.import_module(f"{package}.cases")
    caught = []
    build = run_program.compiled_runner

    def spy(*a, **k):
        runner = build(*a, **k)

        def call(*args):
            caught.append((runner, args))
            return runner(*args)

        return call

    run_program.compiled_runner = spy
    case = cases.get_case(args.case)
    method = jr.get_method(args.method, args.family or case.family)
    model, state = case.build_for(method)(case.resolve())
    state = case.perturb(state, np.random.default_rng(0), 0.05, members)
    jr.simulate(method, model, state, args.dt, steps, save_every=save_every)
    run_program.compiled_runner = build
    return caught[0]


def main():
    p = parser(__doc__)
    p.add_argument("--old", required=True, help="the commit to compare with")
    p.add_argument("--new", default=None, help="the other commit (default: the working tree)")
    p.add_argument("--method", default="IMIDM")
    p.add_argument("--case", default="krysl-torque-free", help="the case's model and state")
    p.add_argument("--family", default=None, help="the method's family (default: the case's)")
    p.add_argument("--dt", type=float, default=0.01)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--members", type=int, default=1024)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--save-every", type=int, default=None, help="default: the end state only")
    args = p.parse_args()
    members, steps, rounds = (16, 50, 2) if args.quick else (args.members, args.steps, args.rounds)
    save_every = args.save_every or steps
    t0 = time.perf_counter()

    import jax

    jax.config.update("jax_enable_x64", True)
    # every build from scratch: `_common` turns JAX's persistent cache on, which would serve
    # each round's compile after the first
    jax.config.update("jax_enable_compilation_cache", False)
    with tempfile.TemporaryDirectory() as tmp:
        with worktree(args.old, f"{tmp}/old") as old, worktree(args.new, f"{tmp}/new") as new:
            for name, tree in (("old", old), ("new", new)):
                shutil.copytree(
                    Path(tree) / "jaxrigid", Path(tmp) / "packages" / f"jaxrigid_{name}"
                )
        sys.path.insert(0, f"{tmp}/packages")
        programs = {
            name: _runner(f"jaxrigid_{name}", args, members, steps, save_every)
            for name in ("old", "new")
        }
        seconds: dict = {name: {"trace": [], "lower": [], "compile": []} for name in programs}
        for _ in range(rounds):
            for name, (runner, call_args) in programs.items():
                jax.clear_caches()
                t = time.perf_counter()
                traced = runner.trace(*call_args)
                t1 = time.perf_counter()
                lowered = traced.lower()
                t2 = time.perf_counter()
                lowered.compile()
                t3 = time.perf_counter()
                for stage, s in zip(("trace", "lower", "compile"), (t1 - t, t2 - t1, t3 - t2)):
                    seconds[name][stage].append(s)
    record: dict = {"old": args.old, "new": args.new or "working tree", "method": args.method}
    record |= {"case": args.case}
    record |= {"members": members, "steps": steps, "save_every": save_every, "rounds": rounds}
    record["seconds"] = {}
    for name, stages in seconds.items():
        totals = [sum(parts) for parts in zip(*stages.values())]
        record["seconds"][name] = {
            f"{stage}_{stat}_seconds": fn(v)
            for stage, v in (*stages.items(), ("build", totals))
            for stat, fn in (("min", min), ("median", statistics.median))
        }
    record["new_over_old_min"] = {
        stage: record["seconds"]["new"][f"{stage}_min_seconds"]
        / record["seconds"]["old"][f"{stage}_min_seconds"]
        for stage in ("trace", "lower", "compile", "build")
    }
    for stage, ratio in record["new_over_old_min"].items():
        log(
            f"{stage:8s} old {record['seconds']['old'][f'{stage}_min_seconds']:.3f} "
            f"new {record['seconds']['new'][f'{stage}_min_seconds']:.3f} s "
            f"(min of {rounds}): {ratio:.3f}"
        )
    every = f"every{save_every}_" if save_every != steps else ""
    case = "" if args.case == "krysl-torque-free" else f"{args.case}_{args.method}_"
    path = write_results(
        args.out,
        f"build_in_one_process_{case}{every}{device_tag(quick=args.quick)}.json",
        record,
        t0,
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
