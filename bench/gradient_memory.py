"""The memory of a reverse pass through `simulate`, against the number of steps.

The compiled memory (`memory_analysis()` of the jitted gradient: temporaries, the buffers a
reverse pass keeps) of `grad` of a loss on the final state of an IMIDM run of Krysl's slow
top, with respect to every model parameter (a traced scale), for n_steps from 10³ to 10⁵:
`simulate`'s default (checkpointed √n scans) against `checkpoint=False` (every step's
residuals stored). The exponent of a power-law fit of bytes against n_steps is the claim:
≤ 0.6 for the default (√n is 0.5), ≈ 1 for store-everything. Nothing runs: the programs are
only compiled, so the largest sizes cost seconds.

    python bench/gradient_memory.py
    python bench/gradient_memory.py --quick --out /tmp/b      # 10³ and 10⁴ steps only
"""

from __future__ import annotations

import time

import jax
from _common import enable_x64_for, log, loglog_slope, memory_bytes, parser, write_results

enable_x64_for("float64")

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402


def compiled_bytes(n_steps: int, checkpoint: bool) -> dict:
    case = get_case("krysl-slow-top")
    model, state0 = case.build(case.resolve())
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(p):
        scaled = eqx.combine(jax.tree_util.tree_map(lambda x: x * p, params), static)
        sol = jr.simulate(
            jr.IMIDM(), scaled, state0, 1e-3, n_steps, save_every=n_steps, checkpoint=checkpoint
        )
        return jnp.sum(sol.final_state.Pi) + jnp.sum(sol.final_state.R)

    t = time.perf_counter()
    compiled = jax.jit(jax.grad(loss)).lower(1.0).compile()
    return {
        "n_steps": n_steps,
        "checkpoint": checkpoint,
        **memory_bytes(compiled),
        "compile_seconds": time.perf_counter() - t,
    }


def exponent(rows) -> float:
    return loglog_slope([r["n_steps"] for r in rows], [r["temp_bytes"] for r in rows])


def main():
    args = parser(__doc__).parse_args()
    t_start = time.perf_counter()
    sizes = [1_000, 10_000] if args.quick else [1_000, 3_000, 10_000, 30_000, 100_000]
    out = {}
    for checkpoint in (True, False):
        rows = [compiled_bytes(n, checkpoint) for n in sizes]
        key = "checkpointed" if checkpoint else "store_everything"
        out[key] = {"rows": rows, "fitted_exponent": exponent(rows)}
        for r in rows:
            log(f"{key:17s} n = {r['n_steps']:>7d}: {r['temp_bytes'] / 1e6:10.3f} MB temporaries")
        log(f"{key:17s} fitted exponent {out[key]['fitted_exponent']:.3f}")
    out["target"] = {
        "exponent_at_most": 0.6,
        "passes": out["checkpointed"]["fitted_exponent"] <= 0.6,
    }
    name = "gradient_memory_cpu" + ("_quick" if args.quick else "") + ".json"
    log(f"wrote {write_results(args.out, name, out, t_start)}")


if __name__ == "__main__":
    main()
