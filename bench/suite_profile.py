"""Where the test suite's time goes: a pytest plugin that sums JAX's build events per test.

For every test: its wall time and the seconds JAX reports (`jax.monitoring` duration events)
for tracing, lowering, XLA's compile and persistent-cache lookups. Each process (each xdist
worker) writes `suite_profile_<worker>.txt` to `--out` (default `bench/results/`): totals per
event with counts, the 40 largest totals per event and jitted function's name, then one line
per test, longest first. With `SUITE_PROFILE_EAGER=1` it also lists the 40 lines of our code
(innermost frame outside jax) whose eager operations cost the most XLA compiles: one compile per
primitive and argument shape, which a test pays when it does arithmetic on `jax.Array`s outside
`jit`.

    PYTHONPATH=bench python -m pytest -q -n auto --dist loadfile -p suite_profile
    PYTHONPATH=bench SUITE_PROFILE_OUT=/tmp/p python -m pytest -q -p suite_profile tests/test_lie.py
"""

from __future__ import annotations

import collections
import os
import sys
import time
from pathlib import Path

import pytest
from jax import monitoring

_TOTAL: collections.Counter = collections.Counter()
_COUNT: collections.Counter = collections.Counter()
_PER_TEST: dict = {}
_BY_NAME: collections.Counter = collections.Counter()
_BY_NAME_COUNT: collections.Counter = collections.Counter()
_EAGER: collections.Counter = collections.Counter()
_EAGER_COUNT: collections.Counter = collections.Counter()
_EAGER_ON = os.environ.get("SUITE_PROFILE_EAGER") == "1"


def _eager_site():
    """The innermost frame outside jax of an eager primitive's compile, or None when the
    compile is not an eager one (jax runs those through `dispatch.apply_primitive`)."""
    frame, eager = sys._getframe(2), False
    while frame is not None:
        name = frame.f_code.co_filename
        if name.endswith("dispatch.py") and frame.f_code.co_name == "apply_primitive":
            eager = True
        elif eager and "/jax/" not in name and "/jaxlib/" not in name:
            return f"{os.path.relpath(name)}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return None


def _listen(event, duration, **kwargs):
    _TOTAL[event] += duration
    _COUNT[event] += 1
    if "fun_name" in kwargs:  # which jitted function was traced, lowered or compiled
        _BY_NAME[event, kwargs["fun_name"]] += duration
        _BY_NAME_COUNT[event, kwargs["fun_name"]] += 1
    if _EAGER_ON and event.endswith("backend_compile_duration"):
        site = _eager_site()
        if site is not None:
            _EAGER[site] += duration
            _EAGER_COUNT[site] += 1


monitoring.register_event_duration_secs_listener(_listen)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, start = dict(_TOTAL), time.perf_counter()
    yield
    spent = {k: v - before.get(k, 0.0) for k, v in _TOTAL.items()}
    _PER_TEST[item.nodeid] = (time.perf_counter() - start, spent)


def pytest_sessionfinish(session):
    out = Path(os.environ.get("SUITE_PROFILE_OUT", Path(__file__).parent / "results"))
    out.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    lines = [
        f"{_TOTAL[k]:9.2f} s {_COUNT[k]:6d}  {k}" for k in sorted(_TOTAL, key=_TOTAL.get)[::-1]
    ]
    lines.append("")
    for (event, name), seconds in _BY_NAME.most_common(40):
        count = _BY_NAME_COUNT[event, name]
        lines.append(f"{seconds:9.2f} s {count:6d}  {event.rsplit('/', 1)[-1]}  {name}")
    lines.append("")
    for site, seconds in _EAGER.most_common(40):
        lines.append(f"{seconds:9.2f} s {_EAGER_COUNT[site]:6d}  eager  {site}")
    lines.append("")
    for nodeid, (wall, spent) in sorted(_PER_TEST.items(), key=lambda kv: -kv[1][0]):
        top = sorted(((v, k) for k, v in spent.items() if v > 0.05), reverse=True)[:4]
        events = " ".join(f"{k.rsplit('/', 1)[-1]}={v:.1f}" for v, k in top)
        lines.append(f"{wall:7.1f} s {nodeid}  {events}")
    (out / f"suite_profile_{worker}.txt").write_text("\n".join(lines) + "\n")
