"""Work–precision: error against wall time per trajectory, jaxrigid against diffrax (issue 17).

Three problems of Krysl (2007) §5, each an ensemble of `--members` members built by the case's
own `perturb` (member 0 unperturbed, the others' body momenta scaled componentwise by
1 + 0.01·N(0, 1), `numpy.random.default_rng(seed)`): the torque-free body
(`krysl-torque-free`), the fast Lagrangian top (`krysl-fast-top`, Ω₃ = 50) and the body in a
Coulombic potential with a soft wall (`krysl-coulomb-wall`). Each is integrated to t = 100 and
to a long horizon (`--t-long`: 10⁴ by default; on the CPU 10³ for the free body and the Coulomb
wall and 200 for the fast top, see `config.t_long_note` in the JSON) by

* jaxrigid's fixed-step methods, several Δt each: IMIDM, IMID, DMV-body (torque-free only),
  MKRK-gauss4, MKRK-gauss6, MKRK-rk4 (skipped, and listed as missing, where the registry lacks
  them), IMIDM composed by triple-jump, suzuki5, yoshida6, kahan-li6, mclachlan8, kahan-li8,
  sofroniou-spaletta10 (`get_method("IMIDM:<scheme>")`), DMV-body:kahan-li8 (torque-free
  only), and the explicit Lie–Poisson splitting LP-split alone and composed by triple-jump,
  yoshida6, kahan-li8 and sofroniou-spaletta10, the last two also with compensated summation
  (`LP-split:kahan-li8+compensated`: `compose(LiePoissonSplitting(compensated=True), …)`).
  Every run is
  `jaxrigid.simulate(method, model, state0_batch, dt, C, save_every=C)` inside one `jax.jit`
  program per (problem, method): Δt is a traced argument and the run is a `lax.while_loop`
  over a traced number of such chunks of C steps (each chunk continues the last with `t0`
  and its `solver_state`, the first from the method's `init`, so the chunks equal one
  unsplit run; a failed chunk ends the run), so that one compiled program serves every Δt
  and both horizons (compiling one per Δt and horizon would cost more than the runs).
  C is the greatest common divisor of the method's step counts to t = 100. `simulate` on
  traced inputs puts its value checks and a host callback into each call, ≈ 0.3 ms a chunk
  on the CPU: a method whose chunk computes for less than 30 ms at t = 100 gets a second
  program for the long horizon with chunks m times longer (`compile.*.chunk_steps_long`), so
  that the callback costs ≤ 1 % there (at t = 100 the cheapest runs still carry it: their
  `chunk_steps` and times are in the JSON). `sol.outcome.all_converged` is checked, and a run
  in which any member's Newton solve failed (or any value is not finite) is recorded as
  failed and left out of the frontiers.
* diffrax 0.7 in the same run, `jax.vmap(diffeqsolve)` over members on the same equations
  (R, Π) — `_harness.TorqueFree.vector_field` (Ṙ = R hat(Ω), Π̇ = Π × Ω, Ω = 𝕀⁻¹Π) plus the
  model's body torque `RigidBody.body_torque` (the potential's, by autodiff, as jaxrigid
  computes it): Tsit5, Dopri5, Dopri8 with a `PIDController(rtol=tol, atol=tol)` at several
  tol (dt0 chosen by diffrax), classical RK4 (`_harness.RK4`, a Butcher tableau) with
  `ConstantStepSize` at several Δt. One compiled program per (problem, solver): t1, dt0, rtol
  and atol are traced. `result == successful` is checked like Newton's convergence.

Timing: every program is compiled ahead of time and called once on a short run (warm-up);
then, per problem and horizon, `--repeats` rounds (t = 100; `--repeats-long` for the long
horizon) in which every (method, Δt or tol) is called once, round robin in a shuffled (fixed)
order (`_common.time_interleaved`), each call ended by `block_until_ready`; `seconds` is the
median. Wall time
per trajectory = seconds / members. A long run whose cost, estimated from its t = 100 time,
exceeds `--max-long-seconds` is skipped and recorded as such, as is one that failed at t = 100.

Accuracy: ‖R − R_ref‖₂ (matrix 2-norm, as tests/helpers.py `state_error`) and ‖Π − Π_ref‖₂ at
the final time, max and median over the reference members. The free body's and the fast
top's references are their exact solutions, for every member (`ExactSolution`; member 0's
DOP853 is recorded beside them as a check, the top's at t = 100 only): the free body's
`jaxrigid.reference.free_body` (Jacobi elliptic functions and one quadrature;
`reference_error_estimate` = 3 × its float64 bound 10·eps·(1 + λt), ≈ 2e-11 at t = 10⁴), the
top's `jaxrigid.reference.lagrange_top` (the tilt by Jacobi elliptic functions, precession and spin
by quadratures; `reference_error_estimate` = its largest difference from a 40-digit
closed-form evaluation, `lagrange_top_exact_mp`, over the first 32 members). The Coulomb
wall's is `jaxrigid.reference.extended.axial_potential_reference` of the first
`--reference-members` members: Gragg–Bulirsch–Stoer extrapolation in `np.longdouble` (macro
step 1/8, 8 columns) on the embedded equations with the torque derived by hand;
`reference_error_estimate` = √3 × the largest entry of its difference from the run with one
extrapolation column fewer (≈ 1e-12 at t = 10⁴), and member 0's DOP853 is recorded as a check.
A model with neither (none of the three by default) gets `jaxrigid.reference.rigid_body_reference`
(scipy DOP853, rtol = atol = 1e-13, float64), whose own error is estimated from member 0
integrated again at rtol = atol = 1e-12: `reference_error_estimate` = ‖R₁₂ − R₁₃‖₂ / 10
(DOP853's error falls ≈ 10–14× per decade of tolerance on these problems). An accuracy below
3× the estimate is not resolved by the reference and its frontier ratio is null. Invariants at
the final time, max over all members (float64 numpy): |H − H₀|/|H₀| (H = K + V; K for the
free body), the conserved spatial momentum (‖π − π₀‖₂ of π = RΠ for the free body; |π₃ − π₃₀|
for the top and the Coulomb wall, whose potentials are symmetric about the spatial e₃ axis, so
only π₃ is conserved), ‖RᵀR − 1‖_F.

Frontiers: per problem and library, each method's long-horizon (R error max, time per
trajectory) points form a curve, sorted by time and interpolated log-log; a method's time to
reach an accuracy ε is the earliest point of its curve at or below ε (no extrapolation), a
library's is the least over its methods (the lower envelope); jaxrigid's envelope takes only
runs that keep the conserved spatial momentum to round-off (drift ≤ 1e-11·|π₀|).
`frontier_ratios` holds diffrax_time / jaxrigid_time at ε = 1e-3 … 1e-10, null where a side
does not reach ε or the reference does not resolve it (the unrestricted jaxrigid envelope and
the t = 100 ratios are recorded beside it).

The Coulomb wall's torque `(−coulomb·u⁻² − 10·wall·u⁻¹¹)(−R₂₃, R₁₃, 0)`, u = 1.1 + R₃₃, is smooth
(analytic) wherever u > 0, and these trajectories keep u in ≈ [0.67, 2.1] (the case's
observables): a smooth ODE solver is meaningful there; the JSON records the u range seen.

    python bench/work_precision.py                          # CPU defaults (≈ 20 min, 2 cores)
    python bench/work_precision.py --quick --out /tmp/wp    # smoke test, < 2 min
    python bench/work_precision.py --members 10000          # accelerator (default there)
    python bench/work_precision.py --t-long krysl-fast-top=1000,krysl-coulomb-wall=10000
    python bench/work_precision.py --dtypes float32 --methods LP-split:yoshida6+compensated,...

`--dtypes float32` runs float32 alone (`--float32`: float64 and float32); any
`LP-split[:<scheme>]+compensated` or `IMIDM[:<scheme>]+compensated` may be named in
`--methods` besides the default list's.

Writes `work_precision_<tag>.json` and `work_precision_<problem>_<tag>.png` to `--out`
(`<tag>`: `cpu` or `<platform>_<device kind>`, `_float32` when float32 is run, `_quick`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import NamedTuple

import _common as common

PROBLEM_NAMES = ("krysl-torque-free", "krysl-fast-top", "krysl-coulomb-wall")
ALIASES = {"free": "krysl-torque-free", "top": "krysl-fast-top", "coulomb": "krysl-coulomb-wall"}
SCHEMES = (
    "triple-jump",
    "suzuki5",
    "yoshida6",
    "kahan-li6",
    "mclachlan8",
    "kahan-li8",
    "sofroniou-spaletta10",
)
# the explicit splitting composed by one scheme of each order
LP_SCHEMES = ("triple-jump", "yoshida6", "kahan-li8", "sofroniou-spaletta10")
# `<method>+compensated`: the method with compensated summation (`compensated=True`), for the
# accuracies where the plain sums' round-off is the floor (the free body's 1e-10 at t = 10⁴)
COMPENSATED = "+compensated"
LP_COMPENSATED_SCHEMES = ("kahan-li8", "sofroniou-spaletta10")
JAXRIGID = (
    "IMIDM",
    "IMID",
    "DMV-body",
    "MKRK-gauss4",
    "MKRK-gauss6",
    "MKRK-rk4",
    *(f"IMIDM:{s}" for s in SCHEMES),
    "DMV-body:kahan-li8",
    "LP-split",
    *(f"LP-split:{s}" for s in LP_SCHEMES),
    *(f"LP-split:{s}{COMPENSATED}" for s in LP_COMPENSATED_SCHEMES),
)
FREE_ONLY = {"DMV-body", "DMV-body:kahan-li8"}
DIFFRAX_ADAPTIVE = ("diffrax_Tsit5", "diffrax_Dopri5", "diffrax_Dopri8")
DIFFRAX = (*DIFFRAX_ADAPTIVE, "diffrax_RK4")
# --quick: one of each kind (implicit, explicit MKRK, DMV, composition, adaptive, fixed step)
QUICK_METHODS = (
    "IMIDM",
    "DMV-body",
    "MKRK-rk4",
    "IMIDM:kahan-li8",
    "LP-split:kahan-li8",
    "diffrax_Dopri8",
    "diffrax_RK4",
)
ACCURACIES = tuple(10.0**-k for k in range(3, 11))
MOMENTUM_ROUNDOFF_REL = 1e-11  # float64: drift ≤ this × |π₀| counts as round-off
MOMENTUM_ROUNDOFF_REL_F32 = 1e-4  # float32: ≈ 10³ eps

p = common.parser(__doc__)
p.add_argument("--members", type=int, default=None, help="ensemble size (CPU 128, else 10⁴)")
p.add_argument("--problems", default=",".join(PROBLEM_NAMES), help="comma list of case names")
p.add_argument("--methods", default=None, help="comma list (default: all; see the docstring)")
p.add_argument(
    "--t-long",
    default=None,
    help="long horizon, a multiple of 100: one value for every problem, or name=value pairs "
    "(default 1e4; on the CPU 1e3, the fast top 200)",
)
p.add_argument("--float32", action="store_true", help="add float32 runs (x64 stays on)")
p.add_argument(
    "--dtypes",
    default=None,
    help="comma list of float64, float32 (default float64; float64,float32 with --float32)",
)
p.add_argument("--reference-members", type=int, default=None, help="DOP853 members (CPU 4/8)")
p.add_argument("--repeats", type=int, default=None, help="timed rounds, t = 100 (CPU 2, else 3)")
p.add_argument("--repeats-long", type=int, default=None, help="timed rounds, long (CPU 1, else 3)")
p.add_argument("--max-long-seconds", type=float, default=None, help="skip longer calls (CPU 30)")
p.add_argument("--dt-scale", type=float, default=1.0, help="multiply every default Δt grid")
p.add_argument(
    "--tolerances",
    default=None,
    help="comma list: diffrax's adaptive tolerances instead of the defaults (e.g. to measure "
    "the tight ones alone on the fast top, whose 10^4 runs cost minutes a call)",
)
p.add_argument("--seed", type=int, default=0)
A = p.parse_args()
common.enable_x64_for("float64")  # x64 stays on; float32 runs cast the model and the state

import _harness as harness  # noqa: E402
import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import jaxrigid  # noqa: E402
from jaxrigid.cases import get_case  # noqa: E402
from jaxrigid.integrators import compose, get_method  # noqa: E402
from jaxrigid.lie import so3  # noqa: E402
from jaxrigid.models.rigid_body import (  # noqa: E402
    AxialPowerPotential,
    RigidBodyState,
)
from jaxrigid.reference import extended as xref  # noqa: E402
from jaxrigid.reference import free_body as fbe  # noqa: E402
from jaxrigid.reference import lagrange_top as lte  # noqa: E402
from jaxrigid.reference import rigid_body_reference  # noqa: E402

CPU = jax.devices()[0].platform == "cpu"
A.members = A.members or (8 if A.quick else 128 if CPU else 10_000)
A.repeats = A.repeats or (1 if A.quick else 2 if CPU else 3)
A.repeats_long = A.repeats_long or (1 if A.quick or CPU else 3)
if A.max_long_seconds is None:
    A.max_long_seconds = 30.0 if CPU and not A.quick else math.inf
A.problems = [ALIASES.get(x.strip(), x.strip()) for x in A.problems.split(",") if x.strip()]
if unknown := set(A.problems) - set(PROBLEM_NAMES):
    p.error(f"unknown problems {sorted(unknown)}; known {PROBLEM_NAMES} (or {sorted(ALIASES)})")
ALL_METHODS = (*JAXRIGID, *DIFFRAX)
A.methods = (
    list(QUICK_METHODS if A.quick else ALL_METHODS)
    if A.methods is None
    else [m.strip() for m in A.methods.split(",") if m.strip()]
)


def known_method(name):
    """A name of `ALL_METHODS`, or `<jaxrigid method>+compensated` for any method of the
    list whose member has a `compensated` setting (`LP-split:yoshida6+compensated`, ...)."""
    if name in ALL_METHODS:
        return True
    base = name.removesuffix(COMPENSATED)
    if name == base or base not in JAXRIGID:
        return False
    return hasattr(get_method(base.partition(":")[0]), "compensated")


if unknown := [m for m in A.methods if not known_method(m)]:
    p.error(
        f"unknown methods {sorted(unknown)}; known {list(ALL_METHODS)} (and "
        "<method>[:<scheme>]+compensated where the method has a compensated setting: "
        "LP-split, IMIDM)"
    )
A.dtypes = [d.strip() for d in (A.dtypes or "").split(",") if d.strip()] or (
    ["float64", "float32"] if A.float32 else ["float64"]
)
if bad := set(A.dtypes) - {"float64", "float32"}:
    p.error(f"--dtypes: unknown {sorted(bad)}; float64 and/or float32")

# Default long horizons (time units): 10⁴; on the CPU 10³ for the free body and the Coulomb
# wall and 200 for the fast top (docs/choosing-an-integrator.md: the CPU budget, and DOP853's own
# error at 10⁴).
T_LONG = dict.fromkeys(PROBLEM_NAMES, 1e4)
if CPU:
    T_LONG = {"krysl-torque-free": 1e3, "krysl-coulomb-wall": 1e3, "krysl-fast-top": 200.0}
if A.quick:
    T_LONG = dict.fromkeys(PROBLEM_NAMES, 200.0)
if A.t_long:
    for item in A.t_long.split(","):
        name, sep, value = item.rpartition("=")
        targets = [ALIASES.get(name, name)] if sep else PROBLEM_NAMES
        for target in targets:
            if target not in T_LONG:
                p.error(f"--t-long: unknown problem {name!r}")
            T_LONG[target] = float(value)
for name, t in T_LONG.items():
    if t < 100 or abs(t / 100 - round(t / 100)) > 1e-9:
        p.error(f"--t-long for {name} must be a multiple of 100, got {t:g}")

T_SHORT = 100.0
LABELS = ("t100", "tlong")

# Reference members where the reference is not an exact solution (which covers every member:
# the free body and the top): the Coulomb wall's GBS in longdouble, vectorised over members,
# ≈ 190 s for 16 members to 10⁴ on the CPU (with its error estimate).
REF_MEMBERS = {"krysl-torque-free": 16, "krysl-fast-top": 16, "krysl-coulomb-wall": 16}
if not CPU:
    REF_MEMBERS = dict.fromkeys(PROBLEM_NAMES, 16)
if A.quick:
    REF_MEMBERS = dict.fromkeys(PROBLEM_NAMES, 2)
if A.reference_members:
    REF_MEMBERS = dict.fromkeys(PROBLEM_NAMES, A.reference_members)

# ------------------------------------------------------------------------------------------
# Step sizes: per problem and method, the numbers of steps to t = 100 (Δt = 100 / n, so every
# horizon is a whole number of steps), chosen from probe runs (members 32–256, t = 100) so
# that the errors at the long horizon span what each method can reach within the CPU budget
# (errors grow about linearly in t here). Implicit methods fail (Newton) on the fast top once
# a (sub)step turns the body by more than ≈ 2 rad: IMIDM at Δt = 0.05, Kahan–Li 8 at 0.1,
# McLachlan 8 at 0.05, Sofroniou–Spaletta 10 at 0.1 (Ω₃ = 50): their grids start below.
# `--dt-scale s` divides every count by s.

_FREE = {
    "IMIDM": (1000, 4000, 16000),
    "IMID": (1000, 4000, 16000),
    "DMV-body": (1000, 4000, 16000),
    "MKRK-gauss4": (250,),
    "MKRK-gauss6": (100, 200),
    "MKRK-rk4": (500, 1000, 2000, 4000, 8000),
    "IMIDM:triple-jump": (500, 1000, 2000),
    "IMIDM:suzuki5": (250, 500, 1000),
    "IMIDM:yoshida6": (100, 200, 400, 800),
    "IMIDM:kahan-li6": (100, 200, 400, 800),
    "IMIDM:mclachlan8": (50, 100, 200, 400),
    "IMIDM:kahan-li8": (50, 100, 200, 400),
    "IMIDM:sofroniou-spaletta10": (50, 100),
    "DMV-body:kahan-li8": (100, 200, 400, 800),
    "LP-split": (1000, 4000, 16000),
    "LP-split:triple-jump": (250, 1000, 4000),
    "LP-split:yoshida6": (100, 200, 400, 800),
    "LP-split:kahan-li8": (50, 100, 200),
    "LP-split:sofroniou-spaletta10": (50, 100, 150, 200),
    # compensated: the steps at which the plain compositions meet their round-off floor
    # (3.7e-10 to 7e-10 at t = 10⁴) and one below
    "LP-split:kahan-li8+compensated": (100, 200, 400),
    "LP-split:sofroniou-spaletta10+compensated": (50, 100, 200),
    "diffrax_RK4": (500, 1000, 2000, 4000, 8000),
}
_COULOMB = {
    "IMIDM": (1000, 4000),
    "IMID": (1000, 4000),
    "MKRK-gauss4": (250, 500),
    "MKRK-gauss6": (200, 400),
    "MKRK-rk4": (500, 1000, 2000, 4000, 8000),
    "IMIDM:triple-jump": (500, 1000, 2000),
    "IMIDM:suzuki5": (250, 500, 1000),
    "IMIDM:yoshida6": (200, 400, 800),
    "IMIDM:kahan-li6": (200, 400, 800),
    "IMIDM:mclachlan8": (100, 200, 400),
    "IMIDM:kahan-li8": (100, 200, 400, 800),
    "IMIDM:sofroniou-spaletta10": (50, 100, 200, 400),
    "LP-split": (1000, 4000, 16000),
    "LP-split:triple-jump": (1000, 4000),
    "LP-split:yoshida6": (400, 800, 1600),
    # plain, the finest steps here meet the round-off floor at t = 10⁴ (1.2e-9 to 2e-9);
    # compensated, 7.6e-11 and 6.7e-12 (kahan-li8 at 1600, 3200), 1.5e-11 (sofroniou-spaletta10
    # at 800); 1200 and 600 put a point between the floor and those, where Dopri8 at tol 1e-14
    # to 1e-15 reaches 1e-9 (without them jaxrigid's 1e-9 came from 1600's point: 0.88x)
    "LP-split:kahan-li8": (400, 800, 1600),
    "LP-split:sofroniou-spaletta10": (200, 400, 800),
    "LP-split:kahan-li8+compensated": (1200, 1600, 3200),
    "LP-split:sofroniou-spaletta10+compensated": (600, 800),
    "diffrax_RK4": (500, 1000, 2000, 4000, 8000),
}
_TOP = {
    "IMIDM": (8000,),
    "IMID": (8000,),
    "MKRK-gauss4": (2000,),
    "MKRK-gauss6": (2000,),
    "MKRK-rk4": (8000, 16000, 32000, 64000),
    "IMIDM:triple-jump": (8000,),
    "IMIDM:suzuki5": (4000,),
    "IMIDM:yoshida6": (4000,),
    "IMIDM:kahan-li6": (4000,),
    "IMIDM:mclachlan8": (4000,),
    "IMIDM:kahan-li8": (2000, 4000),
    "IMIDM:sofroniou-spaletta10": (2000,),
    "LP-split": (4000, 16000),
    "LP-split:triple-jump": (4000, 8000),
    "LP-split:yoshida6": (1600, 3200),
    # the splitting's error on the fast top is asymptotic only once the Casimir turn per step,
    # Δt|Π|/I₁ = 10Δt, is well below 1 rad (kahan-li8 at t = 10⁴: ÷240 from Δt = 1/4 to 1/8,
    # ÷7 from 1/32 to 1/64), and compensation gains ≤ 1.4× there down to Δt = 1/64
    # (results/work_precision_t1e4_krysl-fast-top_cpu.json)
    "LP-split:kahan-li8": (400, 800, 1600, 3200, 6400),
    "LP-split:sofroniou-spaletta10": (200, 400, 800, 1600),
    "LP-split:kahan-li8+compensated": (3200, 6400),
    "diffrax_RK4": (32000, 64000),
}
STEPS_100 = {"krysl-torque-free": _FREE, "krysl-coulomb-wall": _COULOMB, "krysl-fast-top": _TOP}
# The fast top: Tsit5 and Dopri5 at 1e-10 and 1e-12 cost 0.15–0.35 s a trajectory per 100
# time units on the CPU, and Dopri8 is faster at those accuracies: left out there.
TOLS = (1e-4, 1e-6, 1e-8, 1e-10, 1e-12)
# The free body's exact reference resolves 1e-10 at t = 10⁴, which Dopri8 reaches only
# below 1e-12 (5e-9 there at 10⁴): its tolerances go on to 1e-15 (the Coulomb wall's too).
TOLS_BY = {
    ("krysl-fast-top", "diffrax_Tsit5"): TOLS[:3],
    ("krysl-fast-top", "diffrax_Dopri5"): TOLS[:3],
    ("krysl-torque-free", "diffrax_Dopri8"): TOLS + (1e-13, 1e-14, 1e-15),
    # the Coulomb wall's reference resolves 1e-12 at 10⁴ too; Tsit5 at 1e-4 leaves the smooth
    # region (u → 0) there and runs to max_steps (6 s a trajectory, failed)
    ("krysl-coulomb-wall", "diffrax_Dopri8"): TOLS + (1e-13, 1e-14, 1e-15),
    ("krysl-coulomb-wall", "diffrax_Tsit5"): TOLS[1:],
}
TOLS_FLOAT32 = (1e-4, 1e-5, 1e-6)
# diffrax's max_steps per unit of simulated time: ≈ 3-5x what the tightest tolerance takes
# (free body 45, Coulomb wall 65, fast top 380 accepted steps per unit). A run that leaves the
# problem's smooth region (the Coulomb wall's u = 1.1 + R33 → 0, where the attractive u^-10
# term is singular: Tsit5 at 1e-4 does, by t = 1000) stops there as unsuccessful instead of
# spending 2^22 steps; vmapped, every member waits for the slowest.
MAX_STEPS_PER_TIME = {"krysl-torque-free": 200, "krysl-coulomb-wall": 300, "krysl-fast-top": 2000}
# A chunk of C steps costs one host callback of `simulate`'s checks (≈ 0.3 ms on the CPU):
# a method whose chunk computes for less than this at t = 100 gets a second program with
# longer chunks for the long horizon (see `long_programs`).
CHUNK_SECONDS_MIN = 0.03


def make_method(name):
    """`get_method(name)`, or for `<method>[:<scheme>]+compensated` the method built with
    `compensated=True` (then composed by the scheme)."""
    if not name.endswith(COMPENSATED):
        return get_method(name)
    base, sep, scheme = name.removesuffix(COMPENSATED).partition(":")
    member = type(get_method(base))(compensated=True)
    return compose(member, scheme) if sep else member


def steps_grid(problem_name, method):
    grids = STEPS_100[problem_name]
    grid = grids.get(method) or grids[method.removesuffix(COMPENSATED)]
    if A.quick:
        grid = grid[len(grid) // 2 : len(grid) // 2 + 1]
    return tuple(max(1, round(n / A.dt_scale)) for n in grid)


def tolerances(problem_name, method, float32):
    if A.tolerances:
        return tuple(float(x) for x in A.tolerances.split(","))
    if A.quick:
        return (1e-8,) if not float32 else (1e-5,)
    if float32:
        return TOLS_FLOAT32
    return TOLS_BY.get((problem_name, method), TOLS)


def gcd_all(xs):
    g = 0
    for x in xs:
        g = math.gcd(g, int(x))
    return g


# ------------------------------------------------------------------------------------------
# The problems.


def cast(tree, dtype):
    return jax.tree_util.tree_map(
        lambda x: jnp.asarray(x, dtype) if jnp.issubdtype(jnp.result_type(x), jnp.floating) else x,
        tree,
    )


class Problem:
    """A case's model and ensemble in `dtype`, float64 copies, and the diffrax term."""

    def __init__(self, name, dtype, members, seed):
        self.case = get_case(name)
        self.name = name
        self.params = self.case.resolve({})
        model, s0 = self.case.build(self.params)
        self.model64 = model
        self.model = cast(model, dtype)
        self.dtype = jnp.dtype(dtype)
        self.inertia_np = np.asarray(model.inertia, np.float64)
        self.I_inv = jnp.asarray(np.linalg.inv(self.inertia_np), dtype)
        rng = np.random.default_rng(seed)
        ens = self.case.perturb(s0, rng, self.case.ensemble_spread, members)
        self.ens64 = RigidBodyState(np.asarray(ens.R, np.float64), np.asarray(ens.Pi, np.float64))
        self.ens = RigidBodyState(jnp.asarray(ens.R, dtype), jnp.asarray(ens.Pi, dtype))
        self.members = members
        self.torque_free = self.model64.potential is None and self.model64.torque is None
        self.exact = exact_solution(self.model64)
        self.term = diffrax.ODETerm(self.vector_field)
        self.H0, self.pi0, _ = self.invariants(self.ens64.R, self.ens64.Pi)

    def vector_field(self, t, y, args):
        """`_harness`'s Ṙ = R hat(Ω), Π̇ = Π × Ω, plus the model's body torque (one member)."""
        dR, dPi = harness.TorqueFree.vector_field(self, t, y, args)
        if not self.torque_free:
            dPi = dPi + self.model.body_torque(t, y[0], y[1])
        return dR, dPi

    def invariants(self, R, Pi):
        """H = K + V (float64), the conserved spatial momentum (π, or π₃), ‖RᵀR − 1‖_F."""
        R, Pi = np.asarray(R, np.float64), np.asarray(Pi, np.float64)
        K = 0.5 * np.einsum("...i,ij,...j->...", Pi, np.linalg.inv(self.inertia_np), Pi)
        if self.torque_free:
            V = 0.0
        else:
            pot = self.model64.potential
            V = np.asarray(jax.vmap(lambda r: pot(0.0, r))(jnp.asarray(R.reshape(-1, 3, 3))))
            V = V.reshape(R.shape[:-2])
        pi = np.einsum("...ij,...j->...i", R, Pi)
        if not self.torque_free:
            pi = pi[..., 2:]
        E = np.swapaxes(R, -1, -2) @ R - np.eye(3)
        return K + V, pi, np.sqrt(np.sum(E * E, axis=(-2, -1)))

    def drift(self, R, Pi) -> dict:
        H, pi, orth = self.invariants(R, Pi)
        finite = bool(np.isfinite(np.asarray(R)).all() and np.isfinite(np.asarray(Pi)).all())
        dpi = np.linalg.norm(pi - self.pi0, axis=-1)
        scale = float(np.max(np.linalg.norm(self.pi0, axis=-1)))
        out = {
            "energy_rel_drift_max": float(np.max(np.abs(H - self.H0) / np.abs(self.H0))),
            "spatial_momentum_drift_max": float(np.max(dpi)),
            "orthogonality_error_max": float(np.max(orth)),
            "all_finite": finite,
        }
        rel = MOMENTUM_ROUNDOFF_REL if self.dtype == jnp.float64 else MOMENTUM_ROUNDOFF_REL_F32
        out["momentum_roundoff"] = bool(finite and out["spatial_momentum_drift_max"] <= rel * scale)
        if self.name == "krysl-coulomb-wall":
            u = self.params["offset"] + np.asarray(R, np.float64)[..., 2, 2]
            out["u_min"], out["u_max"] = float(np.min(u)), float(np.max(u))
        return out

    def record(self) -> dict:
        return {
            "name": self.name,
            "title": self.case.title,
            "parameters": self.params,
            "torque_free": self.torque_free,
            "conserved_spatial_momentum": "pi = R Pi (all components)"
            if self.torque_free
            else "pi_3 = (R Pi)_3 (potential symmetric about the spatial e3 axis)",
            "energy": "K" if self.torque_free else "H = K + V",
            "ensemble": f"case.perturb(state0, default_rng({A.seed}), "
            f"{self.case.ensemble_spread}, {self.members}): member 0 unperturbed, the others' "
            "body momenta scaled componentwise by 1 + spread*N(0,1)",
            "pi0_norm_max": float(np.max(np.linalg.norm(self.pi0, axis=-1))),
        }


