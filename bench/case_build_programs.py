"""How many programs building each case compiles in a new process (issue 31): every
operation run eagerly on concrete values is a small program of its own, so a model built op
by op waits seconds before its first step. For each case of `jaxrigid.cases.CASES`, in one
fresh process without the persistent cache, in the registry's order: the wall seconds of
`case.build(case.resolve())`, the programs compiled and their compile seconds.

    JAXRIGID_NO_COMPILATION_CACHE=1 PYTHONPATH=. python bench/case_build_programs.py [CASE ...]
"""

from __future__ import annotations

import collections
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax import monitoring  # noqa: E402

from jaxrigid.cases import CASES, get_case  # noqa: E402

compiled: collections.Counter = collections.Counter()


def _listen(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        compiled["n"] += 1
        compiled["s"] += duration


monitoring.register_event_duration_secs_listener(_listen)
(jnp.zeros(3) + 1).block_until_ready()  # the backend started, as in any session
for name in sys.argv[1:] or list(CASES):
    case = get_case(name)
    compiled.clear()
    t = time.perf_counter()
    case.build(case.resolve())
    seconds = time.perf_counter() - t
    print(f"{seconds:6.2f} s {compiled['n']:4d} programs {compiled['s']:5.2f} s  {name}")
