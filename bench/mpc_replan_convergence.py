"""How far MPC's re-plans converge, and what an SQP re-plan would change (issue 35).

The problem of `tests/test_control_feedback.py`: reach-point at dt = 0.25 (20 RKMK4 steps),
B-spline plans re-planned every H = 1.0 (`--replan-every`), K = 4 scenarios of σ = 0.05.
For each re-plan solver:

- `al`: the library's (`control.mpc.replan`, the augmented Lagrangian of 2 × 20 L-BFGS
  iterations per call);
- `sqp`: a prototype written here, not in the library: the re-plan's effort is quadratic
  in the coefficients (`θ̈` is linear in them) and its constraint `x(T)[:2] = x*` has two
  rows, so each iteration solves the KKT system `[Q Jᵀ; J 0][d; λ] = −[∇f; c]` (`Q` the
  effort's constant Hessian plus a ridge of 1e-12·max diag Q for the coefficients past the
  remaining horizon, `J` from two reverse passes), with a backtracking line search on the
  ℓ1 merit `f + ν|c|₁`, `ν = 1.5 max|λ| + 1`; `--sqp-iterations` per call,

it writes the open-loop optimum's effort and miss after each cold-started call at `t = 0`
(`--calls`, as the test's fixture does), and then, per scenario seed, the closed loop's and
the replayed open loop's misses, their median ratio, the closed loop's efforts and the
largest miss any re-plan predicted (a re-plan that converged predicts ≤ 1e-3, the
tolerance). Writes `results/mpc_replan_convergence_<device>.json`.

    python bench/mpc_replan_convergence.py [--seeds 0,1,2] [--replan-every 1.0]
"""

from __future__ import annotations

import time

import _common as common
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)

from jaxrigid.control import get_problem, mpc  # noqa: E402
from jaxrigid.control.scenarios import draw_scenarios, replay  # noqa: E402

p = common.parser(__doc__)
p.add_argument("--seeds", default="0,1,2")
p.add_argument("--replan-every", type=float, default=1.0)
p.add_argument("--calls", type=int, default=12, help="cold-start calls of the AL at t = 0")
p.add_argument("--sqp-calls", type=int, default=3)
p.add_argument("--sqp-iterations", type=int, default=8)
A = p.parse_args()
if A.quick:
    A.seeds, A.calls, A.sqp_calls = "0", 2, 1
K, SIGMA, H = 4, 0.05, A.replan_every
LIBRARY_REPLAN = mpc._replan_one


def sqp_replan_one(problem, settings, plan, state, multipliers, remaining):
    """The prototype SQP re-plan (the module's docstring); `settings` unused."""
    del settings
    objective = mpc._Remaining(problem, plan, state, remaining)
    shape, n, m = plan.coefficients.shape, plan.coefficients.size, multipliers.lam.shape[0]

    def f_of(x):
        return mpc.partial_effort(plan.with_coefficients(x.reshape(shape)), remaining * problem.dt)

    def c_of(x):
        return objective(x.reshape(shape))[1]

    x0 = plan.coefficients.ravel()
    Q = jax.hessian(f_of)(x0)
    Q = Q + 1e-12 * jnp.max(jnp.abs(jnp.diag(Q))) * jnp.eye(n, dtype=x0.dtype)

    def iteration(carry, _):
        x, lam = carry
        g = jax.grad(f_of)(x)
        c, vjp = jax.vjp(c_of, x)
        J = jax.vmap(lambda e: vjp(e)[0])(jnp.eye(m, dtype=x.dtype))
        kkt = jnp.block([[Q, J.T], [J, jnp.zeros((m, m), x.dtype)]])
        solution = jnp.linalg.solve(kkt, -jnp.concatenate([g, c]))
        d, lam_new = solution[:n], solution[n:]
        nu = 1.5 * jnp.max(jnp.abs(lam_new)) + 1.0
        merit0 = f_of(x) + nu * jnp.sum(jnp.abs(c))
        slope = jnp.dot(g, d) - nu * jnp.sum(jnp.abs(c))

        def merit(a):
            return f_of(x + a * d) + nu * jnp.sum(jnp.abs(c_of(x + a * d)))

        def shrink(s):
            a, m_a, k = s
            reject = ~jnp.isfinite(m_a) | (m_a > merit0 + 1e-4 * a * slope)
            return reject & (k < 10)

        def halve(s):
            a, _, k = s
            return 0.5 * a, merit(0.5 * a), k + 1

        one = jnp.asarray(1.0, x.dtype)
        a, m_a, _ = lax.while_loop(shrink, halve, (one, merit(one), 0))
        ok = jnp.isfinite(m_a)
        return (jnp.where(ok, x + a * d, x), jnp.where(ok, lam_new, lam)), None

    (x, lam), _ = lax.scan(iteration, (x0, multipliers.lam), None, length=A.sqp_iterations)
    f, c = objective(x.reshape(shape))
    out = plan.with_coefficients(x.reshape(shape))
    return out, multipliers._replace(lam=lam), f, jnp.linalg.norm(c)