# ------------------------------------------------------------------------------------------
# Programs: jaxrigid (one per method) and diffrax (one per solver), each jitted once.


def jaxrigid_program(problem, integrator, chunk):
    """`run(state0, dt, n_chunks) -> (R, Π, stats)`: `n_chunks` chunks of
    `simulate(integrator, model, state, dt, chunk, save_every=chunk)`, each continuing the
    last (`t0`, `solver_state0`; the first from the method's own `init`, as `simulate` starts
    one): equal to one unsplit run of `n_chunks·chunk` steps."""
    model, dtype = problem.model, problem.dtype
    orthonormal_tol = float(jnp.finfo(dtype).eps) ** 0.5  # models.base.rotation_checks

    def run(state0, dt, n_chunks):
        h = jnp.asarray(dt, dtype)
        ss0 = jax.vmap(lambda s: integrator.init(model, s, jnp.zeros((), dtype), h))(state0)

        def body(carry):
            k, state, ss, ok, _, iters = carry
            sol = jaxrigid.simulate(
                integrator,
                model,
                state,
                dt,
                chunk,
                save_every=chunk,
                t0=k * chunk * dt,
                solver_state0=ss,
            )
            final = sol.final_state
            finite = jnp.all(jnp.isfinite(final.R)) & jnp.all(jnp.isfinite(final.Pi))
            converged = jnp.all(sol.outcome.all_converged)
            # `simulate` refuses an attitude off SO(3) by more than √eps: float32 round-off
            # reaches that after ~10⁵ steps (bench/README, "Work–precision")
            orthonormal = jnp.max(so3.orthogonality_error(final.R)) <= orthonormal_tol
            ok = ok & converged & finite & orthonormal
            iters = jnp.maximum(iters, jnp.max(sol.outcome.max_iterations))
            return k + 1, final, sol.solver_state, ok, converged, iters

        # a failed chunk (a Newton failure, NaN/inf, or R off SO(3)) ends the run: the next
        # `simulate` would refuse its initial state, and the run is recorded as failed anyway
        init = (jnp.int32(0), state0, ss0, jnp.bool_(True), jnp.bool_(True), jnp.int32(0))
        k, state, _, ok, converged, iters = lax.while_loop(
            lambda c: (c[0] < n_chunks) & c[3], body, init
        )
        stats = {
            "all_ok": ok,
            "newton_all_converged": converged,
            "newton_max_iterations": iters,
            "steps_done": k * chunk,
        }
        return state.R, state.Pi, stats

    return jax.jit(run)


