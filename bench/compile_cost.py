"""Where build time goes (issue 31): trace, lower and compile seconds of jaxrigid's programs
against their diffrax peers, with an empty and with a warm persistent compilation cache.

**Programs** (`_compile_programs.py`; ratios, targets and the table in `_compile_report.py`):
`forward` (default `IMIDM()`, `members` torque-free bodies × `steps`, against vmapped diffrax
Tsit5/RK4, fixed step), `gradient` (`jax.grad` through one trajectory w.r.t. (Π₀, inertia),
IMIDM against diffrax Tsit5/RK4 with `RecursiveCheckpointAdjoint`; each with its forward),
`rolling_ball` (the gradient through the two-circles ball, RKMK4 against diffrax RK4 on the
same vector field), `lp_split` (`LP-split:yoshida6` on the Coulomb wall against diffrax
Dopri8), `dla_midpoint` (`DLA-midpoint` on the passive unreduced ball, diffrax RK4 beside
it), `dla_midpoint_quick` (the same under a caller's `jit` with the quick build's
`"repeated"` options, as the docs advise) and `dla_midpoint_direct` (the same with
`simulate` called directly, built with the method's `build_profile`); `cli` is `jaxrigid
run krysl-torque-free --json`, `control` is `jaxrigid control reach-point --json` (the
whole process's wall).

**How.** Each program runs in its own worker process (`--worker NAME`), its jaxrigid programs
and their diffrax peers side by side: one throw-away compile first (so that no entry pays for
XLA's start-up), then per entry `jitted.trace(*args)` → `.lower()` → `.compile()`, each stage
timed by `time.perf_counter` (jax without `.trace`: `.lower` times trace and lower together),
the StableHLO's line count (`lowered.as_text()`), JAX's compile events per stage (nested
backend compiles, persistent-cache lookups, hits and writes), then the run: one warm-up call and
`--repeats` calls round robin over the entries, more where the calls are short (`time_rounds`:
about 0.25 s of the slowest entry, at most 25; median, `jax.block_until_ready`). A gradient
is built before its forward. The parent runs each worker twice with one fresh cache directory
(`jaxrigid.enable_compilation_cache(dir)`): `cold` (empty cache), then `cached`; and
`jaxrigid run` and `jaxrigid control reach-point` twice each with `JAXRIGID_CACHE_DIR=<fresh
dir>`. Writes
`compile_cost_<device>[_quick].json`; a table goes to stdout, progress to stderr.

    python bench/compile_cost.py                            # 1024 members x 1000 steps
    python bench/compile_cost.py --quick --out /tmp/bench   # 16 members x 50 steps
    python bench/compile_cost.py --programs forward,cli
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common
from _compile_report import PHASES, _f, _ratio, print_tables, ratios, targets

ALL = (
    "forward", "forward_direct", "gradient", "rolling_ball", "lp_split", "dla_midpoint",
    "dla_midpoint_quick", "dla_midpoint_direct", "cli", "control",
)  # fmt: skip
COMMANDS = ("cli", "control")  # whole `jaxrigid` processes, not programs in a worker

p = common.parser(__doc__)
p.add_argument("--members", type=int, default=None, help="ensemble size (1024; quick 16)")
p.add_argument("--steps", type=int, default=None, help="steps per run (1000; quick 50)")
p.add_argument("--dt", type=float, default=0.01)
p.add_argument("--repeats", type=int, default=None, help="timed calls, median (3; quick 1)")
p.add_argument("--programs", default=",".join(ALL), help=f"comma list of {', '.join(ALL)}")
p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
p.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
A = p.parse_args()
A.members = A.members or (16 if A.quick else 1024)
A.steps = A.steps or (50 if A.quick else 1000)
A.repeats = A.repeats or (1 if A.quick else 3)
A.programs = [s.strip() for s in A.programs.split(",") if s.strip()]
if unknown := set(A.programs) - set(ALL):
    p.error(f"unknown programs {sorted(unknown)}; known {list(ALL)}")
common.enable_x64_for("float64")


# ------------------------------------------------------------------------------------------
# The worker: one program's entries, built and run in this process.


class Events:
    """Counts and seconds of JAX's monitoring events, for per-stage differences."""

    KEYS = {
        "/jax/core/compile/backend_compile_duration": "backend_compiles",
        "/jax/compilation_cache/compile_requests_use_cache": "cache_requests",
        "/jax/compilation_cache/cache_hits": "cache_hits",
        # JAX records this event when it *writes* an entry (after a miss; never for a program
        # with host callbacks, which JAX does not cache)
        "/jax/compilation_cache/cache_misses": "cache_writes",
        "/jax/core/compile/jaxpr_trace_duration": "jaxpr_traces",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "mlir_modules",
    }

    def __init__(self):
        import jax.monitoring as monitoring

        self.n, self.s = collections.Counter(), collections.Counter()
        monitoring.register_event_listener(lambda e, **kw: self.n.update([e]))
        monitoring.register_event_duration_secs_listener(self._duration)

    def _duration(self, event, seconds, **kw):
        self.n[event] += 1
        self.s[event] += seconds

    def snapshot(self):
        return collections.Counter(self.n), collections.Counter(self.s)

    @classmethod
    def between(cls, a, b) -> dict | None:
        """The events from snapshot `a` to snapshot `b` (counts, and seconds where timed)."""
        if a is None or b is None:
            return None
        out = {}
        for event, key in cls.KEYS.items():
            if n := b[0][event] - a[0][event]:
                out[key] = n
            if (s := b[1][event] - a[1][event]) > 0:
                out[key + "_seconds"] = s
        return out


