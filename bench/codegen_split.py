"""What XLA's parallel code generation costs the test suite's builds on a busy CPU (issue 31).

XLA:CPU splits each program's LLVM module into parts and compiles them on a thread pool
(`--xla_cpu_parallel_codegen_split_count`, small functions inlined into every part first).
The suite runs one xdist worker per core, so the cores are busy anyway: the parts then buy no
wall time and their duplicated work costs CPU. This script measures that, under the suite's
XLA settings (`tests/xla_settings.py`: `O0` and the older fusion emitter):

- **programs**: in fresh worker processes, alternating `default` (XLA's split) and `serial`
  (`--xla_cpu_parallel_codegen_split_count=1`), `--rounds` times, each worker compiles the same
  programs — one Kahan–Li 8 LP-split step with compensated summation (`test_splitting.py`'s
  heaviest build), and `compile_cost.py`'s jaxrigid `gradient`, `rolling_ball` gradient and
  `forward` — and records each compile's wall and CPU seconds (the process's user + system
  time, all threads), then runs each program once and keeps a hash of its output bits: the
  split changes where code is generated, not what it computes, so `serial`'s outputs must
  equal `default`'s bit for bit (checked, `bitwise_equal`).
- **suite** (`--suite FILES`): `pytest -n 2 --dist loadfile FILES` once per setting, with its
  wall and CPU seconds (every process it started, waited for).

Writes `codegen_split_<device>.json`.

    python bench/codegen_split.py --rounds 3
    python bench/codegen_split.py --suite "tests/test_splitting.py tests/test_compositions.py"
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import _common as common

SPLIT_FLAG = "--xla_cpu_parallel_codegen_split_count=1"
SUITE_FLAGS = "--xla_cpu_use_fusion_emitters=false"  # and O0 (JAX_DISABLE_MOST_OPTIMIZATIONS)
SETTINGS = {"default": SUITE_FLAGS, "serial": f"{SUITE_FLAGS} {SPLIT_FLAG}"}

p = common.parser(__doc__)
p.add_argument("--rounds", type=int, default=3, help="worker pairs (default 3)")
p.add_argument("--suite", default=None, help="test files to time under each setting")
p.add_argument("--worker", action="store_true", help="internal: one worker process")
A = p.parse_args()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _programs():
    """`{name: (lowered, args)}`: the programs every worker compiles, lowered."""
    import _compile_programs as programs
    import jax

    from jaxrigid.cases import get_case
    from jaxrigid.integrators import LiePoissonSplitting, compose

    case = get_case("krysl-torque-free")
    method = compose(LiePoissonSplitting(compensated=True), "kahan-li8")
    model, state0 = case.build_for(method)(case.resolve({}))
    args = (model, state0, method.init(model, state0, 0.0, 0.1), 0.0, 0.1)
    out = {"kahan-li8 compensated step": (jax.jit(method.step).lower(*args), args)}
    for prog in ("gradient", "rolling_ball", "forward"):
        e = programs.PROGRAMS[prog](1024, 1000, 0.01)[0]  # the jaxrigid entry
        fn = e.fn if hasattr(e.fn, "lower") else jax.jit(e.fn)
        out[f"{prog}/{e.name} ({e.kind})"] = (fn.lower(*e.args), e.args)
    return out


def worker():
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    records = {}
    for name, (lowered, args) in _programs().items():
        wall, cpu = time.perf_counter(), _cpu()
        compiled = lowered.compile()
        wall, cpu = time.perf_counter() - wall, _cpu() - cpu
        leaves = jax.tree_util.tree_leaves(compiled(*args))
        digest = hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in leaves)).hexdigest()
        records[name] = {"compile_seconds": wall, "compile_cpu_seconds": cpu, "output": digest}
    print(json.dumps(records), flush=True)


def environment(setting: str) -> dict:
    # no persistent cache to carry programs from one worker to the next (the suite makes a
    # fresh one per run)
    drop = ("XLA_FLAGS", "JAXRIGID_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
    env["JAXRIGID_TEST_XLA_DEFAULTS"] = "1"  # the suite's conftest leaves `env` as it is
    return env | {"XLA_FLAGS": SETTINGS[setting]}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_worker(setting: str) -> dict:
    cmd = [sys.executable, __file__, "--worker"]
    env = environment(setting) | {"JAXRIGID_NO_COMPILATION_CACHE": "1"}
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


def suite(setting: str) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile"]
    cmd += ["-p", "no:cacheprovider", *A.suite.split()]
    common.log(f"{setting}: {' '.join(cmd[1:])}")
    wall, cpu = time.perf_counter(), children_cpu()
    run = subprocess.run(
        cmd, env=environment(setting), capture_output=True, text=True, cwd=common.ROOT
    )
    tail = run.stdout.strip().splitlines()[-1:] or [""]
    return {
        "seconds": time.perf_counter() - wall,
        "cpu_seconds": children_cpu() - cpu,
        "returncode": run.returncode,
        "summary": tail[0],
    }


def main():
    t0 = time.perf_counter()
    rounds = {s: [] for s in SETTINGS}
    for r in range(A.rounds):
        order = list(SETTINGS) if r % 2 == 0 else list(SETTINGS)[::-1]
        for s in order:
            common.log(f"round {r + 1}/{A.rounds}: {s}")
            rounds[s].append(run_worker(s))
    names = list(rounds["default"][0])
    table = {}
    for name in names:
        row = {}
        for s in SETTINGS:
            for k in ("compile_seconds", "compile_cpu_seconds"):
                row[f"{s}_{k}_median"] = statistics.median(w[name][k] for w in rounds[s])
        row["cpu_serial_over_default"] = (
            row["serial_compile_cpu_seconds_median"] / row["default_compile_cpu_seconds_median"]
        )
        outputs = {w[name]["output"] for s in SETTINGS for w in rounds[s]}
        row["bitwise_equal"] = len(outputs) == 1
        table[name] = row
    record = {"settings": SETTINGS, "rounds": rounds, "table": table, "suite": {}}
    if A.suite:
        for s in SETTINGS:
            record["suite"][s] = suite(s)
    path = common.write_results(A.out, f"codegen_split_{common.device_tag()}.json", record, t0)
    print(f"{'program':48s} {'cpu default':>11s} {'cpu serial':>10s} {'ratio':>6s} bitwise")
    for name, row in table.items():
        print(
            f"{name:48s} {row['default_compile_cpu_seconds_median']:11.2f} "
            f"{row['serial_compile_cpu_seconds_median']:10.2f} "
            f"{row['cpu_serial_over_default']:6.2f} {row['bitwise_equal']}"
        )
    for s, r in record["suite"].items():
        print(
            f"suite, {s}: {r['seconds']:.0f} s wall, {r['cpu_seconds']:.0f} s CPU ({r['summary']})"
        )
    print(f"wrote {path} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    worker() if A.worker else main()
