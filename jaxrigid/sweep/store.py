"""The on-disk store of a sweep: a zarr (v3) group, one array per kept quantity with the
members on the first axis, chunked exactly as the sweep is, whose chunks are
verified against completion records rather than trusted (`records.py`).

Why zarr and not HDF5: a zarr chunk is its own file, so a sweep chunk's results are written
without touching any other chunk's bytes (a kill during a write can damage only the chunk being
written, never a finished one), and several processes or hosts can write different chunks of
one store at once, which HDF5 does not allow without MPI.

The directory holds the zarr group `results.zarr/`, the completion records `done/` and the
lock file `lock`. A chunk counts as finished only when its record `done/<index>` belongs to the
store and every array's rows verify against it (`check`); the record is written (atomically: a
temporary file renamed) after every array of the chunk. The group's attributes hold the sweep's
full description, the chunk size, the method, step, array layout, library versions, the store's
random `store_id` and its `fingerprint`, so the store alone reproduces the sweep.

One process writes a store at a time (`lock`, an advisory `flock` that the kernel releases when
the process ends, killed or not); the workers of a cluster run write chunks under their
driver's lock. Where a filesystem has no locks, a warning says so and the run goes on.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import time
import uuid
import warnings
from pathlib import Path

import numpy as np

from .records import ChunkState, check_rows, fingerprint, make_record, parse_record

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]  # the module is absent here

__all__ = ["ChunkState", "SweepStoreError", "Store"]

ZARR = "results.zarr"


class SweepStoreError(OSError):
    """The store could not be created, written or read (unwritable or full directory, damaged
    metadata, a store of another sweep, or one another process is writing): finished chunks
    stay readable."""


def _zarr():
    try:
        import zarr
    except ImportError as err:  # pragma: no cover - zarr is a dependency of the sweep extra
        raise ImportError("sweeps need zarr: pip install 'jaxrigid[sweep]'") from err
    return zarr


def chunk_bounds(n_members: int, size: int):
    """The chunks `(index, start, stop)` of `n_members` in chunks of `size` (the last shorter)."""
    for index, start in enumerate(range(0, n_members, size)):
        yield index, start, min(start + size, n_members)


def _fill(dtype) -> float | int:
    """What an unwritten (or unverified) member holds: NaN, or −1 for integers."""
    return np.nan if np.issubdtype(np.dtype(dtype), np.floating) else -1


class Store:
    """An open sweep store at `path` (a directory)."""

    def __init__(self, path, group):
        self.path, self.group, self._lock = Path(path), group, None
        self._attrs, self._arrays = None, {}  # read once: fixed after creation

    # --- creating, opening, locking ---------------------------------------------------

    @classmethod
    def create(cls, path, attrs: dict, arrays: dict, n_members: int, chunk_size: int) -> Store:
        """A new store, locked: `arrays` maps a name (`"final/R"`) to `(event_shape, dtype)`;
        each is created `(n_members, *event_shape)` and filled with NaN (integers: −1).
        Records left in `done/` by a deleted store are removed: they belong to no store."""
        zarr, path = _zarr(), Path(path)
        layout = {
            name: [list(event), np.dtype(dtype).str] for name, (event, dtype) in arrays.items()
        }
        attrs = dict(attrs, n_members=n_members, chunk_size=chunk_size, layout=layout)
        attrs.update(store_id=uuid.uuid4().hex, fingerprint=fingerprint(attrs, layout))
        store = None
        try:
            path.mkdir(parents=True, exist_ok=True)
            store = cls(path, None).lock()
            if cls.exists(path):  # created by another process since we looked
                store.close()
                raise SweepStoreError(f"{path} already holds a sweep store: pass resume=True")
            shutil.rmtree(path / "done", ignore_errors=True)
            (path / "done").mkdir()
            store.group = zarr.open_group(str(path / ZARR), mode="w-")
            store.group.attrs.update(attrs)
            for name, (event, dtype) in layout.items():
                store._create_array(name, event, dtype)
        except OSError as err:  # PermissionError too
            if store is not None:
                store.close()  # the lock is this process's: release it for a retry
            if isinstance(err, SweepStoreError):
                raise
            raise SweepStoreError(f"cannot create the sweep store at {path}: {err}") from err
        return store

    def _create_array(self, name: str, event, dtype: str) -> None:
        n, size = self.attrs["n_members"], self.attrs["chunk_size"]
        self.group.create_array(
            name, shape=(n, *event), chunks=(size, *event), dtype=dtype, fill_value=_fill(dtype)
        )

    @classmethod
    def open(cls, path, mode: str = "r") -> Store:
        """The store at `path` (not locked: `lock()` before writing from a driver)."""
        zarr, path = _zarr(), Path(path)
        if not cls.exists(path):
            raise FileNotFoundError(f"{path} holds no sweep store (no {ZARR}/zarr.json)")
        try:
            store = cls(path, zarr.open_group(str(path / ZARR), mode=mode))
            attrs = store.attrs
        except (ValueError, KeyError, TypeError) as err:  # a damaged zarr.json
            raise SweepStoreError(
                f"the store's metadata {path / ZARR / 'zarr.json'} cannot be read "
                f"({type(err).__name__}: {err}); without it the data cannot be interpreted: "
                "run the sweep again into a new directory"
            ) from err
        if "store_id" not in attrs:
            raise SweepStoreError(
                f"{path} was written by an older jaxrigid, before completion records: its data "
                "cannot be verified; run the sweep again into a new directory"
            )
        if fingerprint(attrs, attrs["layout"]) != attrs["fingerprint"]:
            raise SweepStoreError(
                f"the attributes in {path / ZARR / 'zarr.json'} were changed after the store "
                "was created (its fingerprint does not match): no record can be trusted"
            )
        return store

    @staticmethod
    def exists(path) -> bool:
        return (Path(path) / ZARR / "zarr.json").exists()

    def lock(self) -> Store:
        """Take the store's lock (`SweepStoreError` naming the holder when another process
        has it); released by `close()` or when this process ends."""
        if fcntl is None:  # pragma: no cover - not POSIX
            warnings.warn(f"{self.path}: no file locks here; let no other process write it")
            return self
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "a process"
            os.close(fd)
            if err.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                raise SweepStoreError(
                    f"{self.path} is being written by another process ({holder}): wait for it "
                    "to end, or stop it and continue with --resume (resume=True)"
                ) from None
            warnings.warn(f"{self.path}: cannot lock ({err}); let no other process write it")
            return self
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since {stamp}\n".encode())
        self._lock = fd
        return self

    def close(self) -> None:
        """Release the lock (if held)."""
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the flock
            self._lock = None

    # --- chunks ----------------------------------------------------------------------

    @property
    def attrs(self) -> dict:
        if self._attrs is None:
            self._attrs = dict(self.group.attrs)
        return self._attrs

    def _array(self, name: str):
        if name not in self._arrays:
            self._arrays[name] = self.group[name]
        return self._arrays[name]

    def chunks(self) -> list[tuple[int, int, int]]:
        """Every chunk `(index, start, stop)`."""
        return list(chunk_bounds(self.attrs["n_members"], self.attrs["chunk_size"]))

    def _marker(self, index: int) -> Path:
        return self.path / "done" / str(index)

    def _record(self, chunk) -> dict | str | None:
        """Chunk `(index, start, stop)`'s record if it belongs here, else why not (None: no
        record)."""
        try:
            text = self._marker(chunk[0]).read_text()
        except FileNotFoundError:
            return None
        except OSError as err:
            return f"its record cannot be read ({err})"
        attrs = self.attrs
        return parse_record(text, attrs["store_id"], attrs["fingerprint"], chunk)

    def finished(self) -> set[int]:
        """The indices of the chunks with a record that belongs to the store (their data not
        read: `check` verifies it)."""
        return {c[0] for c in self.chunks() if isinstance(self._record(c), dict)}

    def write_chunk(self, index: int, start: int, arrays: dict) -> None:
        """Write rows `start:` of each array, then chunk `index`'s record. A chunk with a
        record is never written again (`SweepStoreError`)."""
        stop = start + len(next(iter(arrays.values())))
        if isinstance(self._record((index, start, stop)), dict):
            raise SweepStoreError(f"chunk {index} of {self.path} is finished: not rewritten")
        try:
            written = {}
            for name, value in arrays.items():
                array = self._array(name)
                rows = np.asarray(value, dtype=array.dtype)
                self._write_rows(name, start, rows)
                key = array.metadata.encode_chunk_key((index,) + (0,) * (rows.ndim - 1))
                written[name] = (f"{name}/{key}", rows)
            attrs = self.attrs
            record = make_record(
                attrs["store_id"], attrs["fingerprint"], index, start, stop, written
            )
            _write_atomically(self._marker(index), record)
        except OSError as err:
            done = sorted(self.finished())
            raise SweepStoreError(
                f"cannot write chunk {index} to {self.path}: {err}. The {len(done)} finished "
                "chunks are intact and readable; free space or fix permissions and continue "
                "with --resume (jaxrigid.sweep.run(..., resume=True))"
            ) from err

    def _write_rows(self, name: str, start: int, value) -> None:
        self._array(name)[start : start + len(value)] = value

    def discard(self, index: int) -> None:
        """Remove chunk `index`'s record (its data did not verify: it is computed again)."""
        self._marker(index).unlink(missing_ok=True)

    def restore_arrays(self) -> None:
        """Create again (filled) every array of the layout that is missing or unreadable."""
        self._arrays = {}
        for name, (event, dtype) in self.attrs["layout"].items():
            try:
                self.group[name]
            except Exception:  # noqa: BLE001 - missing or damaged metadata alike
                shutil.rmtree(self.path / ZARR / name, ignore_errors=True)
                self._create_array(name, event, dtype)

    # --- verifying and reading ---------------------------------------------------------

    def check(self, keep: bool = False) -> tuple[list[ChunkState], dict[str, np.ndarray]]:
        """Every chunk's state (`ChunkState`: finished, missing or damaged) and, with `keep`,
        every array read whole (`name -> (n_members, ...)`), the rows of chunks that are not
        finished replaced by the fill value (NaN; integers −1)."""
        chunks, layout = self.chunks(), self.attrs["layout"]
        records = {c[0]: self._record(c) for c in chunks}
        why = {i: "" if isinstance(r, dict) else (r or "") for i, r in records.items()}
        damaged: dict[int, str] = {}
        data = {}
        for name, (event, dtype) in layout.items():
            finished = [
                c for c in chunks if isinstance(records[c[0]], dict) and c[0] not in damaged
            ]
            if not finished and not keep:
                continue
            values, errors = self._read(name, [c for c in chunks if c in finished] or chunks)
            for i, s, e in finished:
                record = records[i]
                assert isinstance(record, dict)  # as `finished` was chosen
                problem = errors.get(i) or check_rows(record, name, values[s:e])
                if problem:
                    damaged[i] = problem
            if keep:
                data[name] = values
        states = []
        for i, s, e in chunks:
            if i in damaged:
                states.append(ChunkState(i, s, e, "damaged", damaged[i]))
            elif isinstance(record := records[i], dict):
                extra = set(record["arrays"]) - set(layout)
                state = "damaged" if extra else "finished"
                states.append(
                    ChunkState(i, s, e, state, f"{sorted(extra)} not in the store" * bool(extra))
                )
            else:
                states.append(ChunkState(i, s, e, "missing", why[i]))
        for values in data.values():
            for c in states:
                if c.state != "finished":
                    values[c.start : c.stop] = _fill(values.dtype)
        return states, data

    def _read(self, name: str, chunks) -> tuple[np.ndarray, dict[int, str]]:
        """Array `name` whole (fill values where unreadable) and why each unreadable chunk
        of `chunks` could not be read. One read of the whole array, or chunk by chunk when
        that fails, so that one damaged file names its chunk and spares the others."""
        event, dtype = self.attrs["layout"][name]
        n = self.attrs["n_members"]
        try:
            array = self.group[name]
        except Exception as err:  # noqa: BLE001 - a deleted folder or damaged metadata alike
            why = f"array {name} is missing or unreadable ({type(err).__name__})"
            return np.full((n, *event), _fill(dtype), dtype), {c[0]: why for c in chunks}
        try:
            return np.array(array[...], dtype=dtype), {}
        except Exception:  # noqa: BLE001 - a damaged chunk file: find which
            pass
        values, errors = np.full((n, *event), _fill(dtype), dtype), {}
        for i, s, e in chunks:
            try:
                values[s:e] = array[s:e]
            except Exception as err:  # noqa: BLE001 - codecs raise their own kinds
                key = array.metadata.encode_chunk_key((i,) + (0,) * len(event))
                errors[i] = f"{name}/{key} cannot be read ({type(err).__name__}: {err})"
        return values, errors


def _write_atomically(path: Path, record: dict) -> None:
    import json

    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