def build(jitted, args, events):
    """AOT trace → lower → compile, each stage timed; the compiled program and its record."""
    clock, snaps = [time.perf_counter()], [events.snapshot()]
    if hasattr(jitted, "trace"):
        lowered = jitted.trace(*args)
        clock.append(time.perf_counter())
        snaps.append(events.snapshot())
        lowered = lowered.lower()
    else:  # older jax: trace and lower in one
        lowered = jitted.lower(*args)
        clock.append(None)
        snaps.append(None)
    clock.append(time.perf_counter())
    snaps.append(events.snapshot())
    compiled = lowered.compile()
    clock.append(time.perf_counter())
    snaps.append(events.snapshot())
    traced = clock[1] is not None
    rec = {
        "trace_seconds": clock[1] - clock[0] if traced else None,
        "lower_seconds": clock[2] - (clock[1] if traced else clock[0]),
        "compile_seconds": clock[3] - clock[2],
        "build_seconds": clock[3] - clock[0],
        "trace_includes_lower": not traced,
        "events": {
            "trace": Events.between(snaps[0], snaps[1]),
            "lower": Events.between(snaps[1] if traced else snaps[0], snaps[2]),
            "compile": Events.between(snaps[2], snaps[3]),
        },
    }
    text = lowered.as_text()
    rec["stablehlo_lines"] = text.count("\n") + 1
    rec["stablehlo_while_ops"] = text.count("stablehlo.while")
    rec["stablehlo_callbacks"] = sum(
        1 for line in text.splitlines() if "custom_call" in line and "callback" in line
    )
    return compiled, rec


def build_direct(fn, args, events):
    """A plain call that builds its own programs: `build_seconds` is its first call's wall
    less a second call's (the run), `trace`/`lower`/`compile` JAX's event seconds in the first
    call (summed; nested traces may overlap); no StableHLO (the programs are not staged)."""
    import jax

    snap, t0 = events.snapshot(), time.perf_counter()
    jax.block_until_ready(fn(*args))
    t1 = time.perf_counter()
    first = Events.between(snap, events.snapshot())
    jax.block_until_ready(fn(*args))
    run = time.perf_counter() - t1
    rec = {
        "trace_seconds": first.get("jaxpr_traces_seconds", 0.0),
        "lower_seconds": first.get("mlir_modules_seconds", 0.0),
        "compile_seconds": first.get("backend_compiles_seconds", 0.0),
        "build_seconds": (t1 - t0) - run,
        "first_call_seconds": t1 - t0,
        "second_call_seconds": run,
        "direct": True,
        "events": {"first_call": first},
        "stablehlo_lines": None,
    }
    return (lambda: fn(*args)), rec


def time_rounds(compiled):
    """`common.time_interleaved` over `--repeats` rounds, or more where the calls are short:
    a gradient of one trajectory runs for milliseconds, where one scheduling hiccup moved a
    median of three by a third, so the rounds fill about 0.25 s of the slowest entry (at most
    25). Returns the timings and the rounds."""
    timings = common.time_interleaved(compiled, (), 1)
    slowest = max((min(t.wall) for t in timings.values()), default=1.0)
    rounds = max(A.repeats, min(25, math.ceil(0.25 / max(slowest, 1e-6))))
    if rounds > 1:
        more = common.time_interleaved(compiled, (), rounds - 1, warmup=False)
        for name, t in more.items():
            timings[name].wall += t.wall
            timings[name].cpu += t.cpu
    return timings, rounds


