"""Sweep throughput: members per second of `jaxrigid.sweep.run` against chunk size, and against
the bare in-memory ensemble of the same members in the same run (issue 15, single device).

**Problem.** `krysl-torque-free`, IMIDM, dt = 0.01, `--steps` steps (1000: t_end = 10), float64;
a 2-D grid `Omega1 ∈ [−0.1, 0.1] (--n1) × Omega3 ∈ [−0.1, 0.1] (--n3)` with `Omega2 = 1` and a
diagonal inertia (`I12 = I13 = I23 = 0`), as `examples/dzhanibekov.toml`: 100 × 200 = 2·10⁴
members by default.

**Sweeps.** For each chunk size (`--chunks`, default 2¹⁰, 2¹², 2¹⁴ and `auto`, the one
`chunk_size_for` picks) and each keep (`Keep(invariants=False)`; the default `Keep()`, whose
`InvariantDrift` observer evaluates the invariants every step): `jaxrigid.sweep.run(sweep,
dir, progress=False)` end to end into a fresh directory (removed afterwards, untimed). The
first call of each configuration (`first_run_seconds`: everything, compiles included) is a
warm-up; then `--repeats` timed calls, median kept.

**Bare ensembles.** The same members built by the sweep's own `_build(plan, _parameters(plan,
arange(n)))` (jitted once, outside the timing), then `jax.jit(simulate(IMIDM(), model, state0,
dt, steps, save_every=steps, model_axes=0[, observer=InvariantDrift()]))`, AOT-compiled
(`compile_seconds`), one warm-up call, `--repeats` timed calls ended by `block_until_ready`,
median kept. The sweeps and the bare runs are timed in interleaved rounds (each round calls
every configuration once), so a change of load on the shared machine favours none; each sweep
is compared with the bare run of the same keep (`ratio_vs_bare` = sweep members/s ÷ bare
members/s; target: ≥ 0.9 on CPU).

**Where a sweep's time goes** (per timed call, from wrappers around `jaxrigid.sweep.run`'s
functions, installed by this script, and `jax.monitoring`'s compile events): `chunk_size_for`
(auto only: compiles a 256-member probe), `validate` (the build-only value-check pass over every
chunk: trace, compile, run), `_layout` (`eval_shape`), `Store.create`, `_parameters` (member
parameters from the axes, every call), `write_chunk` (zarr writes and done markers), compile
(trace + lowering + backend compile, summed over every compile during the call) and `loop`
(from the progress bar's creation to its close: the chunks' dispatch, compute, and writes).
`loop_minus_compile_members_per_s` is the sweep's steady rate without the chunk program's
compile.

Device count (issue 15's other axis): `--devices N` shards each chunk over N local devices
(`run(..., devices=N)`; on CPU forced host devices,
`XLA_FLAGS=--xla_force_host_platform_device_count=N`); the bare ensemble stays on one
device. The committed CPU results are one device. Writes
`sweep_throughput_<device>[_devices<N>][_quick].json`.

    python bench/sweep_throughput.py                        # ≈ 6.5 min on 2 loaded CPU cores
    python bench/sweep_throughput.py --quick --out /tmp/b   # smoke test, ≈ 2 min
    XLA_FLAGS=--xla_force_host_platform_device_count=2 \
        python bench/sweep_throughput.py --devices 2 --chunks 4096,auto --out /tmp/b
"""

from __future__ import annotations

import importlib
import shutil
import statistics
import tempfile
import time

import _common as common

p = common.parser(__doc__)
p.add_argument("--n1", type=int, default=None, help="Omega1 grid points (100; quick 16)")
p.add_argument("--n3", type=int, default=None, help="Omega3 grid points (200; quick 32)")
p.add_argument("--steps", type=int, default=None, help="steps per member (1000; quick 50)")
p.add_argument("--chunks", default=None, help="comma list of sizes or auto (1024,4096,16384,auto)")
p.add_argument("--repeats", type=int, default=None, help="timed calls, median kept (3; quick 1)")
p.add_argument("--devices", type=int, default=1, help="local devices a chunk is sharded over (1)")
A = p.parse_args()
A.n1 = A.n1 or (16 if A.quick else 100)
A.n3 = A.n3 or (32 if A.quick else 200)
A.steps = A.steps or (50 if A.quick else 1000)
A.repeats = A.repeats or (1 if A.quick else 3)
A.chunks = A.chunks or ("64,256,auto" if A.quick else "1024,4096,16384,auto")
common.enable_x64_for("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrigid.observers import InvariantDrift  # noqa: E402
from jaxrigid.simulation import simulate  # noqa: E402
from jaxrigid.sweep import Grid, Keep, Sweep  # noqa: E402
from jaxrigid.sweep import run as sweep_run  # noqa: E402
from jaxrigid.sweep.store import Store  # noqa: E402

R = importlib.import_module("jaxrigid.sweep.run")  # the module (the package exports `run`)
DT = 0.01
T0 = time.perf_counter()
MACHINE = common.machine()


# --- per-phase timers --------------------------------------------------------------------

PHASES: dict = {}
IN_LOOP = [False]  # inside run's chunk loop: compiles there are the chunk program's


def _add(name, seconds):
    PHASES[name] = PHASES.get(name, 0.0) + seconds


def _timed(name, fn):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(name, time.perf_counter() - t)

    return wrapper


for _name in ("validate", "chunk_size_for", "_layout", "_parameters"):
    setattr(R, _name, _timed(_name, getattr(R, _name)))
Store.create = classmethod(_timed("Store.create", Store.create.__func__))
Store.write_chunk = _timed("write_chunk", Store.write_chunk)
_progress = R._progress


class _LoopTimer:
    """The progress bar `run` makes right before its chunk loop and closes after it."""

    def __init__(self, bar):
        self.bar, self.t = bar, time.perf_counter()
        IN_LOOP[0] = True

    def update(self, n):
        self.bar.update(n)

    def close(self):
        self.bar.close()
        IN_LOOP[0] = False
        _add("loop", time.perf_counter() - self.t)


R._progress = lambda *a: _LoopTimer(_progress(*a))

_COMPILE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "backend_compile",
}


