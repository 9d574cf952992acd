"""The on-disk store of a sweep: a zarr (v3) group, one array per kept quantity with the
members on the first axis, chunked exactly as the sweep is (issue 15).

Why zarr and not HDF5: a zarr chunk is its own file, so a sweep chunk's results are written
without touching any other chunk's bytes (a kill during a write can damage only the chunk being
written, never a finished one), and several processes or hosts can write different chunks of
one store at once, which HDF5 does not allow without MPI.

The directory holds the zarr group `results.zarr/` and the markers `done/`. A chunk counts as
finished only when its marker `done/<index>` exists; the marker is written
(atomically: a temporary file renamed) after every array of the chunk. Resuming recomputes
the chunks without a marker and never rewrites a finished one. The group's attributes hold the
sweep's full description, the chunk size, the method, step and library versions, so the store
alone reproduces the sweep.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["SweepStoreError", "Store"]

ZARR = "results.zarr"


class SweepStoreError(OSError):
    """The store could not be created or written (unwritable or full directory, or a store of
    another sweep): finished chunks stay readable."""


def _zarr():
    try:
        import zarr
    except ImportError as err:  # pragma: no cover - zarr is a dependency of the sweep extra
        raise ImportError("sweeps need zarr: pip install 'jaxrigid[sweep]'") from err
    return zarr


class Store:
    """An open sweep store at `path` (a directory)."""

    def __init__(self, path, group):
        self.path, self.group = Path(path), group

    # --- creating and opening --------------------------------------------------------

    @classmethod
    def create(cls, path, attrs: dict, arrays: dict, n_members: int, chunk_size: int) -> Store:
        """A new store: `arrays` maps a name (`"final/R"`) to `(event_shape, dtype)`; each is
        created `(n_members, *event_shape)` and filled with NaN (integers: −1)."""
        zarr, path = _zarr(), Path(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
            (path / "done").mkdir(exist_ok=True)
            group = zarr.open_group(str(path / ZARR), mode="w-")
            group.attrs.update(attrs)
            for name, (event, dtype) in arrays.items():
                dtype = np.dtype(dtype)
                fill = np.nan if np.issubdtype(dtype, np.floating) else -1
                group.create_array(
                    name,
                    shape=(n_members, *event),
                    chunks=(chunk_size, *event),
                    dtype=dtype,
                    fill_value=fill,
                )
        except (OSError, PermissionError) as err:
            raise SweepStoreError(f"cannot create the sweep store at {path}: {err}") from err
        return cls(path, group)

    @classmethod
    def open(cls, path, mode: str = "r") -> Store:
        zarr, path = _zarr(), Path(path)
        if not cls.exists(path):
            raise FileNotFoundError(f"{path} holds no sweep store (no {ZARR}/zarr.json)")
        return cls(path, zarr.open_group(str(path / ZARR), mode=mode))

    @staticmethod
    def exists(path) -> bool:
        return (Path(path) / ZARR / "zarr.json").exists()

    # --- chunks ----------------------------------------------------------------------

    @property
    def attrs(self) -> dict:
        return dict(self.group.attrs)

    def _marker(self, index: int) -> Path:
        return self.path / "done" / str(index)

    def finished(self) -> set[int]:
        """The indices of the finished chunks (those with a marker)."""
        done = self.path / "done"
        return {int(p.name) for p in done.iterdir() if p.name.isdigit()} if done.exists() else set()

    def write_chunk(self, index: int, start: int, arrays: dict) -> None:
        """Write rows `start:` of each array, then mark chunk `index` finished. A finished
        chunk is never written again (`SweepStoreError`)."""
        if self._marker(index).exists():
            raise SweepStoreError(f"chunk {index} of {self.path} is finished: not rewritten")
        try:
            for name, value in arrays.items():
                self._write_rows(name, start, value)
            tmp = self._marker(index).with_suffix(".tmp")
            with open(tmp, "w") as f:
                f.write(f"{start} {start + len(next(iter(arrays.values())))}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._marker(index))
        except OSError as err:
            done = sorted(self.finished())
            raise SweepStoreError(
                f"cannot write chunk {index} to {self.path}: {err}. The {len(done)} finished "
                "chunks are intact and readable; free space or fix permissions and continue "
                "with --resume (jaxrigid.sweep.run(..., resume=True))"
            ) from err

    def _write_rows(self, name: str, start: int, value) -> None:
        self.group[name][start : start + len(value)] = value

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array, read whole (`name -> (n_members, ...)`)."""
        out = {}

        def visit(prefix, group):
            for name, item in group.members():
                key = f"{prefix}{name}"
                if hasattr(item, "shape"):
                    out[key] = np.asarray(item[...])
                else:
                    visit(key + "/", item)

        visit("", self.group)
        return out