SOLVERS = {
    "diffrax_Tsit5": diffrax.Tsit5,
    "diffrax_Dopri5": diffrax.Dopri5,
    "diffrax_Dopri8": diffrax.Dopri8,
    "diffrax_RK4": harness.RK4,
}


def diffrax_program(problem, name, max_steps):
    """`run(R, Π, t1, dt0, tol) -> (R, Π, stats)`: `jax.vmap(diffeqsolve)` over members from
    t = 0 to t1, `SaveAt(t1=True)`; adaptive: `PIDController(rtol=tol, atol=tol)`, dt0 chosen
    by diffrax; RK4: `ConstantStepSize`, dt0 the step (tol unused)."""
    solver = SOLVERS[name]()
    fixed = name == "diffrax_RK4"
    dtype = problem.dtype

    def one(R, Pi, t1, dt0, tol):
        if fixed:
            controller, first = diffrax.ConstantStepSize(), dt0
        else:
            controller, first = diffrax.PIDController(rtol=tol, atol=tol), None
        sol = diffrax.diffeqsolve(
            problem.term,
            solver,
            jnp.asarray(0.0, dtype),
            t1,
            first,
            (R, Pi),
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=controller,
            max_steps=max_steps,
            throw=False,
        )
        st = (
            sol.stats["num_steps"],
            sol.stats["num_accepted_steps"],
            sol.result == diffrax.RESULTS.successful,
        )
        return sol.ys[0][-1], sol.ys[1][-1], st

    def run(R, Pi, t1, dt0, tol):
        R1, Pi1, (n, acc, ok) = jax.vmap(one, in_axes=(0, 0, None, None, None))(R, Pi, t1, dt0, tol)
        stats = {
            "num_steps_mean": jnp.mean(n.astype(jnp.float64)),
            "num_steps_max": jnp.max(n),
            "num_accepted_steps_mean": jnp.mean(acc.astype(jnp.float64)),
            "successful": jnp.all(ok),
        }
        return R1, Pi1, stats

    return jax.jit(run)


