"""A pytest plugin: the session's summed JAX trace, lowering and backend-compile seconds.

`PYTHONPATH=.:bench python -m pytest -p pytest_compile_time ...` prints one `JAXTIME` line per
`jax.monitoring` duration event whose name says trace, lower or compile, at the session's end.
"""

from __future__ import annotations

import collections

import jax

TOTALS: collections.Counter[str] = collections.Counter()


def _listener(event: str, duration: float, **kwargs) -> None:
    if any(word in event for word in ("compile", "trace", "lower")):
        TOTALS[event] += duration


jax.monitoring.register_event_duration_secs_listener(_listener)


def pytest_terminal_summary(terminalreporter) -> None:
    for event, seconds in sorted(TOTALS.items()):
        terminalreporter.write_line(f"JAXTIME {event}: {seconds:.1f} s")
