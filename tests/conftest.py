import gc

import jax
import pytest

# float64 is the reference precision; accidental rank promotion ((3,) + (n, 3)) must fail loudly.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled program after each test module. XLA:CPU maps memory for each
    executable it keeps; the whole suite in one process compiles thousands and crossed the
    kernel's limit of 65 530 mappings (segfault inside the compiler; measured: test_order.py
    alone leaves 10 148 mappings), while modules share little compiled code."""
    yield
    jax.clear_caches()
    gc.collect()
