"""Multi-start compile against run time in K (issue 14): where `control.multi_start` stops
scaling on CPU.

For each K: the AOT compile of the jitted function `multi_start` calls
(`jaxrigid.control.optimise._multi`, private) and then one call (which reuses that compile),
on `control.get_problem("reach-point", dt=0.05)` with `AugmentedLagrangian(n_outer=1,
n_inner=5)`, the settings of `control_gradients.py`'s multi-start part; the peak resident size
of the process so far. Prints one line per K (no results file: a diagnostic).

    python bench/control_multistart_compile.py 1000 2000 4000
"""

import resource
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

from jaxrigid import control  # noqa: E402

optimise_module = sys.modules["jaxrigid.control.optimise"]  # the package exports `optimise`
problem = control.get_problem("reach-point", dt=0.05)
settings = control.AugmentedLagrangian(n_outer=1, n_inner=5)
for K in map(int, sys.argv[1:] or ["10", "100", "1000"]):
    p0s = control.initial_guesses(problem, K, seed=0)
    t = time.perf_counter()
    optimise_module._multi.lower(problem, p0s, settings, None).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready(control.multi_start(problem, p0s, settings))
    call_s = time.perf_counter() - t
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux
    print(
        f"K = {K}: compile {compile_s:.1f} s, call {call_s:.1f} s, "
        f"{K * 5 / call_s:.1f} start-iterations/s, peak RSS {peak_gb:.2f} GB",
        flush=True,
    )
