"""Newton's Jacobian: unrolled JVP columns against one `jacfwd` (issue 31, design notes 33
and 49; `jacfwd` at every size since note 49, above 3 unknowns before). For each method: a
`jit` of `simulate` over `--members` `krysl-slow-top` members × `--steps` steps (end state
only), built ahead of time (trace + lower + compile, seconds; the minimum over `--rounds`,
the two forms alternated) and run (`--repeats` calls after a warm-up, best), once with
`linear_solvers`' Jacobian as it is and once with unrolled columns up to 6 unknowns (patched
in, same process: the form before note 33, and at 3 unknowns or fewer the form before note
49); and the contract test's gradient (`jit(grad)` of a loss through four steps w.r.t. a
parameter scale and Δt, `tests/test_contracts.py`), built. Persistent cache off. Writes
`results/newton_jacobian_build_<device>.json`.

    python bench/newton_jacobian_build.py [--members 10000 --steps 200 --methods MKRK,BBTRAPWD]
    python bench/newton_jacobian_build.py --methods IMIDM,IMID,DMV-body,bEM --rounds 3
"""

from __future__ import annotations

import os

os.environ["JAXRIGID_NO_COMPILATION_CACHE"] = "1"  # builds, not cache loads

import sys  # noqa: E402
import time  # noqa: E402

import _common as common  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jaxrigid as jr  # noqa: E402
from jaxrigid import linear_solvers  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402
from jaxrigid.integrators import get_method  # noqa: E402

sys.path.insert(0, str(common.ROOT / "tests"))
import test_contracts  # noqa: E402

p = common.parser(__doc__)
p.add_argument("--members", type=int, default=10000)
p.add_argument("--steps", type=int, default=200)
p.add_argument("--repeats", type=int, default=3)
p.add_argument("--rounds", type=int, default=1, help="the forms alternated; the minimum of each")
p.add_argument("--methods", default="MKRK,BBTRAPWD")
A = p.parse_args()
if A.quick:
    A.members, A.steps, A.repeats, A.rounds = 256, 20, 1, 1
T0 = time.perf_counter()

CURRENT = linear_solvers.value_and_jacobian


def columns(f, x):
    """The former form: `n` unrolled JVP columns up to 6 unknowns (one linearisation, evaluated
    once per column); `DenseLU`, which shares the function since note 49, gets them too."""
    if x.shape[0] > 6:
        return CURRENT(f, x)
    r, f_jvp = jax.linearize(f, x)
    basis = jnp.eye(x.shape[0], dtype=x.dtype)
    return r, jnp.stack([f_jvp(basis[j]) for j in range(x.shape[0])], axis=-1)


def built(fn, *args):
    t = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t


def measure(name):
    case = get_case("krysl-slow-top")
    method = get_method(name)
    model, one = case.build_for(method)(case.resolve())
    states = case.perturb(one, np.random.default_rng(0), 0.01, A.members)

    def run(s):
        return jr.simulate(method, model, s, 0.01, A.steps, save_every=A.steps).final_state

    compiled, build = built(run, states)
    jax.block_until_ready(compiled(states))
    times = []
    for _ in range(A.repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(states))
        times.append(time.perf_counter() - t)
    loss, dt = test_contracts._setup("rigid_body", name, "krysl-slow-top")
    _, grad_build = built(jax.grad(loss, argnums=(0, 1)), 1.0, dt)
    return {"ensemble_build_s": build, "ensemble_run_s": min(times), "gradient_build_s": grad_build}


rows = {}
FORMS = (("jacfwd", CURRENT), ("columns", columns))
for name in A.methods.split(","):
    seen = {form: [] for form, _ in FORMS}
    for _ in range(A.rounds):  # alternated: both forms see the same machine
        for form, fn in FORMS:
            linear_solvers.value_and_jacobian = fn
            jax.clear_caches()
            seen[form].append(measure(name))
            common.log(f"{name} {form}: {seen[form][-1]}")
    linear_solvers.value_and_jacobian = CURRENT
    rows[name] = {form: {k: min(m[k] for m in ms) for k in ms[0]} for form, ms in seen.items()}
    r = rows[name]
    rows[name]["ratios_jacfwd_over_columns"] = {
        k: r["jacfwd"][k] / r["columns"][k] for k in r["jacfwd"]
    }

print(f"{'method':10s} {'form':8s} {'ens build':>9s} {'ens run':>8s} {'grad build':>10s}")
for name, r in rows.items():
    for form in ("columns", "jacfwd"):
        v = r[form]
        print(
            f"{name:10s} {form:8s} {v['ensemble_build_s']:9.2f} {v['ensemble_run_s']:8.2f} "
            f"{v['gradient_build_s']:10.2f}"
        )
path = common.write_results(
    A.out,
    f"newton_jacobian_build_{common.device_tag(quick=A.quick)}.json",
    {
        "members": A.members,
        "steps": A.steps,
        "repeats": A.repeats,
        "rounds": A.rounds,
        "rows": rows,
    },
    T0,
)
common.log(f"wrote {path}")
