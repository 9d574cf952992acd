"""What stored programs (`jaxrigid/program_store.py`) save a second process of the command.

Each command runs twice in fresh processes with one fresh `JAXRIGID_CACHE_DIR` ("cold", then
"warm": JAX's persistent cache and the stored programs filled by the first), once with this
checkout and once with `--old REV` (default: the commit before stored programs), checked out
into a temporary `git worktree` and imported from there by `PYTHONPATH`. The two versions
alternate within each round, so that a change in the machine's speed hits both alike.

Commands: `run` (`jaxrigid run krysl-torque-free --json`: its `compile_seconds`), `control`
(`jaxrigid control reach-point --json`: the optimisation's `seconds`, building included),
`sweep` (`jaxrigid sweep` of examples/dzhanibekov.toml cut to a 20 × 20 grid and t_end = 5,
one chunk). For each: wall seconds of the process and the command's own figure, per round;
medians over the rounds.

    python bench/stored_programs.py                       # 3 rounds, all commands
    python bench/stored_programs.py --rounds 1 --commands run --out /tmp/bench   # smoke

Writes `stored_programs_<tag>.json` (`results/stored_programs_cpu.json`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, device_tag, log, parser, worktree, write_results

OLD = "86f4a76"  # main before stored programs

SWEEP_SPEC = """
case = "krysl-torque-free"
method = "IMIDM"
dt = 0.01
t_end = 5.0
chunk_size = 400
[set]
I12 = 0.0
I13 = 0.0
I23 = 0.0
Omega2 = 1.0
[[axes]]
kind = "grid"
parameter = "Omega1"
start = -0.1
stop = 0.1
num = 20
[[axes]]
kind = "grid"
parameter = "Omega3"
start = -0.1
stop = 0.1
num = 20
[keep]
final_state = true
invariants = true
"""


def _command(name: str, work: Path, k: int, write: bool = True) -> tuple[list[str], str | None]:
    """The argument list and the JSON field that is the command's own figure (`write`: the
    sweep's spec file into `work`)."""
    base = [sys.executable, "-m", "jaxrigid"]
    if name == "run":
        out = ["run", "krysl-torque-free", "--json", "--out", str(work / f"run{k}")]
        return base + out, "compile_seconds"
    if name == "control":
        out = ["control", "reach-point", "--json", "--out", str(work / f"control{k}")]
        return base + out, "seconds"
    spec = work / "sweep.toml"
    if write:
        spec.write_text(SWEEP_SPEC)
    return base + ["sweep", str(spec), "--out", str(work / f"sweep{k}")], None


def _once(name: str, source: Path, work: Path, cache: Path, k: int) -> dict:
    cmd, field = _command(name, work, k)
    env = dict(os.environ, JAXRIGID_CACHE_DIR=str(cache), PYTHONPATH=str(source))
    env.pop("JAXRIGID_NO_COMPILATION_CACHE", None)
    start = time.perf_counter()
    # run from the scratch directory: `python -m` puts the working directory first on the path
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=900)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    rec = {"wall_seconds": wall}
    if field is not None:
        rec[field] = json.loads(out.stdout[out.stdout.index("{") :])[field]
    return rec


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--old", default=OLD, help=f"the commit to compare with (default {OLD})")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--commands", default="run,control,sweep")
    args = p.parse_args()
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    results = {c: {"new": [], "old": []} for c in commands}
    t_start = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="stored_programs_old_") as tmp_old,
        worktree(args.old, str(Path(tmp_old) / "tree")) as old_tree,
    ):
        sources = {"new": ROOT, "old": Path(old_tree)}
        for r in range(args.rounds):
            for name in commands:
                for version in ("new", "old") if r % 2 == 0 else ("old", "new"):
                    with tempfile.TemporaryDirectory(prefix="stored_programs_") as tmp:
                        work, cache = Path(tmp), Path(tmp) / "cache"
                        pair = {
                            phase: _once(name, sources[version], work, cache, k)
                            for k, phase in enumerate(("cold", "warm"))
                        }
                    results[name][version].append(pair)
                    log(f"round {r + 1} {name} {version}: {json.dumps(pair)}")
    summary = {}
    for name, by_version in results.items():
        summary[name] = {}
        for version, rounds in by_version.items():
            med = {}
            for phase in ("cold", "warm"):
                for metric in rounds[0][phase]:
                    med[f"{phase}_{metric}"] = statistics.median(x[phase][metric] for x in rounds)
            summary[name][version] = med
    record = {
        "old": args.old,
        "rounds": args.rounds,
        "commands": {c: _command(c, Path("<tmp>"), 0, write=False)[0][2:] for c in commands},
        "results": results,
        "medians": summary,
    }
    path = write_results(args.out, f"stored_programs_{device_tag()}.json", record, t_start)
    log(f"wrote {path}")
    for name, by_version in summary.items():
        for version, med in by_version.items():
            log(f"{name:8s} {version}: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
