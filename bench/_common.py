"""What the benchmark scripts share: the machine record, timing of compiled code, throughput
records and their ratios to a peer, and the results JSON.

The scripts run as `python bench/<script>.py`, so `bench/` is on the path and they import
this as `from _common import ...`. Nothing here creates a JAX array at import, so a script
may still set `jax_enable_x64` after importing it (`enable_x64_for`). The rigid-body problem
and its diffrax peer are in `_harness.py`.

Timing: `aot_compile` lowers and compiles ahead of time (its seconds are the compile time);
`time_interleaved` calls each compiled function once to warm up, then `repeats` rounds in which
every function is called once (round robin, so that a change of machine load during the run
favours none), each call ended by `jax.block_until_ready`; it keeps every call's wall and
process-CPU seconds, and `Timing.seconds` is their median (or the best, `statistic="best"`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np

from jaxrigid.compilation_cache import ensure_compilation_cache

# The persistent compilation cache, as the command uses it (unless JAXRIGID_NO_COMPILATION_CACHE
# is set): a rerun loads its programs; compile times a script reports are then load times.
ensure_compilation_cache()

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
ROOT = BENCH.parent


def log(msg):
    """Progress to stderr (stdout carries the tables)."""
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# The machine.


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else `platform.processor()`."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _git(*args) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit() -> str | None:
    return _git("rev-parse", "HEAD") or None


def jaxrigid_source_sha256() -> str | None:
    """A hash of the `jaxrigid` package's source on the path (it is edited concurrently);
    found without importing it, so that calling this never imports jax code early."""
    spec = importlib.util.find_spec("jaxrigid")
    if spec is None or spec.origin is None:
        return None
    pkg = Path(spec.origin).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(pkg.rglob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def load_average():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine(
    packages=("jax", "jaxlib", "equinox", "numpy", "scipy", "diffrax", "jaxrigid"),
) -> dict:
    """The machine, the JAX devices, package versions, dtype setting, load average, date, the
    git commit and whether `jaxrigid/` differed from it, and a hash of the imported source."""
    device = jax.devices()[0]
    versions = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = None
    dirty = _git("status", "--porcelain", "--", "jaxrigid")
    return {
        "uname": platform.uname()._asdict(),
        "processor": cpu_name(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "device": str(device),
        "devices": [str(d) for d in jax.devices()],
        "device_kind": device.device_kind,
        "platform": device.platform,
        "versions": versions,
        "python": platform.python_version(),
        "x64_enabled": bool(jax.config.jax_enable_x64),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
        "git_commit": git_commit(),
        "jaxrigid_package_modified_vs_commit": None if dirty is None else bool(dirty),
        "jaxrigid_source_sha256": jaxrigid_source_sha256(),
        "load_average": load_average(),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def device_tag(dtype="float64", quick=False) -> str:
    """`cpu` or `<platform>_<device kind>`, then `_<dtype>` unless float64, `_quick`."""
    d = jax.devices()[0]
    if d.platform == "cpu":
        tag = "cpu"
    else:
        tag = (
            d.platform + "_" + "".join(c if c.isalnum() else "_" for c in d.device_kind).strip("_")
        )
    if str(dtype) != "float64":
        tag += f"_{dtype}"
    return tag + ("_quick" if quick else "")


# ------------------------------------------------------------------------------------------
# Command line and dtype.


def parser(doc: str, *, dtype=False) -> argparse.ArgumentParser:
    """A parser with the options every benchmark has: `--quick`, `--out` (and `--dtype`)."""
    p = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="smoke test: small sizes, seconds")
    p.add_argument("--out", default=str(RESULTS), help="results folder (default bench/results)")
    if dtype:
        p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    return p


def enable_x64_for(dtype: str):
    """x64 on for float64 only; call before any array is made."""
    jax.config.update("jax_enable_x64", str(dtype) == "float64")


# ------------------------------------------------------------------------------------------
# Timing compiled code.


def aot_compile(fn, *args):
    """`jax.jit(fn).lower(*args).compile()` (fn may already be jitted) and its seconds."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    t = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    return compiled, time.perf_counter() - t


def memory_bytes(compiled) -> dict:
    """`compiled.memory_analysis()` of an AOT-compiled program (`aot_compile`): temporaries
    (the buffers a reverse pass keeps live), arguments and outputs, in bytes. An equinox
    `Compiled` (`eqx.filter_jit(f).lower(...).compile()`) is unwrapped."""
    stats = getattr(compiled, "compiled", compiled).memory_analysis()
    return {
        "temp_bytes": int(stats.temp_size_in_bytes),
        "argument_bytes": int(stats.argument_size_in_bytes),
        "output_bytes": int(stats.output_size_in_bytes),
    }


