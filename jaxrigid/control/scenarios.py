"""Disturbed scenarios: the plant (what is simulated) differing from the controller's model.

A scenario of size `σ` draws, independently,

    mᵢ ← mᵢ (1 + σ zᵢ),   λⱼ ← λⱼ (1 + σ z'ⱼ),   zᵢ, z'ⱼ ~ N(0, 1),                      (S1)

for the point masses `mᵢ` on the rails and the principal moments `λⱼ` of the ball's inertia
(`𝕀 = V diag(λ) Vᵀ` kept in its principal axes), and kicks of the body angular velocity

    Ω(tₖ⁺) = Ω(tₖ⁻) + σ eₖ,   eₖ uniform on the unit sphere,   tₖ = T/4, T/2,            (S2)

(`|σ eₖ| = σ` rad/s exactly). `Scenarios` holds `K` of them, every leaf with a leading axis
`K` (usable under `vmap`), drawn from a seed with `jax.random`. `σ = 0` is the nominal model
exactly (the scales are `1 + 0·z`, the inertia `𝕀 + V diag(0) Vᵀ`, the kicks zero).

The plant is simulated step by step with the control problem's integrator and step, the
kicks added to the state between two steps (`advance`): integrating piecewise between the kick
times, which must be whole numbers of steps. `replay` runs a given control (the open-loop
optimum) on all scenarios under one `vmap` and returns each one's miss `|x(T)[:2] − x*|` and
effort.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import xla_options
from .._carry import tied
from .._checks import _Tracer, is_integer, real_number
from .._input_checks import reported_in_outcome
from ..program_store import call_filtered
from ..results import RESULTS
from ..runs.planning import whole_steps
from .costs import FinalPosition, WeightedSum

__all__ = [
    "Replay",
    "Scenarios",
    "advance",
    "draw_scenarios",
    "kick_steps",
    "plant",
    "replay",
    "replay_one",
    "restricted",
]

KICK_FRACTIONS = (0.25, 0.5)
"""The kick times as fractions of the horizon `T` ((S2): `T/4`, `T/2`)."""


class Scenarios(eqx.Module):
    """`K` disturbed plants (S1), (S2), a pytree whose arrays have a leading axis `K`:
    `mass_scale (K, n)`, `inertia_scale (K, 3)` (per principal moment), `kicks (K, k, 3)`
    (added to `Ω` at `kick_times`), `kick_times (K, k)`. Arrays only: scenarios of another
    size `σ` (and the same count) reuse every program built for these."""

    mass_scale: jax.Array
    inertia_scale: jax.Array
    kicks: jax.Array
    kick_times: jax.Array

    @property
    def count(self) -> int:
        return self.mass_scale.shape[0]

    def member(self, i: int) -> Scenarios:
        """The `i`-th scenario, without the leading axis."""
        return jax.tree_util.tree_map(lambda a: a[i], self)


def check_sigma(sigma) -> float:
    """`sigma` (a scenario's size) as a float, or a `ValueError`: a finite number ≥ 0."""
    value = real_number("sigma", sigma)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"sigma (the disturbance) must be a finite number ≥ 0, got {sigma!r}")
    return value


def draw_scenarios(key, count: int, sigma, n_masses: int, t_end: float, dtype=None) -> Scenarios:
    """`count` scenarios (S1), (S2) of size `sigma` (a number ≥ 0, or traced inside a
    program) from the `jax.random` key (or integer seed) `key`, for a ball with `n_masses`
    point masses on the horizon `t_end`; `dtype`: jax's default float unless given. The same
    key gives the same scenarios."""
    if not is_integer(count) or isinstance(count, bool):
        raise TypeError(f"count (the number of scenarios) must be an integer, got {count!r}")
    if count < 1:
        raise ValueError(f"count (the number of scenarios) must be ≥ 1, got {count}")
    if not isinstance(sigma, _Tracer):  # a traced σ is its caller's to check (`tuning`)
        sigma = check_sigma(sigma)
    dtype = jnp.result_type(float) if dtype is None else dtype
    if is_integer(key):
        key = jax.random.key(int(key))
    k_mass, k_inertia, k_kick = jax.random.split(key, 3)
    n_kicks = len(KICK_FRACTIONS)
    z_mass = jax.random.normal(k_mass, (count, n_masses), dtype)
    z_inertia = jax.random.normal(k_inertia, (count, 3), dtype)
    # a standard normal vector normalised is uniform on the sphere (rotation invariance)
    g = jax.random.normal(k_kick, (count, n_kicks, 3), dtype)
    directions = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    times = jnp.broadcast_to(jnp.asarray(KICK_FRACTIONS, dtype) * t_end, (count, n_kicks))
    return Scenarios(1 + sigma * z_mass, 1 + sigma * z_inertia, sigma * directions, times)


