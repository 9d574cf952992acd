"""Count the XLA operations of a compiled ensemble run (10⁴ members, torque-free body).

Each fusion, concatenate, dot or reduction is a pass over the ensemble on XLA:CPU, which is
what bounds the throughput of the `vmap`-ed `(…, 3)` layout (bench/README.md, target (a)).

    python bench/hlo_census.py "jr.IMIDM()"
"""

import re
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jaxrigid as jr  # noqa: E402 (after x64 is enabled)
from jaxrigid.cases import get_case  # noqa: E402

case = get_case("krysl-torque-free")
m, s = case.build(case.resolve())
ens = case.perturb(s, np.random.default_rng(0), 0.01, 10000)
name = sys.argv[1]
f = jax.jit(
    lambda R, P: (
        jr.simulate(eval(name), m, jr.RigidBodyState(R, P), 0.01, 100, save_every=100).final_state
    )
)
txt = f.lower(ens.R, ens.Pi).compile().as_text()
comps = txt.split("\n\n")
print(
    name,
    "fusions:",
    txt.count(" fusion("),
    "while:",
    txt.count(" while("),
    "reduce:",
    len(re.findall(r" reduce\(", txt)),
    "custom-call:",
    txt.count("custom-call"),
    "sin:",
    txt.count(" sine("),
    "copy:",
    txt.count(" copy("),
    "transpose:",
    txt.count(" transpose("),
    "concatenate:",
    txt.count(" concatenate("),
    "dot:",
    txt.count(" dot("),
)