def worker():
    t0 = time.perf_counter()
    import jax
    import numpy as np

    import jaxrigid

    cache = jaxrigid.enable_compilation_cache(A.cache_dir) if A.cache_dir else None
    load_start = common.load_average()
    events = Events()
    t = time.perf_counter()
    jax.jit(lambda x: x + 1.0).lower(1.0).compile()(1.0).block_until_ready()
    warmup_s = time.perf_counter() - t
    import _compile_programs as programs

    entries = programs.PROGRAMS[A.worker](A.members, A.steps, A.dt)
    records, compiled = [], {}
    for i, e in enumerate(entries):
        rec = {"name": e.name, "library": e.library, "kind": e.kind, "what": e.what}
        common.log(f"  [{A.worker}] {e.name} ({e.kind}): build ...")
        try:
            if e.direct:
                compiled[i], rec["build"] = build_direct(e.fn, e.args, events)
            else:
                c, rec["build"] = build(e.fn, e.args, events)
                compiled[i] = lambda c=c, a=e.args: c(*a)
            b = rec["build"]
            common.log(
                f"    trace/lower/compile {_f(b['trace_seconds'])}/{_f(b['lower_seconds'])}"
                f"/{_f(b['compile_seconds'])} s"
            )
        except Exception as err:  # recorded, the other entries still run
            rec["error"] = f"{type(err).__name__}: {err}"[:2000]
            common.log(f"    FAILED: {rec['error'][:300]}")
        records.append(rec)
    timings, rounds = time_rounds(compiled)
    for i, timing in timings.items():
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(timing.out)]
        records[i]["run"] = timing.record() | {
            "output_finite": bool(all(np.isfinite(x).all() for x in leaves if x.dtype.kind == "f"))
        }
        if len(leaves) == 1 and leaves[0].shape == ():
            records[i]["run"]["loss"] = float(leaves[0])
        elif records[i]["kind"] == "gradient":
            records[i]["run"]["gradient_norm"] = float(
                np.sqrt(sum(np.sum(x.astype(float) ** 2) for x in leaves))
            )
    out = {
        "program": A.worker,
        "members": A.members,
        "steps": A.steps,
        "dt": A.dt,
        "repeats": rounds,
        "cache_dir": None if cache is None else str(cache),
        "x64": bool(jax.config.jax_enable_x64),
        "warmup_compile_seconds": warmup_s,
        "worker_seconds": time.perf_counter() - t0,
        "load_average_start_end": [load_start, common.load_average()],
        "entries": records,
    }
    print(json.dumps(common.to_json(out)), flush=True)


# ------------------------------------------------------------------------------------------
# The parent: each program cold then cached, in fresh processes; the `jaxrigid run` command.


def cache_stats(path) -> dict:
    files = [f for f in Path(path).rglob("*") if f.is_file()]
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files)}


def spawn(cmd, env=None):
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=common.ROOT)
    return out, time.perf_counter() - t


def run_program(name) -> dict:
    cache = tempfile.mkdtemp(prefix=f"compile_cost_{name}_")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--cache-dir", cache]
    cmd += ["--members", str(A.members), "--steps", str(A.steps), "--dt", str(A.dt)]
    cmd += ["--repeats", str(A.repeats)]
    env = dict(os.environ, JAXRIGID_CACHE_DIR=cache)
    env.pop("JAXRIGID_NO_COMPILATION_CACHE", None)
    rec = {"phases": {}, "process_wall_seconds": {}, "cache": {}}
    try:
        for phase in PHASES:
            common.log(f"{name}: {phase} worker ...")
            out, wall = spawn(cmd, env)
            rec["process_wall_seconds"][phase] = wall
            rec["cache"][phase] = cache_stats(cache)
            if out.returncode != 0:
                rec["phases"][phase] = {"error": out.stderr[-3000:]}
                common.log(f"  worker failed:\n{out.stderr[-1500:]}")
                continue
            rec["phases"][phase] = json.loads(out.stdout.strip().splitlines()[-1])
            common.log(f"  {wall:.1f} s")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    walls = rec["process_wall_seconds"]
    if len(walls) == 2:
        rec["process_wall_cached_over_cold"] = walls["cached"] / walls["cold"]
    rec["ratios"] = {ph: ratios(r.get("entries", [])) for ph, r in rec["phases"].items()}
    return rec