def loglog_slope(x, y) -> float:
    """The exponent `a` of the least-squares fit `log y = a log x + b` (a power law)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


@dataclasses.dataclass
class Timing:
    """Every timed call's wall and process-CPU seconds, and the warm-up call's output."""

    wall: list
    cpu: list
    out: object = None
    compile_seconds: float | None = None
    statistic: str = "median"

    def _pick(self, xs):
        return min(xs) if self.statistic == "best" else statistics.median(xs)

    @property
    def seconds(self):
        return self._pick(self.wall)

    @property
    def cpu_seconds(self):
        return self._pick(self.cpu)

    def record(self) -> dict:
        rec = {
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "seconds_statistic": self.statistic,
            "seconds_all": list(self.wall),
            "repeats": len(self.wall),
        }
        if self.compile_seconds is not None:
            rec["compile_seconds"] = self.compile_seconds
        return rec


def time_interleaved(fns: dict, args, repeats, *, warmup=True, statistic="median"):
    """{name: Timing} of `fns[name](*args)`: one warm-up call each (its output kept), then
    `repeats` round-robin rounds, every call ended by `jax.block_until_ready`."""
    out = {}
    for name, f in fns.items():
        out[name] = Timing([], [], statistic=statistic)
        if warmup:
            out[name].out = jax.block_until_ready(f(*args))
    for _ in range(max(repeats, 1)):
        for name, f in fns.items():
            t, c = time.perf_counter(), time.process_time()
            res = jax.block_until_ready(f(*args))
            out[name].wall.append(time.perf_counter() - t)
            out[name].cpu.append(time.process_time() - c)
            if out[name].out is None:
                out[name].out = res
    return out


def time_compiled(fn, args, repeats=1, *, statistic="median") -> Timing:
    """AOT-compile `fn` on `args`, warm up, time `repeats` calls (compile seconds recorded)."""
    compiled, compile_s = aot_compile(fn, *args)
    timing = time_interleaved({"f": compiled}, args, repeats, statistic=statistic)["f"]
    timing.compile_seconds = compile_s
    return timing


# ------------------------------------------------------------------------------------------
# Throughput records and their ratio to a peer measured in the same run.


def throughput_record(timing: Timing, members, steps, dt=None, body_steps=None) -> dict:
    """`timing.record()` plus body-steps (members × steps unless given) per second, per CPU
    second, and simulated member-time per second when `dt` is given."""
    rec = timing.record()
    body_steps = members * steps if body_steps is None else body_steps
    rec["body_steps"] = body_steps
    rec["body_steps_per_s"] = body_steps / rec["seconds"]
    rec["body_steps_per_cpu_s"] = body_steps / rec["cpu_seconds"]
    if dt is not None:
        rec["member_time_units_per_s"] = members * steps * dt / rec["seconds"]
    return rec


def add_ratios(records: dict, peer: str, suffix=None):
    """Each record's ratios to `records[peer]` (same run): body-steps/s, CPU time and, where
    both have it, simulated time per second. Keys end in `_vs_<suffix or peer>`."""
    ref = records.get(peer)
    if ref is None:
        return records
    tag = suffix or peer
    for rec in records.values():
        rec[f"ratio_body_steps_vs_{tag}"] = rec["body_steps_per_s"] / ref["body_steps_per_s"]
        rec[f"ratio_cpu_time_vs_{tag}"] = ref["cpu_seconds"] / rec["cpu_seconds"]
        if "member_time_units_per_s" in rec and "member_time_units_per_s" in ref:
            rec[f"ratio_time_units_vs_{tag}"] = (
                rec["member_time_units_per_s"] / ref["member_time_units_per_s"]
            )
    return records


# ------------------------------------------------------------------------------------------
# Results JSON.


def to_json(obj):
    """Arrays and numpy scalars to plain Python; non-finite floats to strings."""
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_json(obj.tolist())
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return to_json(obj.item())
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):  # a jax array
        return to_json(np.asarray(obj))
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj


def command_line() -> str:
    return " ".join(["python", os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])


def write_results(out_dir, filename, record: dict, t_start=None) -> Path:
    """Write `{benchmark, command, machine, ...record, total_seconds, load_average_at_end}`
    as JSON to `out_dir/filename` and return its path."""
    doc = {"benchmark": os.path.relpath(sys.argv[0], ROOT), "command": command_line()}
    doc.setdefault("machine", machine())
    doc |= record
    if t_start is not None:
        doc["total_seconds"] = time.perf_counter() - t_start
    doc["load_average_at_end"] = load_average()
    path = Path(out_dir) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(doc), indent=1))
    return path


def jaxpr_census(jaxpr, counts):
    """Add `jaxpr`'s equations per primitive to the `collections.Counter` `counts`, those of
    nested jaxprs (loop bodies, branches, custom rules) included; returns `counts`."""
    import jax

    for eqn in jaxpr.eqns:
        counts[eqn.primitive.name] += 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                if isinstance(sub, jax.extend.core.ClosedJaxpr):
                    jaxpr_census(sub.jaxpr, counts)
                elif isinstance(sub, jax.extend.core.Jaxpr):
                    jaxpr_census(sub, counts)
    return counts


@contextlib.contextmanager
def worktree(commit: str | None, path: str):
    """A detached `git worktree` of `commit` at `path`, removed afterwards; yields its path.
    `commit=None`: the checkout itself (nothing made)."""
    if commit is None:
        yield str(ROOT)
        return
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", path, commit],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", path], capture_output=True
        )
