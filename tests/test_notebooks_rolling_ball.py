"""Execute the rolling ball's notebooks (`rolling_ball*.ipynb`) and fail on any cell error or on
saved outputs that are not what the fresh execution gives: a file of their own so that the
suite's workers share the notebooks (`notebook_runner`)."""

from __future__ import annotations

import pytest
from notebook_runner import ROLLING_BALL, execute


@pytest.mark.parametrize("path", ROLLING_BALL, ids=[p.name for p in ROLLING_BALL])
def test_notebook_executes(path, tmp_path, monkeypatch):
    execute(path, tmp_path, monkeypatch)
