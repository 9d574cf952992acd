"""Newton iterations per step of the implicit tableau methods: started from the previous step's
extrapolated stages (the solver state, `warm`) against the explicit predictor of every fresh
step (`fresh`: `init` before each step, i.e. the start of every step before the solver state
carried stages), on Kepler (Gauss6 and others), a chain (32 pendulums coupled by torsion
springs, Gauss6 and Radau IIA), the galactic orbit and the symmetric top (Gauss6), and
MKRK-gauss4 on the fast top.

Each problem runs `n` steps with the carried solver state; at every step the fresh step is
also taken from the same state, and the largest difference of the two new states (max norm,
relative to the state's) is recorded: it must stay at the level of Newton's tolerance
(eps^(3/4) ≈ 1.8e-12 on the increments; after quadratic convergence, round-off). Full Newton,
default settings, float64. Writes `results/newton_warm_start_<device>.json`.

    python bench/newton_warm_start.py [--quick] [--out DIR]
"""

import time

from _common import device_tag, enable_x64_for, log, parser, write_results

enable_x64_for("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrigid.cases import get_case  # noqa: E402
from jaxrigid.integrators import get_method  # noqa: E402
from jaxrigid.models.hamiltonian import CanonicalState, HamiltonianSystem  # noqa: E402


def pendulum_chain_hamiltonian(q, p, coupling):
    """A chain of pendulums joined by torsion springs, ends free (discrete sine-Gordon):
    `Σ p²/2 + Σ (1 − cos q) + κ Σ (q_{i+1} − q_i)²/2`."""
    return jnp.sum(p**2) / 2 + jnp.sum(1 - jnp.cos(q)) + coupling * jnp.sum(jnp.diff(q) ** 2) / 2


def pendulum_chain(n=32):
    """The chain, swinging up to 2 rad in its first mode, at rest."""
    q0 = 2.0 * np.cos(np.pi * np.arange(n) / (n - 1))
    model = HamiltonianSystem(pendulum_chain_hamiltonian, jnp.asarray(4.0))
    return model, CanonicalState(jnp.asarray(q0), jnp.zeros(n))


def case_problem(name):
    case = get_case(name)
    model, state0 = case.build(case.resolve())
    return model, state0, case.default_dt, case.family


def problems(quick):
    n = 200 if quick else 2000
    chain_model, chain0 = pendulum_chain()
    kepler = case_problem("kepler")
    return {
        "kepler gauss6": (kepler, "gauss6", n),
        "kepler gauss4": (kepler, "gauss4", n),
        "kepler radau5": (kepler, "radau5", n),
        "kepler sungeng5": (kepler, "sungeng5", n),
        "kepler implicit-midpoint": (kepler, "implicit-midpoint", n),
        "kepler stormer-verlet": (kepler, "stormer-verlet", n),
        "pendulum-chain-32 gauss6": ((chain_model, chain0, 0.1, "hamiltonian"), "gauss6", n),
        "pendulum-chain-32 radau5": ((chain_model, chain0, 0.1, "hamiltonian"), "radau5", n),
        "galactic-orbit gauss6": (case_problem("galactic-orbit"), "gauss6", n),
        "symmetric-top-euler-angles gauss6": (
            case_problem("symmetric-top-euler-angles"),
            "gauss6",
            n,
        ),
        "krysl-fast-top MKRK-gauss4": (case_problem("krysl-fast-top"), "MKRK-gauss4", n),
    }


def measure(integrator, model, state0, dt, n):
    """Per step: the warm (carried) and the fresh step's iterations, and the relative
    difference of the two new states."""

    @jax.jit
    def run(state0):
        h = jnp.asarray(dt)

        def one(carry, k):
            state, ss = carry
            t = k * h
            new, ss1, info = integrator.step(model, state, ss, t, h)
            fresh, _, fresh_info = integrator.step(
                model, state, integrator.init(model, state, t, h), t, h
            )
            leaves = jax.tree_util.tree_leaves((new, fresh))
            half = len(leaves) // 2
            scale = jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in leaves[:half]]))
            diff = jnp.max(
                jnp.stack([jnp.max(jnp.abs(a - b)) for a, b in zip(leaves[:half], leaves[half:])])
            )
            out = (info.iterations, fresh_info.iterations, diff / scale)
            ok = info.converged & fresh_info.converged
            return (new, ss1), (*out, ok)

        ss0 = integrator.init(model, state0, jnp.zeros(()), h)
        return jax.lax.scan(one, (state0, ss0), jnp.arange(n))[1]

    warm, fresh, rel, ok = (np.asarray(x) for x in run(state0))
    return {
        "steps": n,
        "all_converged": bool(ok.all()),
        "warm_mean_iterations": float(warm.mean()),
        "warm_max_iterations": int(warm.max()),
        "fresh_mean_iterations": float(fresh.mean()),
        "fresh_max_iterations": int(fresh.max()),
        "max_relative_state_difference": float(rel.max()),
    }


def main():
    args = parser(__doc__).parse_args()
    t_start = time.perf_counter()
    records = {}
    for label, ((model, state0, dt, family), method, n) in problems(args.quick).items():
        integrator = get_method(method, family)
        records[label] = rec = {
            "method": method,
            "dt": dt,
            **measure(integrator, model, state0, dt, n),
        }
        log(
            f"{label:36s} dt={dt:<5g} iterations/step warm {rec['warm_mean_iterations']:.2f} "
            f"(max {rec['warm_max_iterations']}), fresh {rec['fresh_mean_iterations']:.2f} "
            f"(max {rec['fresh_max_iterations']}); max rel. difference "
            f"{rec['max_relative_state_difference']:.1e}; converged {rec['all_converged']}"
        )
    tag = device_tag("float64", args.quick)
    path = write_results(args.out, f"newton_warm_start_{tag}.json", {"problems": records}, t_start)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
