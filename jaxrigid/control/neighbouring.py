"""Neighbouring-optimal feedback: the linear feedback (F2) whose gains are the sensitivity of
the model's optimal re-plan to the measured state.

At the start `tₖ` of control interval `k` the nominal plan (the open-loop optimum's tail,
`mpc.warm_start`) is, on the model, a constrained optimum of MPC's re-plan (`mpc`): least
effort `f(p)` over the remaining horizon subject to `c(φ, p) = x(T)[:2] − x* = 0`, with `φ`
the measured features (`policies.features`: the centre, `Ω`, `q` and the rails' `θ`, `θ̇`)
and `p` the plan's coefficients. When the plant's features leave the nominal `φ̄ₖ` by `δφ`,
the re-plan's optimum moves, to first order, by the `δp` of the linearised KKT conditions
(the "neighbouring extremal" of Bryson & Ho, *Applied Optimal Control*, 1975, §6.3; Nocedal &
Wright, *Numerical Optimization*, 2nd ed., §12.8 and (18.9) for the sensitivity of a KKT point):

    [ ∇²ₚₚL   Jₚᵀ ] [δp]       [ ∇²ₚφL ]
    [ Jₚ      0   ] [δν]  = −  [ J_φ   ] δφ,      L = f + λᵀc,   Jₚ = ∂c/∂p, J_φ = ∂c/∂φ     (N1)

with `λ` the multipliers of the nominal point (`λ = −(JₚJₚᵀ)⁻¹Jₚ∇f`, least squares on `∇f +
Jₚᵀλ = 0`). So `Kₖ`, the first `rows` rows of `δp` per unit `δφ` (the rows that act on
interval `k`, `policies.active_rows`), makes `LinearFeedback` the first-order MPC:

    cₖ = c̄ₖ + Kₖ (φ − φ̄ₖ),                                                                (F2)

evaluated with one matrix–vector product per interval, no re-plan. Its gains come from the
same derivatives MPC's SQP takes (`∇²L` by forward-over-reverse differentiation of the
remaining horizon's simulation, once per task and interval, offline). The constraint's
curvature `λᵀ∇²c` is in `∇²ₚₚL` and `∇²ₚφL`: without it (Gauss–Newton) the gains are those of
a different linearisation, and where `|λ|` is large (`mpc_replan_convergence.py`) far from
the re-plan's sensitivity.

The nominal tail is the whole horizon's optimum restricted to `[tₖ, T]`, which leaves the
rails' acceleration at `tₖ` continuous; the re-plan may jump it, so its own optimum differs
slightly (MPC from the nominal state changes the effort by ≤ 5.5e-5 relative, bench/README);
the gains are taken at the nominal tail with its least-squares `λ`.

Per task: `neighbouring_feedback` takes each task's optimum (`region.open_loop_optima`, or
reach-point's) and returns the tasks' policies stacked (`PerTask`), which `closed_loop`
evaluates member by member with each rollout's own task.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import xla_options
from .._carry import tied
from .._input_checks import reported_in_outcome
from ..program_store import call_filtered
from .closed_loop import PerTask, Tasks, check_policy_problem, interval_sizes
from .mpc import _Remaining, partial_effort, warm_start
from .policies import LinearFeedback, PlantInformedFeedback, active_rows
from .region import task_plan
from .scenarios import Scenarios, advance, plant

__all__ = ["interval_gain", "neighbouring_feedback", "nominal_intervals"]


def nominal_intervals(problem, coefficients, theta0, m: int, R: int):
    """The nominal run on the model, interval by interval: `(plans, states)`, each with a
    leading axis `R`, plan `k` the optimum's tail from `tₖ = k·m·dt` (local time) and state
    `k` the model's at `tₖ` (the task's rails `theta0` at rest at `t = 0`)."""
    plan = task_plan(problem, coefficients, theta0)

    def interval(carry, _):
        plan, state = carry
        model = eqx.tree_at(problem.slot.get, problem.model, plan)
        end, _, _ = advance(problem.integrator, model, state, problem.dt, m)
        return (warm_start(plan, None, m * problem.dt), end), (plan, state)

    init = tied((plan, problem.state0), (coefficients, theta0))
    _, (plans, states) = jax.lax.scan(interval, init, None, length=R)
    return plans, states


def _with_features(plan, state, phi, n: int):
    """`(plan, state)` with the features `φ = (x[:2], Ω, q, θ, θ̇)` put in: the centre's height
    kept, `θ`, `θ̇` the plan's start."""
    state = state._replace(x=jnp.concatenate([phi[:2], state.x[2:]]), Omega=phi[2:5], q=phi[5:9])
    plan = eqx.tree_at(lambda p: (p.theta0, p.theta_dot0), plan, (phi[9 : 9 + n], phi[9 + n :]))
    return plan, state


