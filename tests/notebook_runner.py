"""Executes a notebook of notebooks/ for the notebook tests, and checks that its saved outputs
are what the fresh execution gives. The tests are two files so that the suite's two workers
(`--dist loadfile`) can share the notebooks: the rolling ball's (`test_notebooks_rolling_ball.py`)
and the rest (`test_notebooks.py`).

Each notebook runs top to bottom in a fresh `python3` kernel whose working directory is a
temporary directory, so a notebook that writes files cannot litter the repository. A notebook
must configure JAX itself (e.g. `jax.config.update("jax_enable_x64", True)` in its first code
cell): the kernel is a separate process and sees none of this test session's settings
(conftest.py), and `JAX_ENABLE_X64` is removed from the kernel's environment so that a notebook
relying on it fails here rather than only on machines where it happens to be unset. The kernel
builds its programs with the suite's XLA settings (`xla_settings`), except the notebooks in
`xla_settings.DEFAULTS_NOTEBOOKS`.

The notebooks are saved with their outputs (the documentation site shows them as saved), made
with XLA's defaults as a reader runs them: `python tests/notebook_runner.py notebooks/NAME.ipynb`
executes and saves one. `assert_outputs_match` compares the saved outputs with a fresh run's:
the same kinds of outputs per cell, every figure (not its pixels), and the texts with their
numbers to `RTOL`; a cell tagged `roundoff` or `chaotic` (its metadata's tags) compares its
numbers more loosely, for the reasons given at `ROUNDOFF_FACTOR` and `CHAOTIC_FACTOR`, one
tagged `machine` its words but not its numbers (at `machine`), and one tagged `optimised`
only its outputs' kinds, figures and lines (at `optimised`). A
notebook must not print timings (they would differ at every run); a progress bar's clock and a
temporary directory's name are left out of the comparison.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
import xla_settings

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
ROLLING_BALL = [p for p in NOTEBOOKS if p.name.startswith("rolling_ball")]
OTHERS = [p for p in NOTEBOOKS if p not in ROLLING_BALL]
CELL_TIMEOUT_S = 600
# the kernel inherits the environment; these would change what a notebook does or draws
_DROP = ("JAX_ENABLE_X64", "JAXRIGID_NB_SAVE", "MPLBACKEND")


def _run(nb, cwd: Path):
    """Execute `nb` in place in a fresh kernel in `cwd` (a cell error raises)."""
    import nbclient

    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
        allow_errors=False,
        record_timing=False,  # no timestamps in the saved files
        coalesce_streams=True,  # one stream output per cell and name, however it was flushed
    )
    client.execute(cwd=str(cwd))
    return nb


def execute(path: Path, tmp_path: Path, monkeypatch) -> None:
    """Run `path` in a fresh kernel in `tmp_path`; a cell error fails the test, and so do saved
    outputs that differ from the fresh ones (`assert_outputs_match`)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    saved = nbformat.read(path, as_version=4)
    fresh = nbformat.read(path, as_version=4)
    for name in _DROP:  # MPLBACKEND too: figures render inline, as for a reader
        monkeypatch.delenv(name, raising=False)
    if path.name in xla_settings.DEFAULTS_NOTEBOOKS and xla_settings.fast_build_on():
        monkeypatch.setenv("XLA_FLAGS", xla_settings.defaults_environment()["XLA_FLAGS"])
        monkeypatch.delenv(xla_settings.FAST_BUILD_ENV, raising=False)  # XLA's defaults
    try:
        _run(fresh, tmp_path)
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name}: a cell raised\n{error}", pytrace=False)
    try:
        assert_outputs_match(saved, fresh)
    except AssertionError as error:
        pytest.fail(
            f"{path.name}: the saved outputs are not what a fresh execution gives (save it "
            f"again: python tests/notebook_runner.py notebooks/{path.name})\n{error}",
            pytrace=False,
        )


def save(path: Path) -> None:
    """Execute `path` with XLA's defaults (as a reader does) and write it with its outputs."""
    import nbformat

    for name in _DROP + (xla_settings.FAST_BUILD_ENV,):
        os.environ.pop(name, None)
    os.environ["XLA_FLAGS"] = xla_settings.without_fast_build_flags(os.environ.get("XLA_FLAGS", ""))
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="jaxrigid-nb-") as cwd:
        _run(nb, Path(cwd))
    nbformat.write(nb, path)