class Config:
    """One (method, Δt or tol) of a problem: its compiled program(s) and their arguments."""

    def __init__(self, method, library, compiled, order, dt=None, tol=None, chunk=None):
        self.method, self.library, self.compiled = method, library, compiled
        self.order, self.dt, self.tol, self.chunk = order, dt, tol, chunk
        self.compiled_long, self.chunk_long = compiled, chunk  # see `long_programs`
        self.steps_100 = None if dt is None else round(T_SHORT / dt)

    @property
    def key(self):
        if self.dt is not None:
            return f"{self.method} dt={self.dt:g}"
        return f"{self.method} tol={self.tol:g}"

    def chunks(self, t_end, long=False):
        return round(t_end / self.dt) // (self.chunk_long if long else self.chunk)

    def call(self, problem, t_end, long=False):
        """`(program, args)` of a run from t = 0 to t_end."""
        if self.library == "jaxrigid":
            dt = jnp.asarray(self.dt, problem.dtype)
            program = self.compiled_long if long else self.compiled
            return program, (problem.ens, dt, jnp.int32(self.chunks(t_end, long)))
        dt0 = self.dt if self.dt is not None else 0.01
        tol = self.tol if self.tol is not None else 1.0
        args = (
            problem.ens.R,
            problem.ens.Pi,
            jnp.asarray(t_end, problem.dtype),
            jnp.asarray(dt0, problem.dtype),
            jnp.asarray(tol, problem.dtype),
        )
        return self.compiled, args

    def warmup_args(self, problem, long=False):
        """Arguments of a short run (one chunk; diffrax to t = 1 or 10 steps)."""
        if self.library == "jaxrigid":
            return (problem.ens, jnp.asarray(self.dt, problem.dtype), jnp.int32(1))
        return self.call(problem, 1.0 if self.dt is None else self.dt * 10)[1]


