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


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled program after each test module. XLA:CPU maps memory for each
    executable it keeps; the whole suite in one process compiles thousands and crossed the
    kernel's limit of 65 530 mappings (segfault inside the compiler; measured: test_order.py
    alone leaves 10 148 mappings), while modules share little compiled code. A program a
    later module builds again is loaded from the run's persistent cache. (Keeping programs
    while under half the limit was tried: that suite run took longer, over 90 min with other
    jobs on the cores, against 47-50 min before; not kept without a clean measurement.)"""
    yield
    jax.clear_caches()
    gc.collect()