def _on_event(event, seconds, **_):
    if event in _COMPILE_EVENTS:
        _add(_COMPILE_EVENTS[event], seconds)
        if IN_LOOP[0]:
            _add("loop_compile", seconds)
        if event.endswith("backend_compile_duration"):
            _add("n_backend_compiles", 1)


jax.monitoring.register_event_duration_secs_listener(_on_event)


# --- the sweeps and their bare counterparts ----------------------------------------------


def make_sweep(chunk, invariants) -> Sweep:
    axes = (Grid("Omega1", -0.1, 0.1, A.n1), Grid("Omega3", -0.1, 0.1, A.n3))
    return Sweep(
        "krysl-torque-free",
        axes=axes,
        method="IMIDM",
        dt=DT,
        t_end=DT * A.steps,
        set={"Omega2": 1.0, "I12": 0.0, "I13": 0.0, "I23": 0.0},
        keep=Keep(invariants=invariants),
        chunk_size=chunk,
    )


def sweep_call(sweep):
    """One `sweep.run` into a fresh directory: (wall, cpu, phases, chunk size)."""
    tmp = tempfile.mkdtemp(prefix="sweep_bench_")
    PHASES.clear()
    try:
        t, c = time.perf_counter(), time.process_time()
        out = sweep_run(sweep, f"{tmp}/s", progress=False, devices=A.devices)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        size = int(Store.open(out).attrs["chunk_size"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return wall, cpu, dict(PHASES), size


n_members = A.n1 * A.n3
plan = R.plan(make_sweep(None, True))
params = {k: np.asarray(v) for k, v in R._parameters(plan, np.arange(n_members)).items()}
model, state0 = jax.block_until_ready(jax.jit(lambda q: R._build(plan, q))(params))
dt = jnp.asarray(plan.dt, plan.dtype)


def bare_fn(observer):
    def f(m, s):
        return simulate(plan.integrator, m, s, dt, plan.n_steps, save_every=plan.n_steps,
                        model_axes=0, observer=observer)  # fmt: skip

    return f


keeps = {"no_invariants": False, "invariants": True}
chunks = [None if c == "auto" else int(c) for c in A.chunks.split(",")]
configs = {}  # name -> dict(kind, keep, ...)
for keep_name in keeps:
    configs[f"bare/{keep_name}"] = dict(kind="bare", keep=keep_name)
    for c in chunks:
        configs[f"sweep/{keep_name}/{c or 'auto'}"] = dict(kind="sweep", keep=keep_name, chunk=c)

common.log(f"{n_members} members × {plan.n_steps} steps; load {common.load_average()}")
timings, first = {}, {}
for name, cfg in configs.items():
    timings[name] = common.Timing([], [])
    if cfg["kind"] == "bare":
        observer = InvariantDrift() if keeps[cfg["keep"]] else None
        cfg["compiled"], cfg["compile_seconds"] = common.aot_compile(
            bare_fn(observer), model, state0
        )
        t = time.perf_counter()
        sol = jax.block_until_ready(cfg["compiled"](model, state0))
        first[name] = dict(seconds=time.perf_counter() - t, compile_seconds=cfg["compile_seconds"])
        assert bool(jnp.all(sol.outcome.result == 0)), name
    else:
        cfg["sweep"] = make_sweep(cfg["chunk"], keeps[cfg["keep"]])
        wall, cpu, phases, size = sweep_call(cfg["sweep"])
        cfg["chunk_size"] = size
        first[name] = dict(seconds=wall, phases=phases)
    common.log(f"  warm-up {name}: {first[name]['seconds']:.1f} s")

phases_all = {name: [] for name in configs}
for r in range(A.repeats):
    for name, cfg in configs.items():
        if cfg["kind"] == "bare":
            t, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(cfg["compiled"](model, state0))
            wall, cpu = time.perf_counter() - t, time.process_time() - c
        else:
            wall, cpu, phases, _ = sweep_call(cfg["sweep"])
            phases_all[name].append(phases)
        timings[name].wall.append(wall)
        timings[name].cpu.append(cpu)
        common.log(f"  round {r + 1} {name}: {wall:.2f} s  (load {common.load_average()})")


# --- records -----------------------------------------------------------------------------

records = {}
for name, cfg in configs.items():
    rec = timings[name].record()
    rec |= dict(kind=cfg["kind"], keep=cfg["keep"], members=n_members, steps=plan.n_steps)
    rec["members_per_s"] = n_members / rec["seconds"]
    rec["first_run"] = first[name]
    if cfg["kind"] == "bare":
        rec["compile_seconds"] = cfg["compile_seconds"]
    else:
        size = cfg["chunk_size"]
        n_chunks = -(-n_members // size)
        rec |= dict(chunk_size=size, chunk_size_requested=cfg["chunk"] or "auto",
                    n_chunks=n_chunks, padded_members=n_chunks * size - n_members)  # fmt: skip
        # each phase: the median over the timed calls
        ph = phases_all[name]
        keys = sorted({k for d in ph for k in d})
        rec["phases_seconds"] = {k: statistics.median(d.get(k, 0.0) for d in ph) for k in keys}
        compile_s = sum(rec["phases_seconds"].get(k, 0.0) for k in ("trace", "lower",
                                                                   "backend_compile"))  # fmt: skip
        rec["compile_seconds_in_run"] = compile_s
        loop = rec["phases_seconds"].get("loop", float("nan"))
        loop_compile = rec["phases_seconds"].get("loop_compile", 0.0)
        rec["loop_members_per_s"] = n_members / loop
        rec["loop_minus_compile_members_per_s"] = n_members / (loop - loop_compile)
    records[name] = rec

for name, rec in records.items():
    if rec["kind"] != "sweep":
        continue
    ph = rec["phases_seconds"]
    bare = records[f"bare/{rec['keep']}"]
    rec["ratio_vs_bare"] = rec["members_per_s"] / bare["members_per_s"]
    rec["ratio_loop_vs_bare"] = rec["loop_members_per_s"] / bare["members_per_s"]
    rec["ratio_loop_minus_compile_vs_bare"] = (
        rec["loop_minus_compile_members_per_s"] / bare["members_per_s"]
    )
    pre = sum(ph.get(k, 0.0) for k in ("validate", "chunk_size_for", "_layout", "Store.create"))
    rec["pre_loop_seconds"] = pre
    # what the call would take if its compiles were cached (jax's persistent cache, or a
    # chunk program kept across calls): its seconds less every compile during it
    rec["members_per_s_without_compile"] = n_members / (
        rec["seconds"] - rec["compile_seconds_in_run"]
    )
    rec["ratio_without_compile_vs_bare"] = (
        rec["members_per_s_without_compile"] / bare["members_per_s"]
    )
    rec["other_seconds"] = rec["seconds"] - pre - ph.get("loop", 0.0)

rows = []
for name, rec in records.items():
    ph = rec.get("phases_seconds", {})
    rows.append(
        f"| {rec['keep']} | {rec['kind']} | {rec.get('chunk_size_requested', '')}"
        f"{'' if rec['kind'] == 'bare' else ' → ' + str(rec['chunk_size'])} "
        f"| {rec['seconds']:.2f} | {rec['members_per_s']:.0f} "
        f"| {rec.get('ratio_vs_bare', 1.0):.2f} | {rec['first_run']['seconds']:.1f} "
        f"| {ph.get('validate', 0):.2f} | {ph.get('chunk_size_for', 0):.2f} "
        f"| {ph.get('trace', 0) + ph.get('lower', 0) + ph.get('backend_compile', 0):.2f} "
        f"| {ph.get('write_chunk', 0):.2f} | {ph.get('_parameters', 0):.3f} "
        f"| {rec.get('padded_members', 0)} | {ph.get('loop', float('nan')):.2f} "
        f"| {rec.get('ratio_loop_minus_compile_vs_bare', 1.0):.2f} |"
    )
header = (
    "| keep | run | chunk | s (median) | members/s | ×bare | first run s | validate s "
    "| chunk_size_for s | compile s | writes s | params s | padded | loop s "
    "| loop − compile ×bare |\n"
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)
print(header)
print("\n".join(rows))

record = dict(
    problem=dict(
        case="krysl-torque-free",
        method="IMIDM",
        dt=DT,
        steps=plan.n_steps,
        members=n_members,
        grid=[A.n1, A.n3],
        dtype="float64",
    ),  # fmt: skip
    repeats=A.repeats,
    seconds_statistic="median",
    devices=A.devices,
    device_count_axis="the sweep's chunks sharded over `devices` local devices; bare: one",
    load_average_at_start=MACHINE["load_average"],
    machine=MACHINE,
    results=records,
    table_markdown=header + "\n" + "\n".join(rows),
)
tag = common.device_tag(quick=A.quick)
if A.devices > 1:
    tag = tag.replace("_quick", "") + f"_devices{A.devices}" + ("_quick" if A.quick else "")
name = f"sweep_throughput_{tag}.json"
path = common.write_results(A.out, name, record, t_start=T0)
common.log(f"wrote {path}")
common.log(f"total {time.perf_counter() - T0:.0f} s")
