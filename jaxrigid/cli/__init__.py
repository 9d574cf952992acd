"""The `jaxrigid` command: list the built-in cases and methods, and run a case.

    jaxrigid cases [CASE]
    jaxrigid methods
    jaxrigid run CASE [--method M] [--dt H] [--t-end T] [--ensemble N] [--seed S]
                      [--set NAME=VALUE ...] [--out DIR] [--json]

`run` writes `<case>.npz`, `<case>_invariants.csv` and `<case>.png` into DIR; with `--json` it
prints exactly one JSON object on stdout (progress and warnings go to stderr). Bad input exits
with status 2 and one line `jaxrigid: error: ...` on stderr that says what would be valid
(and, for a misspelt name, the nearest valid ones).
The command computes in float64.

Modules: `_main` (parsing, dispatch, `cases`, `methods`), `errors`, `lookups` (input
resolution), `run` (setup, chunked integration, `run`), `chunks` (progress bar, compile clock),
`output` (report, files, summary). The run's plan and chunked continuation are the library's
(`jaxrigid.runs`); `CHUNK_STEPS`, `MAX_CHUNKS`, `MAX_SAVES` and `plan_chunks` here are
`jaxrigid.runs.planning`'s.
"""

from __future__ import annotations

from ..runs.planning import CHUNK_STEPS as CHUNK_STEPS
from ..runs.planning import MAX_CHUNKS as MAX_CHUNKS
from ..runs.planning import MAX_SAVES as MAX_SAVES
from ..runs.planning import plan_chunks as plan_chunks
from . import chunks as chunks
from ._main import main as main
from .errors import RunError as RunError
from .errors import UsageError as UsageError
