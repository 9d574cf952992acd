"""What the host-driven optimiser builds (issue 31, design note 44): `optimise` (or, with
`--starts K`, `multi_start` of K starts) of `reach-point` with its default settings, under
the command's `quick_build("repeated")`, cold (no persistent cache): the number of programs
JAX traces, lowers and compiles and their seconds, the process's CPU seconds and the wall.
Compare two checkouts by running it with each on `PYTHONPATH`, alternating:

    JAXRIGID_NO_COMPILATION_CACHE=1 PYTHONPATH=. python bench/optimiser_build.py [--starts 4]
"""

from __future__ import annotations

import argparse
import collections
import resource
import time

import jax

jax.config.update("jax_enable_x64", True)

from jax import monitoring  # noqa: E402

import jaxrigid.control as control  # noqa: E402
from jaxrigid.xla_options import quick_build  # noqa: E402

try:
    from jaxrigid.control.presets import default_settings, get_problem, initial_guesses
except ImportError:  # a checkout before `control.problems` was renamed
    from jaxrigid.control.problems import (  # type: ignore[no-redef]
        default_settings,
        get_problem,
        initial_guesses,
    )

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--starts", type=int, default=0, help="multi_start of this many starts")
A = p.parse_args()

seconds: collections.Counter = collections.Counter()
counts: collections.Counter = collections.Counter()


def _listen(event, duration, **kwargs):
    if event.startswith("/jax/core/compile/"):
        seconds[event.rsplit("/", 1)[-1]] += duration
        counts[event.rsplit("/", 1)[-1]] += 1


monitoring.register_event_duration_secs_listener(_listen)
problem, settings = get_problem("reach-point"), default_settings("reach-point")
p0s = initial_guesses(problem, max(A.starts, 1))
t = time.perf_counter()
with quick_build("repeated"):
    if A.starts:
        result = control.multi_start(problem, p0s, settings)
    else:
        result = control.optimise(problem, p0s[0], settings)
jax.block_until_ready(result)
wall = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_SELF)
print(f"wall {wall:.1f} s, process CPU {use.ru_utime + use.ru_stime:.1f} s")
for name in sorted(seconds):
    print(f"  {name}: {counts[name]} programs, {seconds[name]:.1f} s")
