"""The suite's XLA settings (`xla_settings`): the default suite builds fast, and a test marked
`xla_defaults` runs with XLA's defaults (in a child pytest while the fast build is on)."""

from __future__ import annotations

import os

import jax
import pytest
import xla_settings
from jax._src import compiler


@pytest.mark.skipif(
    os.environ.get(xla_settings.DEFAULTS_ENV) == "1",
    reason="JAXRIGID_TEST_XLA_DEFAULTS=1 asks for XLA's defaults: no fast-build settings to check",
)
def test_the_default_suite_builds_with_optimisations_off():
    assert xla_settings.fast_build_on() and xla_settings.optimisations_off()
    # jax's switch, set from the environment whenever jax was imported
    assert compiler._DISABLE_MOST_OPTIMIZATIONS.value


@pytest.mark.xla_defaults
def test_a_marked_test_sees_neither_setting():
    assert not xla_settings.fast_build_on()
    flags = os.environ.get("XLA_FLAGS", "").split()
    assert not set(xla_settings.FAST_BUILD_XLA_FLAGS) & set(flags), flags
    assert not compiler._DISABLE_MOST_OPTIMIZATIONS.value
    assert float(jax.jit(lambda x: x * 3.0 + 1.0)(2.0)) == 7.0  # a backend started so