# --- saved against fresh outputs ----------------------------------------------------------
# A number in a text output (a sign only where it cannot be a hyphen: not after a letter, digit,
# underscore or another sign).
NUMBER = re.compile(r"(?<![\w.+-])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# The saved outputs come from XLA's defaults, the test's from the suite's fast build (optimisation
# level 0, the older fusion emitter: `xla_settings`), which rounds some products and sums
# differently; over the notebooks' runs a well-conditioned printed quantity moves by far less
# than this, while a stale output (another model, step, method or ensemble) moves by more.
RTOL = 1e-6
# A progress bar's clock and rate (tqdm's "[00:07<00:00, 220member/s]") are not results.
PROGRESS_CLOCK = re.compile(r"\[\d+:\d+(?::\d+)?<[^\]]*\]")
# A temporary directory a notebook makes (`tempfile.mkdtemp`) has a new name at every execution.
TEMPORARY = re.compile(
    rf"(?:{re.escape(tempfile.gettempdir())}|/tmp|/var/folders)/[\w.-]+(?:/[\w.-]+)*"
)
# A cell tagged `roundoff` prints quantities that are themselves rounding errors (the drift of
# an invariant, a defect of a constraint): such a value is the sum of rounding errors of one
# particular program, and what the notebook says of it is its order of magnitude. In such a cell
# two numbers both below `ROUNDOFF_SMALL` in magnitude agree within `ROUNDOFF_FACTOR`, or when
# both are below `ROUNDOFF_FLOOR`: 4500 float64 ε, under which the notebooks' runs (≤ 10⁵ steps)
# call a quantity "at round-off", and where a rounding error may cancel exactly (print 0) in one
# program and not in another. Larger numbers in the cell are compared as everywhere else.
ROUNDOFF_SMALL = 1e-9
ROUNDOFF_FACTOR = 10.0
ROUNDOFF_FLOOR = 1e-12
# A cell tagged `chaotic` prints extremes of a long run in a chaotic regime (Krysl's body in the
# Coulomb potential, 4·10⁴ steps that turn it by over 30° each): rounding differences grow
# along the run, and under the fast build the largest energy error of one method moved from
# 3.3e-2 to 4.1e-2. What the notebook says of them is their size and ranking, which its words
# (the methods' names, "reproduced") carry and which must not change; the numbers must agree
# within this factor (and in sign).
CHAOTIC_FACTOR = 2.0
# A cell tagged `machine` prints numbers of a chaotic run that differ between machines beyond
# any factor: XLA compiles for the host's CPU, and the chain notebook's runs, saved with XLA's
# defaults on one machine, rounded otherwise on an AMD EPYC (2026-12-04), where the
# fitted energy drift of a bounded error, a slope of noise, moved from -1.4e-8 to -3.8e-8.
# Such a cell's words are compared, and with them the count and places of its numbers, but
# not their values; what the numbers must satisfy the cell asserts itself.
# A cell tagged `optimised` prints what an optimiser reached (the control notebook's efforts,
# misses, feasible starts, and what follows from the optimum): the optimiser's path depends on
# rounding — between XLA's two builds the avoid-obstacles effort moved from 4.974 to 4.914 and
# one of six starts changed feasibility — so no tolerance on its numbers or words would hold
# across machines. Such a cell is compared by its outputs' kinds and figures and its count of
# text lines; what the optimum must satisfy is asserted by tests/test_control_*.py.


def _unit(token: str) -> float:
    """One unit in the last printed place of `token` ("3.1e-14" -> 1e-15, "12" -> 1)."""
    mantissa, _, exponent = token.lower().lstrip("+-").partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def numbers_agree(saved: str, fresh: str, roundoff: bool, chaotic: bool = False) -> bool:
    """Whether two printed numbers agree: within `RTOL` plus one unit in the last printed place
    (a value near a rounding boundary prints either way), or as rounding errors (`roundoff`),
    or as a chaotic run's (`chaotic`)."""
    a, b = float(saved), float(fresh)
    slack = min(_unit(saved), _unit(fresh))  # "0.0e+00" has the unit 0.1, "2.2e-16" 1e-17
    if abs(a - b) <= RTOL * max(abs(a), abs(b)) + slack:
        return True
    small, large = sorted((abs(a), abs(b)))
    if chaotic and a * b > 0 and large <= CHAOTIC_FACTOR * small:
        return True
    if not roundoff or large >= ROUNDOFF_SMALL:
        return False
    return large <= ROUNDOFF_FLOOR or (a * b > 0 and large <= ROUNDOFF_FACTOR * small)


def _words(text: str) -> str:
    """`text` with its numbers as `#` and every run of spaces as one (numpy pads the numbers
    of a printed array to a common width, which depends on their digits)."""
    return re.sub(r"[ \t]+", " ", NUMBER.sub("#", text))


def _text_mismatch(
    saved: str, fresh: str, roundoff: bool, chaotic: bool, machine: bool = False
) -> str | None:
    """Why two text outputs differ (their words, their count of numbers, or a number), or None;
    `machine`: the words only."""
    if _words(saved) != _words(fresh):
        for old, new in zip(saved.splitlines(), fresh.splitlines()):
            if _words(old) != _words(new):
                return f"the text differs:\n  saved: {old}\n  fresh: {new}"
        return f"the text differs in its lines:\n  saved: {saved!r}\n  fresh: {fresh!r}"
    if machine:
        return None
    for old, new in zip(NUMBER.findall(saved), NUMBER.findall(fresh)):
        if not numbers_agree(old, new, roundoff, chaotic):
            line = next(x for x in saved.splitlines() if old in x)
            return f"{old} (saved) against {new} (fresh), in: {line.strip()}"
    return None


def _texts(output) -> list[str]:
    """An output's text: a stream's, or the text/plain of a result or display (not images)."""
    if output["output_type"] == "stream":
        text = PROGRESS_CLOCK.sub("[clock]", output["text"])
    else:
        plain = output.get("data", {}).get("text/plain")
        is_figure = "image/png" in output.get("data", {})
        if plain is None or is_figure:  # a figure's text/plain is its repr, "<Figure size …>"
            return []
        text = "".join(plain) if isinstance(plain, list) else plain
    return [TEMPORARY.sub("[temporary]", text)]


def output_kinds(cell) -> list[str]:
    """The kinds of a code cell's outputs in order: `stream:stdout`, `figure`, `result`, ..."""
    kinds = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            kinds.append(f"stream:{output['name']}")
        elif "image/png" in output.get("data", {}):
            kinds.append("figure")
        else:
            kinds.append(output["output_type"])
    return kinds


def assert_outputs_match(saved, fresh) -> None:
    """The saved notebook's outputs are the fresh execution's: every code cell executed and
    saved with the same kinds of outputs in the same order (every figure present; figures are
    not compared pixel by pixel), and equal texts up to `numbers_agree`."""
    problems = []
    code = [(i, c) for i, c in enumerate(saved.cells) if c.cell_type == "code"]
    fresh_code = [c for c in fresh.cells if c.cell_type == "code"]
    assert len(code) == len(fresh_code), "the notebooks have different cells"
    for (i, old), new in zip(code, fresh_code):
        where = f"cell {i} ({old.source.strip().splitlines()[0][:60] if old.source else ''})"
        if old.get("execution_count") is None:
            problems.append(f"{where}: saved without being executed")
        if output_kinds(old) != output_kinds(new):
            problems.append(f"{where}: outputs {output_kinds(old)} saved, {output_kinds(new)} now")
            continue
        tags = old.metadata.get("tags", [])
        for a, b in zip(old.outputs, new.outputs):
            if "optimised" in tags:
                lines = (
                    [len(x.splitlines()) for x in _texts(a)],
                    [len(y.splitlines()) for y in _texts(b)],
                )
                if lines[0] != lines[1]:
                    problems.append(f"{where}: {lines[0]} text lines saved, {lines[1]} now")
                continue
            for x, y in zip(_texts(a), _texts(b)):
                why = _text_mismatch(x, y, "roundoff" in tags, "chaotic" in tags, "machine" in tags)
                if why:
                    problems.append(f"{where}: {why}")
    assert not problems, "\n".join(problems)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        save(Path(arg).resolve())
        print(f"saved {arg} with its outputs")
