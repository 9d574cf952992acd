"""Value checks written once in `jax`, applied at the API boundary (DESIGN.md §4b).

A model states its checks as data: `Check(bad, message, value)`, where `bad` is a boolean
array with the ensemble (or parameter-sweep) shape, one flag per member, and `value` an
optional array of the same shape to quote for the first failing member. `simulate` applies
them in one of two ways, from the same definitions:

- **concrete inputs** (an eager call): `raise_compiled` computes whether each check failed
  in one compiled program per argument structure (cached in memory and by JAX's persistent
  cache: it carries no callback; each eager operation would be a small program of its own to
  compile). Only when one failed are the checks reduced on the device to four scalars a
  check (any, first failing member, count, quoted value), which come to the host, and it
  raises `ValueError` naming the problem and the member. An ensemble is never copied to the
  host.
- **traced inputs** (the caller's `jit`, `grad` or `vmap`): `raise_in_graph` puts the same
  reduction in the compiled program and a host callback that raises, when a check failed,
  `InvalidValueError` (a `ValueError`) with the same message; jax surfaces it as a
  `JaxRuntimeError` whose text contains the message. Unlike `equinox.error_if`, the message
  names the failing member, which is a runtime value.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._callbacks import host_callback
from .xla_options import quick_build_options


def is_integer(n) -> bool:
    """A Python or NumPy integer, not a bool (`True` is an `int`: a count of one, silently)."""
    return isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))


def real_number(name: str, x) -> float:
    """`x` as a float if it is a real number (a Python or NumPy integer or float), else a
    `ValueError` naming `name`: a boolean (`true` in a spec would be 1) and a string ("0.01",
    which `float` would take) are not numbers."""
    if isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool):
        return float(x)
    dtype = getattr(x, "dtype", None)  # a 0-d array of a number (NumPy's or JAX's)
    if dtype is not None and np.ndim(x) == 0 and np.dtype(dtype).kind in "iuf":
        return float(x)
    raise ValueError(f"{name} must be a number, got {x!r} ({type(x).__name__})")


def real_numbers(name: str, values) -> np.ndarray:
    """`values` (nested lists or an array) as a float64 array if every entry is a real
    number (`real_number`), else a `ValueError` naming `name` and the entry."""
    if hasattr(values, "dtype") and hasattr(values, "shape"):  # NumPy's or JAX's arrays
        values = np.asarray(values)
        if values.dtype.kind not in "iuf":
            raise ValueError(f"{name} must be a number, got an array of {values.dtype}")
        return np.asarray(values, np.float64)
    if isinstance(values, list | tuple):
        return np.asarray([real_numbers(name, v) for v in values], np.float64)
    return np.asarray(real_number(name, values), np.float64)


try:
    from jax.core import Tracer as _Tracer
except ImportError:  # pragma: no cover - jax versions that moved it
    from jax._src.core import Tracer as _Tracer


_eval_context = getattr(jax.core, "eval_context", None) or jax.ensure_compile_time_eval


class InvalidValueError(ValueError):
    """A bad value (NaN, a non-rotation, a non-SPD inertia, `dt = 0`, ...) at the API boundary."""


class Check(NamedTuple):
    """`bad`: one flag per member (any shape, scalar for one); `message`: what is wrong;
    `value`: optional, same shape as `bad`, quoted for the first failing member."""

    bad: Any
    message: str
    value: Any = None


def is_concrete(*xs) -> bool:
    return not any(isinstance(x, _Tracer) for x in jax.tree_util.tree_leaves(xs))


def is_differentiated(*xs) -> bool:
    """Whether a leaf is being differentiated: a JVP or linearize trace lies among the traces
    its tracer was made under (`jax.grad`, `jax.jvp`, ... around the call, under any `jit` or
    `vmap`). Not seen: a derivative taken around a caller's inner `jit` (its arguments are
    then plain jaxpr tracers); that costs build time, never a wrong value."""
    for x in jax.tree_util.tree_leaves(xs):
        trace = getattr(x, "_trace", None) if isinstance(x, _Tracer) else None
        while trace is not None:
            if type(trace).__name__ in ("JVPTrace", "LinearizeTrace"):
                return True
            trace = getattr(trace, "parent_trace", None)
    return False


def _reduce(check: Check):
    """`(any, first, count, value at first)`: scalars computed where the flags live."""
    bad = jnp.asarray(check.bad).reshape(-1)
    first = jnp.argmax(bad)
    value = jnp.zeros(()) if check.value is None else jnp.asarray(check.value).reshape(-1)[first]
    return jnp.any(bad), first, jnp.sum(bad), value


def reduce_all(checks):
    """`_reduce` of every check, the checks of one shape reduced together (one `argmax` and
    one sum over the members per shape, not per check: a smaller program to compile)."""
    value_dtype = jnp.result_type(float)
    out = [None] * len(checks)
    groups: dict = {}
    for k, c in enumerate(checks):
        groups.setdefault(jnp.shape(c.bad), []).append(k)
    for ks in groups.values():
        bad = jnp.stack([jnp.asarray(checks[k].bad).reshape(-1) for k in ks], axis=-1)
        values = jnp.stack(
            [
                jnp.zeros(bad.shape[0], value_dtype)
                if checks[k].value is None
                else jnp.asarray(checks[k].value, value_dtype).reshape(-1)
                for k in ks
            ],
            axis=-1,
        )
        first = jnp.argmax(bad, axis=0)
        value = jnp.take_along_axis(values, first[None], axis=0)[0]
        any_bad, count = jnp.any(bad, axis=0), jnp.sum(bad, axis=0)
        for j, k in enumerate(ks):
            out[k] = (any_bad[j], first[j], count[j], value[j])
    return out


def member_of(first, shape):
    """The ensemble member at flat index `first` of `shape`: an int for one axis, a tuple for
    several, `None` for a single trajectory."""
    if not shape:
        return None
    idx = np.unravel_index(int(first), shape)
    return int(idx[0]) if len(idx) == 1 else tuple(int(i) for i in idx)


def first_row(flags, *values):
    """Under a caller's `vmap` a host callback sees the mapped members' values stacked
    (`_callbacks.host_callback`): the values of the first row whose `flags` is set (the
    values themselves when unmapped)."""
    flags = np.asarray(flags)
    if not flags.ndim:
        return values
    i = _first_flagged(flags)
    return tuple(np.asarray(v)[i] for v in values)


def _first_flagged(flags: np.ndarray) -> tuple[int, ...]:
    """The index of the first set entry of a mapped `flags` array."""
    return tuple(int(k) for k in np.unravel_index(int(np.argmax(flags)), flags.shape))


def mapped_note(flags) -> str:
    """Under a caller's `vmap` (flags stacked with one leading axis per `vmap`): which mapped
    index failed first and how many did, for the message ("" unmapped)."""
    flags = np.asarray(flags)
    if not flags.ndim:
        return ""
    i = _first_flagged(flags)
    where = i[0] if len(i) == 1 else i
    return f" [index {where} of the caller's vmap; {int(flags.sum())} of {flags.size} fail]"


def format_failure(check: Check, shape, first, count, value) -> str:
    """The message for a failed check: what, the value quoted, and which member."""
    text = check.message
    if check.value is not None:
        text += f" (got {float(value):.6g})"
    if shape:
        size = int(np.prod(shape))
        text += f" [ensemble member {member_of(first, shape)}; {int(count)} of {size} members fail]"
    return text


def primal_values(tree):
    """`tree` with every leaf under differentiation replaced by its primal value (checks
    need no derivative), or `None` when a leaf is traced otherwise (`jit`, `vmap`): then the
    checks must run in the caller's graph."""

    def primal(x):
        while isinstance(x, _Tracer) and type(x).__name__ in ("JVPTracer", "LinearizeTracer"):
            x = getattr(x, "primal", None)
        return x

    out = jax.tree_util.tree_map(primal, tree)
    return out if is_concrete(out) else None


