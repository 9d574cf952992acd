"""`jaxrigid.progress`: the tqdm-backed `OptimiserProgress` as the optimiser's callback.

- Under `jit` (`optimise`) and under `vmap` of K starts (`multi_start`, K callbacks per
  iteration) the bar counts each L-BFGS iteration once: `n_outer × n_inner` in all, not K×.
- The postfix holds the last iteration's `L_A` (the least over the starts) and gradient norm,
  read against the optimiser's own history; the text output ends with the final line.
- A disabled bar writes nothing and still counts; reports arriving together, out of order or
  from a `starts` set too small never count an iteration twice.
"""

from __future__ import annotations

import io
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrigid import progress
from jaxrigid.control.optimise import AugmentedLagrangian, multi_start, optimise
from jaxrigid.progress import NON_TTY_MININTERVAL, OptimiserProgress, progress_bar

SETTINGS = AugmentedLagrangian(n_outer=3, n_inner=4)
TOTAL = 12


class Toy(eqx.Module):
    """`f = |p − 1|² + Σ p⁴`, `c = p₀ − ½`: a few iterations from anywhere."""

    coefficient_shape = (3,)

    def __call__(self, p):
        return jnp.sum((p - 1.0) ** 2) + jnp.sum(p**4), p[:1] - 0.5


def _final_line(text: str) -> str:
    assert text.endswith("\n"), repr(text)
    return text.splitlines()[-1].strip()


def test_counts_iterations_under_jit():
    """`optimise`: 12 iterations counted, the postfix is the last `L_A` (bit for bit the
    history's) and its gradient norm; the final line reads `12/12`."""
    out = io.StringIO()
    with OptimiserProgress(SETTINGS, file=out, desc="toy") as progress:
        res = jax.block_until_ready(optimise(Toy(), jnp.zeros(3), SETTINGS, callback=progress))
        jax.effects_barrier()
    assert progress.n == progress.bar.n == TOTAL
    last = float(res.history["lagrangian"][-1, -1])
    assert progress.value == last
    assert progress.grad_norm == float(res.history["grad_norm"][-1, -1])
    assert progress.bar.postfix == f"L_A={last:.6g}, |grad|={progress.grad_norm:.2e}"
    assert progress.compile_seconds is not None and progress.compile_seconds >= 0
    line = _final_line(out.getvalue())
    assert line.startswith("toy: 100%|") and f"| {TOTAL}/{TOTAL} [" in line
    assert line.endswith(f"L_A={last:.6g}, |grad|={progress.grad_norm:.2e}]")


@pytest.mark.parametrize("k", [1, 3])
def test_counts_iterations_under_vmap(k):
    """`multi_start` of K starts calls back once per iteration with the K starts' values
    (`jaxrigid._callbacks.host_callback`: not unrolled per start under `vmap`); the bar counts
    12, never more on the way (its text output), and shows the least final `L_A` over the
    starts."""
    out = io.StringIO()
    p0s = jax.random.normal(jax.random.key(1), (k, 3))
    calls = []

    class Counting(OptimiserProgress):
        def __call__(self, *args):
            calls.append(args)
            super().__call__(*args)

    with Counting(SETTINGS, starts=k, file=out, mininterval=0) as progress:
        ms = jax.block_until_ready(multi_start(Toy(), p0s, SETTINGS, callback=progress))
        jax.effects_barrier()
    assert len(calls) == TOTAL  # the premise: one callback per iteration ...
    assert all(np.shape(a[2]) == (k,) for a in calls)  # ... holding every start's value
    assert progress.n == progress.bar.n == TOTAL
    last = np.asarray(ms.all.history["lagrangian"])[:, -1, -1]
    assert progress.value == float(last.min())
    key = "best L_A" if k > 1 else "L_A"
    assert progress.bar.postfix.startswith(f"{key}={last.min():.6g}, |grad|=")
    counts = [int(m) for m in re.findall(r"\| (\d+)/12 \[", out.getvalue())]
    assert counts == sorted(counts) and counts[-1] == TOTAL
    assert f"| {TOTAL}/{TOTAL} [" in _final_line(out.getvalue())


