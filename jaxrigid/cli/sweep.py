"""`jaxrigid sweep SPEC.toml [--out DIR] [--resume] [--devices N]`: run a parameter sweep into a resumable
store (`jaxrigid.sweep`); progress on stderr, a summary line on stdout."""

from __future__ import annotations

import time

from .errors import RunError, UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a parameter sweep from a TOML spec into a store")
    p.add_argument("spec", help="the sweep's TOML spec (see examples/*.toml)")
    p.add_argument("--out", help="output directory (default: the spec's name beside it)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted sweep")
    p.add_argument("--devices", type=int, help="local devices to shard over (default: all)")


def cmd_sweep(args) -> int:
    from pathlib import Path

    from ..sweep import SweepStoreError, load_spec, run

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
        run(sweep, out, resume=args.resume, devices=args.devices)
    except ValueError as err:
        raise UsageError(f"{spec}: {err}") from None
    except SweepStoreError as err:
        raise RunError(str(err)) from None
    seconds = time.perf_counter() - t
    print(f"{sweep.n_members} members of {sweep.case} in {seconds:.1f} s -> {out}")
    return 0
