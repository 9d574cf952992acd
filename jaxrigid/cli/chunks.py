"""The command's view of a chunked run (`jaxrigid.runs`: the chunks' plan and continuation):
the progress bar over the chunks and the clock of JAX's compile time."""

from __future__ import annotations

import math
import sys
from typing import Any

from ..progress import progress_bar

_COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)


class Progress:
    """The run's progress bar on stderr, in steps (`jaxrigid.progress.progress_bar`: redrawn
    on a terminal, else a line every few seconds and the final one); shown when `enabled`
    (the command: a run of several chunks, or of one on a terminal). On a terminal it says
    `building ...` from the start until the first chunk is done (that chunk's time includes
    building its program); off a terminal its first line comes with the first chunk, so that
    input refused before the run leaves the one error line alone."""

    def __init__(self, total: int, enabled: bool, desc: str | None = None):
        self.total, self.enabled, self.desc = total, enabled, desc
        self.bar: Any = None

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if done == 0 and not sys.stderr.isatty():
                return
            building = {"postfix": "building ..."} if done == 0 else {"initial": done}
            self.bar = progress_bar(self.total, desc=self.desc, unit="step", **building)
        if done > self.bar.n:
            if self.bar.n == 0:
                self.bar.set_postfix_str("", False)
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class CompileClock:
    """Wall time JAX spends tracing, lowering and compiling while active (union of spans)."""

    def __enter__(self):
        import jax.monitoring as monitoring

        self.spans: list[tuple[float, float]] = []
        self.durations = 0.0
        self._spans = hasattr(monitoring, "register_event_time_span_listener")
        if self._spans:
            monitoring.register_event_time_span_listener(self._on_span)
        else:  # older jax: durations (nested traces may be counted twice)
            monitoring.register_event_duration_secs_listener(self._on_duration)
        return self

    def __exit__(self, *exc):
        import jax.monitoring as monitoring

        if self._spans:
            monitoring.unregister_event_time_span_listener(self._on_span)
        else:
            monitoring.unregister_event_duration_listener(self._on_duration)

    def _on_span(self, event, start, end, **kwargs):
        if event in _COMPILE_EVENTS:
            self.spans.append((start, end))

    def _on_duration(self, event, duration, **kwargs):
        if event in _COMPILE_EVENTS:
            self.durations += duration

    @property
    def seconds(self) -> float:
        total, reach = self.durations, -math.inf
        for start, end in sorted(self.spans):
            total += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        return total
