"""The programs `compile_cost.py` builds (issue 31), each beside its diffrax peer.

`PROGRAMS[name](members, steps, dt)` returns a list of `Entry`: a jitted function, its
arguments, which library it is, and whether it is a forward run or a gradient. An entry's
`kind` pairs it with its peers (ratios are taken between entries of one kind). Every jaxrigid
program runs through `jaxrigid.simulate` inside `jax.jit`; the diffrax peers integrate the
same equations from the same initial state. float64 throughout (the worker enables x64 before
importing this). jaxrigid's programs run with `checks=CHECKS` (`"outcome"`: a failed value
check is reported in the outcome, not raised from the graph by a host callback, so that JAX's
persistent cache can keep the program; `"raise"`, simulate's default under a caller's `jit`,
is never cached: set `JAXRIGID_BENCH_CHECKS=raise` to measure it).

* `forward`: the torque-free body (`_harness.TorqueFree`), `members` members, default
  `IMIDM()` and `IMIDM(fast_path=False)` (`IMIDM_full`: one program inside the caller's `jit`
  where the default builds two), end state only; diffrax Tsit5 and RK4 with
  `ConstantStepSize` (and Tsit5 with `PIDController(1e-8, 1e-8)`, supplementary),
  `jax.vmap(diffeqsolve)` (`_harness`'s runner).
* `forward_direct`: the same ensemble, `simulate(IMIDM(), ...)` called directly, as the
  README's examples do (it builds its own programs: the fast form, and the full method's only
  where a member needs it), beside the same diffrax peers, in a worker of its own.
* `gradient`: one trajectory of the same body; `jax.jit(jax.grad(loss))` w.r.t. (Π₀, diagonal
  of 𝕀), loss = c·Π(T) + tr(R(T) C) with fixed random c, C; and `jax.jit(loss)` (its forward).
  diffrax Tsit5 and RK4, `ConstantStepSize`, `RecursiveCheckpointAdjoint` (the default).
* `rolling_ball`: `two_circles_ball()`, one trajectory; grad w.r.t. (Ω₀, control amplitudes)
  of a fixed weighting of (q, Ω, x)(T); RKMK4 against diffrax RK4 on `model.vector_field`.
* `lp_split`: `krysl-coulomb-wall`, `members` members (the case's `perturb`),
  `LP-split:yoshida6` (`get_method`, as `work_precision.py` builds it) against diffrax Dopri8
  with `PIDController(rtol = atol = 1e-10)`, vmapped.
* `dla_midpoint`: `rolling-ball-passive` (the unreduced ball, masses free on their rails), one
  trajectory, `DLA-midpoint` (`MidpointDLA`) against diffrax RK4 on the model's
  `vector_field`. `dla_midpoint_quick`: the same under `jax.jit(...,
  compiler_options=jaxrigid.quick_build_options("repeated"))`, as the docs tell a caller.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _harness import RK4, TorqueFree, diffrax_runner, hat, jaxrigid_runner

import jaxrigid
from jaxrigid.cases import get_case
from jaxrigid.integrators import MidpointDLA, get_method
from jaxrigid.integrators.rkmk import RKMK4
from jaxrigid.models.rigid_body import RigidBody, RigidBodyState
from jaxrigid.models.rolling_ball import RollingBallState, two_circles_ball

CHECKS = os.environ.get("JAXRIGID_BENCH_CHECKS", "outcome")  # see the module docstring

F64 = jnp.float64
DOPRI8_TOL = 1e-10
TSIT5_PID_TOL = 1e-8


@dataclasses.dataclass
class Entry:
    name: str
    library: str  # "jaxrigid" or "diffrax"
    kind: str  # "forward" or "gradient": ratios are taken within a kind
    fn: Callable  # jitted; a plain function where `direct`
    args: tuple
    what: str
    # a plain call that builds its own programs (`simulate` called directly, as the README's
    # examples do): timed from its first call, not staged (`compile_cost.build_direct`)
    direct: bool = False


def _weights(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(s), F64) for s in shapes]


def _solve(term, solver, y0, args, t1, dt, max_steps, controller=None, dt0=True):
    """One `diffeqsolve` from t = 0 to t1, end state only (`RecursiveCheckpointAdjoint`)."""
    return diffrax.diffeqsolve(
        term,
        solver,
        jnp.asarray(0.0, F64),
        jnp.asarray(t1, F64),
        jnp.asarray(dt, F64) if dt0 else None,
        y0,
        args=args,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=controller or diffrax.ConstantStepSize(),
        max_steps=max_steps,
        throw=False,
    )


def _last(tree):
    return jax.tree_util.tree_map(lambda x: x[-1], tree)


def _loss_pair(name, library, loss, args, what):
    """The gradient of `loss` w.r.t. every argument and `loss` itself (gradient first: it is
    built first, so that it pays for whatever traces the two share)."""
    argnums = tuple(range(len(args)))
    grad = jax.jit(jax.grad(loss, argnums=argnums))
    return [
        Entry(name, library, "gradient", grad, args, "jax.jit(jax.grad(loss)): " + what),
        Entry(name, library, "forward", jax.jit(loss), args, "jax.jit(loss): " + what),
    ]


# ------------------------------------------------------------------------------------------
# 1. The torque-free ensemble, forward.


def _direct_runner(problem, dt, steps):
    """`simulate(IMIDM(), ...)` as a user calls it, not inside a `jit` of theirs (simulate's
    default checks: their flags are outputs of its programs)."""

    def run(R, Pi):
        sol = jaxrigid.simulate(
            jaxrigid.IMIDM(), problem.model, RigidBodyState(R, Pi), dt, steps, save_every=steps
        )
        return sol.final_state.R, sol.final_state.Pi

    return run


def forward(members, steps, dt):
    problem = TorqueFree("float64")
    ens = problem.ensemble(members)
    xs = (ens.R, ens.Pi)
    fixed = diffrax.ConstantStepSize()
    what = f"{members} members x {steps} steps, dt {dt}, end state only"
    return [
        Entry(
            "IMIDM",
            "jaxrigid",
            "forward",
            jaxrigid_runner(problem, jaxrigid.IMIDM(), dt, steps, checks=CHECKS),
            xs,
            "jax.jit(simulate(IMIDM(), ...)) of (R, Pi), " + what,
        ),
        Entry(  # one program where the default builds two under a caller's jit
            "IMIDM_full",
            "jaxrigid",
            "forward",
            jaxrigid_runner(problem, jaxrigid.IMIDM(fast_path=False), dt, steps, checks=CHECKS),
            xs,
            "jax.jit(simulate(IMIDM(fast_path=False), ...)) of (R, Pi), " + what,
        ),
        Entry(
            "diffrax_Tsit5",
            "diffrax",
            "forward",
            diffrax_runner(problem, "Tsit5", dt, steps, False, fixed),
            xs,
            "vmap(diffeqsolve(Tsit5, ConstantStepSize)), " + what,
        ),
        Entry(
            "diffrax_RK4",
            "diffrax",
            "forward",
            diffrax_runner(problem, "RK4", dt, steps),
            xs,
            "vmap(diffeqsolve(RK4 tableau, ConstantStepSize)), " + what,
        ),
        Entry(
            "diffrax_Tsit5_PID",
            "diffrax",
            "forward",
            diffrax_runner(problem, "Tsit5", dt, steps),
            xs,
            f"supplementary: vmap(diffeqsolve(Tsit5, PIDController({TSIT5_PID_TOL}))), " + what,
        ),
    ]


# ------------------------------------------------------------------------------------------
# 2. One trajectory of the torque-free body, gradient w.r.t. (Π₀, inertia diagonal).


def forward_direct(members, steps, dt):
    """`forward`'s ensemble with `simulate` called directly (in its own worker process, so
    that it reuses no trace of the program under a caller's `jit`), beside the same diffrax
    peers."""
    problem = TorqueFree("float64")
    ens = problem.ensemble(members)
    xs = (ens.R, ens.Pi)
    what = f"{members} members x {steps} steps, dt {dt}, end state only"
    peers = [e for e in forward(members, steps, dt) if e.name in ("diffrax_Tsit5", "diffrax_RK4")]
    return [
        Entry(
            "IMIDM_direct",
            "jaxrigid",
            "forward",
            _direct_runner(problem, dt, steps),
            xs,
            "simulate(IMIDM(), ...) called directly (it builds its own programs: the fast "
            "form, and the full method's only for members whose fast steps failed), " + what,
            direct=True,
        ),
        *peers,
    ]


def _free_body_field(t, y, I_inv):
    R, Pi = y
    Omega = I_inv @ Pi
    return R @ hat(Omega), jnp.cross(Pi, Omega)


FREE_TERM = diffrax.ODETerm(_free_body_field)


def gradient(members, steps, dt):
    problem = TorqueFree("float64")
    R0, Pi0 = problem.state0.R, problem.state0.Pi
    d0 = jnp.asarray(problem.inertia_np.diagonal(), F64)
    c, C = _weights(1, (3,), (3, 3))
    what = f"one trajectory, {steps} steps, dt {dt}; loss = c.Pi(T) + tr(R(T) C)"

    def score(R, Pi):
        return jnp.dot(c, Pi) + jnp.trace(R @ C)

    def jaxrigid_loss(Pi0, d):
        model = RigidBody(jnp.diag(d))
        sol = jaxrigid.simulate(
            jaxrigid.IMIDM(),
            model,
            RigidBodyState(R0, Pi0),
            dt,
            steps,
            save_every=steps,
            checks=CHECKS,
        )
        return score(sol.final_state.R, sol.final_state.Pi)

    def diffrax_loss(solver):
        def loss(Pi0, d):
            I_inv = jnp.diag(1.0 / d)
            sol = _solve(FREE_TERM, solver, (R0, Pi0), I_inv, steps * dt, dt, steps + 16)
            R, Pi = _last(sol.ys)
            return score(R, Pi)

        return loss

    def method_loss(Pi0, d):
        # the forward of what the gradient differentiates: under a derivative `simulate`
        # runs the method alone, without the fast path (`simulation.simulate`)
        model = RigidBody(jnp.diag(d))
        sol = jaxrigid.simulate(
            jaxrigid.IMIDM(fast_path=False), model, RigidBodyState(R0, Pi0), dt, steps,
            save_every=steps, checks=CHECKS,
        )  # fmt: skip
        return score(sol.final_state.R, sol.final_state.Pi)

    args = (Pi0, d0)
    out = _loss_pair("IMIDM", "jaxrigid", jaxrigid_loss, args, "simulate(IMIDM()), " + what)
    desc = "jax.jit(loss): simulate(IMIDM(fast_path=False)), the method the gradient runs, "
    method = jax.jit(method_loss)
    out.append(Entry("IMIDM_method", "jaxrigid", "forward", method, args, desc + what))
    for name, solver in (("diffrax_Tsit5", diffrax.Tsit5()), ("diffrax_RK4", RK4())):
        desc = f"diffeqsolve({name[8:]}, ConstantStepSize, RecursiveCheckpointAdjoint), " + what
        out += _loss_pair(name, "diffrax", diffrax_loss(solver), args, desc)
    return out


# ------------------------------------------------------------------------------------------
# 3. The rolling ball (two circles), gradient w.r.t. (Ω₀, control amplitudes).


BALL_TERM = diffrax.ODETerm(lambda t, y, model: model.vector_field(t, y))


def rolling_ball(members, steps, dt):
    model0, state0 = two_circles_ball()
    omega0 = jnp.asarray([0.1, -0.05, 0.2], F64)
    amp0 = jnp.asarray(model0.control.amplitude, F64)
    wq, wo, wx = _weights(2, (4,), (3,), (3,))
    what = f"two_circles_ball(), one trajectory, {steps} steps, dt {dt}; grad w.r.t. (Omega0, "
    what += "amplitudes) of wq.q(T) + wo.Omega(T) + wx.x(T)"

    def setup(omega, amp):
        model = eqx.tree_at(lambda m: m.control.amplitude, model0, amp)
        return model, state0._replace(Omega=omega)

    def score(s):
        return jnp.dot(wq, s.q) + jnp.dot(wo, s.Omega) + jnp.dot(wx, s.x)

    def jaxrigid_loss(omega, amp):
        model, s0 = setup(omega, amp)
        sol = jaxrigid.simulate(RKMK4(), model, s0, dt, steps, save_every=steps, checks=CHECKS)
        return score(sol.final_state)

    def diffrax_loss(omega, amp):
        model, s0 = setup(omega, amp)
        sol = _solve(BALL_TERM, RK4(), s0, model, steps * dt, dt, steps + 16)
        return score(RollingBallState(*_last(tuple(sol.ys))))

    args = (omega0, amp0)
    out = _loss_pair("RKMK4", "jaxrigid", jaxrigid_loss, args, "simulate(RKMK4()), " + what)
    desc = "diffeqsolve(RK4 tableau, ConstantStepSize, RecursiveCheckpointAdjoint) on "
    desc += "model.vector_field (q as 4 components), " + what
    return out + _loss_pair("diffrax_RK4", "diffrax", diffrax_loss, args, desc)


# ------------------------------------------------------------------------------------------
# 4. LP-split:yoshida6 on the Coulomb wall, forward, against Dopri8.


def lp_split(members, steps, dt):
    case = get_case("krysl-coulomb-wall")
    model, s0 = case.build(case.resolve({}))
    ens = case.perturb(s0, np.random.default_rng(0), case.ensemble_spread, members)
    xs = (jnp.asarray(ens.R, F64), jnp.asarray(ens.Pi, F64))
    I_inv = jnp.asarray(np.linalg.inv(np.asarray(model.inertia, np.float64)), F64)
    integrator = get_method("LP-split:yoshida6")
    what = f"krysl-coulomb-wall, {members} members x t = {steps * dt:g}, end state only"

    def jaxrigid_fn(R, Pi):
        sol = jaxrigid.simulate(
            integrator, model, RigidBodyState(R, Pi), dt, steps, save_every=steps, checks=CHECKS
        )
        return sol.final_state.R, sol.final_state.Pi

    def field(t, y, args):
        R, Pi = y
        dR, dPi = _free_body_field(t, y, I_inv)
        return dR, dPi + model.body_torque(t, R, Pi)

    term = diffrax.ODETerm(field)
    ctl = diffrax.PIDController(rtol=DOPRI8_TOL, atol=DOPRI8_TOL)
    max_steps = max(300 * round(steps * dt), 4096)  # work_precision.py: 300 per time unit

    def one(R, Pi):
        sol = _solve(term, diffrax.Dopri8(), (R, Pi), None, steps * dt, dt, max_steps, ctl, False)
        return _last(sol.ys), sol.stats["num_accepted_steps"]

    def dopri8_fn(R, Pi):
        (R1, Pi1), acc = jax.vmap(one)(R, Pi)
        return R1, Pi1, jnp.max(acc)

    return [
        Entry(
            "LP-split:yoshida6",
            "jaxrigid",
            "forward",
            jax.jit(jaxrigid_fn),
            xs,
            f"jax.jit(simulate(get_method('LP-split:yoshida6'), ...)), dt {dt}, " + what,
        ),
        Entry(
            "diffrax_Dopri8",
            "diffrax",
            "forward",
            jax.jit(dopri8_fn),
            xs,
            f"vmap(diffeqsolve(Dopri8, PIDController({DOPRI8_TOL}))), dt0 by diffrax, " + what,
        ),
    ]


# ------------------------------------------------------------------------------------------
# 5. The DLA midpoint method on the unreduced (passive) rolling ball, forward.


def dla_midpoint(members, steps, dt, compiler_options=None):
    case = get_case("rolling-ball-passive")
    model, s0 = case.build(case.resolve({}))
    what = f"rolling-ball-passive, one trajectory, {steps} steps, dt {dt}, end state only"

    def jaxrigid_fn(state):
        sol = jaxrigid.simulate(
            MidpointDLA(), model, state, dt, steps, save_every=steps, checks=CHECKS
        )
        return sol.final_state, jnp.all(sol.outcome.all_converged)

    term = diffrax.ODETerm(lambda t, y, args: model.vector_field(t, y))

    def rk4_fn(state):
        sol = _solve(term, RK4(), state, None, steps * dt, dt, steps + 16)
        return type(state)(*_last(tuple(sol.ys)))

    how = "" if compiler_options is None else ', compiler_options=quick_build_options("repeated")'
    return [
        Entry(
            "DLA-midpoint" + ("" if compiler_options is None else "_quick"),
            "jaxrigid",
            "forward",
            jax.jit(jaxrigid_fn, compiler_options=compiler_options),
            (s0,),
            f"jax.jit(simulate(MidpointDLA(), ...){how}), " + what,
        ),
        Entry(
            "diffrax_RK4",
            "diffrax",
            "forward",
            jax.jit(rk4_fn),
            (s0,),
            "diffeqsolve(RK4 tableau, ConstantStepSize) on model.vector_field, " + what,
        ),
    ]


def dla_midpoint_quick(members, steps, dt):
    """`dla_midpoint` as its docs tell a caller to build it under their own `jit`:
    `jax.jit(f, compiler_options=jaxrigid.quick_build_options("repeated"))`, the options
    `simulate` uses for it when it builds the program itself (in its own worker)."""
    return dla_midpoint(members, steps, dt, jaxrigid.quick_build_options("repeated"))


def dla_midpoint_direct(members, steps, dt):
    """`dla_midpoint`'s trajectory with `simulate` called directly (in its own worker: it
    builds with the method's `build_profile`, `"repeated"`), beside the same RK4 peer."""
    case = get_case("rolling-ball-passive")
    model, s0 = case.build(case.resolve({}))

    def run(state):
        return jaxrigid.simulate(MidpointDLA(), model, state, dt, steps, save_every=steps)

    what = f"rolling-ball-passive, one trajectory, {steps} steps, dt {dt}, end state only"
    peer = [e for e in dla_midpoint(members, steps, dt) if e.name == "diffrax_RK4"]
    desc = "simulate(MidpointDLA(), ...) called directly (its check and run programs), " + what
    direct = Entry("DLA-midpoint_direct", "jaxrigid", "forward", run, (s0,), desc, direct=True)
    return [direct, *peer]


PROGRAMS = {
    "forward": forward,
    "forward_direct": forward_direct,
    "gradient": gradient,
    "rolling_ball": rolling_ball,
    "lp_split": lp_split,
    "dla_midpoint": dla_midpoint,
    "dla_midpoint_quick": dla_midpoint_quick,
    "dla_midpoint_direct": dla_midpoint_direct,
}