PARTS = ("all", "kicks", "plant")
"""What `restricted` keeps of a scenario: all of (S1), (S2); only the kicks; only the plant."""


def restricted(scenarios: Scenarios, parts: str) -> Scenarios:
    """`scenarios` with only the kicks (S2) (`parts="kicks"`: the plant's masses and inertia
    the model's, scales 1 exactly) or only the plant (S1) (`"plant"`: no kick); `"all"`: as
    drawn. The same draws either way: which of the two a law cannot correct (bench/README,
    `neighbouring_feedback.py --disturbances`)."""
    if parts not in PARTS:
        raise ValueError(f"parts must be one of {', '.join(PARTS)}, got {parts!r}")
    if parts == "kicks":
        ones = (jnp.ones_like(scenarios.mass_scale), jnp.ones_like(scenarios.inertia_scale))
        return eqx.tree_at(lambda s: (s.mass_scale, s.inertia_scale), scenarios, ones)
    if parts == "plant":
        return eqx.tree_at(lambda s: s.kicks, scenarios, jnp.zeros_like(scenarios.kicks))
    return scenarios


def plant(model, scenario: Scenarios):
    """The model with one scenario's masses and inertia (S1): `mᵢ sᵢ`, and `𝕀 + V diag(λ
    (s' − 1)) Vᵀ` (`𝕀 = V diag(λ) Vᵀ`, `eigh`): its principal moments scaled in its own
    principal axes, the model itself when the scales are 1."""
    lam, V = jnp.linalg.eigh(model.inertia)
    dI = (V * (lam * (scenario.inertia_scale - 1))[None, :]) @ V.T
    model = eqx.tree_at(lambda m: m.masses, model, model.masses * scenario.mass_scale)
    return eqx.tree_at(lambda m: m.inertia, model, model.inertia + dI)


def kick_steps(scenarios: Scenarios, dt: float):
    """The kick times in steps of `dt`, `(K, k)` int32; `ValueError` unless each is a whole
    number of steps (`runs.whole_steps`' rule)."""
    for t in {float(t) for t in jnp.ravel(scenarios.kick_times)}:
        try:
            whole_steps(t, dt)
        except ValueError:
            raise ValueError(f"the kick time {t:g} is not a whole number of steps of {dt:g}")
    return jnp.round(scenarios.kick_times / dt).astype(jnp.int32)


