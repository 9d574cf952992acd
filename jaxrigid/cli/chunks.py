"""Chunking of a run: equal chunks (one compile) and at most one shorter tail chunk; the
progress bar over the chunks and the clock of JAX's compile time; the members restarted
between chunks (non-finite: from the initial state, with a fresh solver state)."""

from __future__ import annotations

import math
import sys
import time

import numpy as np

MAX_SAVES = 2000  # at most about this many saved states per member
MAX_SAVED_STATES = 200_000  # and about this many over the ensemble (≈ 19 MB for rigid bodies)
MIN_SAVES = 10
CHUNK_STEPS = 2000  # aim for chunks of about this many steps (progress-bar granularity)
MAX_CHUNKS = 50
_COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)


def _divisors(n: int) -> list[int]:
    """The divisors of `n`, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _smallest_divisor_from(n: int, k: int) -> int:
    """The smallest divisor of `n` that is at least `k` (`n` itself at worst)."""
    return next(d for d in _divisors(n) if d >= k)


def saves_for(members: int | None) -> int:
    """Saves per member: `MAX_SAVES`, fewer for large ensembles (the `.npz` stays ≲ 20 MB)."""
    return max(MIN_SAVES, min(MAX_SAVES, MAX_SAVED_STATES // (members or 1)))


def plan_chunks(n_steps: int, max_saves: int | None = None) -> list[tuple[int, int]]:
    """`[(steps, save_every), ...]` covering `n_steps`: equal chunks (one compilation), then
    maybe a shorter tail; about `CHUNK_STEPS` steps a chunk, at most ~`max_saves` saves
    (default `MAX_SAVES`).

    The save stride is a divisor of `n_steps` when one lies within twice the smallest stride
    allowed, and the saves per chunk a divisor of the saves when one lies within a factor 2
    of the wanted number: then there is no tail.
    """
    s = -(-n_steps // (max_saves or MAX_SAVES))
    d = _smallest_divisor_from(n_steps, s)
    s = d if d <= 2 * s else s
    n_save = n_steps // s
    k = max(1, n_save // min(MAX_CHUNKS, max(1, n_steps // CHUNK_STEPS)))
    k = max([d for d in _divisors(n_save) if k // 2 <= d <= k] or [k])
    chunks = [(k * s, s)] * (n_steps // (k * s))
    tail = n_steps % (k * s)
    if tail:  # saved at most as densely as the other chunks
        chunks.append((tail, _smallest_divisor_from(tail, min(s, -(-tail // k)))))
    return chunks


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal). The estimate of
    the time left uses the chunks after the first, which includes the compilation."""

    def __init__(self, total: int, enabled: bool, width: int = 30):
        self.total, self.width, self.first = total, width, None
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


# ----------------------------------------------------------------------------------------
# Members restarted between chunks


def nonfinite_members(state, ndims) -> np.ndarray:
    """Per member (or scalar): any non-finite value in the state."""
    import jax

    def bad(x, e):
        x = np.asarray(x)
        return ~np.isfinite(x).all(axis=tuple(range(x.ndim - e, x.ndim)))

    flags = jax.tree_util.tree_leaves(jax.tree_util.tree_map(bad, state, ndims))
    return np.logical_or.reduce(flags)


def where_members(mask, a, b):
    """Members of `a` where `mask`, else of `b` (leaves with the ensemble's leading axes:
    states, solver states)."""
    import jax

    def pick(x, y):
        x, y = np.asarray(x), np.asarray(y)
        return np.where(np.reshape(mask, np.shape(mask) + (1,) * (x.ndim - np.ndim(mask))), x, y)

    return jax.tree_util.tree_map(pick, a, b)


def fresh_solver_state(spec, model, state, done: int):
    """The method's initial solver state for `state` at step `done` (per member)."""
    import jax
    import jax.numpy as jnp

    dtype = jax.tree_util.tree_leaves(state)[0].dtype
    t, dt = jnp.asarray(done * spec.dt, dtype), jnp.asarray(spec.dt, dtype)
    init = lambda s: spec.integrator.init(model, s, t, dt)  # noqa: E731
    return jax.vmap(init)(state) if spec.ensemble is not None else init(state)


def nan_like(tree):
    import jax

    return jax.tree_util.tree_map(lambda x: np.full(np.shape(x), np.nan), tree)