def study(solver: str) -> dict:
    mpc._replan_one = LIBRARY_REPLAN if solver == "al" else sqp_replan_one
    jax.clear_caches()  # the re-plan program is built with the solver just chosen
    problem = get_problem("reach-point", dt=0.25, n_basis=mpc.basis_size(5.0, H, 8))
    plans, states = mpc._batched(problem.control, K), mpc._batched(problem.state0, K)
    mult = mpc.Multipliers(jnp.zeros((2,)), jnp.zeros((0,)), jnp.asarray(10.0))
    mult = mpc._batched(mult, K)
    t0, calls = time.perf_counter(), []
    for _ in range(A.calls if solver == "al" else A.sqp_calls):
        plans, mult, effort, miss = mpc.replan(problem, plans, states, mult, problem.n_steps)
        calls.append({"effort": float(effort[0]), "miss": float(miss[0])})
    coefficients = plans.coefficients[0]
    multipliers = jax.tree_util.tree_map(lambda a: a[0], mult)
    seeds = []
    for seed in (int(s) for s in A.seeds.split(",")):
        scenarios = draw_scenarios(seed, K, SIGMA, 2, problem.t_end)
        opened = replay(problem, coefficients, scenarios)
        closed = mpc.run_mpc(problem, coefficients, multipliers, scenarios, H)
        ol, cl = np.asarray(opened.miss), np.asarray(closed.miss)
        seeds.append({
            "seed": seed, "open_loop_miss": ol.tolist(), "closed_loop_miss": cl.tolist(),
            "median_ratio": float(np.median(cl) / np.median(ol)),
            "closed_loop_effort": np.asarray(closed.effort).tolist(),
            "largest_predicted_miss": float(np.max(np.asarray(closed.predicted_miss))),
        })  # fmt: skip
        print(solver, seeds[-1]["seed"], f"ratio {seeds[-1]['median_ratio']:.3f}",
              f"predicted ≤ {seeds[-1]['largest_predicted_miss']:.2e}", flush=True)  # fmt: skip
    return {"open_loop_calls": calls, "seeds": seeds, "seconds": time.perf_counter() - t0}


T0 = time.perf_counter()
record = {"K": K, "sigma": SIGMA, "replan_every": H, "dt": 0.25,
          "sqp_iterations": A.sqp_iterations, "al": study("al"), "sqp": study("sqp")}  # fmt: skip
for solver in ("al", "sqp"):
    last = record[solver]["open_loop_calls"][-1]
    print(solver, f"open loop: effort {last['effort']:.6f}, miss {last['miss']:.2e}")
path = common.write_results(A.out, f"mpc_replan_convergence_{common.device_tag()}.json", record, T0)
print(path)
