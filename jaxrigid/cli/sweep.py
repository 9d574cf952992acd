"""`jaxrigid sweep SPEC.toml [--out DIR] [--resume] [--devices N]
[--scheduler ADDRESS | --scheduler-file FILE | --local-workers N]`: run a parameter sweep into
a resumable store (`jaxrigid.sweep`), in this process or on a Dask distributed cluster (one
task per chunk, `jaxrigid.sweep.cluster`); progress on stderr, a summary line on stdout.

`jaxrigid sweep verify DIR`: every chunk of the store at DIR read and checked against its
completion record; one line per chunk that is not finished, a summary line; exit status 1 when
a chunk is damaged, 0 otherwise (an unfinished sweep is not a damaged one).

`--devices` applies to a run in this process only: on a cluster each worker shards a chunk over
its own local devices, so `--devices` with a cluster option is a usage error rather than a
silently ignored option."""

from __future__ import annotations

import contextlib
import time

from .errors import RunError, UsageError


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a parameter sweep from a TOML spec into a store; `sweep verify DIR` checks one",
        epilog="jaxrigid sweep verify DIR: check every chunk of the store at DIR against its "
        "completion record; exit status 1 when a chunk is damaged, 0 otherwise",
    )
    p.add_argument("spec", help="the sweep's TOML spec (see examples/*.toml), or `verify`")
    p.add_argument("store", nargs="?", help="with `verify`: the store's directory")
    p.add_argument("--out", help="output directory (default: the spec's name beside it)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted sweep")
    p.add_argument("--devices", type=int, help="local devices to shard over (default: all)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="run on this Dask scheduler")
    where.add_argument(
        "--scheduler-file", metavar="FILE", help="run on the Dask scheduler this file names"
    )
    where.add_argument(
        "--local-workers", type=int, metavar="N", help="run on a local Dask cluster of N workers"
    )


def _on_cluster(args) -> bool:
    return any(v is not None for v in (args.scheduler, args.scheduler_file, args.local_workers))


@contextlib.contextmanager
def _client(args):
    """A `distributed.Client` for the cluster the options name (a local one is started and
    stopped here)."""
    from ..sweep.cluster import import_distributed

    try:
        distributed = import_distributed()
    except ImportError as err:
        raise UsageError(str(err)) from None
    if args.local_workers is None:
        where = args.scheduler or args.scheduler_file
        try:
            client = distributed.Client(args.scheduler, scheduler_file=args.scheduler_file)
        except (OSError, TimeoutError) as err:  # refused, timed out, no such file
            raise RunError(f"cannot reach the Dask scheduler at {where}: {err}") from None
        with client:
            yield client
        return
    if args.local_workers < 1:
        raise UsageError(f"--local-workers must be at least 1, got {args.local_workers}")
    cluster = distributed.LocalCluster(
        n_workers=args.local_workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client:
        yield client


def _run(sweep, out, args) -> None:
    from ..sweep import run, run_distributed

    if not _on_cluster(args):
        run(sweep, out, resume=args.resume, devices=args.devices)
        return
    if args.devices is not None:
        raise UsageError(
            "--devices applies to a run in this process; on a cluster each worker uses its "
            "own local devices (one worker per GPU: CUDA_VISIBLE_DEVICES)"
        )
    with _client(args) as client:
        run_distributed(sweep, out, client, resume=args.resume)


def cmd_verify(args) -> int:
    """`jaxrigid sweep verify DIR`."""
    from ..sweep import SweepStoreError, verify

    options = ("out", "devices", "scheduler", "scheduler_file", "local_workers")
    if args.store is None or args.resume or any(getattr(args, o) is not None for o in options):
        raise UsageError("usage: jaxrigid sweep verify DIR (no other option)")
    try:
        states = verify(args.store)
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None
    except SweepStoreError as err:
        raise RunError(str(err)) from None
    counts = {k: sum(c.state == k for c in states) for k in ("finished", "missing", "damaged")}
    for c in states:
        if c.state != "finished":
            why = f": {c.why}" if c.why else ""
            print(f"chunk {c.index} (members {c.start}..{c.stop - 1}) {c.state}{why}")
    members = states[-1].stop if states else 0
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    print(f"{args.store}: {members} members in {len(states)} chunks: {summary}")
    return 1 if counts["damaged"] else 0


def cmd_sweep(args) -> int:
    from pathlib import Path

    from ..sweep import SweepStoreError, load_spec
    from ..sweep.cluster import SweepTaskError

    if args.spec == "verify":
        return cmd_verify(args)
    if args.store is not None:
        raise UsageError(f"unexpected argument {args.store!r} (only `sweep verify` takes a DIR)")
    spec = Path(args.spec)
    out = Path(args.out) if args.out else spec.with_suffix("")
    try:
        sweep = load_spec(spec)
    except FileNotFoundError:
        raise UsageError(f"no such spec file: {spec}") from None
    except ValueError as err:
        raise UsageError(f"{spec}: {err}") from None
    t = time.perf_counter()
    try:
        _run(sweep, out, args)
    except ValueError as err:
        raise UsageError(f"{spec}: {err}") from None
    except (SweepStoreError, SweepTaskError) as err:
        raise RunError(str(err)) from None
    seconds = time.perf_counter() - t
    print(f"{sweep.n_members} members of {sweep.case} in {seconds:.1f} s -> {out}")
    return 0
