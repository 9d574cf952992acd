"""JAX's persistent compilation cache, set up the way jaxrigid's programs need it.

`enable_compilation_cache()` points JAX's persistent cache at one directory and caches every
program, however quickly it compiled: a second process (a rerun of the command, a sweep's
Dask worker, the test suite's other worker) then loads the executables instead of compiling
them. JAX's default threshold (programs that took ≥ 1 s to compile) would skip the many small
programs (the value checks, a case's set-up), which together cost seconds.

Where: `JAXRIGID_CACHE_DIR` if set, else `$XDG_CACHE_HOME/jaxrigid/xla` (`~/.cache/...`).
`JAXRIGID_NO_COMPILATION_CACHE=1` turns it off. The `jaxrigid` command, sweeps, control,
`bench/` and the test suite call it; a library user calls it once, by choice: importing
jaxrigid changes no JAX setting.

JAX caches only what XLA compiled. Tracing and lowering are redone in every process, and a
program with a host callback (a value check raised from inside a caller's `jit`) is never
cached (JAX's rule); programs jaxrigid builds itself carry no callback.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "enable_compilation_cache", "ensure_compilation_cache"]

_OFF = {"1", "true", "yes", "on"}


def cache_dir() -> Path:
    """The cache directory jaxrigid uses: `JAXRIGID_CACHE_DIR`, else
    `$XDG_CACHE_HOME/jaxrigid/xla` with `XDG_CACHE_HOME` defaulting to `~/.cache`."""
    explicit = os.environ.get("JAXRIGID_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "jaxrigid" / "xla"


def disabled_by_environment() -> bool:
    """`JAXRIGID_NO_COMPILATION_CACHE` set to 1/true/yes/on."""
    return os.environ.get("JAXRIGID_NO_COMPILATION_CACHE", "").strip().lower() in _OFF


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path | None:
    """Turn on JAX's persistent compilation cache in `path` (default `cache_dir()`), caching
    every program. Returns the directory, or `None` when `JAXRIGID_NO_COMPILATION_CACHE`
    turns it off or the directory cannot be created (then nothing is changed: a read-only
    home directory costs compile time, never a failure).

    Calling it again with another directory moves the cache there (JAX opens its cache once;
    it is reopened here).
    """
    if disabled_by_environment():
        return None
    import jax

    directory = Path(path).expanduser() if path is not None else cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    # jax's `Config` gets its options as attributes at run time; its types name none
    previous = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]
    jax.config.update("jax_compilation_cache_dir", str(directory))
    if previous and previous != str(directory):
        _reopen()
    # every program: the small ones add up (see the module docstring)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return directory


def _reopen() -> None:
    """Make JAX open its cache again at the next compile (it opens it once per process)."""
    try:
        from jax._src import compilation_cache
    except ImportError:  # pragma: no cover - jax moved its private module
        return
    compilation_cache.reset_cache()


def ensure_compilation_cache() -> None:
    """`enable_compilation_cache()` unless JAX already has a cache directory (the user's own,
    or one set before): what the command, sweeps and the optimiser call on their way in."""
    import jax

    # jax's `Config` gets its options as attributes at run time; its types name none
    if not jax.config.jax_compilation_cache_dir:  # type: ignore[attr-defined]
        enable_compilation_cache()
