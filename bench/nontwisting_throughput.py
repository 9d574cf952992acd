"""Throughput of the non-twisting energy–momentum scheme (EM-AVF, Gebhardt & Romero §5.2) for
ensembles of the loaded Case 3 (`nontwisting-case3`): initial ω⊥ perturbed by N(0, 1) rad/s
and load amplitudes scaled by U(0.5, 1.5) per member (member 0 unperturbed), h = 0.005, steps
from t = 0 (under the load, where Newton works hardest).

Reported per ensemble size: compile seconds, best run seconds over `--repeats` (compiled,
`block_until_ready`), body-steps per second, and the Newton iteration counts (max over the
ensemble of each member's max per step, and the ensemble mean of that max). Results go to
`bench/results/nontwisting_throughput.json`.

    python bench/nontwisting_throughput.py                 # 1 … 10⁵ members on CPU
    python bench/nontwisting_throughput.py --sizes 1000000  # on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1,10,100,1000,10000,100000")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = p.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    import jaxrigid as jr
    from jaxrigid.cases import get_case
    from jaxrigid.cases.nontwisting import perturb_velocity
    from jaxrigid.integrators import EnergyMomentumAVF
    from jaxrigid.models import director as D

    case = get_case("nontwisting-case3")
    model, state0 = case.build(case.resolve())
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rng = np.random.default_rng(0)
        states = perturb_velocity(state0, rng, 1.0, n)
        scale = rng.uniform(0.5, 1.5, n)
        scale[0] = 1.0
        amps = jnp.asarray(scale)[:, None] * model.moment.amplitudes[None, :]
        models = D.DirectorRigidBody(model.euler_inertia, D.MaterialPulseMoment(amps), True)
        axes = D.DirectorRigidBody(None, D.MaterialPulseMoment(0), True)

        def go():
            sol = jr.simulate(
                EnergyMomentumAVF(),
                models,
                states,
                0.005,
                args.steps,
                save_every=args.steps,
                model_axes=axes,
            )
            return jax.block_until_ready(sol)

        t = time.perf_counter()
        sol = go()
        first = time.perf_counter() - t
        best = min(_timed(go) for _ in range(args.repeats))
        its = np.asarray(sol.newton.max_iterations)
        row = {
            "members": n,
            "steps": args.steps,
            "compile_plus_first_run_s": first,
            "run_s": best,
            "body_steps_per_s": n * args.steps / best,
            "newton_max_iterations": int(its.max()),
            "newton_mean_of_member_max": float(its.mean()),
            "all_converged": bool(np.all(sol.newton.all_converged)),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(args.out, exist_ok=True)
    from _common import machine

    meta = {
        "command": "python bench/nontwisting_throughput.py " + " ".join(argv or sys.argv[1:]),
        "machine": machine(),
        "load_average_at_end": os.getloadavg(),
    }
    with open(os.path.join(args.out, "nontwisting_throughput.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
