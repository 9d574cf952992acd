"""Identifying a disturbed plant from what a closed loop measured: (I1), the fit a law that
learns the plant makes (`hindsight.identifying_replanner`).

At the start of each interval `k` the closed loop measures the plant's state `Xₖ` (its
quaternion, `Ω` and centre) and knows its rails' `θₖ`, `θ̇ₖ` and the plans `cⱼ` it drove.
The plant's unknowns are `p = (s, s', e₁, …)`: the point masses' scales `s (n)`, the
principal moments' scales `s' (3)` ((S1)) and the kicks `eᵢ (3)` ((S2): their times, `T/4`
and `T/2`, are the disturbance model's, their sizes are not known). At the start of interval
`s` they are fitted to the intervals observed so far by one-step-ahead least squares,

    p̂ = argmin_p  Σ_{j<s} |Φⱼ(p; Xⱼ, θⱼ, θ̇ⱼ, cⱼ) − Xⱼ₊₁|²,                              (I1)

`Φⱼ` interval `j` run (`closed_loop.drive_interval`) on the plant `p` from the measured
state: each residual one interval long, so no error is carried from one interval into the
next. Levenberg–Marquardt from the model (`s = s' = 1`, no kicks) solves it (`fit_plant`);
a kick not yet observed has no residual, and gets no step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from .._carry import tied
from .closed_loop import drive_interval
from .scenarios import Scenarios

__all__ = [
    "FIT_ITERATIONS",
    "fit_plant",
    "identified_deviation",
    "model_unknowns",
    "one_step_residual",
    "unknowns",
]

FIT_ITERATIONS = 8
"""(I1)'s Levenberg–Marquardt iterations: from exact measurements the residual is zero at the
plant, where Gauss–Newton converges quadratically from the model's `σ`-sized error."""


def model_unknowns(like: Scenarios):
    """The model's `p` (flat): scales 1, no kicks; `like` one scenario (no leading axis)."""
    return jnp.concatenate(
        [jnp.ones_like(like.mass_scale), jnp.ones_like(like.inertia_scale),
         jnp.zeros_like(jnp.ravel(like.kicks))]
    )  # fmt: skip


def unknowns(p, like: Scenarios) -> Scenarios:
    """The plant of the unknowns `p = (s, s', e₁, …)` (flat), its kicks at `like`'s times."""
    n, k = like.mass_scale.shape[0], like.kicks.shape[0]
    return Scenarios(p[:n], p[n : n + 3], jnp.reshape(p[n + 3 :], (k, 3)), like.kick_times)


def one_step_residual(problem, m: int, maps, at, X, C, start, like: Scenarios):
    """(I1)'s residual `p -> ρ`: interval `j < start` run from the measured `X[j] = (state, θ,
    θ̇)` (leading axis `R + 1`) under `C[j]` on the plant `p` (`unknowns`), minus the
    measured `X[j + 1]`'s state, flattened; zero for `j ≥ start` (not yet observed)."""
    zero = jnp.zeros_like(problem.control.coefficients)
    flat = lambda state: ravel_pytree(state)[0]  # noqa: E731
    before = jax.tree_util.tree_map(lambda a: a[:-1], X)
    after = jax.tree_util.tree_map(lambda a: a[1:], X[0])

    def residual(p):
        plant = unknowns(p, like)

        def one(j, state, theta, theta_dot, c, measured):
            c = zero.at[: c.shape[0]].set(c)
            found = drive_interval(problem, maps, m, plant, at, j, state, theta, theta_dot, c)
            return jnp.where(j < start, flat(found[0]) - flat(measured), 0.0)

        R = C.shape[0]
        return jnp.ravel(jax.vmap(one)(jnp.arange(R), *before, C, after))

    return residual


def fit_plant(residual, p0, n_iterations: int = FIT_ITERATIONS):
    """(I1) by Levenberg–Marquardt: `n_iterations` steps `(JᵀJ + μ·tr(JᵀJ)/N·I) δ = −Jᵀρ` from
    `p0 (N,)`, a step kept where it lowers `|ρ|²` (then `μ ← μ/4`, else `μ ← 4μ`; `μ₀ =
    1e-3`); `residual(p) -> ρ`, `J` by `jax.jacfwd` (`N` is small). Returns `(p, |ρ(p)|)`.
    The damping follows `JᵀJ`'s scale, so the unknowns' units do not set it; a direction no
    residual depends on gets no step."""
    N = p0.shape[0]
    eye = jnp.eye(N, dtype=p0.dtype)

    def iteration(carry, _):
        p, mu = carry
        J, rho = jax.jacfwd(lambda p: (residual(p),) * 2, has_aux=True)(p)
        A = J.T @ J
        scale = jnp.trace(A) / N
        step = -jnp.linalg.solve(A + mu * jnp.where(scale > 0, scale, 1.0) * eye, J.T @ rho)
        trial = p + step
        better = (jnp.sum(residual(trial) ** 2) < jnp.sum(rho**2)) & jnp.all(jnp.isfinite(step))
        return (jnp.where(better, trial, p), jnp.where(better, mu / 4, mu * 4)), None

    mu0 = jnp.asarray(1e-3, p0.dtype)
    (p, _), _ = jax.lax.scan(iteration, tied((p0, mu0)), None, length=n_iterations)
    return p, jnp.linalg.norm(residual(p))


def identified_deviation(problem, m: int, maps, at, X, C, like: Scenarios):
    """(I1) fitted to every interval a closed loop measured, `X` its `s + 1` measured `(state,
    θ, θ̇)` (leading axis) and `C (s, rows, n)` the plans it drove: the masses' and moments'
    scales less one, `(n + 3,)` (`policies.plant_deviation` of the fit; the kicks, fitted
    with them, are not returned). Not differentiated: from exact measurements the fit is the
    plant whatever the plans were, so its derivative with respect to them is zero."""
    X, C = jax.lax.stop_gradient((X, C))
    start = C.shape[0]
    residual = one_step_residual(problem, m, maps, at, X, C, start, like)
    p, _ = fit_plant(residual, model_unknowns(like))
    return p[: like.mass_scale.shape[0] + 3] - 1
