"""Self-describing policy files: `save_policy(path, policy, metadata)`, `load_policy(path)`.

A file is

    JAXRIGID-POLICY 1\\n
    {"kind": ..., "sizes": {...}, "dtype": ..., "metadata": {...}}\\n     (one line of JSON)
    <the policy's arrays, `equinox.tree_serialise_leaves`>

The header names the class (`MLPPolicy`, `LinearFeedback`, `QuadraticFeedback`,
`PlantInformedFeedback`), the sizes
that rebuild its structure, the parameters' dtype and free metadata (the problem family, the
training settings, …), so `load_policy` needs nothing but the file. A `PerTask` policy (one
member per task, `closed_loop`) is saved as its class with `"per_task": B` in the header
(the members' arrays stacked); the tasks it belongs to are the caller's metadata. A file
that is not a policy file, or whose header or arrays are damaged or truncated, raises
`ValueError` naming the file and what is wrong.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from .closed_loop import PerTask
from .policies import LinearFeedback, MLPPolicy, PlantInformedFeedback, QuadraticFeedback

__all__ = ["MAGIC", "load_policy", "save_policy"]

MAGIC = b"JAXRIGID-POLICY 1\n"


# the policy classes a file may hold, by the name its header gives: each says its structure
# (`sizes()`) and rebuilds it (`skeleton(sizes, dtype)`)
KINDS = {
    cls.__name__: cls
    for cls in (MLPPolicy, LinearFeedback, QuadraticFeedback, PlantInformedFeedback)
}


def _member(policy):
    """`(the policy a file's header describes, its task count or None)`: a `PerTask`'s first
    member (its arrays without the leading axis)."""
    if isinstance(policy, PerTask):
        return jax.tree_util.tree_map(lambda a: a[0], policy.policy), policy.count
    return policy, None


def _sizes(policy) -> dict:
    if type(policy) not in KINDS.values():
        raise TypeError(f"save_policy: not a policy: {type(policy).__name__}")
    return policy.sizes()


def _dtype(policy) -> str:
    leaves = [x for x in jax.tree_util.tree_leaves(policy) if eqx.is_inexact_array(x)]
    return str(leaves[0].dtype)


def save_policy(path, policy, metadata: dict | None = None) -> Path:
    """Write `policy` (an `MLPPolicy`, `LinearFeedback`, `QuadraticFeedback` or
    `PlantInformedFeedback`, or a `PerTask` of one of the feedbacks) and `metadata`
    (JSON-serialisable) to `path`; returns the path."""
    member, count = _member(policy)
    header = {
        "kind": type(member).__name__,
        "sizes": _sizes(member),
        "dtype": _dtype(member),
        "metadata": metadata or {},
    }
    if count is not None:
        header["per_task"] = count
    path = Path(path)
    with path.open("wb") as f:
        f.write(MAGIC)
        f.write(json.dumps(header, allow_nan=False).encode() + b"\n")
        eqx.tree_serialise_leaves(f, policy)
    return path


def _skeleton(header: dict):
    kind = header["kind"]
    if kind not in KINDS:
        raise ValueError(f"unknown policy kind {kind!r} ({' or '.join(KINDS)})")
    member = KINDS[kind].skeleton(header["sizes"], jnp.dtype(header["dtype"]))
    count = header.get("per_task")
    if count is None:
        return member
    if not (isinstance(count, int) and count >= 1):
        raise ValueError(f"per_task must be a positive integer, got {count!r}")
    return PerTask(jax.tree_util.tree_map(lambda a: jnp.zeros((count,) + a.shape, a.dtype), member))


def read_header(path) -> dict:
    """The header of the policy file at `path` (`ValueError` if it is not one)."""
    with Path(path).open("rb") as f:
        return _header(f, path)


def _header(f, path) -> dict:
    if f.read(len(MAGIC)) != MAGIC:
        raise ValueError(f"{path}: not a jaxrigid policy file (it does not start with {MAGIC!r})")
    try:
        header = json.loads(f.readline().decode())
        for key in ("kind", "sizes", "dtype", "metadata"):
            header[key]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: corrupt policy file: unreadable header ({err})") from None
    return header


def load_policy(path):
    """`(policy, header)` from a file written by `save_policy` (`header["metadata"]` the
    metadata saved with it); `ValueError` for a file that is not a policy file or is damaged,
    `FileNotFoundError` for a missing one."""
    with Path(path).open("rb") as f:
        header = _header(f, path)
        data = f.read()
    try:
        skeleton = _skeleton(header)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: corrupt policy file: bad sizes in the header ({err})") from None
    stream = io.BytesIO(data)
    try:
        policy = eqx.tree_deserialise_leaves(stream, skeleton)
    except Exception as err:  # numpy's reader raises several types on damaged data
        raise ValueError(
            f"{path}: corrupt policy file: its arrays do not match the header "
            f"({type(err).__name__}: {err})"
        ) from None
    if stream.read():
        raise ValueError(f"{path}: corrupt policy file: trailing data after the arrays")
    return policy, header