def test_disabled_writes_nothing():
    """`disable=True`: no output at all, and the iterations are still counted."""
    out = io.StringIO()
    with OptimiserProgress(SETTINGS, file=out, disable=True) as progress:
        jax.block_until_ready(optimise(Toy(), jnp.zeros(3), SETTINGS, callback=progress))
        jax.effects_barrier()
    assert out.getvalue() == ""
    assert progress.n == TOTAL and progress.value is not None


def test_reports_together_out_of_order_and_non_finite():
    """No jax: K values in one report count once; a start's reports in any order; NaN starts
    ignored for the best; an iteration completing late does not move the count back; a
    `starts` too small cannot count an iteration twice."""
    out = io.StringIO()
    with OptimiserProgress(SETTINGS, starts=3, file=out) as progress:
        progress(0, 0, np.array([3.0, np.nan, 2.0]), np.array([0.3, 0.1, 0.2]))
        assert progress.n == 1 and (progress.value, progress.grad_norm) == (2.0, 0.2)
        progress(0, 2, 5.0, 0.5)  # iteration 3 starts before iteration 2 ends
        progress(0, 1, 4.0, 0.4)
        progress(0, 2, 1.0, 0.1)
        progress(0, 2, 6.0, 0.6)
        assert progress.n == 3 and progress.value == 1.0
        for value in (7.0, 8.0, 9.0):
            progress(0, 1, value, 1.0)  # iteration 2 completes now: nothing changes
        assert progress.n == 3 and progress.value == 1.0
    assert "| 3/12 [" in _final_line(out.getvalue())

    with OptimiserProgress(SETTINGS, starts=1, file=io.StringIO()) as short:
        for _ in range(3):  # three starts reporting iteration 1 to a bar told of one
            short(0, 0, 1.0, 0.1)
        assert short.n == short.bar.n == 1
    with pytest.raises(ValueError, match="starts must be"):
        OptimiserProgress(SETTINGS, starts=0)


def test_not_a_terminal_redraws_rarely():
    """Text to a file that is not a terminal: redraws at most every `NON_TTY_MININTERVAL`
    seconds (tqdm's default on a terminal); `mininterval` overrides."""
    bar = progress_bar(10, file=io.StringIO())
    assert bar.mininterval == NON_TTY_MININTERVAL
    bar.close()
    bar = progress_bar(10, file=io.StringIO(), mininterval=0.5)
    assert bar.mininterval == 0.5
    bar.close()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_phase_reports_its_start_and_its_time():
    """Not a terminal: a line when the step starts, one with its time when it ends. A
    terminal: the end overwrites the start (`\\r`, padded over it). A step that raises
    reports no time."""
    log = io.StringIO()
    with progress.phase("writing files", file=log):
        pass
    first, second = log.getvalue().splitlines()
    assert first == "writing files ..." and re.fullmatch(r"writing files: \d+\.\d s", second)
    tty = _Terminal()
    with progress.phase("re-simulating", file=tty):
        pass
    assert re.fullmatch(r"re-simulating \.\.\.\rre-simulating: \d+\.\d s *\n", tty.getvalue())
    failed = io.StringIO()
    with pytest.raises(RuntimeError, match="^boom$"), progress.phase("step", file=failed):
        raise RuntimeError("boom")
    assert failed.getvalue() == "step ...\n"
    quiet = io.StringIO()
    with progress.phase("step", file=quiet, disable=True):
        pass
    assert quiet.getvalue() == ""


def test_the_commands_run_bar_shows_off_a_terminal(capsys):
    """`jaxrigid run`'s bar over steps (`cli.chunks.Progress`) writes to stderr also when it
    is not a terminal (pytest captures it): nothing before the first chunk (input refused
    there leaves its error line alone), then the count, the final one when closed; nothing at
    all for a run of one chunk (`enabled=False`)."""
    from jaxrigid.cli.chunks import Progress

    bar = Progress(100, enabled=True)
    bar.update(0)
    assert capsys.readouterr().err == ""
    for done in (50, 100):
        bar.update(done)
    bar.close()
    err = capsys.readouterr().err
    assert "50/100" in err and "building" not in err
    assert err.rstrip().endswith("]") and "100/100" in err.splitlines()[-1]
    quiet = Progress(100, enabled=False)
    quiet.update(100)
    quiet.close()
    assert capsys.readouterr().err == ""
