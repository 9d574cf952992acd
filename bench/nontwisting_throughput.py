"""Throughput of the non-twisting energy–momentum scheme (EM-AVF, Gebhardt & Romero §5.2) for
ensembles of the loaded Case 3 (`nontwisting-case3`): initial ω⊥ perturbed by N(0, 1) rad/s
and load amplitudes scaled by U(0.5, 1.5) per member (member 0 unperturbed), h = 0.005, steps
from t = 0 (under the load, where Newton works hardest).

Reported per ensemble size: compile seconds, best run seconds over `--repeats` (compiled,
`block_until_ready`), body-steps per second, and the Newton iteration counts (max over the
ensemble of each member's max per step, and the ensemble mean of that max). Results go to
`bench/results/nontwisting_throughput.json` (`--quick`: 1 and 100 members, 20 steps,
`…_quick.json`; `--out DIR` elsewhere).

    python bench/nontwisting_throughput.py                 # 1 … 10⁵ members on CPU
    python bench/nontwisting_throughput.py --sizes 1000000  # on a GPU
"""

from __future__ import annotations

import json
import time

from _common import enable_x64_for, machine, parser, time_interleaved, write_results


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--sizes", default=None, help="1,10,100,1000,10000,100000 (quick 1,100)")
    p.add_argument("--steps", type=int, default=None, help="100 (quick 20)")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    args.sizes = args.sizes or ("1,100" if args.quick else "1,10,100,1000,10000,100000")
    args.steps = args.steps or (20 if args.quick else 100)

    enable_x64_for("float64")
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxrigid as jr
    from jaxrigid.cases import get_case
    from jaxrigid.cases.nontwisting import perturb_velocity
    from jaxrigid.integrators import EnergyMomentumAVF
    from jaxrigid.models import director as D

    info = machine()
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
        timing = time_interleaved({n: go}, (), args.repeats, warmup=False, statistic="best")
        best = timing[n].seconds
        its = np.asarray(sol.outcome.max_iterations)
        row = {
            "members": n,
            "steps": args.steps,
            "compile_plus_first_run_s": first,
            "run_s": best,
            "body_steps_per_s": n * args.steps / best,
            "newton_max_iterations": int(its.max()),
            "newton_mean_of_member_max": float(its.mean()),
            "all_converged": bool(np.all(sol.outcome.all_converged)),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    name = "nontwisting_throughput" + ("_quick" if args.quick else "") + ".json"
    print("wrote", write_results(args.out, name, {"machine": info, "rows": rows}))


if __name__ == "__main__":
    main()
