"""Traced programs kept on disk, so that a second process neither traces nor lowers them.

JAX's persistent compilation cache (`compilation_cache`) keeps what XLA compiled, but every
process still traces and lowers each program before it can look the executable up, most of
what a second process of the command spends building (bench/README.md, `stored_programs.py`).
A stored program is a program
exported once (`jax.export`: StableHLO, versioned by JAX) beside the structure of its output;
a later process with the same key loads it and calls it, and XLA's executable then comes
from the persistent cache as before.

A program is stored only inside `stored_programs(key)`, where the caller promises that `key`
determines every Python-level input of the programs built inside it — the case and its
parameters, the method and its settings, the step counts — so that two processes with the
same key would trace the same program. The file name hashes that key with everything else a
program depends on: jaxrigid's source (every `.py` file of the package), the versions of jax,
jaxlib, equinox, numpy and optax, the JAX settings that change tracing (x64, default matmul
precision, dtype promotion), the platform and device kind, and the structure, shapes and
dtypes of the arguments. The `jaxrigid` command uses it (its run, the optimiser, a sweep's
chunks); a library user's own functions may close over anything, so `simulate` never stores
a program by itself.

A file that cannot be read (damaged, another JAX's format) is rebuilt and overwritten; a
program that cannot be exported (a host callback, a custom call without JAX's compatibility
guarantee) or whose output structure cannot be stored is run the ordinary way. Exported
programs are serialised with `flatbuffers` (a dependency of `jax.export`); without it nothing
is stored.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import os
import pickle
import re
import tempfile
from pathlib import Path

import jax
import numpy as np

from . import xla_options
from ._collector import relaxed_collection

__all__ = ["stored_programs", "call", "call_filtered"]

FORMAT = 1
_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("jaxrigid_stored_programs", default=None)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_CALLABLE: dict = {}  # (path, XLA options) -> (jitted call of the loaded program, out_tree)


@contextlib.contextmanager
def stored_programs(key: str, directory: str | os.PathLike | None = None):
    """Within the block, programs built through `call` are stored under `key` in `directory`
    (default: `programs/` inside JAX's compilation cache directory; nothing is stored when JAX
    has none). `key` must determine everything the programs depend on beyond jaxrigid's
    source and the arguments' shapes (see the module docstring)."""
    if directory is None:
        # jax's `Config` gets its options as attributes at run time; its types name none
        cache = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]
        directory = Path(cache) / "programs" if cache else None
    token = _ACTIVE.set(None if directory is None else (str(key), Path(directory)))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@relaxed_collection()  # a first call builds: Python's collector made rare (`_collector`)
def call(fn, name: str, args: tuple):
    """`fn(*args)`, through a stored program inside `stored_programs`, else directly. `fn`
    calls a jitted function; everything it closes over must be determined by the key and
    `name` (which tells apart the programs of one key: a runner's own cache key)."""
    active = _ACTIVE.get()
    if active is None:
        return fn(*args)
    key, directory = active
    leaves, in_tree = jax.tree_util.tree_flatten(args)
    if not all(isinstance(x, (jax.Array, np.ndarray, np.generic, float, int)) for x in leaves):
        return fn(*args)  # a tracer: under a transformation, nothing to store
    path = directory / f"{_file_key(key, name, in_tree, leaves)}.program"
    # the stored program is StableHLO: XLA's options (`xla_options`) apply when it is compiled
    opts = xla_options.options()
    slot = (path, xla_options.key(opts))
    if slot not in _CALLABLE:
        loaded = _load(path)
        if loaded is None:
            loaded = _export(fn, in_tree, leaves)
            if loaded is None:
                return fn(*args)
            _save(path, *loaded)
        exported, out_tree = loaded
        # one `jit` per program, so that a later call (the next chunk) is not traced again
        _CALLABLE[slot] = jax.jit(exported.call, compiler_options=opts), out_tree
    program, out_tree = _CALLABLE[slot]
    return jax.tree_util.tree_unflatten(out_tree, program(*leaves))


def call_filtered(program, *args):
    """`program(*args)` for an `equinox.filter_jit` program, through `call`: its arrays are
    the stored program's inputs, everything else (settings, functions, flags) is static, as
    for `filter_jit`, and named in the file's key by its `repr`."""
    import equinox as eqx

    dynamic, static = eqx.partition(args, eqx.is_array)
    name = f"{program.__name__} {static!r}"
    return call(lambda d: program(*eqx.combine(d, static)), name, (dynamic,))


def _file_key(key, name, in_tree, leaves) -> str:
    avals = [(np.shape(x), str(jax.numpy.result_type(x)), _weak(x)) for x in leaves]
    # object addresses differ between processes; the key covers what they stand for
    parts = [
        FORMAT,
        key,
        _ADDRESS.sub("", name),
        _ADDRESS.sub("", str(in_tree)),
        repr(avals),
        _versions(),
        # the settings that change what tracing and lowering emit
        # jax's `Config` gets its options as attributes at run time; its types name none
        bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
        str(jax.config.jax_default_matmul_precision),  # type: ignore[attr-defined]
        str(jax.config.jax_numpy_dtype_promotion),  # type: ignore[attr-defined]
        jax.default_backend(),
        [d.device_kind for d in jax.local_devices()[:1]],
        source_digest(),
    ]
    return hashlib.sha256(json.dumps(parts, default=repr).encode()).hexdigest()


def _weak(x) -> bool:
    return bool(getattr(x, "weak_type", False)) or isinstance(x, (float, int))


@functools.cache
def _versions() -> list[str]:
    """The versions of what traces our programs: jax, jaxlib, equinox, numpy, optax."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("jax", "jaxlib", "equinox", "numpy", "optax"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} absent")
    return found


@functools.cache
def source_digest() -> str:
    """SHA-256 of every `.py` file of the installed jaxrigid package (paths and contents)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _export(fn, in_tree, leaves):
    """`(exported, out_tree)` of the flattened program, or `None` when it cannot be stored."""
    try:
        from jax import export
    except ImportError:  # pragma: no cover - jax without jax.export
        return None
    box = {}

    def flat(*xs):
        out = fn(*jax.tree_util.tree_unflatten(in_tree, xs))
        out_leaves, box["tree"] = jax.tree_util.tree_flatten(out)
        return out_leaves

    specs = [
        jax.ShapeDtypeStruct(np.shape(x), jax.numpy.result_type(x), weak_type=_weak(x))
        for x in leaves
    ]
    try:
        # XLA's options apply where the stored program is compiled (`call`), not to the jits
        # it is traced through (JAX accepts them on a top-level jit only)
        with xla_options.quick_build(None):
            exported = export.export(jax.jit(flat))(*specs)
        exported.serialize()  # flatbuffers present, and every custom call serialisable
        tree = box["tree"]
        if pickle.loads(pickle.dumps(tree)) != tree:
            return None  # a node that does not survive pickling (equinox's sentinels)
    except Exception:  # noqa: BLE001 - anything unstorable runs the ordinary way
        return None
    return exported, tree


def _save(path: Path, exported, out_tree) -> None:
    """Write atomically (a reader sees the old file or the new one, never half of one)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = pickle.dumps((FORMAT, bytes(exported.serialize()), out_tree))
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache costs the build, never the run


def _load(path: Path):
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        from jax import export

        fmt, blob, out_tree = pickle.loads(data)
        if fmt != FORMAT:
            return None
        return export.deserialize(bytearray(blob)), out_tree
    except Exception:  # noqa: BLE001 - damaged or another JAX's format: rebuilt and replaced
        return None
