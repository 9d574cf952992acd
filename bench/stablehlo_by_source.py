"""Where a program's StableHLO comes from: the operations of one of `compile_cost.py`'s
programs counted by the jaxrigid source line that emitted them (the innermost jaxrigid frame
of each operation's location), with the trace and lowering seconds.

    python bench/stablehlo_by_source.py dla_midpoint          # its first (jaxrigid) entry
    python bench/stablehlo_by_source.py forward --members 1024 --steps 1000
"""

from __future__ import annotations

import argparse
import collections
import re
import time

import jax

jax.config.update("jax_enable_x64", True)

import _compile_programs as programs  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("program", choices=sorted(programs.PROGRAMS))
p.add_argument("--entry", type=int, default=0, help="which entry of the program (0: jaxrigid's)")
p.add_argument("--members", type=int, default=1)
p.add_argument("--steps", type=int, default=1000)
p.add_argument("--top", type=int, default=25)
A = p.parse_args()

_LOC = re.compile(r"#(loc\d+) = loc\((.*)\)$")
_FILE_LINE = re.compile(r'"([^"]+\.py)":(\d+)')


def main():
    entry = programs.PROGRAMS[A.program](A.members, A.steps, 0.01)[A.entry]
    t0 = time.perf_counter()
    traced = entry.fn.trace(*entry.args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    lines = lowered.as_text(debug_info=True).splitlines()
    locations = {m.group(1): m.group(2) for m in map(_LOC.match, lines) if m}

    def source(text, depth=0):
        found = [f for f in _FILE_LINE.findall(text) if "jaxrigid/" in f[0]]
        if found or depth > 30:
            return found[:1]
        for ref in re.findall(r"#(loc\d+)", text):
            found = source(locations.get(ref, ""), depth + 1)
            if found:
                return found
        return []

    by_line, by_file, ops = collections.Counter(), collections.Counter(), collections.Counter()
    for line in lines:
        op = re.search(r'= "?(stablehlo\.\w+)', line)
        if not op:
            continue
        ops[op.group(1)] += 1
        where = source(line[line.rfind("loc(") :]) if "loc(" in line else []
        path, number = where[0] if where else ("(outside jaxrigid)", "")
        path = path.split("jaxrigid/", 1)[-1] if "jaxrigid/" in path else path
        by_line[f"{path}:{number}"] += 1
        by_file[path] += 1
    print(f"{entry.name}: {entry.what}")
    print(f"trace {t1 - t0:.2f} s, lower {t2 - t1:.2f} s, {sum(ops.values())} operations")
    print("operations:", ", ".join(f"{k} {v}" for k, v in ops.most_common(8)))
    for title, counter in (("by file", by_file), ("by line", by_line)):
        print(f"\n{title}:")
        for key, count in counter.most_common(A.top):
            print(f"{count:7d}  {key}")


if __name__ == "__main__":
    main()