def run_command(args, fields) -> dict:
    """`jaxrigid ARGS --json --out <tmp>` twice with one fresh `JAXRIGID_CACHE_DIR` (`cold`,
    then `cached`): each process's wall and CPU seconds (its own and its children's), the cache
    it left, and `fields` of the JSON it printed."""
    exe = Path(sys.executable).parent / "jaxrigid"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "jaxrigid"]
    tmp = tempfile.mkdtemp(prefix="compile_cost_cmd_")
    env = dict(os.environ, JAXRIGID_CACHE_DIR=os.path.join(tmp, "cache"))
    env.pop("JAXRIGID_NO_COMPILATION_CACHE", None)
    rec = {"command": " ".join(base + args + ["--json", "--out", "<tmp>"])}
    rec["environment"] = "JAXRIGID_CACHE_DIR=<one fresh directory for both processes>"
    try:
        for phase in PHASES:
            cmd = base + args + ["--json", "--out", os.path.join(tmp, phase)]
            common.log(f"{args[0]}: {phase} ...")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out, wall = spawn(cmd, env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            r = rec[phase] = {"process_wall_seconds": wall, "process_cpu_seconds": cpu}
            r["returncode"] = out.returncode
            r["cache"] = (
                cache_stats(env["JAXRIGID_CACHE_DIR"])
                if os.path.isdir(env["JAXRIGID_CACHE_DIR"])
                else {"files": 0, "bytes": 0}
            )
            try:
                doc = json.loads(out.stdout[out.stdout.index("{") :])
                r |= {k: doc.get(k) for k in fields}
            except ValueError:
                r["error"] = (out.stderr or out.stdout)[-2000:]
            common.log(f"  {wall:.1f} s wall, {cpu:.1f} CPU-s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rec["process_wall_cached_over_cold"] = _ratio(
        rec["cached"]["process_wall_seconds"], rec["cold"]["process_wall_seconds"]
    )
    return rec


def _target(what, value, limit) -> dict:
    return {"target": what, "value": value, "pass": None if value is None else bool(value <= limit)}


def run_cli() -> dict:
    """`jaxrigid run krysl-torque-free`: the second process's compile against the first's."""
    rec = run_command(["run", "krysl-torque-free"], ("compile_seconds", "run_seconds", "n_steps"))
    c0, c1 = rec["cold"].get("compile_seconds"), rec["cached"].get("compile_seconds")
    rec["compile_cached_over_cold"] = v = _ratio(c1, c0)
    rec["target"] = _target("second process's compile_seconds <= 0.3 x the first's", v, 0.3)
    return rec


def run_control() -> dict:
    """`jaxrigid control reach-point` (one start, RKMK4, dt 0.05, the optimum re-simulated):
    the whole process's wall, cold (≤ 30 s) and with the cache the first one left (≤ 15 s)."""
    fields = ("converged", "cost_final", "infeasibility", "iterations", "total_seconds")
    rec = run_command(["control", "reach-point"], fields)
    rec["targets"] = [
        _target(
            f"{phase} process_wall_seconds <= {limit}",
            rec[phase].get("process_wall_seconds"),
            limit,
        )
        for phase, limit in (("cold", 30.0), ("cached", 15.0))
    ]
    return rec


def main():
    t0, info = time.perf_counter(), common.machine()
    record = {"machine": info, "programs": {}}
    for name in [n for n in A.programs if n not in COMMANDS]:
        record["programs"][name] = run_program(name)
    record["targets"] = targets(record["programs"])
    if "cli" in A.programs:
        record["cli"] = run_cli()
    if "control" in A.programs:
        record["control"] = run_control()
    record["config"] = {
        "members": A.members,
        "steps": A.steps,
        "dt": A.dt,
        "repeats": A.repeats,
        "phases": "cold: a fresh process with an empty persistent cache directory "
        "(jaxrigid.enable_compilation_cache); cached: a second fresh process, same directory",
        "stages": "jitted.trace(*args) -> .lower() -> .compile(), time.perf_counter; "
        "build = the three; run = median of `repeats` calls after a warm-up, round robin "
        "(more rounds for short calls: each worker's record has the rounds it took)",
        "events": "JAX monitoring events per stage: backend_compiles (in the trace stage: "
        "nested programs compiled while tracing), cache_requests (lookups in the persistent "
        "cache), cache_hits, cache_writes (JAX's cache_misses event, recorded on a write; "
        "programs with host callbacks are never written)",
    }
    record["load_average_at_start"] = info["load_average"]
    path = common.write_results(
        A.out, f"compile_cost_{common.device_tag(quick=A.quick)}.json", record, t0
    )
    print_tables(record, A.members, A.steps)
    print(f"wrote {path} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    worker() if A.worker else main()
