"""Running a sweep on a Dask distributed cluster: one task per chunk.

    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as client:
        run_distributed(sweep, "/shared/out", client)

Why Dask distributed: a sweep's chunks are independent, so a task engine fits, and Dask is
pure Python (`pip install 'jaxrigid[sweep,cluster]'`), its `LocalCluster` is the same code path
as a real cluster, a task whose worker dies or that raises is retried elsewhere, and it runs on
SLURM with `dask scheduler` + `dask worker` under `srun` (examples/slurm/sweep.sbatch) or
dask-jobqueue. Ray would fit too but is a far heavier install with its own object store; and
`jax.distributed` is SPMD in lockstep: one lost host stops the whole computation, with no
retries, which is the wrong model for independent chunks.

The driver (the process calling `run_distributed`) plans the sweep and creates or reopens the
store exactly as `run` does (`open_store`: every member validated, the chunk size chosen),
then submits the unfinished chunks; each task rebuilds the sweep from its description, computes
its chunk (`launch_chunk`) and writes it with its marker (`write_chunk`). Nothing but the
sweep's description and the chunk's bounds travels to a worker, and nothing but a count comes
back: the results go straight from the worker to the store.

- The store directory must be on a filesystem that the driver and every worker see at the same
  path (NFS, Lustre, GPFS; not a node-local /tmp).
- A worker shards each chunk over the largest number of its local devices that divides the
  chunk size (one device for a worker per GPU, the recommended set-up). The chunk size is the
  spec's `chunk_size` (rounded up to a multiple of the driver's local devices), or else chosen
  as `run` chooses it, from the footprint measured on the driver's first device: run the driver
  on a node like the workers', or set `chunk_size`.
- Run one thread per worker (`--nthreads 1`): a chunk already uses every device it is given.
- A chunk's result does not depend on where it is computed (on the same kind of device and
  device count), so the store equals an in-process `run` member by member. A task that raises
  is retried `retries` times; a task whose worker dies is rescheduled (up to the scheduler's
  `distributed.scheduler.allowed-failures`, default 3). A task repeated after its chunk was
  written (its worker died before reporting) finds the marker and does nothing. A chunk that
  still fails stops the run with `SweepTaskError`; its finished chunks are intact and
  `resume=True` / `--resume` continues.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from .program import chunk_program, plan, stored_chunks
from .run import launch_chunk, member_count, open_store, sweep_progress, unfinished, write_chunk
from .spec import Sweep
from .store import Store

__all__ = ["SweepTaskError", "run_distributed"]


class SweepTaskError(RuntimeError):
    """A chunk's task failed on the cluster after its retries; finished chunks are intact."""


def import_distributed():
    try:
        import distributed
    except ImportError as err:
        raise ImportError(
            "running a sweep on a cluster needs dask distributed: "
            "pip install 'jaxrigid[sweep,cluster]'"
        ) from err
    return distributed


def _x64(sweep: Sweep) -> bool:
    """Whether the sweep runs with 64-bit types: float64 sweeps always, float32 ones as the
    driver does (its `jax_enable_x64`), so workers compile what `run` would here."""
    import jax

    # jax's `Config` gets its options as attributes at run time; its types name none
    return sweep.dtype == "float64" or bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]


def shard_count(n_local: int, size: int) -> int:
    """The largest number of a worker's `n_local` devices that divides the chunk `size`."""
    return max(k for k in range(1, n_local + 1) if size % k == 0)


def _chunk_task(spec: dict, out: str, index: int, start: int, stop: int, size: int, x64: bool):
    """One chunk on a worker: computed and written with its marker; returns the number of
    members written (0 when the chunk was already finished: a repeated task does nothing)."""
    import jax

    from ..compilation_cache import ensure_compilation_cache

    ensure_compilation_cache()  # the worker's process loads what others compiled
    with jax.enable_x64(x64):  # thread-local, before any array is made
        p = plan(Sweep.from_dict(spec))
        store = Store.open(out, mode="r+")
        if index in store.finished():
            return 0
        local = jax.local_devices()
        devices = local[: shard_count(len(local), size)]
        with stored_chunks(p, devices):  # a worker loads the chunk program, not traces it
            launched = launch_chunk(p, chunk_program(p, devices), size, (index, start, stop))
        return write_chunk(store, launched)


def _driver_devices(out: Path):
    """The devices `open_store` sizes a new store's chunks for: the driver's local ones. On
    resume, one: the store's chunk size stands and workers pick their own devices."""
    import jax

    local = jax.local_devices()
    return local[:1] if Store.exists(out) else local


def _failure(out: Path, chunk, retries: int, err: BaseException | None) -> SweepTaskError:
    """The error for a chunk whose task failed (`err`) or was cancelled (`None`)."""
    index, start, stop = chunk
    done = len(Store.open(out).finished())
    why = "its task was cancelled" if err is None else f"{type(err).__name__}: {err}"
    if isinstance(err, FileNotFoundError):
        why += f" (is {out} on a filesystem that every worker sees at this path?)"
    return SweepTaskError(
        f"chunk {index} (members {start}..{stop - 1}) failed on the cluster (a task that raises "
        f"is retried {retries} times): {why}. The {done} finished chunks in {out} are intact; "
        "continue with --resume (run_distributed(..., resume=True))"
    )


def run_distributed(
    sweep: Sweep, out, client, *, resume: bool = False, progress: bool = True, retries: int = 3
) -> Path:
    """Run `sweep` into the store at `out` on the Dask cluster of `client` (a
    `distributed.Client`), one task per chunk; returns the store's path.

    `out` must be a directory every worker sees. `resume`: continue the store at `out`,
    submitting only its unfinished chunks. `retries`: how often a chunk's task that raises is
    run again. Raises `ValueError` for a bad spec or member before any task,
    `SweepStoreError` when the store cannot be created, `SweepTaskError` when a chunk fails
    after its retries (the other chunks' tasks are cancelled)."""
    import jax

    distributed, out, x64 = import_distributed(), Path(out), _x64(sweep)
    with jax.enable_x64(x64):
        p = plan(sweep)
        store, size = open_store(p, out, resume=resume, devices=_driver_devices(out))
    try:  # the driver holds the store's lock while its workers write the chunks
        _submit(client, sweep, out, store, size, x64, progress, retries, distributed)
    finally:
        store.close()
    return out


def _submit(client, sweep, out, store, size, x64, progress, retries, distributed) -> None:
    """Submit the store's unfinished chunks as tasks and wait for them."""
    todo = unfinished(store)
    if not todo:
        return
    tag, spec = uuid.uuid4().hex[:8], sweep.describe()
    futures = {
        client.submit(
            _chunk_task, spec, str(out.resolve()), *chunk, size, x64,
            pure=False, retries=retries, key=f"jaxrigid-sweep-{tag}-chunk-{chunk[0]}",
        ): chunk
        for chunk in todo
    }  # fmt: skip
    bar = sweep_progress(sweep.n_members, sweep.n_members - member_count(todo), progress)
    try:
        for future in distributed.as_completed(futures, loop=client.loop):
            chunk = futures[future]
            if future.status != "finished":  # "error" after its retries, or "cancelled"
                client.cancel(list(futures))
                err = future.exception() if future.status == "error" else None
                raise _failure(out, chunk, retries, err) from err
            bar.update(chunk[2] - chunk[1])
    finally:
        bar.close()
