"""Execute every notebook in notebooks/ and fail on any cell error (`notebook_runner`); the
rolling ball's two are in `test_notebooks_rolling_ball.py`."""

from __future__ import annotations

import pytest
from notebook_runner import NOTEBOOK_DIR, NOTEBOOKS, OTHERS, ROLLING_BALL, execute


def test_notebooks_found():
    """Every notebook is executed by exactly one of the two files."""
    assert ROLLING_BALL and OTHERS, f"notebooks missing in {NOTEBOOK_DIR}"
    assert sorted(ROLLING_BALL + OTHERS) == NOTEBOOKS


@pytest.mark.parametrize("path", OTHERS, ids=[p.name for p in OTHERS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    execute(path, tmp_path, monkeypatch)
