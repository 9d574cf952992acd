"""Progress bars for long runs, backed by `tqdm` (shared by the CLI and the notebooks).

`progress_bar(total, ...)` is a `tqdm` bar with the library's defaults: text on `file`
(default `sys.stderr`), or with `notebook=True` `tqdm.auto` (a widget in Jupyter when
`ipywidgets` is installed, text otherwise). When `file` is not a terminal (a log file, CI, a
test capturing stderr) the bar is redrawn at most every `NON_TTY_MININTERVAL` seconds, each
redraw a `\\r`-separated line, and closing it always writes the final line (count, elapsed
time, rate, postfix) and a newline. A run over ensemble members counts them with
`bar.update(n)`: tqdm shows members done, members per second and the time left
(`unit="member"`).

`OptimiserProgress` is a `callback(outer, inner, value, grad_norm)` for
`jaxrigid.control.optimise` and `multi_start`, which call it from the compiled program
(a host callback) after each inner (L-BFGS) iteration; under `multi_start`'s `vmap` it is
called once per iteration with the `K` starts' values as arrays (`jaxrigid._callbacks`); it
also accepts one report per start, advancing once all `starts` have reported. It shows the
least augmented Lagrangian `L_A` over the starts and that start's gradient norm.

`phase(desc)` reports a step that has no count (building, re-simulating, writing files): one
line when it starts and its time when it ends, on a terminal or not.

No `jax` import: the callback receives numbers or arrays and reads them with `numpy`.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

__all__ = ["NON_TTY_MININTERVAL", "OptimiserProgress", "phase", "progress_bar"]

NON_TTY_MININTERVAL = 5.0  # seconds between redraws when the output is not a terminal


def _isatty(file) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def progress_bar(
    total: int | None,
    *,
    desc: str | None = None,
    unit: str = "it",
    file: IO[str] | None = None,
    disable: bool = False,
    notebook: bool = False,
    mininterval: float | None = None,
    **kwargs: Any,
):
    """A `tqdm` bar over `total` units. `notebook=True`: `tqdm.auto` (display in Jupyter;
    `file` only for its text fallback); else `tqdm.tqdm` on `file` (default `sys.stderr`).
    `mininterval` (seconds between redraws) defaults to tqdm's 0.1 on a terminal and in a
    notebook, `NON_TTY_MININTERVAL` when `file` is not a terminal. `disable=True`: no output
    at all. Further keyword arguments go to `tqdm`."""
    if notebook:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm

        file = sys.stderr if file is None else file
    if mininterval is None:
        mininterval = 0.1 if notebook or _isatty(file) else NON_TTY_MININTERVAL
    if file is not None:
        kwargs["file"] = file
    return tqdm(
        total=total, desc=desc, unit=unit, disable=disable, mininterval=mininterval, **kwargs
    )


@contextlib.contextmanager
def phase(desc: str, *, file: IO[str] | None = None, disable: bool = False) -> Iterator[None]:
    """Report the step `desc` on `file` (default `sys.stderr`): `"desc ..."` when it starts
    and `"desc: 12.3 s"` when it ends — on a terminal the second overwrites the first, else
    each is a line of its own, so a log shows what a silent minute was spent on. A step that
    raises reports nothing more (the error says what happened)."""
    file = sys.stderr if file is None else file
    if disable:
        yield
        return
    tty = _isatty(file)
    file.write(f"{desc} ..." + ("" if tty else "\n"))
    file.flush()
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        if tty:
            file.write("\n")
            file.flush()
        raise
    done = f"{desc}: {time.perf_counter() - start:.1f} s"
    file.write((f"\r{done:<{len(desc) + 4}}" if tty else done) + "\n")
    file.flush()


class OptimiserProgress:
    """A progress bar that is a valid `callback(outer, inner, value, grad_norm)` of
    `jaxrigid.control.optimise` / `multi_start` (`settings` their `AugmentedLagrangian`;
    `starts` the number of initial guesses `K` of `multi_start`, 1 for `optimise`).

    The bar counts L-BFGS iterations, `settings.n_outer × settings.n_inner` in all: iteration
    `outer · n_inner + inner + 1` is done once `starts` reports of it have arrived (one per
    start under `vmap`, in any order, or one report holding all `K` values). Its postfix is
    `L_A=…, |grad|=…` (`best L_A` with several starts: the least finite `L_A` over them and
    that start's gradient norm), also kept as `value` and `grad_norm`; `n` is the number of
    iterations done (counted also when disabled). Until the first report arrives the postfix
    says `compiling ...`, then `compiled in … s` (`compile_seconds`: from construction to the
    first report: the compilation and the first outer iteration, reported together from the
    host), and the bar's clock restarts there, so its elapsed time, rate and time left are
    the iterations' (the bar moves by one outer iteration at a time).

    `desc`, `file`, `disable`, `notebook` and other keywords: `progress_bar`. Close it with
    `close()` or use it as a context manager (`with OptimiserProgress(...) as progress:`);
    wait for the run first (`jax.block_until_ready`, and `jax.effects_barrier()` for the last
    callbacks under a caller's `jit`). For concrete inputs the callback is called from the
    host and is part of no program: a new instance compiles nothing new."""

    def __init__(
        self,
        settings,
        starts: int = 1,
        *,
        desc: str | None = None,
        file: IO[str] | None = None,
        disable: bool = False,
        notebook: bool = False,
        **kwargs: Any,
    ):
        if int(starts) < 1:
            raise ValueError(f"OptimiserProgress: starts must be ≥ 1, got {starts}")
        self.n_inner = int(settings.n_inner)
        self.total = int(settings.n_outer) * self.n_inner
        self.starts = int(starts)
        self.n = 0
        self.value: float | None = None
        self.grad_norm: float | None = None
        self.compile_seconds: float | None = None
        self._pending: dict[int, list[tuple[float, float]]] = {}
        self._t0 = time.perf_counter()
        kwargs.setdefault("postfix", "compiling ...")
        self.bar = progress_bar(
            self.total,
            desc=desc,
            unit="it",
            file=file,
            disable=disable,
            notebook=notebook,
            **kwargs,
        )

    def __call__(self, outer, inner, value, grad_norm) -> None:
        if self.compile_seconds is None:
            self.compile_seconds = time.perf_counter() - self._t0
            self.bar.set_postfix_str(f"compiled in {self.compile_seconds:.1f} s", False)
            self.bar.reset()  # elapsed time and rate from the first iteration on
        # under vmap `outer` and `inner` come as arrays of K equal counters
        outer, inner = (int(np.ravel(np.asarray(x))[0]) for x in (outer, inner))
        i = outer * self.n_inner + inner + 1
        values = np.ravel(np.asarray(value, dtype=float)).tolist()
        grads = np.ravel(np.asarray(grad_norm, dtype=float)).tolist()
        seen = self._pending.setdefault(i, [])
        seen.extend(zip(values, grads))
        if len(seen) < self.starts:
            return
        del self._pending[i]
        if i <= self.n:  # an earlier iteration completed late: the count does not go back
            return
        finite = [s for s in seen if math.isfinite(s[0])] or seen
        self.value, self.grad_norm = min(finite, key=lambda s: s[0])
        key = "best L_A" if self.starts > 1 else "L_A"
        self.bar.set_postfix_str(f"{key}={self.value:.6g}, |grad|={self.grad_norm:.2e}", False)
        self.bar.update(i - self.n)
        self.n = i

    def close(self) -> None:
        """Write the final line (count, time, postfix) and release the bar."""
        self.bar.close()

    def __enter__(self) -> OptimiserProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
