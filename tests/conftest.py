import gc
import os
import shutil
import tempfile

import jax
import pytest

import jaxrigid

# float64 is the reference precision; accidental rank promotion ((3,) + (n, 3)) must fail loudly.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

# The kernel's limit on a process's memory mappings is 65 530; XLA:CPU maps memory for each
# executable it keeps, and the whole suite in one process crossed the limit (a segfault
# inside the compiler; test_order.py alone leaves about 10 000 mappings). Compiled programs
# are dropped after a module only when the process holds more than this many mappings, so
# that later modules reuse the programs earlier ones built (the same runs recur across files).
_MAX_MAPPINGS = 30_000
_CACHE_ENV = "JAXRIGID_CACHE_DIR"
_OWNED_CACHE = "_JAXRIGID_TEST_CACHE_OWNED"


def pytest_configure(config):
    """One persistent compilation cache for the run, shared by the xdist workers (which
    inherit the controller's environment): a program one worker compiled, the other loads.
    A fresh directory per run unless `JAXRIGID_CACHE_DIR` names one (then it is kept)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None and not os.environ.get(_CACHE_ENV):
        os.environ[_CACHE_ENV] = tempfile.mkdtemp(prefix="jaxrigid-test-xla-")
        os.environ[_OWNED_CACHE] = "1"
    jaxrigid.enable_compilation_cache()


def pytest_unconfigure(config):
    if os.environ.get("PYTEST_XDIST_WORKER") is None and os.environ.pop(_OWNED_CACHE, None):
        shutil.rmtree(os.environ.pop(_CACHE_ENV), ignore_errors=True)


def _mappings() -> int:
    try:
        with open("/proc/self/maps") as fh:
            return sum(1 for _ in fh)
    except OSError:  # not Linux: no such limit known, keep the programs
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop the compiled programs after a test module when the process holds more than
    `_MAX_MAPPINGS` memory mappings (see above)."""
    yield
    if _mappings() > _MAX_MAPPINGS:
        jax.clear_caches()
        gc.collect()
