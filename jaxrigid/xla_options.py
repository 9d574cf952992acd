"""XLA's options for the programs jaxrigid builds: quick builds, a cheaper compile for programs
that run briefly compared with their build.

XLA spends most of a program's build in its backend optimisations and code generation. For
a program that then runs for milliseconds to seconds — one trajectory, an optimiser's
iterations over one or a few rollouts, a re-simulation run once — a cheaper compile is worth
a somewhat slower program; for an ensemble of thousands of members running for seconds it
is not. On the CPU a quick build compiles, per program (`jax.jit(...,
compiler_options=...)`, so that the rest of the process builds as usual), with

- `"once"` (the default; a program run once or a few times): XLA's backend optimisation
  level 0 with LLVM's expensive passes off (what `JAX_DISABLE_MOST_OPTIMIZATIONS=1` sets
  for a whole process) and XLA's older element-wise fusion emitter
  (`xla_cpu_use_fusion_emitters=False`);
- `"repeated"` (a program called many times, e.g. an optimiser's iteration): the older
  fusion emitter only, which builds for less and runs about as fast, where level 0 would
  make every call slower.

What each costs and buys is measured in bench/README.md (`xla_quick_build.py`). Neither changes
what is computed beyond rounding: a product and a sum may be fused differently, as between
any two differently shaped programs. Off the CPU nothing changes (`None`): there a quick
build has not been measured.

    with jaxrigid.quick_build():      # programs jaxrigid builds itself in the block
        ...
    jax.jit(f, compiler_options=jaxrigid.quick_build_options())   # a program of your own

jaxrigid's own program builders (`simulate`'s runners, `control.optimise`, stored
programs) read `options()` when they build; the `jaxrigid control` command builds its
optimiser (`"repeated"`) and its re-simulations (`"once"`) this way. A method may prefer a
profile for the programs `simulate` builds with it where no `quick_build` block is around
(`AbstractIntegrator.build_profile`, applied by `preferred`): `DLA-midpoint` builds with
`"repeated"`; `quick_build(None)` around the call restores XLA's defaults. JAX's persistent
compilation cache keys on the options, so programs built with different ones are cached
apart.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os

import jax

__all__ = ["options", "preferred", "quick_build", "quick_build_options"]

_EMITTER = ("xla_cpu_use_fusion_emitters", False)
_PROFILES = {
    "once": (("xla_backend_optimization_level", 0), ("xla_llvm_disable_expensive_passes", True)),
    "repeated": (),
}
_UNSET = "unset"  # no `quick_build` around: a method's `preferred` profile may apply
_ACTIVE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jaxrigid_quick_build", default=_UNSET
)


@contextlib.contextmanager
def quick_build(profile: str | None = "once"):
    """Within the block, the programs jaxrigid builds itself use
    `quick_build_options(profile)`; `profile=None`: XLA's defaults (e.g. for an ensemble
    inside an outer quick block)."""
    if profile is not None and profile not in _PROFILES:
        raise ValueError(
            f"quick_build profile must be one of {sorted(_PROFILES)} or None, got {profile!r}"
        )
    token = _ACTIVE.set(profile)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def quick_build_options(profile: str = "once") -> dict | None:
    """The compiler options of a quick build (`"once"` or `"repeated"`, see the module) on the
    default backend: a dict for `jax.jit(..., compiler_options=...)` on the CPU, `None`
    elsewhere. Options this jaxlib's XLA does not know are left out (all are tried at once on
    a one-element program, once per process; one by one only if that fails), and so are those
    the process builds every program with already (`JAX_DISABLE_MOST_OPTIMIZATIONS=1`,
    `XLA_FLAGS`): `None` when none is left."""
    if profile not in _PROFILES:
        raise ValueError(f"quick_build profile must be one of {sorted(_PROFILES)}, got {profile!r}")
    if jax.default_backend() != "cpu":
        return None
    wanted = [(n, v) for n, v in _PROFILES[profile] + (_EMITTER,) if not _in_effect(n, v)]
    # one probe for every profile's options (the jaxlibs this runs on know them all), one by
    # one only where that fails
    every = tuple(dict.fromkeys(o for p in _PROFILES.values() for o in p + (_EMITTER,)))
    every = tuple(o for o in every if not _in_effect(*o))
    opts = dict(wanted) if _known(every) else {n: v for n, v in wanted if _known(((n, v),))}
    # options the whole process already builds with are left out: a quick build is then the
    # same program as a plain one, built once (the test suite's fast build, a user's
    # `JAX_DISABLE_MOST_OPTIMIZATIONS=1`), not a second copy under another key
    return opts or None


def _in_effect(name: str, value) -> bool:
    """Whether every program of this process is built with `name = value` already: XLA's
    level 0 and cheap LLVM passes under jax's `jax_disable_most_optimizations`, an option
    given in `XLA_FLAGS` (as the process was started with it)."""
    if (
        jax.config.values.get("jax_disable_most_optimizations")
        and (name, value) in _PROFILES["once"]
    ):
        return True
    flag = f"--{name}={str(value).lower()}"
    return flag in os.environ.get("XLA_FLAGS", "").split()


def options() -> dict | None:
    """What a program jaxrigid builds now gets: `quick_build_options(profile)` inside
    `quick_build(profile)`, else `None` (XLA's defaults)."""
    profile = _ACTIVE.get()
    return None if profile in (None, _UNSET) else quick_build_options(profile)


@contextlib.contextmanager
def preferred(profile: str | None):
    """Within the block, `quick_build(profile)` unless the caller chose a profile (a
    `quick_build` block around, `None` included): the default of a method whose programs
    build for long and run no slower with it (`AbstractIntegrator.build_profile`)."""
    if profile is None or _ACTIVE.get() != _UNSET:
        yield
        return
    with quick_build(profile):
        yield


def key(opts: dict | None) -> tuple:
    """A hashable form of `opts`, for the caches of built programs."""
    return () if not opts else tuple(sorted(opts.items()))


@functools.cache
def _known(options: tuple) -> bool:
    """Whether this XLA compiles with every `(name, value)` of `options` (the probe: a
    one-element program's compile)."""
    if not options:
        return True
    try:
        # ahead of time, so that the probe is no nested `jit` whatever the caller traces
        probe = jax.jit(lambda x: x + 1).lower(jax.ShapeDtypeStruct((1,), "float32"))
        probe.compile(compiler_options=dict(options))
    except Exception:  # XLA's "No such compile option" (jaxlib's own error type)
        return False
    return True


def filter_jit(fn):
    """`equinox.filter_jit(fn)`, built with `options()` as they are at each call: one jitted
    version per set of options, so that a quick build and a full one never share a program."""
    import equinox as eqx

    versions: dict = {}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        opts = options()
        k = key(opts)
        if k not in versions:
            versions[k] = eqx.filter_jit(fn, compiler_options=opts)
        return versions[k](*args, **kwargs)

    return call
