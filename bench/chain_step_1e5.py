"""One step of each chain integrator at N + 2 = 10⁵ bodies (issue 16: chains of 10⁵ bodies run):
the case `chain-tetrahedra-c1c2` with `n_bodies = 100000`, `jit(simulate)` of 2 steps of
h = 0.0025, timed on the second call. Prints one line per method (no results file: a check
that the size runs, and its time; `chain_scaling.py --sections steps` is the benchmark).

    python bench/chain_step_1e5.py
"""

import os
import time

import jax

jax.config.update("jax_enable_x64", True)

from jaxrigid.cases import get_case  # noqa: E402
from jaxrigid.integrators import METHODS_BY_FAMILY  # noqa: E402
from jaxrigid.simulation import simulate  # noqa: E402

case = get_case("chain-tetrahedra-c1c2")
for name in ("rattle", "gauss6"):
    integrator = METHODS_BY_FAMILY["chain"][name]()
    model, state0 = case.build_for(integrator)(case.resolve({"n_bodies": 100000}))

    def two_steps(m, s, integrator=integrator):
        return simulate(integrator, m, s, 0.0025, 2, save_every=2).final_state

    run = jax.jit(two_steps)
    t = time.perf_counter()
    jax.block_until_ready(run(model, state0))
    first = time.perf_counter() - t
    t = time.perf_counter()
    out = jax.block_until_ready(run(model, state0))
    seconds = time.perf_counter() - t
    finite = bool(jax.numpy.all(jax.numpy.isfinite(out.r)))
    print(
        f"{name}: N+2 = 10⁵ tetrahedra, first call {first:.1f} s, {seconds / 2:.3f} s/step, "
        f"finite {finite}, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
