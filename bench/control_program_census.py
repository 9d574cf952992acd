"""Why `jaxrigid control reach-point` built slowly (issue 31): the size of one outer
iteration of the optimiser (`control.optimise.outer_iteration`: `n_inner` L-BFGS
iterations, then the multiplier update) against one evaluation of the augmented Lagrangian and one
`jax.value_and_grad` of it — jaxpr equations (nested jaxprs counted) and `scan`s, trace
seconds, and (`--compile`) the outer iteration's XLA compile seconds. The ratio says how many
copies of the gradient program the outer iteration carries (each call site is traced and
compiled anew; XLA inlines them all). Two outer iterations: the default inner minimiser
(`control.lbfgs`, one evaluation per iteration) and `optax.lbfgs()` with its zoom line search.

    python bench/control_program_census.py [--problem reach-point] [--compile]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib
import time

import _common as common
import jax
import jax.numpy as jnp
import optax

jax.config.update("jax_enable_x64", True)

from jaxrigid.control.presets import default_settings, get_problem, initial_guesses  # noqa: E402

O = importlib.import_module("jaxrigid.control.optimise")  # the module, not the function
AL = importlib.import_module("jaxrigid.control.augmented_lagrangian")

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--problem", default="reach-point")
p.add_argument("--compile", action="store_true", help="also compile the outer iterations")
A = p.parse_args()


census = common.jaxpr_census


problem = get_problem(A.problem)
settings = default_settings(A.problem)
p0 = initial_guesses(problem, 1)[0]
carry, _ = O._initial_program(problem, p0, settings, False)
p, lam, mu, rho, _ = carry


def lagrangian(p):
    f, c, g = AL.evaluate(problem, p)
    phr = jnp.sum(jnp.square(jnp.maximum(mu + rho * g, 0.0)) - mu * mu) / (2 * rho)
    return f + jnp.dot(lam, c) + 0.5 * rho * jnp.dot(c, c) + phr


with_optax = dataclasses.replace(settings, inner=optax.lbfgs())


def outer(settings):
    return lambda c: O.outer_iteration(problem, settings, None, c, jnp.int32(0))


rows = {}
for name, fn in [
    ("lagrangian", lagrangian),
    ("value_and_grad", jax.value_and_grad(lagrangian)),
    ("outer, lbfgs", outer(settings)),
    ("outer, optax", outer(with_optax)),
]:
    arg = carry if name.startswith("outer") else p
    jax.clear_caches()  # each traced from scratch
    t = time.process_time()
    jaxpr = jax.make_jaxpr(fn)(arg)
    seconds = time.process_time() - t
    c = census(jaxpr.jaxpr, collections.Counter())
    rows[name] = sum(c.values())
    line = (
        f"{name:16s} {rows[name]:6d} equations, {c['scan']:3d} scans, {c['while']} while, "
        f"{c['cond']} cond; trace {seconds:.1f} s (process)"
    )
    if A.compile and name.startswith("outer"):
        t = time.perf_counter()
        jax.jit(fn).lower(arg).compile()
        line += f"; trace+lower+compile {time.perf_counter() - t:.1f} s (wall)"
    print(line, flush=True)
for name in ("outer, lbfgs", "outer, optax"):
    print(
        f"{A.problem}: n_inner {settings.n_inner}; {name} is "
        f"{rows[name] / rows['value_and_grad']:.2f} value_and_grads in equations"
    )
