"""EM-AVF's energy and spatial momentum over a long run: a random walk of rounding, or a drift
(design note 51).

The energy–momentum scheme keeps `K` and `π` exactly (Gebhardt & Romero, Theorem 5.1), so
what a float64 run shows is rounding. `EnergyMomentumAVF` on the generic tumbling body of
tests/test_energy_momentum.py (Δt = 0.05, `--steps`, every state saved), called directly and
under a caller's `jax.jit` (Δt a constant there, where XLA turns a plain division by it into
a product with the reciprocal), beside the same step with the velocity formed as before
note 51, `q̇ₙ₊₁ = fl(2/h)·Δq − q̇ₙ` (`RoundedReciprocal` below). All in one process. For
each: the largest `|K − K₀|/K₀` and `|π − π₀|/|π₀|` over the run, in eps and in `n·eps`, and
the mean and standard deviation of K's change per step, in eps. Writes
`results/em_energy_drift_<device>.json`.

    PYTHONPATH=tests python bench/em_energy_drift.py [--steps 100000]
"""

from __future__ import annotations

import time

import jax
import numpy as np
from _common import device_tag, enable_x64_for, log, parser, write_results

enable_x64_for("float64")

import jaxrigid as jr  # noqa: E402
from jaxrigid.integrators import energy_momentum as em  # noqa: E402
from jaxrigid.models import director as D  # noqa: E402

EPS = float(np.finfo(np.float64).eps)
DT = 0.05


class RoundedReciprocal(em.EnergyMomentumAVF):
    """The step before note 51: the same `Δq`, the velocity through the rounded `2/h`."""

    def step(self, model, state, solver_state, t, dt):
        residual = lambda c: em.reduced_residual(model, state, t, dt, c)  # noqa: E731
        c, info = self.newton.solve(residual, em._guess(model, state, dt))
        dq = em.increment(state, c)
        return D.DirectorState(state.q + dq, (2.0 / dt) * dq - state.v), solver_state, info


def drift(method, model, state0, n, under_jit=False):
    def run(s):
        return jr.simulate(method, model, s, DT, n)

    sol = jax.jit(run)(state0) if under_jit else run(state0)
    assert bool(sol.outcome.all_converged)
    inv = jax.vmap(model.invariants, in_axes=(None, 0))(0.0, sol.states)
    K = np.asarray(inv["K"])
    pi = np.stack([np.asarray(inv[f"pi{i}"]) for i in (1, 2, 3)], axis=-1)
    steps = np.diff(K) / K[0] / EPS
    k_max = float(np.max(np.abs(K - K[0])) / K[0] / EPS)
    pi_max = float(np.max(np.abs(pi - pi[0])) / np.linalg.norm(pi[0]) / EPS)
    return {
        "K_max_drift_eps": k_max,
        "K_final_drift_eps": float((K[-1] - K[0]) / K[0] / EPS),
        "K_max_drift_over_n_eps": k_max / n,
        "pi_max_drift_eps": pi_max,
        "K_step_mean_eps": float(steps.mean()),
        "K_step_std_eps": float(steps.std()),
        "random_walk_scale_eps": float(steps.std() * np.sqrt(n)),
    }


def main():
    from test_energy_momentum import J_GENERIC, OMEGA0, R0

    p = parser(__doc__)
    p.add_argument("--steps", type=int, default=100_000)
    args = p.parse_args()
    n = 1000 if args.quick else args.steps
    t_start = time.perf_counter()
    model = D.DirectorRigidBody.from_convected(J_GENERIC)
    state0 = D.from_rotation(R0, OMEGA0)
    rows = {}
    runs = (
        ("EM-AVF", em.EnergyMomentumAVF(), False),
        ("EM-AVF under a jit", em.EnergyMomentumAVF(), True),
        ("rounded 2/h", RoundedReciprocal(), False),
    )
    for name, method, under_jit in runs:
        rows[name] = drift(method, model, state0, n, under_jit)
        r = rows[name]
        log(
            f"{name}: max |K - K0|/K0 {r['K_max_drift_eps']:.0f} eps "
            f"({r['K_max_drift_over_n_eps']:.3f} n eps), final {r['K_final_drift_eps']:.0f} eps, "
            f"pi {r['pi_max_drift_eps']:.0f} eps; per step {r['K_step_mean_eps']:.3f} "
            f"± {r['K_step_std_eps']:.2f} eps (random walk: {r['random_walk_scale_eps']:.0f})"
        )
    name = f"em_energy_drift_{device_tag(quick=args.quick)}.json"
    record = {"config": {"steps": n, "dt": DT, "x64": True}, "runs": rows}
    log(f"wrote {write_results(args.out, name, record, t_start)}")


if __name__ == "__main__":
    main()
