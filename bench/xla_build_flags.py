"""What XLA's CPU optimisations cost and buy (issue 31): build and run of `compile_cost.py`'s
programs, and the wall time of a sample of the test suite, under four compiler settings.

**Settings.** `default` (XLA's own); `O0` (`JAX_DISABLE_MOST_OPTIMIZATIONS=1`: backend
optimisation level 0, LLVM's expensive passes off); `no-fusion-emitters`
(`XLA_FLAGS=--xla_cpu_use_fusion_emitters=false`: fusions emitted by XLA's older element-wise
emitter, not the MLIR fusion emitters); `test` (both: what `tests/conftest.py` sets for the
suite). None of them enables fast math: they change code generation, not the arithmetic asked
for (results may still differ in the last bit where a different code path rounds differently).

**How.** For each setting, `python bench/compile_cost.py --programs P --out <tmp>` runs with
that environment (each program in fresh worker processes, cold then cached, jaxrigid beside
diffrax; see compile_cost.py) and its record is kept whole; the table shows each entry's cold
build and run, and their ratios to `default`. `--suite FILES` also times
`python -m pytest -q -n 2 --dist loadfile FILES` once per setting (every setting's
environment carries `JAXRIGID_TEST_XLA_DEFAULTS=1`, so the suite's conftest adds nothing to
it; tests marked `xla_defaults` still run in a child with XLA's defaults, as in the suite).
Writes `xla_build_flags_<device>.json`.

    python bench/xla_build_flags.py                       # forward, gradient at 1024 x 1000
    python bench/xla_build_flags.py --suite "tests/test_compositions.py tests/test_simulate.py"
    python bench/xla_build_flags.py --quick --out /tmp/bench
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common

SETTINGS = {
    "default": {},
    "O0": {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"},
    "no-fusion-emitters": {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=false"},
    "test": {
        "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
        "XLA_FLAGS": "--xla_cpu_use_fusion_emitters=false",
    },
}

p = common.parser(__doc__)
p.add_argument("--programs", default="forward,gradient", help="compile_cost.py's --programs")
p.add_argument("--suite", default=None, help="test files to time under each setting")
p.add_argument("--settings", default=",".join(SETTINGS), help="comma list of settings")
A = p.parse_args()


def environment(setting: str) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("XLA_FLAGS", "JAX_DISABLE_MOST_OPTIMIZATIONS")
    }
    env["JAXRIGID_TEST_XLA_DEFAULTS"] = "1"  # the suite's conftest then leaves `env` alone
    return env | SETTINGS[setting]


def compile_cost(setting: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, str(common.BENCH / "compile_cost.py"), "--programs", A.programs]
        cmd += ["--out", out] + (["--quick"] if A.quick else [])
        common.log(f"{setting}: {' '.join(cmd[1:])}")
        run = subprocess.run(cmd, env=environment(setting), capture_output=True, text=True)
        if run.returncode != 0:
            return {"error": run.stderr[-3000:]}
        return json.loads(next(Path(out).glob("compile_cost_*.json")).read_text())


def suite(setting: str) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile"]
    cmd += ["-p", "no:cacheprovider", *A.suite.split()]
    common.log(f"{setting}: {' '.join(cmd[1:])}")
    t = time.perf_counter()
    run = subprocess.run(
        cmd, env=environment(setting), capture_output=True, text=True, cwd=common.ROOT
    )
    tail = run.stdout.strip().splitlines()[-1:] or [""]
    return {"seconds": time.perf_counter() - t, "returncode": run.returncode, "summary": tail[0]}


def cold_entries(record: dict) -> dict:
    """`{program/entry (kind): (build seconds, run seconds)}` of the cold phase."""
    out = {}
    for name, prog in record.get("programs", {}).items():
        for e in prog["phases"].get("cold", {}).get("entries", []):
            if "build" in e and "run" in e:
                out[f"{name}/{e['name']} ({e['kind']})"] = (
                    e["build"]["build_seconds"],
                    e["run"]["seconds"],
                )
    return out


def main():
    t0, settings = time.perf_counter(), [s for s in A.settings.split(",") if s]
    record = {"settings": {s: SETTINGS[s] for s in settings}, "compile_cost": {}, "suite": {}}
    for s in settings:
        record["compile_cost"][s] = compile_cost(s)
        if A.suite:
            record["suite"][s] = suite(s)
    base = cold_entries(record["compile_cost"].get("default", {}))
    rows = record["table"] = []
    for s in settings:
        for entry, (build, run) in cold_entries(record["compile_cost"][s]).items():
            b0, r0 = base.get(entry, (None, None))
            rows.append(
                {
                    "setting": s,
                    "entry": entry,
                    "build_seconds": build,
                    "run_seconds": run,
                    "build_over_default": build / b0 if b0 else None,
                    "run_over_default": run / r0 if r0 else None,
                }
            )
    path = common.write_results(
        A.out, f"xla_build_flags_{common.device_tag(quick=A.quick)}.json", record, t0
    )
    print(
        f"{'setting':20s} {'entry':42s} {'build s':>8s} {'run s':>9s} {'xbuild':>7s} {'xrun':>6s}"
    )
    for r in rows:
        xb, xr = r["build_over_default"], r["run_over_default"]
        print(
            f"{r['setting']:20s} {r['entry']:42s} {r['build_seconds']:8.2f} {r['run_seconds']:9.4f}"
            f" {xb or float('nan'):7.2f} {xr or float('nan'):6.2f}"
        )
    for s, r in record["suite"].items():
        print(f"suite, {s}: {r['seconds']:.0f} s ({r['summary']})")
    print(f"wrote {path} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
