"""What IMIDM's fast path costs a caller's `jit` to build: both runs in one program, each alone.

Under a caller's `jit`, `simulate(IMIDM(), ...)` builds the fast form and the full method's
redo in one program (`_run_program._fast_first`); called directly, the redo is built only when
a member needs it. This script builds, in one process and in this order, `jax.jit` of
`simulate(..., checks="outcome")` over the `compile_cost.py` forward ensemble (the torque-free
body, `--members` × `--steps`, Δt = 0.01, end state only; `_harness.jaxrigid_runner`) for
`IMIDM()` (both runs), `IMIDM().fast_variant()` (the fast form alone) and
`IMIDM(fast_path=False)` (the full method alone): trace, lower and compile seconds
(`jitted.trace`, `.lower`, `.compile`), StableHLO lines, and the run (median of `--repeats`
calls after a warm-up). float64.

    python bench/fast_path_build.py                      # 1024 members x 1000 steps
    python bench/fast_path_build.py --quick --out /tmp/bench

Writes `fast_path_build_<tag>.json` (`results/fast_path_build_cpu.json`).
"""

from __future__ import annotations

import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

from _common import device_tag, log, parser, write_results  # noqa: E402
from _harness import TorqueFree, jaxrigid_runner  # noqa: E402

import jaxrigid  # noqa: E402

VARIANTS = {
    "IMIDM() (both runs)": lambda: jaxrigid.IMIDM(),
    "fast form alone": lambda: jaxrigid.IMIDM().fast_variant(),
    "full method alone": lambda: jaxrigid.IMIDM(fast_path=False),
}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--members", type=int, default=1024)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if args.quick:
        args.members, args.steps, args.repeats = 16, 50, 1
    t_start = time.perf_counter()
    problem = TorqueFree("float64")
    ens = problem.ensemble(args.members)
    jax.jit(lambda x: x + 1).lower(1.0).compile()  # XLA's start-up charged to no entry
    rows = {}
    for name, make in VARIANTS.items():
        fn = jaxrigid_runner(problem, make(), 0.01, args.steps, checks="outcome")
        t0 = time.perf_counter()
        traced = fn.trace(ens.R, ens.Pi)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        compiled = lowered.compile()
        t3 = time.perf_counter()
        jax.block_until_ready(compiled(ens.R, ens.Pi))
        runs = []
        for _ in range(args.repeats):
            a = time.perf_counter()
            jax.block_until_ready(compiled(ens.R, ens.Pi))
            runs.append(time.perf_counter() - a)
        rows[name] = {
            "trace": t1 - t0,
            "lower": t2 - t1,
            "compile": t3 - t2,
            "build": t3 - t0,
            "stablehlo_lines": lowered.as_text().count("\n"),
            "run": statistics.median(runs),
        }
        log(f"{name:22s} " + ", ".join(f"{k} {v:.3f}" for k, v in rows[name].items()))
    record = {"members": args.members, "steps": args.steps, "dt": 0.01, "variants": rows}
    tag = device_tag(quick=args.quick)
    path = write_results(args.out, f"fast_path_build_{tag}.json", record, t_start)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