def build_configs(problem, methods, t_long, log_prefix):
    """Compile every method's program for this problem; return (configs, compile records,
    missing methods)."""
    configs, compile_rec, missing = [], {}, []
    float32 = problem.dtype == jnp.float32
    for method in methods:
        if method not in DIFFRAX:
            if method in FREE_ONLY and not problem.torque_free:
                continue
            try:
                integrator = make_method(method)
            except ValueError as err:
                missing.append({"method": method, "why": str(err).split(";")[0]})
                continue
            if not integrator.integrates(problem.model):
                missing.append({"method": method, "why": "does not integrate this model"})
                continue
            order = int(integrator.order)
            grid = steps_grid(problem.name, method)
            chunk = gcd_all(grid)
            program = jaxrigid_program(problem, integrator, chunk)
            dts = [T_SHORT / n for n in grid]
            probe = Config(method, "jaxrigid", None, order, dt=dts[0], chunk=chunk)
            common.log(f"{log_prefix} compile {method} (chunk {chunk}, {len(dts)} dt) ...")
            compiled, secs = common.aot_compile(program, *probe.warmup_args(problem))
            compile_rec[method] = {"compile_seconds": secs, "chunk_steps": chunk, "order": order}
            for dt in dts:
                cfg = Config(method, "jaxrigid", compiled, order, dt=dt, chunk=chunk)
                cfg.integrator = integrator
                configs.append(cfg)
        else:
            order = {"diffrax_Tsit5": 5, "diffrax_Dopri5": 5, "diffrax_Dopri8": 8}.get(method, 4)
            if method == "diffrax_RK4":
                grid = steps_grid(problem.name, method)
                max_steps = int(max(grid) * t_long / T_SHORT) + 64
                variants = [{"dt": T_SHORT / n} for n in grid]
            else:
                tols = tolerances(problem.name, method, float32)
                max_steps = int(MAX_STEPS_PER_TIME[problem.name] * t_long)
                variants = [{"tol": tol} for tol in tols]
            program = diffrax_program(problem, method, max_steps)
            probe = Config(method, "diffrax", None, order, **variants[0])
            common.log(f"{log_prefix} compile {method} ...")
            compiled, secs = common.aot_compile(program, *probe.warmup_args(problem))
            compile_rec[method] = {"compile_seconds": secs, "max_steps": max_steps, "order": order}
            for v in variants:
                configs.append(Config(method, "diffrax", compiled, order, **v))
    return configs, compile_rec, missing


def long_programs(problem, configs, runs, t_long, compile_rec, log_prefix):
    """For each jaxrigid method whose chunk computed for less than CHUNK_SECONDS_MIN at
    t = 100 (its cheapest Δt), a second program with chunks m times longer for the long
    horizon, m the least divisor of t_long/100 that makes them last CHUNK_SECONDS_MIN (else
    t_long/100 itself), so that the per-chunk host callback stays negligible there too."""
    ratio = round(t_long / T_SHORT)
    by_method = {}
    for cfg in configs:
        if cfg.library == "jaxrigid" and runs[cfg.key]["t100"]["converged"]:
            by_method.setdefault(cfg.method, []).append(cfg)
    for method, cfgs in by_method.items():
        per_chunk = min(runs[c.key]["t100"]["seconds"] / c.chunks(T_SHORT) for c in cfgs)
        if per_chunk >= CHUNK_SECONDS_MIN or ratio == 1:
            continue
        m = next(
            (
                d
                for d in range(2, ratio + 1)
                if ratio % d == 0 and per_chunk * d >= CHUNK_SECONDS_MIN
            ),
            ratio,
        )
        chunk = cfgs[0].chunk * m
        program = jaxrigid_program(problem, cfgs[0].integrator, chunk)
        common.log(f"{log_prefix} compile {method} for t = {t_long:g} (chunk {chunk}) ...")
        compiled, secs = common.aot_compile(program, *cfgs[0].warmup_args(problem))
        jax.block_until_ready(compiled(*cfgs[0].warmup_args(problem)))  # warm-up
        compile_rec[method] |= {
            "chunk_steps_long": chunk,
            "compile_seconds_long": secs,
            "t100_seconds_per_chunk": per_chunk,
        }
        for c in configs:
            if c.method == method:
                c.compiled_long, c.chunk_long = compiled, chunk


# ------------------------------------------------------------------------------------------
# References and errors.


def references(problem, idx, t_long):
    """The references at t = 100 and t_long: the exact solution where there is one (every
    member), the extended-precision GBS one for a body in an axial potential (members `idx`),
    else DOP853 (rtol = atol = 1e-13) of members `idx` with member 0 at 1e-12 for the
    reference's own error."""
    if problem.exact is not None:
        return exact_references(problem, t_long)
    model = problem.model64
    axial = isinstance(model.potential, AxialPowerPotential) and model.torque is None
    if axial and principal_moments(model) is not None:
        return extended_references(problem, idx, t_long)
    return dop853_references(problem, idx, t_long)


def dop853_references(problem, idx, t_long):
    """DOP853 (rtol = atol = 1e-13) of members `idx`, member 0 again at 1e-12 for the
    reference's own error."""
    R100, Pi100, RL, PiL = [], [], [], []
    t0 = time.perf_counter()
    for i in idx:
        s = RigidBodyState(jnp.asarray(problem.ens64.R[i]), jnp.asarray(problem.ens64.Pi[i]))
        ref = rigid_body_reference(problem.model64, s, [T_SHORT, t_long])
        R100.append(np.asarray(ref.R[0]))
        Pi100.append(np.asarray(ref.Pi[0]))
        RL.append(np.asarray(ref.R[-1]))
        PiL.append(np.asarray(ref.Pi[-1]))
    seconds = time.perf_counter() - t0
    s = RigidBodyState(jnp.asarray(problem.ens64.R[0]), jnp.asarray(problem.ens64.Pi[0]))
    t1 = time.perf_counter()
    loose = rigid_body_reference(problem.model64, s, [T_SHORT, t_long], rtol=1e-12, atol=1e-12)
    check_seconds = time.perf_counter() - t1
    d100 = float(np.linalg.norm(np.asarray(loose.R[0]) - R100[0], 2))
    dL = float(np.linalg.norm(np.asarray(loose.R[-1]) - RL[0], 2))
    refs = {
        "t100": (np.stack(R100), np.stack(Pi100)),
        "tlong": (np.stack(RL), np.stack(PiL)),
    }
    rec = {
        "method": "jaxrigid.reference.rigid_body_reference: scipy DOP853, rtol = atol = 1e-13",
        "members": list(map(int, idx)),
        "seconds": seconds,
        "check": "member 0 again at rtol = atol = 1e-12 (check_seconds); "
        "reference_error_estimate = |R_1e-12 - R_1e-13|_2 / 10; accuracies below "
        "3x the estimate are not resolved",
        "check_seconds": check_seconds,
        "R_difference_1e-12_vs_1e-13": {"t100": d100, "tlong": dL},
        "reference_error_estimate": {"t100": d100 / 10, "tlong": dL / 10},
    }
    return refs, rec


# GBS in longdouble on the Coulomb wall (jaxrigid/reference/extended.py, measured there):
# H = 1/8 and 8 columns put its error estimate at 5e-16, 1.2e-14, 4.5e-13 at t = 10², 10³, 10⁴
GBS_MACRO_STEP, GBS_COLUMNS = 0.125, 8


