"""What a step count without a block length that divides it costs a checkpointed run to build
(issue 31): `_run_program._scan` splits `n` steps into blocks of `b ≈ √n`; where no `b` within
a factor 2 of √n divides `n` (1001, 997, 37, …: `_run_program._block_length`), the `n mod b`
steps left over run in a remainder scan, a second copy of the step to trace and compile.

For each `--steps` count, in a fresh process (no trace shared between counts, no persistent
cache), one trajectory of the free body (`_harness.TorqueFree`), default `IMIDM()`, Δt = 0.01,
end state only, `checks="outcome"` — the same program as `compile_cost.py`'s `gradient`:
`jax.jit(loss)` and `jax.jit(jax.grad(loss))` w.r.t. (Π₀, the inertia's diagonal), each
staged (`.trace`, `.lower`, `.compile`, seconds), its StableHLO lines and `while` loops, and
its run (median of `--repeats` calls, round robin). Writes `checkpoint_blocks_<tag>.json`.

    python bench/checkpoint_blocks.py                        # 1000 and 1001 steps
    python bench/checkpoint_blocks.py --steps 1000,1001,997 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(steps: int, repeats: int) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from _common import time_interleaved
    from _harness import TorqueFree

    import jaxrigid
    from jaxrigid._run_program import _block_length
    from jaxrigid.models.rigid_body import RigidBody, RigidBodyState

    problem = TorqueFree("float64")
    R0, Pi0 = problem.state0.R, problem.state0.Pi
    args = (Pi0, jnp.asarray(problem.inertia_np.diagonal()))

    def loss(Pi0, d):
        sol = jaxrigid.simulate(
            jaxrigid.IMIDM(), RigidBody(jnp.diag(d)), RigidBodyState(R0, Pi0), 0.01, steps,
            save_every=steps, checks="outcome",
        )  # fmt: skip
        return jnp.sum(sol.final_state.Pi) + jnp.sum(sol.final_state.R)

    jax.jit(lambda x: x + 1).lower(1.0).compile()  # XLA's start-up, charged to neither
    programs = {"gradient": jax.jit(jax.grad(loss, argnums=(0, 1))), "forward": jax.jit(loss)}
    out, compiled = {}, {}
    for name, fn in programs.items():  # the gradient first, as in compile_cost.py
        t0 = time.perf_counter()
        traced = fn.trace(*args)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        compiled[name] = lowered.compile()
        t3 = time.perf_counter()
        text = lowered.as_text()
        out[name] = {
            "trace_seconds": t1 - t0,
            "lower_seconds": t2 - t1,
            "compile_seconds": t3 - t2,
            "build_seconds": t3 - t0,
            "stablehlo_lines": len(text.splitlines()),
            "stablehlo_while_ops": text.count("stablehlo.while"),
        }
    timings = time_interleaved(compiled, args, repeats)
    for name, timing in timings.items():
        out[name]["run_seconds"] = timing.seconds
    b = _block_length(steps)
    return {"steps": steps, "block_length": b, "remainder": steps % b, "programs": out}


def main() -> None:
    sys.path.insert(0, HERE)
    from _common import device_tag, log, parser, write_results

    p = parser(__doc__)
    p.add_argument("--steps", default="1000,1001", help="comma list of step counts")
    p.add_argument("--rounds", type=int, default=1, help="fresh processes per count, alternating")
    p.add_argument("--repeats", type=int, default=20, help="timed calls per program, median")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker is not None:
        print(json.dumps(worker(a.worker, a.repeats)))
        return
    counts = [int(s) for s in a.steps.split(",")]
    if a.quick:
        counts, a.repeats = [37, 36], 3
    t_start, records = time.perf_counter(), []
    for r in range(a.rounds):
        for n in counts:
            cmd = [sys.executable, __file__, "--worker", str(n), "--repeats", str(a.repeats)]
            env = dict(os.environ, JAXRIGID_NO_COMPILATION_CACHE="1")
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            rec = json.loads(res.stdout.strip().splitlines()[-1]) | {"round": r}
            records.append(rec)
            for name, x in rec["programs"].items():
                log(
                    f"round {r} steps {n} (b {rec['block_length']}, remainder "
                    f"{rec['remainder']}) {name}: trace {x['trace_seconds']:.2f} lower "
                    f"{x['lower_seconds']:.2f} compile {x['compile_seconds']:.2f} build "
                    f"{x['build_seconds']:.2f} s, {x['stablehlo_lines']} lines, "
                    f"{x['stablehlo_while_ops']} whiles, run {1e3 * x['run_seconds']:.2f} ms"
                )
    config = {"repeats": a.repeats, "rounds": a.rounds, "dt": 0.01, "method": "IMIDM()"}
    path = write_results(
        a.out, f"checkpoint_blocks_{device_tag(quick=a.quick)}.json",
        {"config": config, "records": records}, t_start,
    )  # fmt: skip
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
