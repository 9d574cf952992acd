"""The command's view of a chunked run (`jaxrigid.runs`: the chunks' plan and continuation):
the progress bar over the chunks and the clock of JAX's compile time."""

from __future__ import annotations

import math
import sys
import time

_COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal). The estimate of
    the time left uses the chunks after the first, which includes the compilation."""

    def __init__(self, total: int, enabled: bool, width: int = 30):
        self.total, self.width = total, width
        self.first: tuple[int, float] | None = None  # (steps done, time) at the first chunk
        self.t0 = time.perf_counter()
        self.enabled = enabled and sys.stderr.isatty()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now, frac = time.perf_counter(), done / self.total
        if done == 0:
            note = "compiling"
        elif self.first is None:
            self.first, note = (done, now), ""
        else:
            rate = (done - self.first[0]) / max(now - self.first[1], 1e-9)
            note = f"~{(self.total - done) / rate:.0f} s left"
        bar = "#" * int(self.width * frac)
        sys.stderr.write(
            f"\r[{bar:<{self.width}}] {100 * frac:5.1f}%  step {done}/{self.total}"
            f"  {now - self.t0:.1f} s  {note:<16}"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


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