_PROGRAMS: dict = {}


def raise_compiled(make_checks, *args, **static) -> None:
    """Concrete `args`: raise `InvalidValueError` for the first failed check of
    `make_checks(*args, **static)` (a module-level function returning `Check`s; `static`
    hashable settings, part of the program's key). One compiled program for the arguments'
    structure and types computes whether each check failed; only when one did are the
    checks reduced again op by op (`raise_now`) to name the member: the reduction (first
    member, count, value) would triple the program's compile time."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    key = (make_checks, tuple(sorted(static.items())), treedef, tuple(map(jax.typeof, leaves)))
    if key not in _PROGRAMS:

        def program(*args):
            flags = [jnp.any(jnp.asarray(c.bad)) for c in make_checks(*args, **static)]
            return jnp.stack(flags) if flags else jnp.zeros((0,), bool)

        # small next to the run it guards: XLA's quick build (`xla_options`, "once") compiles
        # it in a third of the time; a call on 10⁶ members costs 61–65 against 36–38 ms so
        # (bench/README, compile_cost section of 2026-12-01)
        _PROGRAMS[key] = jax.jit(program, compiler_options=quick_build_options("once"))
    failed = np.asarray(_PROGRAMS[key](*args))
    if failed.any():
        checks = list(make_checks(*args, **static))
        raise_now(checks)
        # a value at a check's threshold, rounded one way compiled and the other op by op
        raise InvalidValueError(checks[int(np.argmax(failed))].message)


def model_parameter_checks(model) -> list:
    """`model.parameter_checks()` (a module-level function: a key of `raise_compiled`)."""
    return model.parameter_checks()


def model_state_checks(model, state) -> list:
    """`model.state_checks(state)` (a module-level function: a key of `raise_compiled`)."""
    return model.state_checks(state)


def raise_at_once(make_checks, *args, **static) -> None:
    """Concrete `args` at construction: `raise_compiled`, one program rather than one per
    operation (a rolling ball's checks were about 40 small programs to build in every new
    process), evaluated at once also inside a caller's trace."""
    # Evaluated now, not staged into a caller's trace; unlike `jax.ensure_compile_time_eval`,
    # which also folds the program's own constants op by op while it is traced (a compiled
    # program per operation: 7 for a director state's checks).
    with _eval_context():
        raise_compiled(make_checks, *args, **static)


