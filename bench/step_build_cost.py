"""Build cost of one implicit step (issue 31, design note 31): for `IMIDM(fast_path=False)`
on `krysl-slow-top`, the jaxpr's equations (nested jaxprs counted; slices and reshapes
apart), forward and under `jax.grad`, the StableHLO lines, and trace / compile seconds.

    python bench/step_build_cost.py
"""

from __future__ import annotations

import collections
import time

import _common as common
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402

census = common.jaxpr_census


case = get_case("krysl-slow-top")
model, state0 = case.build(case.resolve())
method = jr.IMIDM(fast_path=False)


def step(s):
    return method.step(model, s, None, 0.0, 0.01)


def grad_step(s):
    return jax.grad(lambda s: jnp.sum(step(s)[0].Pi))(s)


for name, fn in (("forward", step), ("grad", grad_step)):
    jax.make_jaxpr(lambda s: fn(s))(state0)  # JAX's first-use costs (a new function: no cache hit)
    t = time.process_time()
    counts = census(jax.jit(fn).trace(state0).jaxpr.jaxpr, collections.Counter())
    trace = time.process_time() - t
    lowered = jax.jit(fn).lower(state0)
    t = time.perf_counter()
    lowered.compile()
    compile_s = time.perf_counter() - t
    print(
        f"{name}: {sum(counts.values())} equations ({counts['slice'] + counts['squeeze']} "
        f"slices+reshapes), {lowered.as_text().count(chr(10))} StableHLO lines, trace "
        f"{trace:.2f} s (process), compile {compile_s:.2f} s"
    )
