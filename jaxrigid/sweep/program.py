"""What one chunk of a sweep computes: the planned sweep (`plan`: the case, its
fixed parameters, the method and step, checked) and the chunk program — the members'
parameters (from the axes, by member index) → the case's `build`, `vmap`ped → `simulate` (one
step for all, or each member's own when the step is swept) with the observers the `[keep]`
table asks for → the kept quantities — jitted once per case, method, step, keep, dtype and
devices (`chunk_program`), split over several devices by `shard_map`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks, program_store
from ..observers import Combined, InvariantDrift, Reductions, observable, state_fields
from ..simulation import simulate
from .axes import member_values
from .spec import Sweep

if TYPE_CHECKING:
    from ..cases.base import Case
    from ..integrators.base import AbstractIntegrator

__all__ = ["STEP", "Plan", "plan"]

STEP = "dt"  # an axis over the step itself (with the spec's n_steps)


_PROGRAMS: dict = {}  # compiled chunk programs and check passes, by `_program_key`


def cached_program(key, make):
    """One jitted program per key, kept across `run` calls: a second sweep of the same case,
    method and step (a resume, a sweep over other values) does not compile again."""
    if key not in _PROGRAMS:
        _PROGRAMS[key] = make()
    return _PROGRAMS[key]


@dataclasses.dataclass(frozen=True)
class Plan:
    """A validated sweep: the case, its fixed parameters, the integrator, `dt`, `n_steps`
    (`dt` and `t_end` are None when an axis sweeps the step: each member has its own)."""

    sweep: Sweep
    case: Case
    fixed: dict
    integrator: AbstractIntegrator
    method: str
    dt: float | None
    t_end: float | None
    n_steps: int

    @property
    def dtype(self):
        return jnp.dtype(self.sweep.dtype)

    @property
    def program_key(self) -> tuple:
        """What a chunk's program depends on (the axes and fixed values are its inputs,
        except the structural ones, which are constants of it)."""
        keep = dataclasses.astuple(self.sweep.keep)
        structural = tuple(sorted(self.structural.items()))
        return (
            self.case.name,
            self.method,
            self.dt,
            self.n_steps,
            keep,
            self.sweep.dtype,
            structural,
        )

    @property
    def structural(self) -> dict[str, float]:
        """The fixed values of the case's structural parameters (`sweepable=False`, e.g. a
        chain's `n_bodies`, which sets shapes): Python constants of the build."""
        return {k: v for k, v in self.fixed.items() if not self.case.parameters[k].sweepable}


