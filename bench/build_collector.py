"""What Python's cyclic garbage collector costs jaxrigid's builds, and what `_collector` saves.

`jaxrigid._collector.relaxed_collection` raises the collector's thresholds while jaxrigid
builds its own programs (`simulate`, `program_store.call`, the command). This script builds
the same programs with it (`relaxed`, the library as shipped) and without it (`default`:
`BUILD_THRESHOLDS = None`, CPython's `(700, 10, 10)` throughout), each build in a fresh
worker process, the two settings alternated round by round (`--rounds`), the persistent
compilation cache off. Per program: trace and lower seconds (`jitted.trace`, `.lower`; a
direct call: its first call's wall, compile included), the seconds the collector ran during
the build (`gc.callbacks`) and its collections per generation.

Programs: compile_cost's `forward` (default `IMIDM()` under a caller's `jit`, 1024 members ×
1000 steps) and `gradient` (`jax.grad` through 1000 steps), each beside its diffrax Tsit5 peer,
which runs outside jaxrigid's builds and so under CPython's thresholds in both settings (a
control: how much the machine drifted between processes); `forward_direct` (`simulate`
called directly); and `gains`: the neighbouring-optimal gains' program
(`control.neighbouring`), 2 held-out reach-region tasks at dt = 0.25, as
tests/test_control_neighbouring.py builds it. Writes `results/build_collector_<device>.json`.

    python bench/build_collector.py [--rounds 3] [--programs forward,gradient,forward_direct,gains]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import _common as common

PROGRAMS = ("forward", "gradient", "forward_direct", "gains")
SETTINGS = ("default", "relaxed")

p = common.parser(__doc__)
p.add_argument(
    "--rounds", type=int, default=None, help="processes per program and setting (3; quick 1)"
)
p.add_argument("--programs", default=",".join(PROGRAMS))
p.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
A = p.parse_args()


class _GcClock:
    """Seconds spent in the collector, and collections per generation, while installed."""

    def __init__(self):
        self.seconds, self.collections, self._t = 0.0, [0, 0, 0], 0.0

    def __call__(self, phase, info):
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t
            self.collections[info["generation"]] += 1

    def __enter__(self):
        gc.collect()
        self.seconds, self.collections = 0.0, [0, 0, 0]
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


def _entries(program):
    """(name, jitted or plain function, args, direct) of one program."""
    import _compile_programs as cp

    if program in ("forward", "gradient", "forward_direct"):
        keep = {"IMIDM", "IMIDM_direct", "diffrax_Tsit5"}
        size = (16, 50) if A.quick else (1024, 1000)
        entries = cp.PROGRAMS[program](*size, 0.01)
        return [(f"{e.name} {e.kind}", e.fn, e.args, e.direct) for e in entries if e.name in keep]
    import equinox as eqx
    import jax.numpy as jnp

    from jaxrigid.control import neighbouring, region
    from jaxrigid.control.closed_loop import interval_sizes
    from jaxrigid.control.policies import active_rows

    problem = region.reach_region(dt=0.25, dtype=jnp.dtype("float64"))
    tasks = region.sample_tasks(0, 2, "heldout", 0)
    m, R = interval_sizes(problem, 0.5, None)
    rows = active_rows(problem.control, m * problem.dt)
    coefficients = jnp.zeros((2,) + problem.control.coefficients.shape)  # the build's inputs
    args = (problem, m, R, rows, 0, coefficients, tasks.theta0, tasks.target)
    jitted = eqx.filter_jit(neighbouring._gains_program.__wrapped__)

    def build(*args):  # as `call_filtered` builds it: inside the library's relaxed collection
        from jaxrigid._collector import relaxed_collection

        with relaxed_collection():
            return jitted.lower(*args)

    return [("gains", build, args, "lower")]


def _worker(program, setting):
    os.environ["JAXRIGID_NO_COMPILATION_CACHE"] = "1"
    sys.path.insert(0, os.path.dirname(__file__))
    import jax

    jax.config.update("jax_enable_x64", True)
    from jaxrigid import _collector

    if setting == "default":
        _collector.BUILD_THRESHOLDS = None
    out = {}
    for name, fn, args, direct in _entries(program):
        jax.clear_caches()
        with _GcClock() as clock:
            t0 = time.perf_counter()
            if direct == "lower":
                fn(*args)
                t1 = t2 = time.perf_counter()
            elif direct:
                jax.block_until_ready(fn(*args))
                t1 = t2 = time.perf_counter()
            else:
                traced = fn.trace(*args)
                t1 = time.perf_counter()
                traced.lower()
                t2 = time.perf_counter()
        out[name] = {
            "trace_s": t1 - t0 if not direct else None,
            "lower_s": t2 - t1 if not direct else None,
            "trace_and_lower_s": t2 - t0 if not direct or direct == "lower" else None,
            "first_call_s": t2 - t0 if direct is True else None,
            "gc_s": clock.seconds,
            "gc_collections": clock.collections,
        }
    print(json.dumps(out))


def main():
    t_start = time.perf_counter()
    programs = [x for x in A.programs.split(",") if x]
    unknown = sorted(set(programs) - set(PROGRAMS))
    if unknown:
        raise SystemExit(f"unknown programs {unknown}; choose from {', '.join(PROGRAMS)}")
    runs: dict = {prog: {s: [] for s in SETTINGS} for prog in programs}
    rounds = A.rounds or (1 if A.quick else 3)
    for r in range(rounds):
        for prog in programs:
            for setting in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
                common.log(f"round {r + 1}/{rounds}: {prog}, {setting}")
                cmd = [sys.executable, __file__, "--worker", prog, setting]
                cmd += ["--quick"] if A.quick else []
                res = subprocess.run(cmd, capture_output=True, text=True, check=True)
                runs[prog][setting].append(json.loads(res.stdout.strip().splitlines()[-1]))
    summary: dict = {}
    for prog, by_setting in runs.items():
        for name in by_setting["default"][0]:
            row = {}
            for setting, rounds in by_setting.items():
                for field in ("trace_s", "lower_s", "trace_and_lower_s", "first_call_s", "gc_s"):
                    values = [x[name][field] for x in rounds if x[name][field] is not None]
                    if values:
                        row[f"{field}_{setting}_min"] = min(values)
            for field in ("trace_and_lower_s", "first_call_s", "trace_s"):
                if f"{field}_default_min" in row:
                    ratio = row[f"{field}_relaxed_min"] / row[f"{field}_default_min"]
                    row[f"{field}_relaxed_over_default"] = ratio
            summary[f"{prog}/{name}"] = row
            common.log(f"{prog}/{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
    record = {"rounds": rounds, "summary": summary, "runs": runs}
    name = f"build_collector_{common.device_tag(quick=A.quick)}.json"
    common.write_results(A.out, name, record, t_start)


if __name__ == "__main__":
    if A.worker:
        _worker(*A.worker)
    else:
        main()
