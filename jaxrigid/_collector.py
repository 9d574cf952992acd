"""Python's cyclic garbage collector, made rare while jaxrigid builds a program.

Tracing and lowering create millions of short-lived Python objects (tracers, equations,
MLIR operations) and few reference cycles. With CPython's default thresholds, `(700, 10, 10)`,
the collector runs its youngest generation every 700 net allocations and walks the whole heap
(jax's and the program's own, 10⁵–10⁶ objects) every hundred of those: time spent finding
almost nothing to free. Measured: 24.2 s of `tests/test_contracts.py`'s 320 s went to the
collector (4.4 s with `BUILD_THRESHOLDS`), and the neighbouring gains' program traced and
lowered in 0.8 of the time (bench/README.md, `build_collector.py`). Compilers written in Python
do the same (PyTorch's Dynamo defers full collections while compiling).

`relaxed_collection` raises the thresholds for the duration of a build and restores the
caller's afterwards; the collector stays enabled, so a long build still collects (every 10⁵
net allocations, and the whole heap far more rarely). It is used where jaxrigid builds and
calls its own programs (`simulate`, `program_store.call`), and for the whole process by the
`jaxrigid` command and the test suite. It changes no number, only when Python frees cycles.
The thresholds are the process's: where threads build at once, the first to finish gives the
caller's thresholds back for all of them, which makes the others' builds slower, not wrong.
"""

from __future__ import annotations

import contextlib
import gc

__all__ = ["BUILD_THRESHOLDS", "relaxed_collection"]

# Generation 0 every 10⁵ net allocations, generation 1 every 50 of those, a full collection
# (every object on the heap) every 1000 of the latter at most. `None`: leave the thresholds
# alone (how bench/build_collector.py measures the default).
BUILD_THRESHOLDS: tuple[int, int, int] | None = (100_000, 50, 1000)


@contextlib.contextmanager
def relaxed_collection():
    """Within the block (also usable as a decorator), the collector's thresholds are at least
    `BUILD_THRESHOLDS`; on leaving, the caller's own are back. Nested blocks, and a process
    whose thresholds are already as high (the command's, the suite's), change nothing."""
    old = gc.get_threshold()
    if BUILD_THRESHOLDS is None or old[0] >= BUILD_THRESHOLDS[0]:
        yield
        return
    gc.set_threshold(*BUILD_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)
