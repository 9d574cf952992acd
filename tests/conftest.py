import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jax
import pytest
import xla_settings

import jaxrigid

# float64 is the reference precision; accidental rank promotion ((3,) + (n, 3)) must fail loudly.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

_CACHE_ENV = "JAXRIGID_CACHE_DIR"
_OWNED_CACHE = "_JAXRIGID_TEST_CACHE_OWNED"


def pytest_configure(config):
    """One persistent compilation cache for the run, shared by the xdist workers (which
    inherit the controller's environment): a program one worker compiled, the other loads.
    A fresh directory per run unless `JAXRIGID_CACHE_DIR` names one (then it is kept).
    XLA's settings (`xla_settings`) go first, before any backend starts: the fast build for
    the default suite, XLA's defaults where the mark expression selects the slow tests (long
    runs, where optimised code pays)."""
    if not re.search(r"(?<!not )\bslow\b", config.getoption("markexpr") or ""):
        xla_settings.apply_fast_build()
    # jax reads the variable when it is first imported, which may have been before
    jax.config.update("jax_disable_most_optimizations", xla_settings.optimisations_off())
    if os.environ.get("PYTEST_XDIST_WORKER") is None and not os.environ.get(_CACHE_ENV):
        os.environ[_CACHE_ENV] = tempfile.mkdtemp(prefix="jaxrigid-test-xla-")
        os.environ[_OWNED_CACHE] = "1"
    jaxrigid.enable_compilation_cache()
    config.addinivalue_line(
        "markers",
        "xla_defaults: the property depends on how XLA rounds (bit-for-bit equality of "
        "differently shaped programs, round-off over long runs): run with XLA's defaults",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked `xla_defaults` runs in a fresh pytest process with XLA's defaults while
    the suite's fast build is on (its failure message is the child's)."""
    if not (xla_settings.fast_build_on() and pyfuncitem.get_closest_marker("xla_defaults")):
        return None
    root = pyfuncitem.config.rootpath
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    child = subprocess.run(
        cmd + [pyfuncitem.nodeid],
        env=xla_settings.defaults_environment(),
        cwd=root,
        capture_output=True,
        text=True,
    )
    if child.returncode != 0:
        pytest.fail(
            f"with XLA's defaults (a child pytest, exit {child.returncode}):\n"
            + child.stdout[-6000:]
            + child.stderr[-2000:],
            pytrace=False,
        )
    return True


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
