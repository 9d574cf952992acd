"""Running a sweep in chunks into its store, resumably; what a chunk computes is
`program.py`.

Every chunk holds `chunk_size` members (the last one padded by repeating its last member, the
padding dropped before writing), so one compiled program serves the whole sweep and a member's
result does not depend on which chunk it fell in or on where a run was interrupted: a resumed
sweep equals an uninterrupted one bit for bit. A chunk is one compiled program
(`program.chunk_program`), dispatched one ahead of the host's write of the previous chunk.

Before any work starts every member is checked: the parameter names against the case, the
method against the case's model, and each member's values (the model's and the state's value
checks, e.g. a non-SPD inertia) by a jitted pass over the chunks that only builds; a bad member
is named by its index and its parameters.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import jax
import numpy as np

from .. import program_store
from ..compilation_cache import ensure_compilation_cache
from .program import (
    Plan,
    cached_program,
    chunk_parameters,
    chunk_program,
    plan,
    reduced_checks,
    stored_chunks,
)
from .spec import Sweep
from .store import Store, SweepStoreError
from .store import chunk_bounds as _chunks

__all__ = [
    "Plan",
    "chunk_size_for",
    "launch_chunk",
    "open_store",
    "plan",
    "run",
    "unfinished",
    "validate",
    "write_chunk",
]

DEFAULT_MEMORY_FRACTION = 0.25  # of the device's memory a chunk may use (CPU: of the host's)
MAX_CHUNK = 1 << 20  # members: bounds the work lost to a kill and keeps progress visible


# --- chunking ---------------------------------------------------------------------------


def _memory_budget() -> int:
    device = jax.devices()[0]
    stats = getattr(device, "memory_stats", lambda: None)()
    if stats and "bytes_limit" in stats:
        return int(DEFAULT_MEMORY_FRACTION * stats["bytes_limit"])
    try:
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        host = 8 << 30
    return int(DEFAULT_MEMORY_FRACTION * host)


def chunk_size_for(p: Plan, probe: int = 256) -> tuple[int, float]:
    """`(chunk_size, bytes per member)`: the per-member footprint measured from the compiled
    chunk program of `probe` members (`memory_analysis`: arguments, outputs and temporaries),
    and the largest chunk within `DEFAULT_MEMORY_FRACTION` of the device's memory (at most
    `MAX_CHUNK`, at most the sweep)."""
    params = chunk_parameters(p, np.arange(probe) % p.sweep.n_members)
    compiled = chunk_program(p, jax.local_devices()[:1]).lower(params).compile()
    mem = compiled.memory_analysis()
    total = sum(
        getattr(mem, k, 0) or 0
        for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")
    )
    per_member = max(total / probe, 1.0)
    size = int(min(MAX_CHUNK, p.sweep.n_members, max(1, _memory_budget() // per_member)))
    return size, per_member


def _padded(start, stop, size):
    """The member indices of a chunk, padded to `size` by repeating the last."""
    return np.minimum(np.arange(start, start + size), stop - 1)


def validate(p: Plan, size: int) -> None:
    """Every member's value checks, chunk by chunk, before any work starts: `ValueError`
    naming the first bad member by index and parameters."""

    def make():
        messages: list = []  # filled when the pass is traced
        # the step count is an argument: another t_end reuses the program
        return jax.jit(lambda q, n: reduced_checks(p, q, messages, n)), messages

    check, messages = cached_program(("checks", p.case.name, p.dt, p.sweep.dtype), make)
    for _, start, stop in _chunks(p.sweep.n_members, size):
        reduced = check(chunk_parameters(p, _padded(start, stop, size)), p.n_steps)
        for (bad, first, _, value), (message, quoted) in zip(reduced, messages):
            if bool(bad):
                member = start + int(first)
                at = chunk_parameters(p, np.array([member]))
                swept = {n: float(at[n][0]) for a in p.sweep.axes for n in a.names}
                text = message + (f" (got {float(value):.6g})" if quoted else "")
                raise ValueError(f"sweep member {member} {swept}: {text}")


# --- run --------------------------------------------------------------------------------


def _attrs(p: Plan, size: int, per_member: float, devices) -> dict:
    import jaxrigid

    return {
        "sweep": p.sweep.describe(),
        "shape": list(p.sweep.shape),
        "dims": [a.dim for a in p.sweep.axes],
        "n_members": p.sweep.n_members,
        "chunk_size": size,
        "bytes_per_member": per_member,
        "devices": [str(d) for d in devices],
        "method": p.method,
        "dt": p.dt,
        "t_end": p.t_end,
        "n_steps": p.n_steps,
        "versions": {"jaxrigid": jaxrigid.__version__, "jax": jax.__version__},
    }


def _layout(p: Plan, size: int, fn) -> dict:
    params = chunk_parameters(p, np.arange(size) % p.sweep.n_members)
    shapes = jax.eval_shape(fn, params)
    layout = {f"param/{k}": ((), np.float64) for k in params}
    layout.update({k: (v.shape[1:], v.dtype) for k, v in shapes.items()})
    return layout


def _devices(devices: int | None):
    local = jax.local_devices()
    if devices is None:
        return local
    if not (isinstance(devices, int) and 1 <= devices <= len(local)):
        raise ValueError(
            f"devices must be between 1 and {len(local)} (local devices), got {devices!r}"
        )
    return local[:devices]


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def _balanced(n: int, size: int, k: int) -> int:
    """The chunk size for `n` members in chunks of at most about `size`: as many chunks as
    `size` needs, of equal size (padding under one member a chunk), a multiple of the `k`
    devices."""
    chunks = -(-n // min(size, n))
    return _round_up(-(-n // chunks), k)


def open_store(p: Plan, out, *, resume: bool, devices) -> tuple[Store, int]:
    """The store at `out` for the planned sweep and its chunk size, locked against other
    writers: created (the chunk size chosen, every member validated first) or, with `resume`,
    reopened and checked to hold this sweep in chunks that `devices` divide."""
    sweep = p.sweep
    if Store.exists(out):
        if not resume:
            raise SweepStoreError(f"{out} already holds a sweep store: pass resume=True / --resume")
        store = Store.open(out, mode="r+")
        stored, asked = store.attrs.get("sweep"), _roundtrip(sweep.describe())
        assert stored is not None  # every sweep store holds its spec (`_attrs`)
        if stored != asked:
            raise ValueError(f"{out} holds a different sweep: {_differences(stored, asked)}")
        size = int(store.attrs["chunk_size"])
        if size % len(devices):
            raise ValueError(
                f"{out} was run in chunks of {size} members, which {len(devices)} devices do "
                "not divide: resume with a device count that does (--devices)"
            )
        return store.lock(), size
    if sweep.chunk_size:  # at most as asked (rounded up to a multiple of the devices)
        per_member, size = float("nan"), sweep.chunk_size
    else:  # the footprint is per device
        size, per_member = chunk_size_for(p)
        size *= len(devices)
    size = _balanced(sweep.n_members, size, len(devices))
    validate(p, size)
    fn = chunk_program(p, devices)
    attrs, layout = _attrs(p, size, per_member, devices), _layout(p, size, fn)
    return Store.create(out, attrs, layout, sweep.n_members, size), size


def unfinished(store: Store) -> list[tuple[int, int, int]]:
    """The chunks `(index, start, stop)` to compute, in order: those without a record that
    belongs to the store, and those whose data does not verify (their records discarded and
    any missing array created again, with a warning naming them)."""
    states, _ = store.check()
    damaged = [c for c in states if c.state == "damaged"]
    if damaged:
        warnings.warn(
            f"{store.path}: {len(damaged)} damaged chunk(s) computed again: "
            + "; ".join(f"chunk {c.index}: {c.why}" for c in damaged[:5]),
            stacklevel=3,
        )
        for c in damaged:
            store.discard(c.index)
        store.restore_arrays()
    return [c[:3] for c in states if c.state != "finished"]


def launch_chunk(p: Plan, fn, size: int, chunk):
    """Dispatch chunk `(index, start, stop)` to the compiled program `fn` (asynchronously: the
    device works while the host writes the previous chunk); `(chunk, params, result)`."""
    _, start, stop = chunk
    params = chunk_parameters(p, _padded(start, stop, size))
    return chunk, params, program_store.call(fn, "sweep chunk", (params,))


def write_chunk(store: Store, launched) -> int:
    """Write a launched chunk's members (the padding dropped) and mark it finished; returns
    the number of members written."""
    (index, start, stop), params, result = launched
    rows = stop - start
    arrays = {f"param/{name}": v[:rows] for name, v in params.items()}
    arrays.update({name: np.asarray(v)[:rows] for name, v in result.items()})
    store.write_chunk(index, start, arrays)
    return rows


def run(
    sweep: Sweep, out, *, resume: bool = False, progress: bool = True, devices: int | None = None
) -> Path:
    """Run `sweep` into the store at `out` (a directory); returns its path.

    `resume`: continue the store at `out` (it must hold this sweep), computing only the
    unfinished chunks; without it an existing store is an error. `devices`: shard each chunk's
    members over this many local devices (default: all). Raises `ValueError` for a bad spec
    or member before any work, `SweepStoreError` when the store cannot be written. Turns on
    the persistent compilation cache unless JAX has one (`ensure_compilation_cache`)."""
    ensure_compilation_cache()
    out = Path(out)
    p = plan(sweep)
    devs = _devices(devices)
    store, size = open_store(p, out, resume=resume, devices=devs)
    try:
        with stored_chunks(p, devs):
            _write_all(p, store, size, devs, progress)
    finally:
        store.close()
    return out


def _write_all(p: Plan, store: Store, size: int, devs, progress: bool) -> None:
    """Compute and write every unfinished chunk, one launched ahead of the host's writes."""
    n = p.sweep.n_members
    fn = chunk_program(p, devs)
    todo = unfinished(store)
    bar = sweep_progress(n, n - member_count(todo), progress)
    try:
        pending = launch_chunk(p, fn, size, todo[0]) if todo else None
        for k in range(len(todo)):
            launched = pending
            pending = launch_chunk(p, fn, size, todo[k + 1]) if k + 1 < len(todo) else None
            bar.update(write_chunk(store, launched))
    finally:
        bar.close()


def member_count(chunks) -> int:
    return sum(stop - start for _, start, stop in chunks)


def _differences(stored: dict, asked: dict) -> str:
    """The spec's fields that differ, `name: stored → asked` (a missing field: `unset`)."""
    keys = sorted(set(stored) | set(asked), key=str)
    shown = [
        f"{k}: {stored.get(k, 'unset')!r} in the store, {asked.get(k, 'unset')!r} asked"
        for k in keys
        if stored.get(k) != asked.get(k)
    ]
    return "; ".join(shown)


def _roundtrip(d):
    """A description as the store's JSON attributes give it back (tuples become lists)."""
    import json

    return json.loads(json.dumps(d))


def sweep_progress(total, initial, enabled):
    """Members done, members per second and time left (`jaxrigid.progress`, tqdm)."""
    from ..progress import progress_bar

    return progress_bar(
        total, desc="sweep", unit="member", unit_scale=True, initial=initial,
        smoothing=0.1, disable=not enabled,
    )  # fmt: skip