def plan(sweep: Sweep) -> Plan:
    """Resolve and check a sweep's case, parameters, method and step (`ValueError` naming the
    offending entry); no member is built."""
    from ..cases import get_case
    from ..integrators import get_method
    from ..runs import step_plan

    try:
        case = get_case(sweep.case)
    except (KeyError, ValueError) as err:
        raise ValueError(f"sweep spec: case: {err}") from None
    fixed = case.resolve(sweep.set)  # ValueError naming an unknown [set] parameter
    seen: dict[str, str] = {}
    for axis in sweep.axes:
        for name in axis.names:
            if name == STEP and name not in fixed:
                if sweep.dt is not None or sweep.n_steps is None:
                    raise ValueError(
                        f"sweep spec: axis {axis.dim!r} sweeps the step dt: give n_steps (each "
                        "member runs n_steps steps of its own dt) and no fixed dt"
                    )
            elif name not in fixed:
                raise ValueError(
                    f"sweep spec: axis {axis.dim!r} sweeps {name!r}, which case {case.name} does "
                    f"not have; its parameters: {', '.join(fixed)}"
                )
            elif not case.parameters[name].sweepable:
                raise ValueError(
                    f"sweep spec: axis {axis.dim!r} sweeps {name!r}, a structural parameter of "
                    f"case {case.name} (it changes the program, not a value): [set] it instead"
                )
            if name in seen:
                raise ValueError(f"sweep spec: parameter {name!r} is swept by two axes")
            if name in sweep.set:
                raise ValueError(f"sweep spec: parameter {name!r} is both [set] and swept")
            seen[name] = axis.dim
    method = sweep.method or case.default_method
    try:
        integrator = get_method(method, case.family)
    except (KeyError, ValueError) as err:
        raise ValueError(f"sweep spec: method: {err}") from None
    if not case.accepts(integrator):
        raise ValueError(
            f"sweep spec: method {method} does not integrate case {case.name}; methods that "
            f"do: {', '.join(case.methods())}"
        )
    if STEP in seen:
        assert sweep.n_steps is not None  # an axis over the step needs it (checked above)
        dt, t_end, n_steps = None, None, sweep.n_steps
    elif sweep.n_steps is not None:
        dt = sweep.dt if sweep.dt is not None else case.default_dt
        t_end, n_steps = dt * sweep.n_steps, sweep.n_steps
    else:
        try:
            dt, t_end, n_steps = step_plan(case, sweep.t_end, sweep.dt)
        except ValueError as err:
            raise ValueError(f"sweep spec: {err}") from None
    _check_keep(sweep.keep, case, integrator, fixed, n_steps)
    # jax's `Config` gets its options as attributes at run time; its types name none
    if sweep.dtype == "float64" and not jax.config.jax_enable_x64:  # type: ignore[attr-defined]
        raise ValueError(
            "sweep spec: dtype float64 needs jax's 64-bit mode, which is off: "
            'jax.config.update("jax_enable_x64", True) first (the jaxrigid command does), or '
            'dtype = "float32"'
        )
    return Plan(sweep, case, fixed, integrator, integrator.name, dt, t_end, n_steps)


def _check_keep(keep, case, integrator, fixed, n_steps) -> None:
    """The stride divides the steps; every observable to reduce exists and is a scalar."""
    if keep.stride and n_steps % keep.stride:
        raise ValueError(
            f"sweep spec: [keep] stride {keep.stride} does not divide the {n_steps} steps"
        )
    structural = {k: v for k, v in fixed.items() if not case.parameters[k].sweepable}
    traced = {k: jnp.asarray(v) for k, v in fixed.items() if k not in structural}
    build = case.build_for(integrator)
    model, state0 = jax.eval_shape(lambda q: build({**q, **structural}), traced)
    if keep.lyapunov:
        value: Any = getattr(state0, keep.lyapunov, None) if keep.lyapunov.isidentifier() else None
        if not (hasattr(value, "dtype") and jnp.issubdtype(value.dtype, jnp.floating)):
            fields = ", ".join(state_fields(state0))
            raise ValueError(
                f"sweep spec: [keep] lyapunov = {keep.lyapunov!r} is not a field of case "
                f"{case.name}'s state; its fields: {fields}"
            )
    if keep.reductions:
        for name, _ in keep.reductions:
            try:
                jax.eval_shape(lambda m, s: observable(m, 0.0, s, name), model, state0)
            except ValueError as err:
                raise ValueError(f"sweep spec: [keep.reductions] {err}") from None


# --- one chunk --------------------------------------------------------------------------


def chunk_parameters(p: Plan, indices: np.ndarray) -> dict[str, np.ndarray]:
    """Every case parameter of the members at `indices` (fixed ones broadcast), and their
    steps `dt` when swept; float64."""
    swept = member_values(p.sweep.axes, indices)
    n = len(indices)
    out = {k: swept[k] if k in swept else np.full(n, v) for k, v in p.fixed.items()}
    if p.dt is None:
        out[STEP] = swept[STEP]
    return out


