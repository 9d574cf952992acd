"""Time per step and Newton iterations of Gauss6 on the quaternion chain (issue 16), for
N + 2 = 10, 10³, 10⁴ of §3.5's tetrahedra (a = 1, m = 1, Lennard-Jones ε = 5, σ = 1,
r_i = (2i, 0, 0), c1-c2 with F = (3, 0, 0), velocities and spins normal(0, 0.3 / 0.5), seed 0),
h = 0.01, float64, with two stage solvers of `jaxrigid.Gauss6` on a chain:

- `stage_jacobian` (the default, `linear_solvers.StageJacobian`): simplified Newton,
  per-body 14×14 Jacobian blocks at y₀ from 28 JVPs and `I − hλD` inverses through the
  eigenvalues of A, once per step;
- `block_diagonal`: `Newton(chord=True, linear_solver=BlockDiagonal())` on the stage
  residual (42×42 diagonal blocks from 42 JVPs of the 3-stage residual, an LU per body per
  iteration).

Each case AOT-compiles one `lax.scan` of `k` steps from the start (the first step's
predictor is `f(y₀)`, later ones extrapolate the last step's stages) and times it (median
of `repeats`), recording seconds and CPU seconds per step, compile seconds, and the Newton
iterations of every step (mean, max, mean after the first step) and failed steps. Writes
`results/chain_gauss_timing_<device>.json`.

    python bench/chain_gauss_timing.py [--quick] [--out DIR]
"""

import time

from _common import device_tag, enable_x64_for, log, parser, time_compiled, write_results

enable_x64_for("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrigid.integrators import Gauss6  # noqa: E402
from jaxrigid.linear_solvers import BlockDiagonal  # noqa: E402
from jaxrigid.models.chain_boundary import ChainBoundary  # noqa: E402
from jaxrigid.models.chain_quaternion import QuaternionChain, from_velocities  # noqa: E402
from jaxrigid.models.particle_body import tetrahedron  # noqa: E402
from jaxrigid.models.particle_chain import LennardJones, ParticleChain  # noqa: E402
from jaxrigid.newton import Newton  # noqa: E402

H = 0.01
SOLVERS = {
    "stage_jacobian": Gauss6(),
    "block_diagonal": Gauss6(newton=Newton(chord=True, linear_solver=BlockDiagonal())),
}


def section_3_5(n):
    chain = ParticleChain(tetrahedron(1.0, 1.0), LennardJones(jnp.asarray(5.0), jnp.asarray(1.0)))
    boundary = ChainBoundary("c1-c2", jnp.asarray([3.0, 0.0, 0.0]))
    r = jnp.stack([2.0 * jnp.arange(n), jnp.zeros(n), jnp.zeros(n)], -1)
    q = jnp.tile(jnp.asarray([1.0, 0.0, 0.0, 0.0]), (n, 1))
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    v, w = 0.3 * jax.random.normal(k1, (n, 3)), 0.5 * jax.random.normal(k2, (n, 3))
    return QuaternionChain(chain, boundary), from_velocities(chain, boundary, r, q, v, w)


def steps_fn(integrator, model, k):
    def run(state):
        ss = integrator.init(model, state, 0.0, H)

        def body(c, _):
            s, ss, info = integrator.step(model, *c, 0.0, H)
            return (s, ss), (info.iterations, info.result)

        (s, _), (iters, results) = jax.lax.scan(body, (state, ss), None, k)
        return s, iters, results

    return run


def main():
    args = parser(__doc__).parse_args()
    t_start = time.perf_counter()
    plan = (
        [(10, 20, 5), (100, 10, 3)] if args.quick else [(10, 40, 5), (1000, 10, 3), (10_000, 4, 1)]
    )
    rows = []
    for n, k, repeats in plan:
        model, s0 = section_3_5(n)
        for name, integrator in SOLVERS.items():
            log(f"N+2 = {n}, {name}: {k} steps × {repeats}")
            timing = time_compiled(steps_fn(integrator, model, k), (s0,), repeats)
            _, iters, results = timing.out
            iters, results = np.asarray(iters), np.asarray(results)
            row = {
                "bodies": n,
                "solver": name,
                "steps": k,
                "seconds_per_step": timing.seconds / k,
                "cpu_seconds_per_step": timing.cpu_seconds / k,
                "compile_seconds": timing.compile_seconds,
                "iterations_mean": float(iters.mean()),
                "iterations_max": int(iters.max()),
                "iterations_mean_after_first": float(iters[1:].mean()),
                "failed_steps": int((results != 0).sum()),
                **{f"timing_{key}": v for key, v in timing.record().items()},
            }
            rows.append(row)
            print(
                f"N+2 = {n:6d}  {name:15s} {1e3 * row['seconds_per_step']:10.2f} ms/step "
                f"(cpu {1e3 * row['cpu_seconds_per_step']:.2f})  "
                f"compile {row['compile_seconds']:.1f} s"
                f"  Newton it. mean {row['iterations_mean']:.2f} (after 1st "
                f"{row['iterations_mean_after_first']:.2f}) max {row['iterations_max']}"
                f"  failed {row['failed_steps']}",
                flush=True,
            )
    path = write_results(
        args.out,
        f"chain_gauss_timing_{device_tag('float64', args.quick)}.json",
        {"h": H, "rows": rows},
        t_start,
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