def _replan_functions(problem, plan, state, remaining, plant_size: int = 0):
    """The re-plan around the nominal as functions of `z = (φ, δϑ, p)`: `(c, f, z0)` with
    `c(z)` (N1)'s constraint `x(T)[:2] − x*` of the remaining horizon's run from the features
    `φ` with coefficients `p` on the plant `δϑ` (`plant_size` its length, `n + 3`: the masses'
    and moments' scales less one, `policies.plant_deviation`; 0: the model, no `δϑ`), `f(z)`
    the plan's effort, `z0` the nominal `(φ̄, 0, p̄)`."""
    shape = plan.coefficients.shape
    phi0 = jnp.concatenate([state.x[:2], state.Omega, state.q, plan.theta0, plan.theta_dot0])
    F = phi0.shape[0] + plant_size
    n = shape[1]

    def split(z):
        return z[: F - plant_size], z[F - plant_size : F], jnp.reshape(z[F:], shape)

    def c(z):
        phi, d, p = split(z)
        pl, st = _with_features(plan, state, phi, n)
        pb = problem
        if plant_size:
            none = jnp.zeros((0,), d.dtype)  # no kick: `plant` reads the scales only
            told = Scenarios(1 + d[:n], 1 + d[n:], none.reshape(0, 3), none)
            pb = eqx.tree_at(lambda q: q.model, problem, plant(problem.model, told))
        return _Remaining(pb, pl, st, remaining).miss(p)

    def f(z):
        return partial_effort(plan.with_coefficients(split(z)[2]), remaining * problem.dt)

    z0 = jnp.concatenate([phi0, jnp.zeros((plant_size,), phi0.dtype), jnp.ravel(plan.coefficients)])
    return c, f, z0


def _kkt_gains(H, J, shape, rows: int):
    """(N1) solved: `K (rows·n, F)` from `H = (∇²ₚφL ∇²ₚₚL) (P, F + P)` and `J = (J_φ Jₚ)
    (2, F + P)` for coefficients of `shape (M, n)`."""
    F = J.shape[1] - H.shape[0]
    J_phi, J_p = J[:, :F], J[:, F:]
    H_pphi, H_pp = H[:, :F], H[:, F:]
    # coefficients past the remaining horizon: neither the effort nor the miss sees them
    unseen = jnp.all(J_p == 0, axis=0) & (jnp.diag(H_pp) == 0)
    H_pp = H_pp + jnp.diag(unseen.astype(H_pp.dtype))
    kkt = jnp.block([[H_pp, J_p.T], [J_p, jnp.zeros((2, 2), J_p.dtype)]])
    dp = jnp.linalg.solve(kkt, -jnp.concatenate([H_pphi, J_phi]))[: H_pp.shape[0]]
    return jnp.reshape(dp, shape + (F,))[:rows].reshape(rows * shape[1], F)


def interval_gain(problem, plan, state, remaining, rows: int, plant_size: int = 0):
    """(N1) at one interval's start: `(K (rows·n, F), c̄ (rows, n), φ̄ (F,))` for the nominal
    `plan` (local time) and model `state` with `remaining` steps of the horizon left
    (traced), the target the problem's; with `plant_size` the plant's deviation `δϑ` among
    the features (its `plant_size` columns last in `K`, zeros last in `φ̄`): the re-plan's
    sensitivity to a known plant, (F5)'s gains."""
    c, f, z0 = _replan_functions(problem, plan, state, remaining, plant_size)
    F = z0.shape[0] - plan.coefficients.size
    J = jax.jacrev(c)(z0)  # (2, F + P)
    J_p = J[:, F:]
    grad_f = jax.grad(f)(z0)[F:]
    lam = -jnp.linalg.solve(J_p @ J_p.T, J_p @ grad_f)

    def grad_L_p(z):
        return jax.grad(lambda z: f(z) + jnp.dot(lam, c(z)))(z)[F:]

    # a second trace of the simulation, after `λ`: the Hessians of both constraints from one
    # trace (`jacfwd(jacrev(c))`) build for 0.64-0.96x but run 1.1-2.2x as long
    # (bench/neighbouring_gains_build.py)
    H = jax.jacfwd(grad_L_p)(z0)  # (P, F + P): ∇²ₚφL and ∇²ₚₚL
    K = _kkt_gains(H, J, plan.coefficients.shape, rows)
    return K, plan.coefficients[:rows], z0[:F]


