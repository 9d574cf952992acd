"""The README's 30-second example as a new user meets it (issue 31): seconds of the first
`simulate` call and of the first `jax.grad`, in fresh processes sharing one persistent
compilation cache directory (`jaxrigid.enable_compilation_cache()`, as the README's "sharp
bits" advise): the first process builds cold, the later ones load what it compiled.

    python bench/readme_first_call.py [--processes 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import time
t0 = time.perf_counter()
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import jaxrigid as jr
jr.enable_compilation_cache()
t1 = time.perf_counter()
inertia = jnp.diag(jnp.array([0.9144, 1.098, 1.66]))
model = jr.RigidBody(inertia)
state0 = jr.RigidBodyState(R=jnp.eye(3), Pi=inertia @ jnp.array([0.45549, 0.82623, 0.03476]))
t2 = time.perf_counter()
sol = jr.simulate(jr.IMIDM(), model, state0, dt=0.01, n_steps=10_000, save_every=100)
jax.block_until_ready(sol.states)
t3 = time.perf_counter()
loss = lambda Pi0: jr.simulate(jr.IMIDM(), model, state0._replace(Pi=Pi0), 0.01, 1000,
                               save_every=1000).final_state.Pi[0]
jax.block_until_ready(jax.grad(loss)(state0.Pi))
t4 = time.perf_counter()
print(f"import {t1 - t0:.2f} s, first simulate {t3 - t2:.2f} s, first grad {t4 - t3:.2f} s")
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="jaxrigid-readme-") as cache:
        env = dict(os.environ, JAXRIGID_CACHE_DIR=cache)
        env.pop("JAXRIGID_NO_COMPILATION_CACHE", None)
        for i in range(args.processes):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
            )
            print(f"process {i + 1} ({'cold' if i == 0 else 'cached'}): {out.stdout.strip()}")


if __name__ == "__main__":
    main()