def extended_references(problem, idx, t_long):
    """`jaxrigid.reference.extended.axial_potential_reference` (Gragg–Bulirsch–Stoer in
    longdouble, the torque derived by hand) of members `idx`; its error estimate is its own
    (the run with one extrapolation column fewer), and member 0's DOP853 at 1e-13 is recorded
    as a check."""
    pot = problem.model64.potential
    dfdu = xref.coulomb_wall_dfdu(*(float(x) for x in (pot.coulomb, pot.wall, pot.offset)))
    moments = np.diag(problem.inertia_np)
    t0 = time.perf_counter()
    ref = xref.axial_potential_reference(
        moments,
        dfdu,
        problem.ens64.R[idx],
        problem.ens64.Pi[idx],
        [T_SHORT, t_long],
        macro_step=GBS_MACRO_STEP,
        columns=GBS_COLUMNS,
    )
    seconds = time.perf_counter() - t0
    R, Pi = np.asarray(ref.R, np.float64), np.asarray(ref.Pi, np.float64)
    s = RigidBodyState(jnp.asarray(problem.ens64.R[0]), jnp.asarray(problem.ens64.Pi[0]))
    t1 = time.perf_counter()
    dop = rigid_body_reference(problem.model64, s, [T_SHORT, t_long])
    check_seconds = time.perf_counter() - t1
    # error_R is the largest entry of |R − R'|: ≤ the 2-norm bound √3× it
    estimate = {lab: float(np.sqrt(3) * np.max(ref.error_R[k])) for k, lab in enumerate(LABELS)}
    rec = {
        "method": "jaxrigid.reference.extended.axial_potential_reference: Gragg-Bulirsch-Stoer "
        f"extrapolation in np.longdouble (eps {float(np.finfo(np.longdouble).eps):.2e}), macro "
        f"step {GBS_MACRO_STEP}, {GBS_COLUMNS} columns, torque derived by hand",
        "members": list(map(int, idx)),
        "seconds": seconds,
        "check": "member 0 by DOP853 at rtol = atol = 1e-13 (check_seconds): its difference "
        "is DOP853's own error; reference_error_estimate = sqrt(3) x the largest entry of "
        "|R - R'| against the run with one extrapolation column fewer, max over members; "
        "accuracies below 3x the estimate are not resolved",
        "check_seconds": check_seconds,
        "R_difference_DOP853_1e-13_vs_extended": {
            lab: float(np.linalg.norm(np.asarray(dop.R[k]) - R[k, 0], 2))
            for k, lab in enumerate(LABELS)
        },
        "reference_error_estimate": estimate,
    }
    return {lab: (R[k], Pi[k]) for k, lab in enumerate(LABELS)}, rec


class ExactSolution(NamedTuple):
    """An exact solution as a reference: `solve(R0, Π0, ts) -> (R, Π)` in float64, and how
    its own error is estimated (`estimate(R0, Π0, t, R) -> float`, on ‖R − R_exact‖)."""

    name: str
    solve: Callable
    estimate: Callable
    estimate_doc: str
    checked_members: int  # members whose estimate is computed (the slow ones: a few)
    dop853_to_t_long: bool = True  # the DOP853 check to t_long too (False: too slow there)


def principal_moments(model):
    """The principal moments of a model whose inertia is diagonal, else None (the exact and
    the GBS references are written in principal axes)."""
    inertia = np.asarray(model.inertia, np.float64)
    moments = np.diag(inertia)
    return moments if np.array_equal(inertia, np.diag(moments)) else None


def exact_solution(model) -> ExactSolution | None:
    """The free body with a diagonal inertia (`jaxrigid.reference.free_body`) and the Lagrange top
    (`jaxrigid.reference.lagrange_top`: diag(I₁, I₁, I₃), gravity along body e₃, up = e₃) have
    exact solutions; other models None (DOP853 references)."""
    moments = principal_moments(model)
    if moments is None:
        return None
    if model.potential is None and model.torque is None:
        return ExactSolution(
            "jaxrigid.reference.free_body: Jacobi elliptic functions and one quadrature (exact up "
            "to float64 rounding)",
            lambda R0, Pi0, ts: fbe.free_body_exact(moments, R0, Pi0, ts),
            lambda R0, Pi0, t, R: 3 * fbe.float64_error_bound(moments, Pi0, t),
            "3 x float64_error_bound (its bound on the precession angle; the attitude's error "
            "is at most 3x it), max over members",
            10**9,
        )
    pot = model.potential
    if model.torque is None and model.gravity is not None and moments[0] == moments[1]:
        com, up = np.asarray(pot.weighted_com, np.float64), np.asarray(pot.up, np.float64)
        if com[0] == com[1] == 0 and np.array_equal(up, [0.0, 0.0, 1.0]) and com[2] != 0:
            c = float(com[2])

            def estimate(R0, Pi0, t, R):  # the float64 evaluation against 40 digits
                return float(
                    np.linalg.norm(R - lte.lagrange_top_exact_mp(moments, c, R0, Pi0, t)[0])
                )

            return ExactSolution(
                "jaxrigid.reference.lagrange_top: Jacobi elliptic functions and quadratures of "
                "the precession and spin rates (exact up to float64 rounding)",
                lambda R0, Pi0, ts: lte.lagrange_top_exact(moments, c, R0, Pi0, ts),
                estimate,
                "max over the first checked_members members of ||R - R_40 digits||_F, the "
                "float64 evaluation against lagrange_top_exact_mp (closed form by elliptic "
                "integrals of the third kind, mpmath, 40 digits)",
                32,
                # the fast top's DOP853 to 10⁴ takes ≈ 2 h on the CPU: checked at t = 100
                dop853_to_t_long=False,
            )
    return None


def exact_references(problem, t_long):
    """The exact solution for every member; its error estimate as `ExactSolution` states, and
    member 0's DOP853 at 1e-13 (to t = 100 only where the exact one is the reason DOP853 is
    not run to t_long: the fast top) recorded as a check (DOP853's own error)."""
    exact = problem.exact
    R100, Pi100, RL, PiL = [], [], [], []
    estimate = {"t100": 0.0, "tlong": 0.0}
    t0 = time.perf_counter()
    for R0, Pi0 in zip(problem.ens64.R, problem.ens64.Pi):
        R, Pi = exact.solve(R0, Pi0, [T_SHORT, t_long])
        R100.append(R[0])
        Pi100.append(Pi[0])
        RL.append(R[1])
        PiL.append(Pi[1])
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    checked = min(exact.checked_members, problem.members)
    for i in range(checked):
        R0, Pi0 = problem.ens64.R[i], problem.ens64.Pi[i]
        for label, t, R in (("t100", T_SHORT, R100[i]), ("tlong", t_long, RL[i])):
            estimate[label] = max(estimate[label], exact.estimate(R0, Pi0, t, R))
    estimate_seconds = time.perf_counter() - t1
    s = RigidBodyState(jnp.asarray(problem.ens64.R[0]), jnp.asarray(problem.ens64.Pi[0]))
    t1 = time.perf_counter()
    t_check = [T_SHORT, t_long] if exact.dop853_to_t_long else [T_SHORT]
    dop = rigid_body_reference(problem.model64, s, t_check)
    check_seconds = time.perf_counter() - t1
    refs = {"t100": (np.stack(R100), np.stack(Pi100)), "tlong": (np.stack(RL), np.stack(PiL))}
    dop_diff = {"t100": float(np.linalg.norm(np.asarray(dop.R[0]) - R100[0], 2))}
    if len(t_check) > 1:
        dop_diff["tlong"] = float(np.linalg.norm(np.asarray(dop.R[-1]) - RL[0], 2))
    rec = {
        "method": exact.name,
        "members": f"all {problem.members}",
        "seconds": seconds,
        "check": "member 0 by DOP853 at rtol = atol = 1e-13 (check_seconds): its difference "
        f"is DOP853's own error; reference_error_estimate = {exact.estimate_doc}; accuracies "
        "below 3x the estimate are not resolved",
        "checked_members": checked,
        "estimate_seconds": estimate_seconds,
        "check_seconds": check_seconds,
        "R_difference_DOP853_1e-13_vs_exact": dop_diff,
        "reference_error_estimate": estimate,
    }
    return refs, rec


def errors(R, Pi, ref, idx) -> dict:
    R = np.asarray(R, np.float64)[idx]
    Pi = np.asarray(Pi, np.float64)[idx]
    if not (np.isfinite(R).all() and np.isfinite(Pi).all()):
        return dict.fromkeys(
            ("error_R_max", "error_R_median", "error_Pi_max", "error_Pi_median"), math.inf
        )
    eR = np.linalg.norm(R - ref[0], ord=2, axis=(-2, -1))
    ePi = np.linalg.norm(Pi - ref[1], axis=-1)
    return {
        "error_R_max": float(np.max(eR)),
        "error_R_median": float(np.median(eR)),
        "error_Pi_max": float(np.max(ePi)),
        "error_Pi_median": float(np.median(ePi)),
    }


