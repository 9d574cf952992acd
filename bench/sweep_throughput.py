"""Sweep throughput: members per second of `jaxrigid.sweep.run` against chunk size and device
count, against the bare in-memory ensemble of the same members in the same run, and the chunk
program built with `shard_map` against the library's jit + `NamedSharding` one (issue 15).

**Problem.** `krysl-torque-free`, IMIDM, dt = 0.01, `--steps` steps (1000: t_end = 10), float64;
a 2-D grid `Omega1 ∈ [−0.1, 0.1] (--n1) × Omega3 ∈ [−0.1, 0.1] (--n3)` with `Omega2 = 1` and a
diagonal inertia (`I12 = I13 = I23 = 0`), as `examples/dzhanibekov.toml`: 100 × 200 = 2·10⁴
members by default.

**Sweeps.** For each keep (`--keeps`: `no_invariants` = `Keep(invariants=False)`;
`invariants` = the default `Keep()`, whose `InvariantDrift` observer evaluates the invariants
every step), each device count (`--devices`, a comma list) and each chunk size (`--chunks`,
default 2¹⁰, 2¹², 2¹⁴ and `auto`, the one `chunk_size_for` picks; `run` balances it over the
chunks and rounds it to the devices): `jaxrigid.sweep.run(sweep, dir, progress=False,
devices=N)` end to end into a fresh directory (removed afterwards, untimed). The first call of
each configuration (`first_run_seconds`: everything, compiles included) is a warm-up; then
`--repeats` timed calls, median kept.

**Chunk programs** (`--programs mesh,shard_map`): the sweep's loop without its store — each
chunk's parameters by `chunk_parameters(plan, _padded(...))`, dispatched to the compiled chunk
program one chunk ahead of the host's `np.asarray` of the previous chunk's results (as `run`
pipelines them), no zarr writes, no value-check pass. `mesh`: the library's construction
(`chunk_program`: `jax.jit(lambda q: _kept(p, q))`, with `in_shardings = out_shardings =
NamedSharding(Mesh(devices, ("members",)), P("members"))` when N > 1), a fresh jit object so
that its compile is timed; `shard_map`: `jax.jit(shard_map(lambda q: _kept(p, q), mesh=Mesh(
devices, ("members",)), in_specs=(P("members"),), out_specs=P("members")))` (`jax.shard_map`
with `check_vma=False`, else `jax.experimental.shard_map.shard_map` with `check_rep=False`),
each device running `_kept` on its block. Both are AOT-compiled on the chunk's parameters
(`compile_seconds`). Every program's results over all members (padding dropped) are compared
with the `mesh` program's of the same keep, device count and chunk size and with the 1-device
`mesh` program's of the same keep (`equal_*`: bitwise; `max_abs_diff_*`).

**Bare ensembles.** The same members built by the sweep's own `_build(plan, chunk_parameters(plan,
arange(n)))` (jitted once, outside the timing), then `jax.jit(simulate(IMIDM(), model, state0,
dt, steps, save_every=steps, model_axes=0[, observer=InvariantDrift()]))`, AOT-compiled
(`compile_seconds`), one warm-up call, `--repeats` timed calls ended by `block_until_ready`,
median kept; one device. Sweeps, programs and bare runs are timed in interleaved rounds (each
round calls every configuration once), so a change of load on the shared machine favours none;
each is compared with the bare run of the same keep (`ratio_vs_bare` = members/s ÷ bare
members/s; target: sweep ≥ 0.9 on CPU), and with the same configuration on 1 device
(`ratio_vs_1_device`; target with 4 forced host devices on 2 cores: ≥ 1).

**Where a sweep's time goes** (per timed call, from wrappers around `jaxrigid.sweep.run`'s
functions, installed by this script, and `jax.monitoring`'s compile events): `chunk_size_for`
(auto only), `validate` (the build-only value-check pass over every chunk), `_layout`
(`eval_shape`), `Store.create`, `chunk_parameters` (member parameters from the axes), `write_chunk`
(zarr writes and done markers), compile (trace + lowering + backend compile, summed over every
compile during the call; 0 once `run` caches its programs) and `loop` (from the progress bar's
creation to its close: the chunks' dispatch, compute, and writes). The program rows are the
loop without the writes.

Devices: `--devices 1,2,4` sets `XLA_FLAGS=--xla_force_host_platform_device_count=4` (the
largest) before jax is imported, unless XLA_FLAGS already forces a count. Writes
`sweep_throughput_<device>[_devices<N1-N2-…>][_quick].json` (no device suffix for `1`).

    python bench/sweep_throughput.py              # 1 device: 876 s at load 7–11, 2 cores
    python bench/sweep_throughput.py --devices 1,2,4 --keeps no_invariants \\
        --chunks 1024,4096,auto --programs mesh,shard_map --repeats 2  # 417 s
    python bench/sweep_throughput.py --quick --out /tmp/b   # smoke test, ≈ 2 min
"""

