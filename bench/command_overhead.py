"""What the `jaxrigid run` command costs beyond the bare `simulate` of the same ensemble
(issue 33: at most 10 % more, its invariants included), and both against diffrax RK4.

In one process, on the case `krysl-torque-free` (default IMIDM, the command's own ensemble:
`--ensemble N --seed 0`, and its `t_end`, `dt` and save plan), warm (every program built by a
first call), `--repeats` interleaved rounds, median wall and process-CPU seconds:

* `bare`: `simulate(IMIDM(), model, state0, dt, n_steps, save_every=n_steps)` (end state
  only), as `ensemble_throughput.py` runs it;
* `bare_saves`: the same with the command's saves (`plan_chunks(n_steps, saves_for(N))`);
* `command_run`: the command's integration (`cli.run._integrate`'s `runs.run_chunks` over
  its chunk plan, inside `stored_programs` with its program key, as `cmd_run`);
* `command_run_invariants`: that and the invariants along the saved states
  (`output.evaluate_along` as a quick build, as `cmd_run` computes them; its program stored
  by the first call and loaded by the others, as in a second process of the command);
* `diffrax_RK4`: `vmap(diffeqsolve(RK4, ConstantStepSize))` of the same ensemble, end state
  (`_harness.diffrax_runner`).

The command's writing of files and plot is not counted (it is not integration: bench/README.md
gives its seconds). Writes `results/command_overhead_<device>.json`.

    python bench/command_overhead.py                     # 16384 members, t_end = 10
    python bench/command_overhead.py --quick --out /tmp/bench
"""

from __future__ import annotations

import argparse
import time

import _common as common
import jax

common.enable_x64_for("float64")

import numpy as np  # noqa: E402
from _harness import TorqueFree, diffrax_runner  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid import runs  # noqa: E402
from jaxrigid.cli import output  # noqa: E402
from jaxrigid.cli import run as cli_run  # noqa: E402
from jaxrigid.program_store import stored_programs  # noqa: E402
from jaxrigid.runs.planning import plan_chunks, saves_for  # noqa: E402
from jaxrigid.xla_options import quick_build  # noqa: E402

p = common.parser(__doc__)
p.add_argument("--members", type=int, default=None, help="ensemble size (16384; quick 256)")
p.add_argument("--t-end", type=float, default=None, help="final time (10; quick 1)")
p.add_argument("--repeats", type=int, default=None, help="interleaved rounds (9; quick 2)")
A = p.parse_args()
A.members = A.members or (256 if A.quick else 16384)
A.t_end = A.t_end or (1.0 if A.quick else 10.0)
A.repeats = A.repeats or (2 if A.quick else 9)


def main():
    t_start = time.perf_counter()
    jr.enable_compilation_cache()
    args = argparse.Namespace(
        case="krysl-torque-free",
        method=None,
        t_end=A.t_end,
        dt=None,
        ensemble=A.members,
        seed=0,
        set=[],
        out="unused",
    )
    spec = cli_run._run_spec(args)
    model, state0 = cli_run._initial(spec)
    chunks = plan_chunks(spec.n_steps, saves_for(spec.ensemble))
    integrator, dt, n = spec.integrator, spec.dt, spec.n_steps
    problem = TorqueFree("float64")
    same = problem.ensemble(A.members)  # the harness's ensemble is the command's
    np.testing.assert_array_equal(np.asarray(same.Pi), np.asarray(state0.Pi))
    common.log(f"{A.members} members, {n} steps of {dt}, chunks {chunks}")

    key = cli_run.program_key(spec)

    def command_run():
        with stored_programs(key):
            return runs.run_chunks(integrator, model, state0, dt, chunks)

    def command_run_invariants():
        # as `cmd_run`: inside its `stored_programs` block, so that the `along` program
        # (a fresh `jax.jit` per call) is stored once and then loaded, as a second process
        # of the command loads it
        with stored_programs(key):
            run = runs.run_chunks(integrator, model, state0, dt, chunks)
            with quick_build():
                values = output.evaluate_along(model, run.ts, run.states, None)
        return run.final_state, values

    diffrax = diffrax_runner(problem, "RK4", dt, n)
    fns = {
        "bare": lambda: jr.simulate(integrator, model, state0, dt, n, save_every=n).final_state,
        "bare_saves": lambda: (
            jr.simulate(integrator, model, state0, dt, n, save_every=chunks[0][1]).final_state
        ),
        "command_run": lambda: command_run().final_state,
        "command_run_invariants": command_run_invariants,
        "diffrax_RK4": lambda: diffrax(state0.R, state0.Pi),
    }
    timings = common.time_interleaved(fns, (), A.repeats)
    records = {k: common.throughput_record(t, A.members, n, dt) for k, t in timings.items()}
    common.add_ratios(records, "bare")
    common.add_ratios(records, "diffrax_RK4")
    for name, rec in records.items():
        times_bare = rec["seconds"] / records["bare"]["seconds"]
        common.log(
            f"{name:24s} {rec['seconds']:7.3f} s  x bare {times_bare:.3f}"
            f"  body-steps/s x diffrax RK4 {rec.get('ratio_body_steps_vs_diffrax_RK4', 1.0):.2f}"
        )
    record = {
        "case": "krysl-torque-free",
        "method": integrator.name,
        "members": A.members,
        "t_end": spec.t_end,
        "dt": dt,
        "n_steps": n,
        "chunks": chunks,
        "repeats": A.repeats,
        "records": records,
        "overhead_command_run_invariants_vs_bare": (
            records["command_run_invariants"]["seconds"] / records["bare"]["seconds"] - 1
        ),
    }
    name = f"command_overhead_{common.device_tag('float64', A.quick)}.json"
    path = common.write_results(A.out, name, record, t_start)
    common.log(f"wrote {path}")


if __name__ == "__main__":
    jax.config.update("jax_numpy_rank_promotion", "allow")
    main()
