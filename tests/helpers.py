"""Shared test helpers: the integrator registry, problems, and a compile-once driver."""

from __future__ import annotations

import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.cases.base import sketch
from jaxrigid.integrators import RIGID_BODY_METHODS
from jaxrigid.integrators.base import AbstractIntegrator, explicit_info
from jaxrigid.lie import quaternion
from jaxrigid.models.structures import AbstractAttitudeQuaternion, AbstractLagrangeDAlembert
from jaxrigid.reference import rigid_body_reference

ALL_METHODS = list(RIGID_BODY_METHODS)
# methods for any rigid body in a potential (the torqued Krysl problems): not DMV, which takes
# the free body and uniform gravity only (a stand-in of Krysl's Coulomb wall asks)
TORQUED_BODY = sketch(jr.RigidBody, potential=jr.models.AxialPowerPotential)
TORQUED_METHODS = [n for n in ALL_METHODS if RIGID_BODY_METHODS[n]().integrates(TORQUED_BODY)]
SECOND_ORDER = [n for n in ALL_METHODS if RIGID_BODY_METHODS[n]().order == 2]
PAPER_SEVEN = ["AKW", "BBTRAP", "SWC1", "TRAP", "IMID", "TRAPM", "IMIDM"]


def method(name):
    return RIGID_BODY_METHODS[name]()


def problem(case_name, **overrides):
    case = get_case(case_name)
    return case.build(case.resolve(overrides))


def one_step(integrator, model, state, t, dt):
    """One step of `integrator` from a fresh solver state: `(state, StepInfo)`."""
    state1, _, info = integrator.step(model, state, integrator.init(model, state, t, dt), t, dt)
    return state1, info


def integrate(integrator, model, state0, dt, n_steps, chunk=None, t0=0.0):
    """Final state after `n_steps`, run as `n_steps / chunk` calls of one compiled chunk, so a
    sweep over step sizes compiles once per method (dt is traced, the chunk length static)."""
    chunk = chunk or n_steps
    assert n_steps % chunk == 0
    state, t = state0, t0
    for k in range(n_steps // chunk):
        # a continued state is not checked again, as in one call (`simulate`'s `check_state`)
        sol = jr.simulate(
            integrator, model, state, dt, chunk, save_every=chunk, t0=t, check_state=k == 0
        )
        assert bool(np.all(sol.outcome.all_converged)), f"Newton failed: {sol.outcome}"
        state, t = sol.final_state, t + chunk * dt
    return state


@functools.cache
def reference_at(case_name, t_end):
    model, state0 = problem(case_name)
    ref = rigid_body_reference(model, state0, [t_end])
    return jax.tree_util.tree_map(lambda x: x[0], ref)


def state_error(a, b):
    """(‖Π − Π_ref‖₂, ‖R − R_ref‖₂) with the matrix 2-norm, as Krysl §5 measures."""
    return (
        float(jnp.linalg.norm(a.Pi - b.Pi)),
        float(jnp.linalg.norm(a.R - b.R, ord=2)),
    )


class Heun(AbstractIntegrator):
    """Explicit second-order Runge–Kutta (Heun) on `vector_field`, a unit quaternion `q`
    renormalised (the rolling ball): an explicit method of the nonholonomic integrators' order
    that preserves nothing, the contrast of their energy tests."""

    name: ClassVar[str] = "heun-test"
    order: ClassVar[int] = 2
    structures = (AbstractAttitudeQuaternion, AbstractLagrangeDAlembert)

    def step(self, model, state, solver_state, t, dt):
        k1 = model.vector_field(t, state)
        mid = jax.tree.map(lambda y, k: y + dt * k, state, k1)
        k2 = model.vector_field(t + dt, mid)
        out = jax.tree.map(lambda y, a, b: y + 0.5 * dt * (a + b), state, k1, k2)
        if isinstance(model, AbstractAttitudeQuaternion):
            out = out._replace(q=quaternion.normalize(out.q))
        return out, solver_state, explicit_info(state.q.dtype)


def central_difference_error(f, p, grad, h=1e-5) -> float:
    """`max|grad − FD| / max|grad|`, FD the central differences `(f(p + heᵢ) − f(p − heᵢ))/2h`
    along every coefficient of `p` (one jitted `vmap` of `f` over the 2·size shifted points:
    one copy of `f` to trace and compile, not one per sign)."""
    n = p.size
    eye = h * jnp.eye(n).reshape((n,) + p.shape)

    @jax.jit
    def differences(p):
        values = jax.vmap(f)(jnp.concatenate([p[None] + eye, p[None] - eye]))
        return (values[:n] - values[n:]) / (2 * h)

    fd = np.asarray(differences(p)).reshape(p.shape)
    grad = np.asarray(grad)
    return float(np.max(np.abs(grad - fd)) / np.max(np.abs(grad)))


def quad_by_interval(fn, edges) -> float:
    """`∫ fn` over `[edges[0], edges[-1]]` by scipy's adaptive quadrature on each interval
    (a piecewise polynomial's pieces are smooth: relative tolerance 1e-13 each)."""
    from scipy import integrate

    return sum(
        integrate.quad(fn, a, b, epsabs=0, epsrel=1e-13)[0] for a, b in zip(edges[:-1], edges[1:])
    )


def nominal_replan_point(problem, tasks, optima, b: int, k: int, m: int, R: int, interval):
    """What MPC's re-plan of task `b` starts from at interval `k` of its nominal run (the
    neighbouring law's reference, `tests/test_control_neighbouring.py`): `(problem with the
    task's target, plan, state, remaining steps, active rows, zero multipliers)`."""
    import equinox as eqx

    from jaxrigid.control import mpc
    from jaxrigid.control.neighbouring import nominal_intervals
    from jaxrigid.control.policies import active_rows

    pb = eqx.tree_at(lambda p: p.constraints[0].target, problem, tasks.target[b])
    plans, states = nominal_intervals(pb, optima.coefficients[b], tasks.theta0[b], m, R)
    plan, state = jax.tree_util.tree_map(lambda a: a[k], (plans, states))
    remaining = jnp.asarray(pb.n_steps - k * m, jnp.int32)
    start = mpc.Multipliers(jnp.zeros(2), jnp.zeros(0), jnp.ones(()))
    return pb, plan, state, remaining, active_rows(problem.control, interval), start