def raise_now(checks) -> None:
    """Concrete inputs: raise `InvalidValueError` for the first failed check."""
    for check in checks:
        any_bad, first, count, value = _reduce(check)
        if bool(any_bad):
            shape = jnp.shape(check.bad)
            raise InvalidValueError(format_failure(check, shape, first, count, value))


def raise_in_graph(checks) -> None:
    """Traced inputs: the checks in the program, raising from one host callback on failure.
    Under a caller's `vmap` the callback sees one row per mapped member and reports the
    first failing one."""
    if not checks:
        return
    shapes = [jnp.shape(c.bad) for c in checks]
    reduced = reduce_all(checks)
    # one callback for all checks (four scalars each): fewer host calls and a smaller program
    stacked = tuple(jnp.stack([r[i] for r in reduced], axis=-1) for i in range(4))

    def callback(any_bad, first, count, value):
        any_bad = np.asarray(any_bad)
        for k, (check, shape) in enumerate(zip(checks, shapes)):
            if any_bad[..., k].any():
                row = first_row(any_bad[..., k], first[..., k], count[..., k], value[..., k])
                note = mapped_note(any_bad[..., k])
                raise InvalidValueError(format_failure(check, shape, *row) + note)

    # Always called: a `lax.cond` around it would become a select under a caller's `vmap`,
    # which effects do not allow.
    host_callback(callback, *stacked)


def apply(checks) -> None:
    """`raise_now` for concrete checks, `raise_in_graph` for traced ones."""
    checks = list(checks)
    if is_concrete([c.bad for c in checks], [c.value for c in checks]):
        raise_now(checks)
    else:
        raise_in_graph(checks)