from __future__ import annotations

import os
import sys


def _forced_devices():
    """Force host devices for `--devices` before jax is imported (`_common` imports it)."""
    args = sys.argv[1:]
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--devices=") else (
            args[i + 1] if a == "--devices" and i + 1 < len(args) else None
        )  # fmt: skip
        if value:
            n = max(int(x) for x in value.split(","))
            flags = os.environ.get("XLA_FLAGS", "")
            if n > 1 and "xla_force_host_platform_device_count" not in flags:
                os.environ["XLA_FLAGS"] = (
                    f"{flags} --xla_force_host_platform_device_count={n}".strip()
                )


_forced_devices()

import importlib  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import _common as common  # noqa: E402

p = common.parser(__doc__)
p.add_argument("--n1", type=int, default=None, help="Omega1 grid points (100; quick 16)")
p.add_argument("--n3", type=int, default=None, help="Omega3 grid points (200; quick 32)")
p.add_argument("--steps", type=int, default=None, help="steps per member (1000; quick 50)")
p.add_argument("--chunks", default=None, help="comma list of sizes or auto (1024,4096,16384,auto)")
p.add_argument("--repeats", type=int, default=None, help="timed calls, median kept (3; quick 1)")
p.add_argument("--devices", default="1", help="comma list of local device counts (1)")
p.add_argument("--keeps", default="no_invariants,invariants", help="no_invariants,invariants")
p.add_argument("--programs", default="mesh", help="chunk programs timed alone: mesh,shard_map")
A = p.parse_args()
A.n1 = A.n1 or (16 if A.quick else 100)
A.n3 = A.n3 or (32 if A.quick else 200)
A.steps = A.steps or (50 if A.quick else 1000)
A.repeats = A.repeats or (1 if A.quick else 3)
A.chunks = A.chunks or ("64,256,auto" if A.quick else "1024,4096,16384,auto")
DEVICES = [int(d) for d in A.devices.split(",")]
PROGRAMS = [s for s in A.programs.split(",") if s]
common.enable_x64_for("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from jaxrigid.observers import InvariantDrift  # noqa: E402
from jaxrigid.simulation import simulate  # noqa: E402
from jaxrigid.sweep import Grid, Keep, Sweep  # noqa: E402
from jaxrigid.sweep import run as sweep_run  # noqa: E402
from jaxrigid.sweep.store import Store  # noqa: E402

R = importlib.import_module("jaxrigid.sweep.run")  # the module (the package exports `run`)
PG = importlib.import_module("jaxrigid.sweep.program")  # what a chunk computes
DT = 0.01
T0 = time.perf_counter()
MACHINE = common.machine()
MACHINE["jaxrigid_path"] = str(importlib.import_module("jaxrigid").__file__)
assert len(jax.local_devices()) >= max(DEVICES), (jax.local_devices(), DEVICES)


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


chunk_parameters = PG.chunk_parameters  # unwrapped, for the program rows
for _name in ("validate", "chunk_size_for", "_layout", "chunk_parameters"):
    setattr(R, _name, _timed(_name, getattr(R, _name)))
Store.create = classmethod(_timed("Store.create", Store.create.__func__))
Store.write_chunk = _timed("write_chunk", Store.write_chunk)
sweep_progress = R.sweep_progress


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


R.sweep_progress = lambda *a: _LoopTimer(sweep_progress(*a))

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


# --- the sweeps, the chunk programs and the bare ensembles ---------------------------------


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


def sweep_call(sweep, devices):
    """One `sweep.run` into a fresh directory: (wall, cpu, phases, chunk size)."""
    tmp = tempfile.mkdtemp(prefix="sweep_bench_")
    PHASES.clear()
    try:
        t, c = time.perf_counter(), time.process_time()
        out = sweep_run(sweep, f"{tmp}/s", progress=False, devices=devices)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        size = int(Store.open(out).attrs["chunk_size"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return wall, cpu, dict(PHASES), size


def _shard_map():
    """`(shard_map, its keyword that turns the replication check off)` of this jax."""
    if hasattr(jax, "shard_map"):  # jax ≥ 0.6 (the experimental one is deprecated)
        return jax.shard_map, "check_vma"
    from jax.experimental.shard_map import shard_map

    return shard_map, "check_rep"


def make_program(impl, pl, devs):
    """A fresh jitted chunk program: the library's construction (`mesh`) or `shard_map`."""
    fn = lambda q: PG._kept(pl, q)  # noqa: E731
    if impl == "mesh":
        if len(devs) == 1:
            return jax.jit(fn)
        members = NamedSharding(Mesh(np.array(devs), ("members",)), P("members"))
        return jax.jit(fn, in_shardings=members, out_shardings=members)
    shard_map, check = _shard_map()
    mesh = Mesh(np.array(devs), ("members",))
    body = shard_map(fn, mesh=mesh, in_specs=(P("members"),), out_specs=P("members"),
                     **{check: False})  # fmt: skip
    return jax.jit(body)


def program_call(compiled, pl, size):
    """The sweep's loop without its store: every chunk dispatched one ahead of the host's
    `np.asarray` of the previous one's results; the members' results (padding dropped)."""
    n = pl.sweep.n_members
    chunks = list(R._chunks(n, size))
    launch = lambda c: (c, compiled(chunk_parameters(pl, R._padded(c[1], c[2], size))))  # noqa: E731
    out = {}
    pending = launch(chunks[0])
    for k in range(len(chunks)):
        (_, start, stop), res = pending
        pending = launch(chunks[k + 1]) if k + 1 < len(chunks) else None
        for name, v in res.items():
            out.setdefault(name, []).append(np.asarray(v)[: stop - start])
    return {name: np.concatenate(v) for name, v in out.items()}


def compare(a: dict, b: dict):
    """(bitwise equal, largest |a − b| over every kept array)."""
    equal, diff = True, 0.0
    for name in a:
        x, y = a[name], b[name]
        equal &= bool(np.array_equal(x, y, equal_nan=np.issubdtype(x.dtype, np.floating)))
        if np.issubdtype(x.dtype, np.floating):
            diff = max(diff, float(np.nanmax(np.abs(x - y))) if x.size else 0.0)
        else:
            diff = max(diff, float(np.max(np.abs(x.astype(np.int64) - y))) if x.size else 0.0)
    return equal, diff


def bare_fn(pl, observer):
    dt = jnp.asarray(pl.dt, pl.dtype)

    def f(m, s):
        return simulate(pl.integrator, m, s, dt, pl.n_steps, save_every=pl.n_steps,
                        model_axes=0, observer=observer)  # fmt: skip

    return f


n_members = A.n1 * A.n3
keeps = {"no_invariants": False, "invariants": True}
keeps = {k: keeps[k] for k in A.keeps.split(",")}
plans = {k: R.plan(make_sweep(None, inv)) for k, inv in keeps.items()}
pl0 = next(iter(plans.values()))
params = {k: np.asarray(v) for k, v in chunk_parameters(pl0, np.arange(n_members)).items()}
model, state0 = jax.block_until_ready(jax.jit(lambda q: PG._build(pl0, q))(params))
chunks = [None if c == "auto" else int(c) for c in A.chunks.split(",")]
local = jax.local_devices()

configs = {}  # name -> dict(kind, keep, ...)
for keep_name in keeps:
    configs[f"bare/{keep_name}"] = dict(kind="bare", keep=keep_name, devices=1)
    for d in DEVICES:
        for c in chunks:
            base = dict(keep=keep_name, chunk=c, devices=d)
            configs[f"sweep/{keep_name}/d{d}/{c or 'auto'}"] = dict(kind="sweep", **base)
            for impl in PROGRAMS:
                configs[f"{impl}/{keep_name}/d{d}/{c or 'auto'}"] = dict(
                    kind="program", impl=impl, **base
                )

common.log(f"{n_members} members × {pl0.n_steps} steps; {len(local)} local devices; "
           f"{len(configs)} configurations; load {common.load_average()}")  # fmt: skip
timings, first, outputs = {}, {}, {}
for name, cfg in configs.items():
    timings[name] = common.Timing([], [])
    pl = plans[cfg["keep"]]
    if cfg["kind"] == "bare":
        observer = InvariantDrift() if keeps[cfg["keep"]] else None
        cfg["compiled"], cfg["compile_seconds"] = common.aot_compile(
            bare_fn(pl, observer), model, state0
        )
        t = time.perf_counter()
        sol = jax.block_until_ready(cfg["compiled"](model, state0))
        first[name] = dict(seconds=time.perf_counter() - t, compile_seconds=cfg["compile_seconds"])
        assert bool(jnp.all(sol.outcome.result == 0)), name
    elif cfg["kind"] == "sweep":
        cfg["sweep"] = make_sweep(cfg["chunk"], keeps[cfg["keep"]])
        wall, cpu, phases, size = sweep_call(cfg["sweep"], cfg["devices"])
        cfg["chunk_size"] = size
        first[name] = dict(seconds=wall, phases=phases)
    else:
        size = configs[f"sweep/{cfg['keep']}/d{cfg['devices']}/{cfg['chunk'] or 'auto'}"][
            "chunk_size"
        ]
        cfg["chunk_size"] = size
        devs = local[: cfg["devices"]]
        probe = chunk_parameters(pl, R._padded(0, min(size, n_members), size))
        cfg["compiled"], cfg["compile_seconds"] = common.aot_compile(
            make_program(cfg["impl"], pl, devs), probe
        )
        t = time.perf_counter()
        outputs[name] = program_call(cfg["compiled"], pl, size)
        first[name] = dict(seconds=time.perf_counter() - t, compile_seconds=cfg["compile_seconds"])
        assert bool(np.all(outputs[name]["outcome/result"] == 0)), name
    extra = f" (compile {cfg['compile_seconds']:.1f} s)" if "compile_seconds" in cfg else ""
    common.log(f"  warm-up {name}: {first[name]['seconds']:.1f} s{extra} "
               f"(load {common.load_average()})")  # fmt: skip

phases_all = {name: [] for name in configs}
loads = []
for r in range(A.repeats):
    for name, cfg in configs.items():
        pl = plans[cfg["keep"]]
        if cfg["kind"] == "bare":
            t, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(cfg["compiled"](model, state0))
            wall, cpu = time.perf_counter() - t, time.process_time() - c
        elif cfg["kind"] == "sweep":
            wall, cpu, phases, _ = sweep_call(cfg["sweep"], cfg["devices"])
            phases_all[name].append(phases)
        else:
            t, c = time.perf_counter(), time.process_time()
            program_call(cfg["compiled"], pl, cfg["chunk_size"])
            wall, cpu = time.perf_counter() - t, time.process_time() - c
        timings[name].wall.append(wall)
        timings[name].cpu.append(cpu)
        load = common.load_average()
        loads.append(load[0] if load else float("nan"))
        common.log(f"  round {r + 1} {name}: {wall:.2f} s  (load {load})")


# --- records -----------------------------------------------------------------------------

records = {}
for name, cfg in configs.items():
    rec = timings[name].record()
    rec |= dict(kind=cfg["kind"], keep=cfg["keep"], devices=cfg["devices"], members=n_members,
                steps=pl0.n_steps)  # fmt: skip
    rec["members_per_s"] = n_members / rec["seconds"]
    rec["first_run"] = first[name]
    if "compile_seconds" in cfg:
        rec["compile_seconds"] = cfg["compile_seconds"]
    if cfg["kind"] != "bare":
        size = cfg["chunk_size"]
        n_chunks = -(-n_members // size)
        rec |= dict(chunk_size=size, chunk_size_requested=cfg["chunk"] or "auto",
                    n_chunks=n_chunks, padded_members=n_chunks * size - n_members)  # fmt: skip
    if cfg["kind"] == "program":
        rec["impl"] = cfg["impl"]
        key = f"/{cfg['keep']}/d{cfg['devices']}/{cfg['chunk'] or 'auto'}"
        for tag, ref in (
            ("mesh", "mesh" + key),
            ("mesh_1_device", f"mesh/{cfg['keep']}/d1/{cfg['chunk'] or 'auto'}"),
        ):
            if ref in outputs and ref != name:
                rec[f"equal_{tag}"], rec[f"max_abs_diff_{tag}"] = compare(
                    outputs[name], outputs[ref]
                )
    if cfg["kind"] == "sweep":
        # each phase: the median over the timed calls
        ph = phases_all[name]
        keys = sorted({k for d in ph for k in d})
        rec["phases_seconds"] = {k: statistics.median(d.get(k, 0.0) for d in ph) for k in keys}
        ph = rec["phases_seconds"]
        compiles = ("trace", "lower", "backend_compile")
        rec["compile_seconds_in_run"] = sum(ph.get(k, 0.0) for k in compiles)
        rec["loop_members_per_s"] = n_members / ph.get("loop", float("nan"))
        pre = sum(ph.get(k, 0.0) for k in ("validate", "chunk_size_for", "_layout",
                                           "Store.create"))  # fmt: skip
        rec["pre_loop_seconds"] = pre
        rec["other_seconds"] = rec["seconds"] - pre - ph.get("loop", 0.0)
    records[name] = rec

for name, rec in records.items():
    if rec["kind"] == "bare":
        continue
    bare = records[f"bare/{rec['keep']}"]
    rec["ratio_vs_bare"] = rec["members_per_s"] / bare["members_per_s"]
    # process CPU seconds: less sensitive to the other jobs on the shared cores (1 device:
    # one busy core; more devices use more CPU per wall second, so compare those by wall)
    rec["ratio_cpu_vs_bare"] = bare["cpu_seconds"] / rec["cpu_seconds"]
    if rec["kind"] == "sweep":
        rec["ratio_loop_vs_bare"] = rec["loop_members_per_s"] / bare["members_per_s"]
    one = name.replace(f"/d{rec['devices']}/", "/d1/")
    if one in records:
        rec["ratio_vs_1_device"] = rec["members_per_s"] / records[one]["members_per_s"]
    if rec["kind"] == "program" and rec["impl"] != "mesh":
        mesh = records.get(name.replace(rec["impl"] + "/", "mesh/", 1))
        if mesh:
            rec["ratio_vs_mesh"] = rec["members_per_s"] / mesh["members_per_s"]
            rec["compile_ratio_vs_mesh"] = rec["compile_seconds"] / mesh["compile_seconds"]


def _f(x, fmt):
    return "" if x is None else format(x, fmt)


rows = []
for name, rec in records.items():
    ph = rec.get("phases_seconds", {})
    run = rec["kind"] if rec["kind"] != "program" else rec["impl"]
    chunk = "" if rec["kind"] == "bare" else (
        f"{rec['chunk_size_requested']} → {rec['chunk_size']} × {rec['n_chunks']}"
        f" (+{rec['padded_members']})"
    )  # fmt: skip
    per_round = ""
    if rec["kind"] != "bare":
        bare = records[f"bare/{rec['keep']}"]
        per_round = ", ".join(
            f"{b / s:.2f}" for s, b in zip(rec["seconds_all"], bare["seconds_all"])
        )
    eq = rec.get("equal_mesh")
    eq = "" if eq is None else ("bitwise" if eq else f"≠ {rec['max_abs_diff_mesh']:.1e}")
    rows.append(
        f"| {rec['keep']} | {run} | {rec['devices']} | {chunk} | {rec['seconds']:.2f} "
        f"| {rec['members_per_s']:.0f} | {_f(rec.get('ratio_vs_bare', 1.0), '.2f')} "
        f"| {per_round} | {_f(rec.get('ratio_vs_1_device'), '.2f')} "
        f"| {_f(rec.get('ratio_vs_mesh'), '.2f')} | {_f(rec.get('compile_seconds'), '.1f')} "
        f"| {rec['first_run']['seconds']:.1f} "
        f"| {_f(ph.get('validate'), '.2f')} "
        f"| {_f(ph.get('trace', 0) + ph.get('lower', 0) + ph.get('backend_compile', 0), '.2f')} "
        f"| {_f(ph.get('write_chunk'), '.2f')} | {_f(ph.get('chunk_parameters'), '.3f')} "
        f"| {_f(ph.get('loop'), '.2f')} | {eq} |"
    )
header = (
    "| keep | run | devices | chunk → size × n (+pad) | s (median) | members/s | ×bare "
    "| ×bare per round | ×1 device | ×mesh | AOT compile s | first run s | validate s "
    "| compile s in call | writes s | params s | loop s | = mesh |\n"
    "|---|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)
print(header)
print("\n".join(rows))

record = dict(
    problem=dict(
        case="krysl-torque-free",
        method="IMIDM",
        dt=DT,
        steps=pl0.n_steps,
        members=n_members,
        grid=[A.n1, A.n3],
        dtype="float64",
    ),  # fmt: skip
    repeats=A.repeats,
    seconds_statistic="median",
    devices=DEVICES,
    programs=PROGRAMS,
    shard_map=f"{_shard_map()[0].__module__}.shard_map ({_shard_map()[1]}=False)",
    device_count_axis="the sweep's chunks sharded over `devices` local devices; bare: one",
    load_average_at_start=MACHINE["load_average"],
    load_1min_during_timed_rounds=dict(min=min(loads), max=max(loads)) if loads else None,
    machine=MACHINE,
    results=records,
    table_markdown=header + "\n" + "\n".join(rows),
)
tag = common.device_tag()
if DEVICES != [1]:
    tag += "_devices" + "-".join(map(str, DEVICES))
name = f"sweep_throughput_{tag}{'_quick' if A.quick else ''}.json"
path = common.write_results(A.out, name, record, t_start=T0)
common.log(f"wrote {path}")
common.log(f"total {time.perf_counter() - T0:.0f} s")