# ------------------------------------------------------------------------------------------
# Runs.


def horizon_record(problem, cfg, timing, t_end, refs, idx) -> dict:
    R1, Pi1, stats = timing.out
    stats = {k: np.asarray(v).item() for k, v in stats.items()}
    rec = timing.record()
    rec["t"] = t_end
    rec["seconds_per_trajectory"] = rec["seconds"] / problem.members
    rec["cpu_seconds_per_trajectory"] = rec["cpu_seconds"] / problem.members
    if cfg.dt is not None:
        rec["steps"] = round(t_end / cfg.dt)
    rec["stats"] = stats
    rec |= errors(R1, Pi1, refs, idx)
    rec["drift"] = problem.drift(R1, Pi1)
    ok = rec["drift"]["all_finite"]
    if cfg.library == "jaxrigid":
        ok = ok and bool(stats["all_ok"])
    else:
        ok = ok and bool(stats["successful"])
        if cfg.dt is None:
            rec["steps"] = stats["num_accepted_steps_mean"]
    rec["converged"] = ok
    if not ok:
        rec["failure"] = failure_reason(cfg, stats, rec["drift"]["all_finite"])
    return rec


def failure_reason(cfg, stats, all_finite) -> str:
    """Why a run is recorded as failed, in words."""
    if not all_finite:
        return "non-finite values"
    if cfg.library != "jaxrigid":
        return "diffrax result not successful (max_steps or step-size failure)"
    ended = f"run ended after {stats.get('steps_done')} steps"
    if not stats["newton_all_converged"]:
        return f"Newton did not converge for some member ({ended})"
    return f"an attitude left SO(3) by more than √eps (round-off; {ended})"


def run_problem(name, dtype):
    problem = Problem(name, dtype, A.members, A.seed)
    t_long = T_LONG[name]
    prefix = f"[{name} {dtype}]"
    idx = list(range(min(REF_MEMBERS[name], A.members)))
    if problem.exact is not None:
        idx = list(range(A.members))
    common.log(f"{prefix} references for members {idx[0]}..{idx[-1]} to t = {t_long:g} ...")
    refs, ref_rec = references(problem, idx, t_long)
    common.log(f"{prefix}   {ref_rec['seconds']:.1f} s (+{ref_rec['check_seconds']:.1f} s check)")
    configs, compile_rec, missing = build_configs(problem, A.methods, t_long, prefix)
    for m in missing:
        common.log(f"{prefix} skipped {m['method']}: {m['why']}")
    # warm-up: each compiled program once, on a short run
    warmed = set()
    for cfg in configs:
        if id(cfg.compiled) not in warmed:
            jax.block_until_ready(cfg.compiled(*cfg.warmup_args(problem)))
            warmed.add(id(cfg.compiled))
    runs = {cfg.key: {"config": cfg} for cfg in configs}
    # t = 100, then the long horizon, each in interleaved rounds
    for label, t_end, repeats in (("t100", T_SHORT, A.repeats), ("tlong", t_long, A.repeats_long)):
        if label == "tlong":
            long_programs(problem, configs, runs, t_long, compile_rec, prefix)
        todo = {}
        # a shuffled (fixed) order, so that a change of the machine's load during a round
        # (a long round takes minutes and is run once on the CPU) favours neither library
        for cfg in random.Random(A.seed).sample(configs, len(configs)):
            run = runs[cfg.key]
            if label == "tlong":
                short = run["t100"]
                est = short["seconds"] * t_long / T_SHORT
                if not short["converged"]:
                    run["tlong"] = {"skipped": "failed at t = 100: " + short.get("failure", "")}
                    continue
                if est > A.max_long_seconds:
                    run["tlong"] = {
                        "skipped": f"estimated {est:.0f} s a call > --max-long-seconds "
                        f"{A.max_long_seconds:g}"
                    }
                    continue
            program, args = cfg.call(problem, t_end, long=label == "tlong")
            todo[cfg.key] = lambda c=program, a=args: c(*a)
        common.log(
            f"{prefix} t = {t_end:g}: {len(todo)} runs x {repeats} round(s), "
            f"load {common.load_average()} ..."
        )
        load_before = common.load_average()
        t0 = time.perf_counter()
        timings = common.time_interleaved(todo, (), repeats, warmup=False)
        common.log(f"{prefix}   {time.perf_counter() - t0:.1f} s")
        for key, timing in timings.items():
            cfg = runs[key]["config"]
            rec = horizon_record(problem, cfg, timing, t_end, refs[label], idx)
            rec["load_average_before_rounds"] = load_before
            runs[key][label] = rec
    out = []
    for key, run in runs.items():
        cfg = run.pop("config")
        row = {
            "problem": name,
            "dtype": str(dtype),
            "method": cfg.method,
            "library": cfg.library,
            "order": cfg.order,
            "dt": cfg.dt,
            "tol": cfg.tol,
            "steps_t100": cfg.steps_100,
            "chunk_steps": cfg.chunk,
            "chunk_steps_long": cfg.chunk_long,
        }
        for label in ("t100", "tlong"):
            r = run.get(label, {})
            row[f"error_{label}"] = r.get("error_R_max")
            row[f"seconds_per_trajectory_{label}"] = r.get("seconds_per_trajectory")
        row["converged"] = bool(run["t100"]["converged"]) and run["tlong"].get("converged", True)
        row["t100"], row["tlong"] = run["t100"], run["tlong"]
        out.append(row)
        tl = run["tlong"]
        common.log(
            f"{prefix} {key:<32} t100 err {row['error_t100']:.2e} "
            f"{row['seconds_per_trajectory_t100'] * 1e6:9.2f} us/traj"
            + (
                f" | t={t_long:g} err {tl['error_R_max']:.2e} "
                f"{tl['seconds_per_trajectory'] * 1e3:8.3f} ms/traj "
                f"dpi {tl['drift']['spatial_momentum_drift_max']:.1e}"
                if "skipped" not in tl
                else f" | {tl['skipped']}"
            )
            + ("" if row["converged"] else "  FAILED")
        )
    record = {
        "problem": problem.record(),
        "dtype": str(dtype),
        "members": A.members,
        "t_short": T_SHORT,
        "t_long": t_long,
        "reference": ref_rec,
        "compile": compile_rec,
        "missing_methods": missing,
    }
    return record, out


# ------------------------------------------------------------------------------------------
# Frontiers.


def time_to_reach(points, eps):
    """Earliest time on a method's log-log interpolated (time, error) curve with error ≤ eps
    (points sorted by time; no extrapolation), or None."""
    pts = sorted(points)
    for k, (t, e) in enumerate(pts):
        if e <= eps:
            if k == 0:
                return t
            t0, e0 = pts[k - 1]
            if e0 <= eps:  # cannot happen (the earlier point would have returned)
                return t0
            x = (math.log(eps) - math.log(e0)) / (math.log(e) - math.log(e0))
            return math.exp(math.log(t0) + x * (math.log(t) - math.log(t0)))
    return None


def envelope(rows, library, label, eps, roundoff_only):
    """(time, method) of the fastest method of `library` to reach eps at `label`."""
    curves = {}
    for r in rows:
        h = r[label]
        if r["library"] != library or "skipped" in h or not h.get("converged"):
            continue
        if roundoff_only and not h["drift"]["momentum_roundoff"]:
            continue
        e = max(h["error_R_max"], 1e-300)
        curves.setdefault(r["method"], []).append((h["seconds_per_trajectory"], e))
    best = (None, None)
    for method, pts in curves.items():
        t = time_to_reach(pts, eps)
        if t is not None and (best[0] is None or t < best[0]):
            best = (t, method)
    return best


def frontiers(record, rows):
    out = {}
    for label in ("tlong", "t100"):
        floor = 3 * record["reference"]["reference_error_estimate"][label]
        table = []
        for eps in ACCURACIES:
            tj, mj = envelope(rows, "jaxrigid", label, eps, roundoff_only=True)
            tj_any, mj_any = envelope(rows, "jaxrigid", label, eps, roundoff_only=False)
            td, md = envelope(rows, "diffrax", label, eps, roundoff_only=False)
            resolved = eps >= floor
            ratio = td / tj if (td and tj and resolved) else None
            ratio_any = td / tj_any if (td and tj_any and resolved) else None
            table.append(
                {
                    "accuracy": eps,
                    "ratio": ratio,
                    "jaxrigid_seconds_per_trajectory": tj,
                    "jaxrigid_best": mj,
                    "diffrax_seconds_per_trajectory": td,
                    "diffrax_best": md,
                    "ratio_any_jaxrigid_run": ratio_any,
                    "jaxrigid_best_any": mj_any,
                    "resolved_by_reference": resolved,
                }
            )
        out[label] = {"t": record[f"t_{'long' if label == 'tlong' else 'short'}"], "table": table}
    return out


