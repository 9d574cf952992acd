"""A run as a library object: its plan and its chunked continuation.

`planning`: the steps of `dt` that make `t_end` (`whole_steps`, `step_plan`) and the chunks a
long run is integrated in (`plan_chunks`, `saves_for`; their bounds `CHUNK_STEPS`,
`MAX_SAVES`, ... are `planning`'s, read at each call). `chunked`: `run_chunks`, the run
integrated chunk by chunk, each chunk continuing the last one's state, solver state and
observer carry (bit for bit one `simulate` call), with non-finite members restarted.

The command (`jaxrigid run`), sweeps and control plan their runs here; progress bars and
compile clocks are the command's (`jaxrigid.cli.chunks`).
"""

from __future__ import annotations

from .chunked import ChunkedRun as ChunkedRun
from .chunked import ChunkInputError as ChunkInputError
from .chunked import fresh_solver_state as fresh_solver_state
from .chunked import nan_like as nan_like
from .chunked import nonfinite_members as nonfinite_members
from .chunked import run_chunks as run_chunks
from .chunked import where_members as where_members
from .planning import plan_chunks as plan_chunks
from .planning import positive as positive
from .planning import saves_for as saves_for
from .planning import step_plan as step_plan
from .planning import whole_steps as whole_steps
