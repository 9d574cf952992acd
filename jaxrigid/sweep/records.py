"""Completion records: what a sweep store's chunk holds, so that its data is verified rather
than trusted.

A chunk counts as finished only when its record `done/<index>` belongs to the store and the
data verifies against it. The record (JSON, written atomically after every array of the chunk)
says

- which store it belongs to: the store's `store_id` (a random id drawn when the store is
  created: a record left behind by a deleted store, or copied from another one, never matches)
  and its `fingerprint` (a SHA-256 of everything that determines the results: the sweep's
  description, method, step, chunk size and array layout);
- which members it covers (`start`, `stop`) and, for every array, its zarr chunk key, shape,
  dtype and the SHA-256 of the rows written (`digest`).

Why a digest of the values and not of the chunk files: zarr leaves out a chunk equal to its
fill value and may change codecs between versions; the values are what `load` returns, so
they are what must verify. A deleted chunk file reads back as fill values, an overwritten one
as other values or a decompression error: either way the digest does not match.
"""

from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

import numpy as np

__all__ = ["ChunkState", "check_rows", "digest", "fingerprint", "make_record", "parse_record"]

FORMAT = 1
_NOT_A_RECORD = "its record is not a completion record (unreadable, or from an older jaxrigid)"

# the store attributes that determine a chunk's results (not `devices`, `bytes_per_member`,
# `versions`: a store resumed on other devices or by a newer jaxrigid holds the same sweep)
_DETERMINING = ("sweep", "shape", "n_members", "chunk_size", "method", "dt", "t_end", "n_steps")


class ChunkState(NamedTuple):
    """One chunk's state: `"finished"` (its record belongs to the store and its data verifies),
    `"missing"` (no record that belongs: never finished, or interrupted) or `"damaged"` (a
    record, but data that does not verify); `why` says what failed or what was ignored."""

    index: int  # type: ignore[assignment]  # shadows `tuple.index`, by design
    start: int
    stop: int
    state: str
    why: str = ""


def fingerprint(attrs: dict, layout: dict) -> str:
    """SHA-256 of the canonical JSON of the determining attributes and the array layout."""
    keep = {k: attrs.get(k) for k in _DETERMINING}
    keep["layout"] = layout
    text = json.dumps(keep, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def digest(rows: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (C order)."""
    rows = np.ascontiguousarray(rows)
    h = hashlib.sha256(f"{rows.dtype.str}{rows.shape}".encode())
    h.update(rows.tobytes())
    return h.hexdigest()


def make_record(store_id: str, fp: str, index: int, start: int, stop: int, arrays: dict) -> dict:
    """The record of chunk `index`: `arrays` maps a name to `(chunk_key, rows)`, the rows as
    stored (the store's dtype)."""
    return {
        "format": FORMAT,
        "store": store_id,
        "fingerprint": fp,
        "index": index,
        "start": start,
        "stop": stop,
        "arrays": {
            name: {
                "key": key,
                "shape": list(rows.shape),
                "dtype": rows.dtype.str,
                "digest": digest(rows),
            }
            for name, (key, rows) in arrays.items()
        },
    }


def parse_record(text: str, store_id: str, fp: str, chunk: tuple[int, int, int]) -> str | dict:
    """The record in `text` if it belongs to this store and chunk `(index, start, stop)`;
    otherwise why it is not trusted (a string)."""
    try:
        record = json.loads(text)
    except ValueError:
        return _NOT_A_RECORD
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return _NOT_A_RECORD
    if record.get("store") != store_id:
        return "its record belongs to another store (ignored)"
    if record.get("fingerprint") != fp:
        return "its record belongs to another sweep spec (ignored)"
    if [record.get("index"), record.get("start"), record.get("stop")] != list(chunk):
        return f"its record covers other members ({record.get('start')}..{record.get('stop')})"
    return record


def check_rows(record: dict, name: str, rows: np.ndarray) -> str:
    """Why the `rows` read back for array `name` do not verify against `record` ("" if they
    do)."""
    entry = record["arrays"].get(name)
    if entry is None:
        return f"{name} is not in its record"
    if list(rows.shape) != entry["shape"] or rows.dtype.str != entry["dtype"]:
        return f"{name} has shape {rows.shape} {rows.dtype}, its record {entry['shape']}"
    if digest(rows) != entry["digest"]:
        return (
            f"{name} ({entry['key']}) differs from its record: a chunk file deleted or overwritten"
        )
    return ""