def _build(p: Plan, params):
    """`(model, state0)` of the members, each leaf with the members' leading axis, every
    floating leaf in the sweep's dtype (a build's constants, e.g. `jnp.eye(3)`, are made in
    the default one)."""
    structural = p.structural
    params = {
        k: jnp.asarray(v, p.dtype) for k, v in params.items() if k != STEP and k not in structural
    }
    build = p.case.build_for(p.integrator)

    def cast(x):
        return x.astype(p.dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x

    built = jax.vmap(lambda q: build({**q, **structural}))(params)
    return jax.tree_util.tree_map(cast, built)


def _step(p: Plan, params):
    """The step: a scalar, or the members' own `(k,)` when swept."""
    return jnp.asarray(params[STEP] if p.dt is None else p.dt, p.dtype)


def _simulate_members(p: Plan, model, state0, dt, **kwargs):
    """`simulate` over the members (leading axes of `model` and `state0`), with one step for
    all or each member's own (then `vmap`ped: the steps differ inside one scan). `validate`
    has checked every member before: the checks in the chunk program report in the outcome
    (no host callback, so the program is cacheable) and never fire."""
    kwargs = {"checks": "outcome", **kwargs}
    if jnp.ndim(dt) == 0:
        axes = 0 if jax.tree_util.tree_leaves(model) else None  # a model with no arrays: Kepler
        return simulate(p.integrator, model, state0, dt, p.n_steps, model_axes=axes, **kwargs)
    one = lambda m, s, h: simulate(p.integrator, m, s, h, p.n_steps, **kwargs)  # noqa: E731
    return jax.vmap(one)(model, state0, dt)


def reduced_checks(p: Plan, params, messages: list, n_steps=None):
    """Each member's value checks (`simulate`'s: `dt`, the model's, the state's and the
    method's), reduced over the members (`_checks.reduce_all`). The checks' messages and
    whether they quote a value are filled into `messages` when this is traced (they are
    Python strings)."""
    from .._input_checks import value_checks

    model, state0 = _build(p, params)
    dt = _step(p, params)

    def one(m, s, h):
        checks = value_checks(p.integrator, m, s, 0.0, h, p.n_steps if n_steps is None else n_steps)
        messages[:] = [(c.message, c.value is not None) for c in checks]
        zero = jnp.zeros((), p.dtype)
        return [c.bad for c in checks], [zero if c.value is None else c.value for c in checks]

    flags, values = jax.vmap(one, in_axes=(0, 0, 0 if jnp.ndim(dt) else None))(model, state0, dt)
    return _checks.reduce_all([_checks.Check(b, "", v) for b, v in zip(flags, values)])


def _observer(keep):
    """The observers a chunk's scan runs: invariant drifts and the reductions asked for."""
    observers = []
    if keep.invariants:
        observers.append(InvariantDrift())
    if keep.reductions:
        names = tuple(name for name, _ in keep.reductions)
        observers.append(Reductions(names))
    return Combined(tuple(observers)) if observers else None


def _kept(p: Plan, params):
    """One chunk: build, simulate, and the kept quantities `{name: (k, ...)}`."""
    model, state0 = _build(p, params)
    keep = p.sweep.keep
    observer = _observer(keep)
    dt = _step(p, params)
    save_every = keep.stride or p.n_steps

    def run(s0):
        return _simulate_members(p, model, s0, dt, save_every=save_every, observer=observer)

    if keep.lyapunov:  # the run and its tangent in one pass
        sol, tangent = jax.jvp(run, (state0,), (_unit_tangent(state0, keep.lyapunov),))
    else:
        sol = run(state0)
    observations = list(sol.observations or ())
    out = {}
    if keep.final_state:
        for path, leaf in jax.tree_util.tree_flatten_with_path(sol.final_state)[0]:
            out["final/" + _leaf_name(path)] = leaf
    if keep.stride:
        for path, leaf in jax.tree_util.tree_flatten_with_path(sol.states)[0]:
            out["trajectory/" + _leaf_name(path)] = leaf
    if keep.invariants:
        initial, largest = observations.pop(0)
        t_end = jnp.broadcast_to(dt * p.n_steps, sol.outcome.result.shape)
        final = jax.vmap(lambda m, s, t: m.invariants(t, s))(model, sol.final_state, t_end)
        for name in initial:
            out[f"drift_final/{name}"] = jnp.abs(final[name] - initial[name])
            out[f"drift_max/{name}"] = largest[name]
    if keep.reductions:
        reduced = Reductions(tuple(n for n, _ in keep.reductions)).results(observations.pop(0))
        for name, which in keep.reductions:
            for r in which:
                out[f"reductions/{_array_name(name)}/{r}"] = reduced[(name, r)]
    if keep.lyapunov:
        growth = sum(
            jnp.sum(jnp.reshape(x, (x.shape[0], -1)) ** 2, axis=1)
            for x in jax.tree_util.tree_leaves(tangent.final_state)
        )
        out[f"lyapunov/{keep.lyapunov}"] = 0.5 * jnp.log(growth) / (dt * p.n_steps)
    if keep.outcome:
        out["outcome/result"] = sol.outcome.result
        out["outcome/first_failure"] = sol.outcome.first_failure
    return out


def _unit_tangent(state0, field: str):
    """A tangent of the members' states: zero but in `field`, there the unit vector along
    (1, 1, …)/√n (the same direction for every member, so their exponents compare)."""
    tangent = jax.tree_util.tree_map(jnp.zeros_like, state0)
    value = getattr(state0, field)
    n = max(1, int(np.prod(value.shape[1:])))
    unit = jnp.full_like(value, 1.0 / np.sqrt(n))
    if hasattr(tangent, "_replace"):  # a NamedTuple
        return tangent._replace(**{field: unit})
    return dataclasses.replace(tangent, **{field: unit})


def _array_name(observable: str) -> str:
    """An observable as a store array's name: `Pi[1]` -> `Pi_1`, `R[0,2]` -> `R_0_2`."""
    return re.sub(r"\W+", "_", observable.replace(" ", "")).strip("_")


def _leaf_name(path) -> str:
    return ".".join(str(getattr(k, "name", getattr(k, "key", getattr(k, "idx", k)))) for k in path)


def chunk_program(p: Plan, devices):
    """The jitted chunk: on one device, or with the members' axis split over `devices` by
    `shard_map` (the chunk size is a multiple of their number). Against `jit` with a
    `NamedSharding` over the same 1-D mesh it runs faster on several devices, bitwise equal,
    and compiles a little longer (bench/README.md, `sweep_throughput.py`); probably (not
    confirmed in the compiled code) because each device runs its block alone, so a vmapped
    Newton loop stops when its own members have converged, where under the sharded `jit` the
    "any member still iterating" test spans every device at each iteration."""
    fn = lambda q: _kept(p, q)  # noqa: E731
    if len(devices) == 1:
        return cached_program(("chunk", *p.program_key, str(devices[0])), lambda: jax.jit(fn))
    from jax.sharding import Mesh, PartitionSpec

    def make():
        shard_map, unchecked = _shard_map()
        mesh = Mesh(np.array(devices), ("members",))
        members = PartitionSpec("members")
        return jax.jit(
            shard_map(fn, mesh=mesh, in_specs=(members,), out_specs=members, **unchecked)
        )

    return cached_program(("chunk", *p.program_key, tuple(map(str, devices))), make)


def stored_chunks(p: Plan, devices):
    """The context in which the chunk program is a stored program (`program_store`: a second
    process, a Dask worker, neither traces nor lowers it), keyed by `Plan.program_key`; on one
    device only (a sharded program is built where it runs)."""
    if len(devices) != 1:
        return contextlib.nullcontext()
    key = json.dumps(["sweep chunk", p.program_key, str(devices[0])], default=repr)
    return program_store.stored_programs(key)


def _shard_map():
    """This jax's `shard_map` and the keyword that turns its replication check off (the
    members' blocks are independent: nothing is replicated)."""
    if hasattr(jax, "shard_map"):  # jax ≥ 0.6
        return jax.shard_map, {"check_vma": False}
    from jax.experimental.shard_map import shard_map  # pragma: no cover - older jax

    return shard_map, {"check_rep": False}