def _one_task(problem, m, R, rows, plant_size, coefficients, theta0, target):
    problem = eqx.tree_at(lambda p: p.constraints[0].target, problem, target)
    plans, states = nominal_intervals(problem, coefficients, theta0, m, R)
    remaining = problem.n_steps - m * jnp.arange(R, dtype=jnp.int32)

    def gain(args):
        plan, state, left = args
        return interval_gain(problem, plan, state, left, rows, plant_size)

    # one interval at a time: the second derivatives of R intervals at once would hold R
    # remaining-horizon runs' tangents in memory for every task
    return jax.lax.map(gain, (plans, states, remaining))


_BATCH = 8  # tasks whose gains are computed at once (vectorised), the rest one batch at a time


@xla_options.filter_jit
def _gains_program(problem, m, R, rows, plant_size, coefficients, theta0s, targets):
    one = lambda c, th, x: _one_task(problem, m, R, rows, plant_size, c, th, x)  # noqa: E731
    B = coefficients.shape[0]
    # `lax.map` traces a batch count that is not a multiple of its batch size twice (the
    # batches and the remainder): the tasks padded with copies of the last, traced once
    pad = -B % _BATCH if B > _BATCH else 0
    padded = [
        jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)])
        for a in (coefficients, theta0s, targets)
    ]
    with reported_in_outcome():
        out = jax.lax.map(lambda a: one(*a), tuple(padded), batch_size=_BATCH)
    return jax.tree_util.tree_map(lambda a: a[:B], out)


def neighbouring_feedback(
    problem, coefficients, tasks: Tasks, interval=None, identify_at: int | None = None
) -> PerTask:
    """Each task's (F2) with the gains (N1) around its optimum `coefficients (B, M, n)` (on
    `problem`'s model, from the task's rails at rest, reaching its target: the tasks' own
    open-loop optima), for control intervals `interval` (default `T/10`). Returns the `B`
    policies stacked (`PerTask`); with zero disturbance each one runs its optimum unchanged.
    With `identify_at`, (F5) (`PlantInformedFeedback`) whose plant gains are (N1)'s
    sensitivity to the plant too (`interval_gain`'s `plant_size`)."""
    check_policy_problem(problem)
    m, R = interval_sizes(problem, interval, None)
    rows = active_rows(problem.control, m * problem.dt)
    dtype = problem.control.coefficients.dtype
    coefficients = jnp.asarray(coefficients, dtype)
    targets, theta0s = jnp.asarray(tasks.target, dtype), jnp.asarray(tasks.theta0, dtype)
    B = coefficients.shape[0]
    if coefficients.shape[1:] != problem.control.coefficients.shape or targets.shape != (
        B, 2,
    ) or theta0s.shape != (B, problem.model.n_masses):  # fmt: skip
        raise ValueError(
            f"coefficients must be (B, {', '.join(map(str, problem.control.coefficients.shape))})"
            f" with one task each, got {coefficients.shape}, targets {targets.shape} and "
            f"theta0 {theta0s.shape}"
        )
    size = 0 if identify_at is None else problem.model.n_masses + 3
    K, c_bar, phi_bar = call_filtered(_gains_program, problem, m, R, rows, size, coefficients,
                                      theta0s, targets)  # fmt: skip
    if identify_at is None:
        return PerTask(LinearFeedback(K, c_bar, phi_bar))
    F = phi_bar.shape[-1] - size
    law = PlantInformedFeedback.from_base(LinearFeedback(K[..., :F], c_bar, phi_bar[..., :F]),
                                          identify_at)  # fmt: skip
    return PerTask(dataclasses.replace(law, plant_gains=K[..., F:]))
