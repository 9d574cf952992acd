"""What a new `n_steps` costs a direct `simulate` call (issue 31, design note 32): the default
`IMIDM()` on `krysl-torque-free`, an ensemble, called with 1000, 2000, 500 and 1000 steps at
ten saves each (`save_every = n_steps // 10`); per call the wall seconds and the number and
seconds of XLA compiles (jax.monitoring). Compare a commit before note 32 by pointing
`PYTHONPATH` at its worktree (`git worktree add /tmp/before <rev>`).

    python bench/step_count_rebuild.py [--members 1024]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxrigid as jr  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--members", type=int, default=1024)
A = p.parse_args()

compiles: list[float] = []
jax.monitoring.register_event_duration_secs_listener(
    lambda e, s, **kw: (
        compiles.append(s) if e == "/jax/core/compile/backend_compile_duration" else None
    )
)
case = get_case("krysl-torque-free")
model, one = case.build(case.resolve())
states = case.perturb(one, np.random.default_rng(0), 0.05, A.members)
print(f"jaxrigid from {jr.__file__}, {A.members} members, persistent cache off")
for n in (1000, 2000, 500, 1000):
    c0, t = len(compiles), time.perf_counter()
    sol = jax.block_until_ready(jr.simulate(jr.IMIDM(), model, states, 0.01, n, save_every=n // 10))
    wall = time.perf_counter() - t
    new = compiles[c0:]
    print(f"n_steps {n:5d}: {wall:6.2f} s wall, {len(new):3d} compiles ({sum(new):.2f} s)")
