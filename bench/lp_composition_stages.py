"""LP-split's compositions: the fused form (kicks merged at the stage boundaries, its stages
a scan; design note 24) against the generic stage-by-stage
composition (a `lax.scan` over the LP-split steps), issue 17.

On the Coulomb wall (a potential: kicks between the stages), for each scheme and ensemble
size: microseconds per member and step of `simulate` (compiled ahead of time, warmed up,
interleaved repeats, median), the compile seconds of the run and of its `jax.grad` with
respect to the initial momenta, and the largest difference of the two forms' final states
(they are one method: round-off). Float64. Writes `results/lp_composition_stages_<device>.json`.

    python bench/lp_composition_stages.py [--quick] [--out DIR]
"""

import time

from _common import (
    aot_compile,
    device_tag,
    enable_x64_for,
    log,
    parser,
    time_interleaved,
    write_results,
)

enable_x64_for("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402
from jaxrigid.integrators import LiePoissonSplitting, compose  # noqa: E402
from jaxrigid.integrators.composition import AbstractComposition, composition_class  # noqa: E402

p = parser(__doc__)
p.add_argument("--sizes", default="256,4096")
p.add_argument("--steps", type=int, default=400)
p.add_argument("--repeats", type=int, default=5)
p.add_argument("--schemes", default="triple-jump,kahan-li8,sofroniou-spaletta10")
A = p.parse_args()
SIZES = [16, 64] if A.quick else [int(x) for x in A.sizes.split(",")]
STEPS = 40 if A.quick else A.steps
SCHEMES = ("triple-jump", "kahan-li8") if A.quick else tuple(A.schemes.split(","))
DT = 0.05


def forms(scheme):
    fused = compose(LiePoissonSplitting(), scheme)
    cls = type(fused)
    generic = composition_class(
        cls.member_classes, cls.fractions, cls.order, cls.name, cls.reference, AbstractComposition
    )(fused.integrators)
    return {"fused": fused, "generic": generic}


def ensemble(model, state0, members):
    rng = np.random.default_rng(0)
    Pi = state0.Pi * (1 + 0.01 * rng.standard_normal((members, 3)))
    return jr.RigidBodyState(jnp.broadcast_to(state0.R, (members, 3, 3)), jnp.asarray(Pi))


def main():
    t_start = time.perf_counter()
    case = get_case("krysl-coulomb-wall")
    model, state0 = case.build(case.resolve())
    rows = []
    for scheme in SCHEMES:
        methods = forms(scheme)
        for members in SIZES:
            states = ensemble(model, state0, members)
            runs, compile_s, grad_compile_s = {}, {}, {}
            for name, method in methods.items():

                def run(s, method=method):
                    return jr.simulate(method, model, s, DT, STEPS, save_every=STEPS).final_state

                def loss(Pi, method=method):
                    s = jr.RigidBodyState(states.R[:1], Pi)
                    final = jr.simulate(method, model, s, DT, 10, save_every=10).final_state
                    return jnp.sum(final.R)

                runs[name], compile_s[name] = aot_compile(run, states)
                _, grad_compile_s[name] = aot_compile(jax.grad(loss), states.Pi[:1])
            timings = time_interleaved(runs, (states,), A.repeats)
            finals = {k: f(states) for k, f in runs.items()}
            diff = max(
                float(jnp.max(jnp.abs(finals["fused"].R - finals["generic"].R))),
                float(jnp.max(jnp.abs(finals["fused"].Pi - finals["generic"].Pi))),
            )
            row = {"scheme": scheme, "members": members, "steps": STEPS, "dt": DT}
            for name in methods:
                us = timings[name].seconds / (members * STEPS) * 1e6
                row[name] = {
                    "us_per_member_step": us,
                    "compile_seconds": compile_s[name],
                    "grad_compile_seconds": grad_compile_s[name],
                    "timing": timings[name].record(),
                }
            row["speedup_fused_vs_generic"] = (
                row["generic"]["us_per_member_step"] / row["fused"]["us_per_member_step"]
            )
            row["max_final_state_difference"] = diff
            rows.append(row)
            log(
                f"{scheme:22s} {members:6d}: fused {row['fused']['us_per_member_step']:.3f} "
                f"generic {row['generic']['us_per_member_step']:.3f} us/member-step "
                f"(x{row['speedup_fused_vs_generic']:.2f}); compile {compile_s['fused']:.1f} / "
                f"{compile_s['generic']:.1f} s, grad compile {grad_compile_s['fused']:.1f} / "
                f"{grad_compile_s['generic']:.1f} s; |difference| {diff:.1e}"
            )
    write_results(
        A.out,
        f"lp_composition_stages_{device_tag(quick=A.quick)}.json",
        {"problem": "krysl-coulomb-wall", "rows": rows},
        t_start,
    )


if __name__ == "__main__":
    main()