# ------------------------------------------------------------------------------------------
# Plot.


def plot(record, rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    floor = 1e-18
    methods = list(dict.fromkeys(r["method"] for r in rows))
    jr = [m for m in methods if not m.startswith("diffrax")]
    cmap_j = plt.get_cmap("viridis")
    cmap_d = plt.get_cmap("autumn")
    dx = [m for m in methods if m.startswith("diffrax")]
    color = {m: cmap_j(i / max(len(jr) - 1, 1) * 0.9) for i, m in enumerate(jr)}
    color |= {m: cmap_d(i / max(len(dx), 1) * 0.8) for i, m in enumerate(dx)}
    markers = "o s D ^ v < > p h * P X d 8".split()
    fig, axes = plt.subplots(1, 2, figsize=(15, 6.5))
    for i, m in enumerate(methods):
        rs = [r for r in rows if r["method"] == m]
        mk = "x" if m.startswith("diffrax") else markers[i % len(markers)]
        for label, ls in (("tlong", "-"), ("t100", "--")):
            pts = sorted(
                (r[label]["seconds_per_trajectory"], r[label]["error_R_max"], r[label])
                for r in rs
                if "skipped" not in r[label]
            )
            ok = [(t, e) for t, e, h in pts if h["converged"]]
            bad = [(t, e) for t, e, h in pts if not h["converged"]]
            kw = {"color": color[m], "ls": ls, "marker": mk, "ms": 5}
            if ok:
                axes[0].loglog(*zip(*ok), label=m if label == "tlong" else None, **kw)
            if bad:
                axes[0].loglog(*zip(*bad), ls="none", marker="x", color="k", ms=8)
            if label == "tlong":
                dr = [(t, max(h["drift"]["spatial_momentum_drift_max"], floor)) for t, _, h in pts]
                de = [(t, max(h["drift"]["energy_rel_drift_max"], floor)) for t, _, h in pts]
                if dr:
                    axes[1].loglog(*zip(*dr), color=color[m], ls="-", marker=mk, ms=5, label=m)
                    axes[1].loglog(*zip(*de), color=color[m], ls=":", marker=mk, ms=3, mfc="none")
    est = record["reference"]["reference_error_estimate"]
    axes[0].axhline(3 * est["tlong"], color="grey", lw=0.8, ls="-")
    axes[0].axhline(3 * est["t100"], color="grey", lw=0.8, ls="--")
    t_long = record["t_long"]
    axes[0].set_xlabel("wall seconds per trajectory (median call / members)")
    axes[0].set_ylabel(r"attitude error $\max\|R - R_\mathrm{ref}\|_2$ over reference members")
    axes[0].set_title(
        f"error: t = {t_long:g} solid, t = 100 dashed; grey: 3x reference error estimate; "
        "black x: failed",
        fontsize=9,
    )
    axes[1].set_xlabel(f"wall seconds per trajectory to t = {t_long:g}")
    axes[1].set_ylabel("drift at the final time (max over members)")
    mom = "‖π − π₀‖" if record["problem"]["torque_free"] else "|π₃ − π₃₀|"
    en = "|K − K₀|/K₀" if record["problem"]["torque_free"] else "|H − H₀|/|H₀|"
    axes[1].set_title(
        f"t = {t_long:g}: spatial momentum {mom} solid, energy {en} dotted; zeros at {floor:g}",
        fontsize=9,
    )
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2, loc="best")
    kind = jax.devices()[0].device_kind
    fig.suptitle(
        f"{record['problem']['name']} ({record['dtype']}): {record['members']} members, "
        f"{kind}; t_long = {t_long:g}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------


def print_frontiers(name, dtype, fr):
    tab = fr["tlong"]["table"]
    print(f"{name} ({dtype}), t = {fr['tlong']['t']:g}: diffrax time / jaxrigid time")
    for row in tab:
        r, j, d = row["ratio"], row["jaxrigid_best"], row["diffrax_best"]
        reached = {(True, False): "jaxrigid only", (False, True): "diffrax only"}
        print(
            f"  eps {row['accuracy']:.0e}: "
            + (f"{r:7.2f}" if r is not None else reached.get((bool(j), bool(d)), "   null"))
            + f"  jaxrigid {row['jaxrigid_best']}  diffrax {row['diffrax_best']}"
            + ("" if row["resolved_by_reference"] else "  (below reference accuracy)")
        )


def main():
    from pathlib import Path

    t_start, info = time.perf_counter(), common.machine()
    tag = common.device_tag("float32" if "float32" in A.dtypes else "float64", A.quick)
    Path(A.out).mkdir(parents=True, exist_ok=True)
    dtypes = A.dtypes
    problems, runs, ratios = {}, [], {}
    for name in A.problems:
        for dtype in dtypes:
            record, rows = run_problem(name, dtype)
            fr = frontiers(record, rows)
            key = name if dtype == "float64" else f"{name}_{dtype}"
            problems[key] = record | {"frontiers": fr}
            ratios[key] = {f"{row['accuracy']:.0e}": row["ratio"] for row in fr["tlong"]["table"]}
            runs += rows
            png = Path(A.out) / f"work_precision_{key}_{tag}.png"
            plot(record, rows, png)
            problems[key]["plot"] = png.name
            print_frontiers(name, dtype, fr)
    config = {
        "dtypes": dtypes,
        "members": A.members,
        "members_default": "128 on the CPU, 10^4 elsewhere, 8 with --quick. On the 2-core CPU "
        "jaxrigid's time per trajectory falls with the ensemble up to ~128 members (at 32 it "
        "is ~1.3-1.5x, at 64 ~1.15-1.2x its value at 128-256) while diffrax's is flat from 32 "
        "on, so fewer members would bias the comparison; more do not fit the ~20 min budget",
        "t_short": T_SHORT,
        "t_long": {k: T_LONG[k] for k in A.problems},
        "t_long_note": "10^4 by default (accelerators); on the CPU 10^3 for the free body and "
        "the Coulomb wall, 200 for the fast top: at 128 members the long runs of every "
        "(method, dt/tol) to 10^4 would take ~10 min for the free body alone, ~45 min for the "
        "Coulomb wall, hours for the top (Omega3 = 50: ~10^4-10^5 steps per 100 time units); "
        "the references (exact solutions, GBS in longdouble) resolve 1e-10 at 10^4 on all three",
        "reference_members": {k: p["reference"]["members"] for k, p in problems.items()},
        "repeats_t100": A.repeats,
        "repeats_tlong": A.repeats_long,
        "max_long_seconds": A.max_long_seconds,
        "methods_requested": A.methods,
        "steps_to_t100": STEPS_100,
        "chunk_seconds_min": CHUNK_SECONDS_MIN,
        "dt_scale": A.dt_scale,
        "tolerances": {
            "float64": TOLS,
            "float32": TOLS_FLOAT32,
            "except": {f"{k[0]} {k[1]}": v for k, v in TOLS_BY.items()},
        },
        "momentum_roundoff_rel": {
            "float64": MOMENTUM_ROUNDOFF_REL,
            "float32": MOMENTUM_ROUNDOFF_REL_F32,
        },
        "timing": "AOT-compiled; one warm-up call per program on a short run; then rounds in "
        "which every (method, dt/tol) is called once (round robin, shuffled order), each call "
        "blocked; seconds = median; per trajectory = seconds / members",
        "jaxrigid": "jax.jit(while_loop over n_chunks of simulate(method, model, state, dt, C, "
        "save_every=C, t0, solver_state0)), ended early by a failed chunk; dt and n_chunks "
        "traced; chunk C per method in `compile`",
        "diffrax": "jax.vmap(diffeqsolve) over members, state (R, Pi), SaveAt(t1=True), "
        "throw=False; adaptive: PIDController(rtol=tol, atol=tol), dt0=None; RK4: "
        "ConstantStepSize; t1, dt0, tol traced",
        "coulomb_wall_torque": "(-coulomb u^-2 - 10 wall u^-11)(-R23, R13, 0), u = 1.1 + R33: "
        "smooth (analytic) for u > 0; the u range reached is in each run's drift (u_min, "
        "u_max), so a smooth ODE solver is meaningful",
        "accuracies": ACCURACIES,
    }
    doc = {
        "machine": info,
        "config": config,
        "problems": problems,
        "frontier_ratios": ratios,
        "frontier_ratios_note": "diffrax_time / jaxrigid_time per trajectory at attitude "
        "accuracy eps (max over reference members) at the long horizon, from the lower "
        "envelopes of log-log interpolated error-vs-time curves; jaxrigid runs counted only if "
        "they keep the conserved spatial momentum to round-off; null: not reached by a side, "
        "or below 3x the reference's estimated error",
        "runs": runs,
    }
    path = common.write_results(A.out, f"work_precision_{tag}.json", doc, t_start)
    print(f"wrote {path} ({time.perf_counter() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
