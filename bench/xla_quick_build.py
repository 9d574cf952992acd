"""What a quick build (`jaxrigid.quick_build`, `jaxrigid.xla_options`) saves and costs: the
build and the run of the programs `jaxrigid control reach-point` builds, and of one
DLA-midpoint program, under XLA's defaults and each quick-build profile.

Each (task, profile) runs in a fresh worker process (`--worker TASK PROFILE`, one JSON line
on stdout), so that no program built in one is reused by another; no persistent cache. The
figures are process-CPU seconds beside wall seconds: CPU seconds move less with the load of
a shared machine (its load average is recorded per worker).

Tasks:
- `optimise`: `control.optimise` on reach-point (its default settings, 10 × 40 iterations,
  the first initial guess); `build` = CPU until the first outer iteration returned (its
  three programs built, one iteration run), `call` = median CPU of the later outer calls.
- `resim_rkmk4`, `resim_dla`: the command's two runs of the optimum's controls (here the
  first initial guess's), saved at every step: RKMK4 at dt, DLA at dt/4; the first call
  (build and run) and a second (run only).
- `dla_midpoint`: `compile_cost.py`'s DLA-midpoint program (rolling-ball-passive, one
  trajectory, 1000 steps of 0.01), `jax.jit(f, compiler_options=...)` built ahead of time.

    python bench/xla_quick_build.py                 # every task, default/repeated/once
    python bench/xla_quick_build.py --tasks resim_dla --profiles default,once
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import _common as common

TASKS = ("optimise", "resim_rkmk4", "resim_dla", "dla_midpoint")
PROFILES = ("default", "repeated", "once")


def _clock():
    return time.perf_counter(), time.process_time()


def _since(start):
    w, c = _clock()
    return {"wall": w - start[0], "cpu": c - start[1]}


def _context(profile):
    import jaxrigid

    return jaxrigid.quick_build(None if profile == "default" else profile)


def worker_optimise(profile):
    import jax
    import numpy as np

    from jaxrigid.control.optimise import optimise
    from jaxrigid.control.presets import default_settings, get_problem, initial_guesses

    problem = get_problem("reach-point")
    p0 = initial_guesses(problem, 1, seed=0)[0]
    marks = []

    def callback(k, j, value, gnorm):
        if j == 0:  # called from the host after each outer iteration returned
            marks.append(_clock())

    start = _clock()
    with _context(profile):
        res = jax.block_until_ready(
            optimise(problem, p0, default_settings("reach-point"), callback=callback)
        )
    total = _since(start)
    calls = np.diff([m[1] for m in marks])
    return {
        "build_cpu": marks[0][1] - start[1],
        "build_wall": marks[0][0] - start[0],
        "call_cpu_median": float(np.median(calls)),
        "calls": len(calls) + 1,
        "total": total,
        "cost": float(res.cost),
        "residual_norm": float(res.residual_norm),
    }


def _worker_resim(profile, method):
    import jax

    from jaxrigid.cli.control_setup import REFINE, dense, method
    from jaxrigid.control.presets import get_problem, initial_guesses

    problem = get_problem("reach-point")
    p = initial_guesses(problem, 1, seed=0)[0]
    integrator, refine = (
        (None, 1) if method == "RKMK4" else (method(method, problem.model)[1], REFINE)
    )
    out = {}
    with _context(profile):
        for call in ("first", "second"):
            start = _clock()
            traj = jax.block_until_ready(dense(problem, p, integrator, refine))
            out[call] = _since(start)
    out["final_x"] = [float(v) for v in traj.x[-1]]
    return out


def worker_resim_rkmk4(profile):
    return _worker_resim(profile, "RKMK4")


def worker_resim_dla(profile):
    return _worker_resim(profile, "DLA")


def worker_dla_midpoint(profile):
    import jax

    import jaxrigid
    from jaxrigid.cases import get_case
    from jaxrigid.integrators import MidpointDLA

    case = get_case("rolling-ball-passive")
    model, s0 = case.build(case.resolve({}))
    steps, dt = 1000, 0.01

    def fn(state):
        sol = jaxrigid.simulate(
            MidpointDLA(), model, state, dt, steps, save_every=steps, checks="outcome"
        )
        return sol.final_state

    opts = None if profile == "default" else jaxrigid.quick_build_options(profile)
    start = _clock()
    lowered = jax.jit(fn).lower(s0)
    trace_lower = _since(start)
    start = _clock()
    compiled = lowered.compile(compiler_options=opts)
    compile_ = _since(start)
    jax.block_until_ready(compiled(s0))
    start = _clock()
    for _ in range(3):
        jax.block_until_ready(compiled(s0))
    run = _since(start)
    return {
        "trace_lower": trace_lower,
        "compile": compile_,
        "build_wall": trace_lower["wall"] + compile_["wall"],
        "build_cpu": trace_lower["cpu"] + compile_["cpu"],
        "run_wall_mean": run["wall"] / 3,
        "options": opts,
    }


def worker(task, profile):
    import jax

    jax.config.update("jax_enable_x64", True)
    record = globals()[f"worker_{task}"](profile)
    record.update(task=task, profile=profile, load_average=common.load_average())
    print(json.dumps(record))


def main():
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--profiles", default=",".join(PROFILES))
    args = p.parse_args()
    t0 = time.perf_counter()
    env = dict(os.environ, JAXRIGID_NO_COMPILATION_CACHE="1")
    rows = []
    for task in args.tasks.split(","):
        for profile in args.profiles.split(","):
            if task == "dla_midpoint" and profile == "repeated":
                continue  # one program built once: the "once" profile's case
            common.log(f"{task} / {profile} ...")
            cmd = [sys.executable, __file__, "--worker", task, profile]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            common.log(json.dumps(rows[-1]))
    record = {"machine": common.machine(), "rows": rows}
    common.write_results(args.out, "xla_quick_build_cpu.json", record, t0)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