def advance(
    integrator, model, state, dt, n_steps: int, *, t0=0.0, step0=0, kicks=None, at=None, upto=None
):
    """`n_steps` steps of `dt` of one plant from `state` at `t0` (the model's control read at
    `t0 + j·dt`), `step0` the first step's index on the plant's own clock; before step `j`
    every kick `kicks[i] (3,)` with `at[i] == step0 + j` is added to `Ω` ((S2): the run is
    piecewise between the kicks). Returns the final state, the centre `x` after every step
    `(n_steps, 3)`, and `ok`: every step succeeded (its `StepInfo.result`) and the final
    state is finite — a caller reports the plant's numbers only where `ok` (`replay`,
    `mpc.run_mpc`: NaN elsewhere, never a silently wrong miss). Plain `lax.scan` over the
    integrator's `step` at `t0 + j·dt`, as `simulate` takes them.

    `upto` (traced, `1 ≤ upto ≤ n_steps`; `None`: all): only the first `upto` steps are taken,
    the state after step `upto` carried unchanged through the rest (one program for every
    count). A step past `upto` is still computed under the scan (and discarded): from the
    carried state at the last taken step's time, so that it sees only inputs the run has
    already met — past `upto` the control may drive the model to overflow, and the reverse
    pass multiplies a discarded step's derivatives by zero, `0·∞ = NaN`."""
    t0 = jnp.asarray(t0, state.q.dtype)

    def one(carry, j):
        s, solver, ok = carry
        if kicks is not None:
            hit = (at == step0 + j).astype(s.Omega.dtype)
            s = s._replace(Omega=s.Omega + hit @ kicks)
        if upto is None:
            t = t0 + j * dt
            s, solver, info = integrator.step(model, s, solver, t, jnp.asarray(dt, t.dtype))
            return (s, solver, ok & (info.result == RESULTS.successful)), s.x
        taken = j < upto
        t = t0 + jnp.minimum(j, upto - 1) * dt
        new, new_solver, info = integrator.step(model, s, solver, t, jnp.asarray(dt, t.dtype))
        s, solver = jax.tree_util.tree_map(
            lambda a, b: jnp.where(taken, a, b), (new, new_solver), (s, solver)
        )
        return (s, solver, ok & (~taken | (info.result == RESULTS.successful))), s.x

    solver = integrator.init(model, state, t0, dt)
    carry = tied((state, solver, jnp.asarray(True)), (model, t0, dt, kicks, at, upto))
    (state, _, ok), xs = jax.lax.scan(one, carry, jnp.arange(n_steps))
    finite = jnp.all(
        jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(state)])
    )
    return state, xs, ok & finite


def target_of(problem):
    """The final-position target `x* (2,)` of a problem whose only constraint is a
    `FinalPosition` and whose cost has no tracking term; `ValueError` otherwise."""
    terms = problem.cost.terms if isinstance(problem.cost, WeightedSum) else (problem.cost,)
    target = problem.target_point()
    if (
        target is None
        or problem.target_path() is not None
        or problem.inequalities
        or len(problem.constraints) != 1
        or not isinstance(problem.constraints[0], FinalPosition)
        or any(isinstance(t, FinalPosition) for t in terms)
    ):
        raise ValueError(
            f"problem {problem.name}: feedback needs a final-position constraint as the only "
            "constraint (reach-point); tracking and obstacle problems are not supported yet"
        )
    return target


class Replay(NamedTuple):
    """`miss (K,)` `|x(T)[:2] − x*|` (NaN where a plant step failed, `advance`); `effort
    (K,)` (the control's, the same in every scenario); `path (K, n_steps + 1, 3)` the centre
    `x` at every step."""

    miss: jax.Array
    effort: jax.Array
    path: jax.Array


def replay_one(problem, model, target, scenario: Scenarios, at):
    """One scenario's plant (`model` with its masses and inertia) run over the whole horizon
    from the problem's initial state, kicks included: `(miss, path)`, the miss NaN where a
    plant step failed (`replay`'s, unbatched; `region.replay_optima` maps it over tasks)."""
    final, xs, ok = advance(
        problem.integrator, plant(model, scenario), problem.state0, problem.dt,
        problem.n_steps, kicks=scenario.kicks, at=at,
    )  # fmt: skip
    path = jnp.concatenate([problem.state0.x[None], xs])
    miss = jnp.linalg.norm(final.x[:2] - target)
    return jnp.where(ok, miss, jnp.nan), path


@xla_options.filter_jit
def _replay_program(problem, coefficients, scenarios: Scenarios, steps):
    model = problem.with_coefficients(coefficients)
    target = target_of(problem)
    one = lambda s, at: replay_one(problem, model, target, s, at)  # noqa: E731
    with reported_in_outcome():
        miss, path = jax.vmap(one)(scenarios, steps)
    effort = problem.control.with_coefficients(coefficients).effort()
    return Replay(miss, jnp.broadcast_to(effort, miss.shape), path)


def replay(problem, coefficients, scenarios: Scenarios) -> Replay:
    """The control with `coefficients` (e.g. the open-loop optimum) run unchanged on every
    scenario (one program, `vmap` over them), the plant stepped by the problem's integrator
    and step with the kicks between steps (`advance`)."""
    steps = kick_steps(scenarios, problem.dt)
    return call_filtered(_replay_program, problem, coefficients, scenarios, steps)
