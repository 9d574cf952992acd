"""Execute every notebook in notebooks/ and fail on any cell error or on saved outputs that
are not what the fresh execution gives (`notebook_runner`); the rolling ball's two are in
`test_notebooks_rolling_ball.py`. The comparison itself is checked here on saved outputs,
without executing anything."""

from __future__ import annotations

import copy
import re

import pytest
from notebook_runner import (
    NOTEBOOK_DIR,
    NOTEBOOKS,
    NUMBER,
    OTHERS,
    ROLLING_BALL,
    assert_outputs_match,
    execute,
    numbers_agree,
    output_kinds,
)

nbformat = pytest.importorskip("nbformat")


def test_notebooks_found():
    """Every notebook is executed by exactly one of the two files."""
    assert ROLLING_BALL and OTHERS, f"notebooks missing in {NOTEBOOK_DIR}"
    assert sorted(ROLLING_BALL + OTHERS) == NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_saved_executed(path):
    """Saved with its outputs: every code cell executed, in order, none raised (that each
    figure is there, test_docs.py checks)."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), path.name
    for cell in code:
        assert "error" not in output_kinds(cell), cell.source[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_names_no_path_outside_the_repository(path):
    """A reader has the repository, not the machine it was written on: papers are cited by
    author and title, files by their path in the repository."""
    nb = nbformat.read(path, as_version=4)
    texts = [c.source for c in nb.cells] + [
        o.get("text", "") for c in nb.cells for o in c.get("outputs", [])
    ]
    outside = [t[:80] for t in texts if re.search(r"/work/|\.\./shared|/shared/papers", t)]
    assert not outside, outside


def _with_text(nb):
    """The first code cell of `nb` with a number in a stdout stream, and that output."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("name") == "stdout" and NUMBER.search(output["text"]):
                return cell, output
    raise AssertionError("no printed number")


@pytest.fixture(scope="module")
def saved():
    return nbformat.read(NOTEBOOK_DIR / "sweeps.ipynb", as_version=4)


def test_saved_outputs_match_themselves(saved):
    assert_outputs_match(saved, copy.deepcopy(saved))


@pytest.mark.parametrize("factor", [1.001, 0.5, 10.0])
def test_a_changed_number_is_caught(saved, factor):
    """A saved number off by 0.1 % (above `RTOL` and the printed digits' rounding) fails."""
    fresh = copy.deepcopy(saved)
    _, output = _with_text(fresh)
    match = max(NUMBER.finditer(output["text"]), key=lambda m: len(m.group()))
    value = float(match.group())
    changed = f"{value * factor + (1 if value == 0 else 0):.6e}"
    output["text"] = output["text"][: match.start()] + changed + output["text"][match.end() :]
    with pytest.raises(AssertionError, match="saved"):
        assert_outputs_match(saved, fresh)


def test_changed_words_and_missing_figures_are_caught(saved):
    fresh = copy.deepcopy(saved)
    _, output = _with_text(fresh)
    first = next(ch for ch in output["text"] if ch.isalpha())
    output["text"] = output["text"].replace(first, "Z" if first != "Z" else "Y", 1)
    with pytest.raises(AssertionError, match="text differs"):
        assert_outputs_match(saved, fresh)
    fresh = copy.deepcopy(saved)
    cell = next(c for c in fresh.cells if "figure" in output_kinds(c))
    cell.outputs = [o for o in cell.outputs if "image/png" not in o.get("data", {})]
    with pytest.raises(AssertionError, match="figure"):
        assert_outputs_match(saved, fresh)


def test_an_optimised_cell_is_compared_by_its_lines(saved):
    """A cell tagged `optimised` (the optimiser's results depend on rounding) passes with other
    numbers and words, and fails with another count of text lines."""
    saved, fresh = copy.deepcopy(saved), copy.deepcopy(saved)
    cell, output = _with_text(fresh)
    old_cell = next(c for c in saved.cells if c.source == cell.source)
    old_cell.metadata["tags"] = [*old_cell.metadata.get("tags", []), "optimised"]
    output["text"] = NUMBER.sub("7.5", output["text"]).replace("e", "E")
    assert_outputs_match(saved, fresh)
    output["text"] += "one more line\n"
    with pytest.raises(AssertionError, match="text lines saved"):
        assert_outputs_match(saved, fresh)


def test_a_machine_cell_is_compared_by_its_words(saved):
    """A cell tagged `machine` passes with any numbers in the places of its numbers, and fails
    with a changed word."""
    saved, fresh = copy.deepcopy(saved), copy.deepcopy(saved)
    cell, output = _with_text(fresh)
    old_cell = next(c for c in saved.cells if c.source == cell.source)
    old_cell.metadata["tags"] = [*old_cell.metadata.get("tags", []), "machine"]
    output["text"] = NUMBER.sub("-7.5e+03", output["text"])
    assert_outputs_match(saved, fresh)
    first = next(ch for ch in output["text"] if ch.isalpha())
    output["text"] = output["text"].replace(first, "Z" if first != "Z" else "Y", 1)
    with pytest.raises(AssertionError, match="text differs"):
        assert_outputs_match(saved, fresh)


def test_numbers_agree():
    assert numbers_agree("0.238117", "0.238117", roundoff=False)
    assert numbers_agree("1.234", "1.235", roundoff=False)  # a rounding boundary: one unit
    assert not numbers_agree("1.234", "1.236", roundoff=False)
    assert not numbers_agree("3.1e-14", "6.2e-14", roundoff=False)
    assert numbers_agree("3.1e-14", "6.2e-14", roundoff=True)
    assert not numbers_agree("3.1e-14", "6.2e-12", roundoff=True)
    assert not numbers_agree("3.1e-11", "-3.1e-11", roundoff=True)
    assert numbers_agree("0.0e+00", "2.2e-16", roundoff=True)  # both under the floor
    assert not numbers_agree("0.0e+00", "2.2e-16", roundoff=False)
    assert not numbers_agree("1.15e-02", "1.17e-02", roundoff=True)  # not a rounding error
    assert numbers_agree("3.303e-02", "4.138e-02", roundoff=False, chaotic=True)
    assert not numbers_agree("3.303e-02", "7.0e-02", roundoff=False, chaotic=True)
    assert not numbers_agree("3.303e-02", "-3.303e-02", roundoff=False, chaotic=True)


@pytest.mark.parametrize("path", OTHERS, ids=[p.name for p in OTHERS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    execute(path, tmp_path, monkeypatch)
