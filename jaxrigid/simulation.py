"""The batched simulation driver: any integrator under `lax.scan`, ensembles under `vmap`.

`simulate(integrator, model, state0, dt, n_steps)` integrates one trajectory or an ensemble:
leading axes of the state's arrays beyond the model's event shape are ensemble axes, and
model parameters are swept with `model_axes` (as `jax.vmap`'s `in_axes` for the model).
Every `save_every`-th state (or `save(t, state)` of it) is kept, with the initial one; the
per-step outcomes are reduced per saved interval and per trajectory, by cause, never dropped.

The driver knows no particular model or method: it asks the integrator whether it integrates
the model (`integrates`), the model for its event shapes and value checks
(`jaxrigid.models.AbstractModel`), and runs `init`/`step` (`AbstractIntegrator`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, _input_checks, results
from ._collector import relaxed_collection
from ._run_program import Solution, compiled_runner, fast_then_full
from .observers import AbstractObserver
from .results import Outcome, StepFailedError

__all__ = [
    "AbstractObserver",
    "IncompatibleModelError",
    "Outcome",
    "Solution",
    "StepFailedError",
    "simulate",
]


class IncompatibleModelError(TypeError):
    """The integrator does not integrate this kind of model (raised before tracing)."""


# ----------------------------------------------------------------------------------------
# The scans


# ----------------------------------------------------------------------------------------
# simulate


@relaxed_collection()  # its trace: Python's collector made rare (`_collector`)
def simulate(
    integrator,
    model,
    state0,
    dt,
    n_steps: int,
    *,
    t0=0.0,
    save_every: int = 1,
    save=None,
    model_axes=None,
    throw: bool | None = None,
    observer: AbstractObserver | None = None,
    observations0=None,
    solver_state0=None,
    checkpoint: bool = True,
    checks: str | None = None,
    check_state: bool = True,
) -> Solution:
    """Integrate `n_steps` steps of size `dt` from `state0` at `t0`.

    **Arguments:** `integrator` (an `AbstractIntegrator`); `model` (an `AbstractModel`);
    `state0` (leaves with optional leading ensemble axes); `dt` (nonzero; negative runs
    backwards); `save_every` (must divide `n_steps`); `save` (optional `fn(t, state)` of one
    member: what to keep at each saved time instead of the whole state, e.g. an observable);
    `model_axes` (`None`: one model for all members; `0` or a pytree prefix: the model's
    ensemble axis, as `jax.vmap`'s `in_axes`); `throw` (`True`: raise `StepFailedError` naming
    the cause, step, time and member of the first failed step, also inside `jit`; `False`:
    report it in `solution.outcome` only; `None`, the default: `False`, except under a
    derivative (`jax.grad`, `jvp`, `vjp`) with `checks="raise"`, where the outcome is hidden
    from the caller and a failed step would leave a NaN gradient with no cause: there it
    raises — to get the outcome beside a gradient instead, pass `throw=False` and return
    `solution.outcome` as `jax.grad(..., has_aux=True)`'s auxiliary output); `observer` (an
    `AbstractObserver` updated every step inside the scan) and `observations0` (its carry to
    continue from); `solver_state0` (a previous `Solution.solver_state`, to continue that
    run: with its `final_state` as `state0` the two runs equal one unsplit run bit for bit);
    `checkpoint` (default: a reverse pass through the run stores O(√n_steps) states,
    recomputing the rest; `False` stores every step: less compute for short horizons);
    `checks` (`"raise"`, the default: a failed value check raises, see below; `"outcome"`: a
    member that fails one is reported in `solution.outcome` as `RESULTS.invalid_input` with
    its states NaN, and nothing is raised — no host callback, so a caller's `jit` of it
    stays cacheable by JAX's persistent compilation cache); `check_state` (default: `state0`'s
    values are checked; `False`: only that they are finite, for a state that a run of this
    method reached and that is continued, so that a run split into calls accepts what one
    call of all its steps would — e.g. a method that does not keep a chain's quaternions unit
    lets them drift past the √eps an initial state must meet; `runs.run_chunks` passes it for
    every chunk after the first. `dt`, `t0` and the model are checked either way).

    `dt`, `t0` and every array of the model and the state may be traced (`jit` arguments,
    differentiated, `vmap`ped).

    **Raises:** `IncompatibleModelError` (a `TypeError`) when the integrator does not
    integrate this model, naming those that do; `ValueError` for bad shapes; `TypeError` for a
    model parameter whose dtype is not the state's; `ValueError` for bad values (zero or
    non-finite `dt`, non-SPD inertia, non-orthonormal attitude, NaN in the state) naming the
    ensemble member — at once for concrete inputs (also under an eager `jax.grad`), and from
    the compiled program (as a `JaxRuntimeError` carrying the same message) for inputs traced
    by a caller's `jit` or `vmap`: that check is a host callback, and JAX does not put a
    program with one in its persistent cache (`checks="outcome"` avoids it).
    """
    checks = _input_checks.mode(checks)
    if not _checks.is_integer(n_steps) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if not _checks.is_integer(save_every) or save_every < 1 or n_steps % save_every:
        raise ValueError(
            f"save_every must be a positive divisor of n_steps={n_steps}, got {save_every!r}"
        )
    n_steps, save_every = int(n_steps), int(save_every)
    n_save = n_steps // save_every
    check_integrates(integrator, model)
    _input_checks.check_time_types(t0, dt)
    _input_checks.check_state_type(model, state0)

    ndims = model.state_event_ndims()
    leaves, treedef = jax.tree_util.tree_flatten(state0)
    event = jax.tree_util.tree_leaves(ndims)
    leaves = [jnp.asarray(x) for x in leaves]
    batch_shapes = {x.shape[: x.ndim - e] for x, e in zip(leaves, event)}
    if len(batch_shapes) != 1 or any(x.ndim < e for x, e in zip(leaves, event)):
        raise ValueError(
            "state arrays must share their leading (ensemble) axes; got shapes "
            + ", ".join(str(x.shape) for x in leaves)
        )
    batch_shape = batch_shapes.pop()
    state0 = jax.tree_util.tree_unflatten(treedef, leaves)
    _input_checks.check_state_dtypes(state0)
    model.check_state_shapes(state0)
    dtype = leaves[0].dtype
    _input_checks.check_dtypes(model, dtype)

    broadcast = None
    n_members = int(np.prod(batch_shape)) if batch_shape else None
    checked = model  # what the value checks see: the members on axis 0, as integrated
    if model_axes is not None:
        leaves, axes = _leaves_with_axes(model, model_axes)
        m, checked = _model_members(model, leaves, axes)
        if m is None and n_members is None:
            raise ValueError(
                f"model_axes={model_axes!r} sweeps no array of the {type(model).__name__} and the "
                "state is one trajectory: there is no ensemble (model_axes=None)"
            )
        if m is None:  # no array to sweep (a model of functions): shared, as under vmap
            pass
        elif n_members is None:
            broadcast, batch_shape, n_members = m, (m,), m
        elif n_members != m:
            raise ValueError(f"state ensemble has {n_members} members but the model sweep has {m}")
    if checks == "raise":
        _input_checks.apply_value_checks(integrator, checked, state0, t0, dt, n_steps, check_state)

    spec, inputs = (n_save, save_every, checkpoint), (model, state0, observations0, solver_state0)
    args = (observer, save, *inputs, t0, dt)
    if _checks.is_concrete(integrator, observer, *inputs, t0, dt):
        # nothing here is differentiated: the steps per save are an input of the program
        # (`None` in its spec), so another `n_steps` with as many saves reuses it
        solution = fast_then_full(
            integrator,
            (n_save, None, False),
            model_axes,
            (tuple(batch_shape), broadcast),
            args + (save_every,),
        )
    else:
        # Under a derivative the method runs alone: the fast path would build and
        # differentiate both of its runs. A single trajectory keeps the fast path, so that it
        # equals the same member of an ensemble bit for bit.
        fast = not _checks.is_differentiated(*inputs, t0, dt)
        layout = (tuple(batch_shape), broadcast, fast)
        solution = compiled_runner(spec, model_axes, layout)(integrator, *args, None)
    if checks == "outcome":
        invalid = _input_checks.invalid_members(
            _input_checks.value_checks(integrator, checked, state0, t0, dt, n_steps, check_state),
            batch_shape,
        )
        solution = _input_checks.mark_invalid(solution, invalid, len(batch_shape))
    note = ""
    if throw is None:  # under a derivative the caller cannot see the outcome
        throw = checks == "raise" and _checks.is_differentiated(*inputs, t0, dt)
        note = _UNDER_A_DERIVATIVE
    if throw:
        results.raise_on_failure(solution.outcome, solution.ts[0], dt, note)
    return solution


_UNDER_A_DERIVATIVE = (
    " (raised under a derivative, whose gradient would be NaN: to return the outcome beside "
    "the gradient instead, pass throw=False and solution.outcome as jax.grad(..., has_aux=True)'s"
    " auxiliary output)"
)


def check_integrates(integrator, model) -> None:
    """`IncompatibleModelError` unless `integrator` integrates `model`, naming the methods
    of the registry that do."""
    refusal = integrator.refusal(model)
    if refusal is None:
        return
    from .integrators import classes_for

    # each by its name and its class: a name two families share (`gauss6`) is told apart
    valid = [f"{c.name} (jaxrigid.{c.__name__})" for c in classes_for(model)]
    raise IncompatibleModelError(
        f"{integrator.name} does not integrate a {type(model).__name__} "
        f"({refusal}); methods that do: {', '.join(valid) or 'none'}"
    )


class _Axis:
    """An axis of `model_axes` carried through `tree_map` as a leaf: neither dropped (as
    `None` would be) nor confused with the model's own tuples (a model's `rails` field)."""

    def __init__(self, axis):
        self.axis = axis


def _leaves_with_axes(model, model_axes):
    """The model's array leaves and, for each, its ensemble axis (`None`: shared), from a
    `vmap`-style prefix."""
    leaves = jax.tree_util.tree_leaves(model)
    if model_axes is None or isinstance(model_axes, int):
        return leaves, [model_axes] * len(leaves)
    wrapped = jax.tree_util.tree_map(
        lambda a, sub: [_Axis(a)] * len(jax.tree_util.tree_leaves(sub)),
        model_axes,
        model,
        is_leaf=lambda x: x is None,
    )
    axes = [
        t.axis for t in jax.tree_util.tree_leaves(wrapped, is_leaf=lambda x: isinstance(x, _Axis))
    ]
    if len(axes) != len(leaves):
        raise ValueError("model_axes must be a prefix of the model's pytree structure")
    return leaves, axes


def _model_members(model, leaves, axes):
    """`(members, model)`: the ensemble size `model_axes` selects and the model with each
    swept leaf's ensemble axis moved to the front — the slices that are integrated, which the
    value checks must see (with `model_axes=1` they checked the axis-0 slices); `None`
    members when no leaf is swept. `ValueError` for an axis a leaf does not have, or sizes
    that differ."""
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(model)[0]]
    sizes, moved = set(), []
    for path, x, a in zip(paths, leaves, axes):
        if a is None:
            moved.append(x)
            continue
        ndim = jnp.ndim(x)
        if not (_checks.is_integer(a) and -ndim <= a < ndim):
            raise ValueError(
                f"model_axes: {type(model).__name__}{path} has shape {jnp.shape(x)}, no axis "
                f"{a!r} to sweep (model_axes=None shares one model among all members)"
            )
        sizes.add(jnp.shape(x)[a])
        moved.append(jnp.moveaxis(x, a, 0))
    if len(sizes) > 1:
        raise ValueError(f"model_axes must select one ensemble size, got sizes {sorted(sizes)}")
    treedef = jax.tree_util.tree_structure(model)
    return (sizes.pop() if sizes else None), jax.tree_util.tree_unflatten(treedef, moved)
