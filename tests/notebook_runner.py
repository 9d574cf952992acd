"""Executes a notebook of notebooks/ for the notebook tests, which are two files so that the
suite's two workers (`--dist loadfile`) can share the notebooks' ≈ 18 min: the rolling ball's
(`test_notebooks_rolling_ball.py`) and the rest (`test_notebooks.py`).

Each notebook runs top to bottom in a fresh `python3` kernel whose working directory is a
temporary directory, so a notebook that writes files cannot litter the repository. A notebook
must configure JAX itself (e.g. `jax.config.update("jax_enable_x64", True)` in its first code
cell): the kernel is a separate process and sees none of this test session's settings
(conftest.py), and `JAX_ENABLE_X64` is removed from the kernel's environment so that a notebook
relying on it fails here rather than only on machines where it happens to be unset. The kernel
builds its programs with the suite's XLA settings (`xla_settings`), except the notebooks in
`xla_settings.DEFAULTS_NOTEBOOKS`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import xla_settings

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
ROLLING_BALL = [p for p in NOTEBOOKS if p.name.startswith("rolling_ball")]
OTHERS = [p for p in NOTEBOOKS if p not in ROLLING_BALL]
CELL_TIMEOUT_S = 600


def execute(path: Path, tmp_path: Path, monkeypatch) -> None:
    """Run `path` in a fresh kernel in `tmp_path`; a cell error fails the test."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(path, as_version=4)
    # The kernel inherits this process's environment.
    monkeypatch.delenv("JAX_ENABLE_X64", raising=False)
    monkeypatch.delenv("JAXRIGID_NB_SAVE", raising=False)  # no figure files in tests
    monkeypatch.delenv("MPLBACKEND", raising=False)  # figures render inline, as for a reader
    if path.name in xla_settings.DEFAULTS_NOTEBOOKS and xla_settings.fast_build_on():
        monkeypatch.setenv("XLA_FLAGS", xla_settings.defaults_environment()["XLA_FLAGS"])
        monkeypatch.delenv(xla_settings.FAST_BUILD_ENV, raising=False)  # XLA's defaults
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        allow_errors=False,
    )
    try:
        client.execute(cwd=str(tmp_path))
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name}: a cell raised\n{error}", pytrace=False)
