"""Rolling-ball ensemble throughput: jaxrigid's RKMK2/4/8 (and the nonholonomic DLA method once
it has landed) against diffrax's Tsit5 on the same reduced equations, with the accuracy each
reaches at t = 10 on `rolling-ball-two-circles` (issue 13).

**Problem.** `two_circles_ball()` (the contract case: r = 1, m₀ = 1, 𝕀 = diag(0.4, 0.45, 0.5),
χ₀ = (0, 0, −0.1), two masses of 0.25 on circles of radius ½ driven by
θᵢ(t) = −π/2 + 0.8 sin(1.5t + φᵢ), from rest). Ensemble member j has its own initial body
angular velocity Ω₀ = s_Ω·z_j[0:3] and control amplitudes 0.8·(1 + s_a·z_j[3:5]) (z_j rows of
`numpy.random.default_rng(seed).standard_normal((n, 5))`, row 0 zeroed: member 0 is the contract
case; the first members are the same for every ensemble size). The amplitudes are a parameter
sweep: the model carries them as an `(n, 2)` array and `simulate(..., model_axes=...)` maps over
that field alone.

**Methods**, all with the model's `(q, Ω, x)` state and one `dt`: `RKMK2`, `RKMK4`, `RKMK8`
(`jaxrigid.integrators.rkmk`) and `DLA` (`nonholonomic_lie.NonholonomicDLA`, default
`Newton`; in the default list once its module is in the git commit) through
`jax.jit(simulate(integrator, model, state0, dt, steps, save_every=steps, model_axes=axes))`;
`diffrax_Tsit5` — `diffrax.Tsit5()` with `ConstantStepSize`, dt0 = dt — and `diffrax_Tsit5_PID`
— `PIDController(rtol=tol, atol=tol)` (diffrax's default coefficients), dt0 = dt — on
`RollingBall.vector_field` with q as four Euclidean components (nothing keeps |q| = 1 there),
`jax.vmap(diffeqsolve, in_axes=(axes, 0))` over the members. `tol` is calibrated in the run: the
loosest of 10^(−k/4) whose largest error at t = 10 over the accuracy members is at most RKMK4's
(`--tsit5-tol` sets it).

**Timing** (per size): every runner AOT-compiled (`compile_seconds`), one warm-up call, then
`--repeats` interleaved rounds (`_common.time_interleaved`, median kept, `block_until_ready`) of
`steps` steps (1000 = t 10 at dt 0.01; members × steps capped by `--max-body-steps`, 2e6 on
CPU, 2e8 on accelerators). Ball-steps/s = members × steps / seconds (Tsit5_PID: its accepted
steps); ratios to `diffrax_Tsit5` of the same size and run.

**Accuracy** at t = 10 (the same for every size: members are independent): the first
`--accuracy-members` members run to t = 10 at dt by every method; error = ‖(q, Ω, x) −
reference‖₂ at t = 10, max over those members and member 0's; ||q| − 1| at t = 10. Reference:
scipy DOP853 at rtol 2.3e-14, atol 2.3e-16 (its tightest), one solve per member on
`vector_field` in float64 — a method none of the benchmarked ones is, in another attitude
representation; checked against RKMK8 at dt = 1/128 (the largest difference is recorded: the
floor under which errors are not resolved). Writes
`rolling_ball_throughput_<device>[_<dtype>][_quick].json`.

    python bench/rolling_ball_throughput.py                       # CPU, 1 … 10⁵ members (≈ 5 min)
    python bench/rolling_ball_throughput.py --quick --out /tmp/b  # smoke test: 1, 100 members
    python bench/rolling_ball_throughput.py --sizes 1000000,10000000   # GPU
"""

from __future__ import annotations

import time

import _common as common

BASE_METHODS = ["RKMK2", "RKMK4", "RKMK8"]
DIFFRAX_METHODS = ["diffrax_Tsit5", "diffrax_Tsit5_PID"]
DLA_PATH = "jaxrigid/integrators/nonholonomic_lie.py"
PEER = "diffrax_Tsit5"
T_END = 10.0

p = common.parser(__doc__, dtype=True)
p.add_argument("--sizes", default=None, help="comma list (1,10,…,1e5; GPU adds 1e6, 1e7)")
p.add_argument("--steps", type=int, default=None, help="steps per timed run (1000; quick 50)")
p.add_argument("--max-body-steps", type=float, default=None, help="cap on members × steps")
p.add_argument("--min-steps", type=int, default=20)
p.add_argument("--repeats", type=int, default=None, help="timed calls, median kept (3; quick 1)")
p.add_argument("--dt", type=float, default=0.01)
p.add_argument("--methods", default=None, help="comma list (default: all available)")
p.add_argument("--tsit5-tol", type=float, default=None, help="Tsit5_PID rtol = atol (calibrated)")
p.add_argument("--accuracy-members", type=int, default=None, help="members checked (8; quick 2)")
p.add_argument("--omega-spread", type=float, default=0.1, help="s_Ω, rad/s")
p.add_argument("--amplitude-spread", type=float, default=0.1, help="s_a, relative")
p.add_argument("--seed", type=int, default=0)
A = p.parse_args()
A.steps = A.steps or (50 if A.quick else 1000)
A.repeats = A.repeats or (1 if A.quick else 3)
A.accuracy_members = A.accuracy_members or (2 if A.quick else 8)
common.enable_x64_for(A.dtype)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import jaxrigid  # noqa: E402
from jaxrigid.integrators.rkmk import RKMK2, RKMK4, RKMK8  # noqa: E402
from jaxrigid.models.rolling_ball import RollingBallState, two_circles_ball  # noqa: E402

try:
    from jaxrigid.integrators.nonholonomic_lie import NonholonomicDLA
except ImportError:
    NonholonomicDLA = None
# "landed": importable and in the git commit (or no git to ask, e.g. a copied tree)
_tracked = common._git("ls-files", DLA_PATH)
DLA_LANDED = NonholonomicDLA is not None and (_tracked is None or bool(_tracked))

INTEGRATORS = {"RKMK2": RKMK2, "RKMK4": RKMK4, "RKMK8": RKMK8}
if NonholonomicDLA is not None:
    INTEGRATORS["DLA"] = NonholonomicDLA
DEFAULT = BASE_METHODS + (["DLA"] if DLA_LANDED else []) + DIFFRAX_METHODS
A.methods = DEFAULT if A.methods is None else [m.strip() for m in A.methods.split(",") if m]
if unknown := set(A.methods) - set(INTEGRATORS) - set(DIFFRAX_METHODS):
    p.error(f"unknown or unavailable methods {sorted(unknown)}; known {DEFAULT}")

PLATFORM = jax.devices()[0].platform
CPU = PLATFORM == "cpu"
if A.sizes is None:
    A.sizes = "1,100" if A.quick else "1,10,100,1000,10000,100000"
    A.sizes += "" if CPU or A.quick else ",1000000,10000000"
A.sizes = [int(float(s)) for s in A.sizes.split(",")]
CAP = A.max_body_steps if A.max_body_steps is not None else (2e6 if CPU else 2e8)
CAP = CAP or float("inf")  # 0: no cap
N_T_END = round(T_END / A.dt)
if abs(N_T_END * A.dt - T_END) > 1e-9 * T_END:
    p.error(f"--dt must divide t = {T_END}")
DTYPE = jnp.dtype(A.dtype)
REF_RTOL, REF_ATOL, CHECK_DT = 2.3e-14, 2.3e-16, 1 / 128


# ------------------------------------------------------------------------------------------
# The problem: the contract case, its ensembles and the sweep's axes.


class TwoCircles:
    """`two_circles_ball()` in `dtype`; `ensemble(n)` = (model with `(n, 2)` amplitudes,
    state with `(n, …)` leaves); `axes` the `model_axes` prefix (the amplitude alone)."""

    def __init__(self, dtype):
        self.dtype = jnp.dtype(dtype)
        model, state0 = two_circles_ball()
        cast = lambda x: jnp.asarray(x, self.dtype) if eqx.is_inexact_array(x) else x  # noqa: E731
        self.model = jax.tree_util.tree_map(cast, model)
        self.state0 = jax.tree_util.tree_map(cast, state0)
        self.amplitude0 = np.asarray(model.control.amplitude, np.float64)
        axes = jax.tree_util.tree_map(lambda _: None, self.model)
        self.axes = eqx.tree_at(lambda m: m.control.amplitude, axes, 0, is_leaf=_is_none)

    def parameters(self, n):
        """`(Ω₀ (n, 3), amplitudes (n, 2))` in float64 numpy; member 0 unperturbed."""
        z = np.random.default_rng(A.seed).standard_normal((n, 5))
        z[0] = 0.0
        return A.omega_spread * z[:, :3], self.amplitude0 * (1.0 + A.amplitude_spread * z[:, 3:])

    def ensemble(self, n):
        omega, amps = self.parameters(n)
        model = eqx.tree_at(lambda m: m.control.amplitude, self.model, jnp.asarray(amps, DTYPE))
        s0 = self.state0
        state = RollingBallState(
            jnp.broadcast_to(s0.q, (n, 4)),
            jnp.asarray(omega, self.dtype),
            jnp.broadcast_to(s0.x, (n, 3)),
        )
        return model, state

    def record(self):
        return {
            "name": "rolling-ball-two-circles",
            "model": "two_circles_ball(): r = 1, m0 = 1, inertia diag(0.4, 0.45, 0.5), "
            "chi0 = (0, 0, -0.1), g = 9.81, masses 0.25, 0.25 on circles of radius 0.5, "
            "theta_i = -pi/2 + a_i sin(1.5 t + phi_i), phi = (0, pi/2), from rest, Lambda = 1",
            "ensemble": f"member j: Omega0 = {A.omega_spread}*z[j, 0:3], amplitudes = "
            f"0.8*(1 + {A.amplitude_spread}*z[j, 3:5]), z = numpy default_rng({A.seed})."
            "standard_normal((n, 5)), z[0] = 0 (member 0 is the contract case)",
            "model_axes": "control.amplitude alone (axis 0), every other field shared",
            "t_end_accuracy": T_END,
        }


def _is_none(x):
    return x is None


PROBLEM = TwoCircles(A.dtype)


# ------------------------------------------------------------------------------------------
# Runners: jitted `fn(model, state, *extra) -> (final_state, stats)`.


def jaxrigid_runner(name, steps):
    integrator = INTEGRATORS[name]()

    def fn(model, state):
        sol = jaxrigid.simulate(
            integrator, model, state, A.dt, steps, save_every=steps, model_axes=PROBLEM.axes
        )
        out = sol.outcome
        stats = {
            "all_successful": jnp.all(out.all_converged),
            "max_newton_iterations": jnp.max(out.max_iterations),
        }
        return sol.final_state, stats

    return jax.jit(fn)


TERM = diffrax.ODETerm(lambda t, y, model: model.vector_field(t, y))


def diffrax_runner(name, steps):
    """`jax.vmap(diffeqsolve)` over members (model sweep by `PROBLEM.axes`) to t = steps·dt;
    `diffrax_Tsit5_PID` takes its tolerance as a traced argument (one compile, any tol)."""
    adaptive = name == "diffrax_Tsit5_PID"
    t1 = steps * A.dt
    max_steps = max(64 * steps, 4096) if adaptive else steps + 16

    def one(model, y0, tol):
        if adaptive:
            ctl = diffrax.PIDController(rtol=tol, atol=tol)
        else:
            ctl = diffrax.ConstantStepSize()
        sol = diffrax.diffeqsolve(
            TERM,
            diffrax.Tsit5(),
            jnp.asarray(0.0, DTYPE),
            jnp.asarray(t1, DTYPE),
            jnp.asarray(A.dt, DTYPE),
            y0,
            args=model,
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=ctl,
            max_steps=max_steps,
            throw=False,
        )
        final = jax.tree_util.tree_map(lambda x: x[-1], sol.ys)
        return final, sol.stats["num_steps"], sol.stats["num_accepted_steps"], sol.result

    def fn(model, state, tol=None):
        tol = jnp.asarray(1e-8 if tol is None else tol, DTYPE)
        final, n, acc, res = jax.vmap(one, in_axes=(PROBLEM.axes, 0, None))(model, state, tol)
        stats = {
            "all_successful": jnp.all(res == diffrax.RESULTS.successful),
            "num_steps_sum": jnp.sum(n),
            "num_steps_max": jnp.max(n),
            "num_accepted_steps_sum": jnp.sum(acc),
        }
        return final, stats

    return jax.jit(fn)


def runner(name, steps):
    return jaxrigid_runner(name, steps) if name in INTEGRATORS else diffrax_runner(name, steps)


# ------------------------------------------------------------------------------------------
# Accuracy at t = 10: the reference, every method's error, the Tsit5 tolerance.


def as_array(state):
    """`(…, 10)` float64 numpy `(q, Ω, x)`."""
    return np.concatenate([np.asarray(x, np.float64) for x in state], axis=-1)


def reference(n):
    """The first `n` members at t = 10 by scipy DOP853 (rtol 2.3e-14, atol 2.3e-16) on
    `vector_field` in float64 (q as 4 components), and RKMK8 at dt = 1/128 for the check."""
    omega, amps = PROBLEM.parameters(n)
    with jax.enable_x64(True):
        model, s0 = two_circles_ball()

        @jax.jit
        def f(t, y, amp):
            m = eqx.tree_at(lambda m: m.control.amplitude, model, amp)
            dy = m.vector_field(t, RollingBallState(y[:4], y[4:7], y[7:]))
            return jnp.concatenate(dy)

        ref, calls = [], 0
        for j in range(n):
            y0 = np.concatenate([np.asarray(s0.q), omega[j], np.asarray(s0.x)])
            amp = jnp.asarray(amps[j])
            sol = solve_ivp(
                lambda t, y: np.asarray(f(t, y, amp)),  # noqa: B023
                (0.0, T_END),
                y0,
                method="DOP853",
                rtol=REF_RTOL,
                atol=REF_ATOL,
            )
            assert sol.success, sol.message
            ref.append(sol.y[:, -1])
            calls = max(calls, sol.nfev)
        swept = eqx.tree_at(lambda m: m.control.amplitude, model, jnp.asarray(amps))
        states = RollingBallState(
            jnp.broadcast_to(s0.q, (n, 4)), jnp.asarray(omega), jnp.broadcast_to(s0.x, (n, 3))
        )
        steps = round(T_END / CHECK_DT)
        sol = jaxrigid.simulate(
            RKMK8(), swept, states, CHECK_DT, steps, save_every=steps, model_axes=PROBLEM.axes
        )
        check = as_array(sol.final_state)
    ref = np.stack(ref)
    return ref, {
        "reference": f"scipy solve_ivp DOP853, rtol {REF_RTOL}, atol {REF_ATOL}, float64, "
        "one solve per member on RollingBall.vector_field with q as 4 Euclidean components",
        "reference_max_nfev": calls,
        "reference_q_norm_error_max": float(np.max(q_norm_error(ref))),
        "check": f"RKMK8 at dt = 1/{round(1 / CHECK_DT)}, float64",
        "check_difference_max": float(np.max(np.linalg.norm(check - ref, axis=-1))),
    }


def q_norm_error(y):
    """`||q| − 1|` per member of a `(…, 10)` array."""
    return np.abs(np.linalg.norm(y[..., :4], axis=-1) - 1.0)


def errors(final, ref):
    y = as_array(final)
    e = np.linalg.norm(y - ref, axis=-1)
    qn = q_norm_error(y)
    return {
        "error_t10_max": float(np.max(e)),
        "error_t10_member0": float(e[0]),
        "error_t10_per_member": e,
        "error_x_t10_max": float(np.max(np.linalg.norm(y[:, 7:] - ref[:, 7:], axis=-1))),
        "q_norm_error_t10_max": float(np.max(qn)),
        "height_error_t10_max": float(np.max(np.abs(y[:, 9] - 1.0))),
    }


def accuracy():
    """Every method from the first members to t = 10 at dt; the calibrated Tsit5 tolerance."""
    n = A.accuracy_members
    common.log(f"reference: DOP853 for {n} members ...")
    t = time.perf_counter()
    ref, info = reference(n)
    info["seconds"] = time.perf_counter() - t
    common.log(f"  {info['seconds']:.1f} s, RKMK8 check {info['check_difference_max']:.2e}")
    model, state = PROBLEM.ensemble(n)
    out = {}
    for name in [m for m in A.methods if m != "diffrax_Tsit5_PID"]:
        final, stats = runner(name, N_T_END)(model, state)
        out[name] = errors(final, ref) | {"stats": _host(stats)}
        common.log(f"  {name}: error at t = 10 {out[name]['error_t10_max']:.3e}")
    tol, calibration = A.tsit5_tol, None
    if "diffrax_Tsit5_PID" in A.methods:
        pid = runner("diffrax_Tsit5_PID", N_T_END)
        if tol is None:
            tol, calibration = calibrate(pid, model, state, ref, out.get("RKMK4"))
        final, stats = pid(model, state, tol)
        out["diffrax_Tsit5_PID"] = errors(final, ref) | {"stats": _host(stats), "tol": tol}
        if calibration is not None:
            out["diffrax_Tsit5_PID"]["calibration"] = calibration
        e = out["diffrax_Tsit5_PID"]["error_t10_max"]
        common.log(f"  diffrax_Tsit5_PID (tol {tol:.3g}): error at t = 10 {e:.3e}")
    return {"members": n, "dt": A.dt, "steps": N_T_END} | info | {"methods": out}, tol


def calibrate(pid, model, state, ref, target):
    """The loosest tol = 10^(−k/4), k = 8 … 56, whose largest error at t = 10 is at most
    RKMK4's (`target`); 1e-8 if RKMK4 was not run."""
    if target is None:
        return 1e-8, None
    goal = target["error_t10_max"]
    tried = []
    for k in range(8, 57):
        tol = 10.0 ** (-k / 4)
        final, stats = pid(model, state, tol)
        e = errors(final, ref)["error_t10_max"]
        steps = int(stats["num_accepted_steps_sum"])
        tried.append({"tol": tol, "error_t10_max": e, "num_accepted_steps_sum": steps})
        if e <= goal:
            return tol, {"target": "RKMK4 error_t10_max", "target_error": goal, "tried": tried}
    note = "RKMK4 error_t10_max (not reached: the tightest tol kept)"
    return tol, {"target": note, "target_error": goal, "tried": tried}


def _host(stats):
    return {k: np.asarray(v).item() for k, v in stats.items()}


# ------------------------------------------------------------------------------------------
# Throughput.


def throughput(size, acc, tol):
    model, state = PROBLEM.ensemble(size)
    steps = A.steps if size * A.steps <= CAP else max(A.min_steps, int(CAP // size))
    row = {"members": size, "steps": steps, "dt": A.dt, "simulated_time": steps * A.dt}
    compiled, compile_s = {}, {}
    for name in A.methods:
        common.log(f"  [{size} members, {steps} steps] {name}: compile ...")
        fn = runner(name, steps)
        if name == "diffrax_Tsit5_PID":  # the tolerance as a constant, like a user's program
            fn = jax.jit(lambda m, s, f=fn: f(m, s, tol))
        compiled[name], compile_s[name] = common.aot_compile(fn, model, state)
    row["load_average_before"] = common.load_average()
    timings = common.time_interleaved(compiled, (model, state), A.repeats)
    row["load_average_after"] = common.load_average()
    methods = {}
    for name, t in timings.items():
        t.compile_seconds = compile_s[name]
        final, stats = t.out
        stats = _host(stats)
        body = stats["num_accepted_steps_sum"] if name == "diffrax_Tsit5_PID" else None
        rec = methods[name] = common.throughput_record(t, size, steps, A.dt, body)
        rec["ball_steps_per_s"] = rec["body_steps_per_s"]
        rec["seconds_per_member_step"] = 1.0 / rec["body_steps_per_s"]
        rec["seconds_per_member_to_t10"] = T_END / rec["member_time_units_per_s"]
        rec["stats"] = stats
        y = as_array(final)
        rec["q_norm_error_end_max"] = float(np.max(q_norm_error(y)))
        rec["all_finite"] = bool(np.isfinite(y).all())
        a = acc["methods"].get(name, {})
        for k in ("error_t10_max", "error_t10_member0", "q_norm_error_t10_max"):
            rec[k] = a.get(k)
        common.log(
            f"    {name}: {rec['seconds']:.4g} s, {rec['body_steps_per_s']:.3e} ball-steps/s"
        )
    row["methods"] = common.add_ratios(methods, PEER)
    return row


def print_table(rows, acc):
    print(
        f"{'members':>8} {'method':<18} {'steps':>5} {'seconds':>9} {'ball-steps/s':>12} "
        f"{'xTsit5':>6} {'t-units':>6} {'compile':>7} {'err t=10':>9} {'|q|-1 t=10':>10}"
    )
    for row in rows:
        for name, r in row["methods"].items():
            rb = r.get(f"ratio_body_steps_vs_{PEER}", float("nan"))
            rt = r.get(f"ratio_time_units_vs_{PEER}", float("nan"))
            a = acc["methods"][name]
            print(
                f"{row['members']:>8} {name:<18} {row['steps']:>5} {r['seconds']:>9.4g} "
                f"{r['body_steps_per_s']:>12.3e} {rb:>6.2f} {rt:>6.2f} "
                f"{r['compile_seconds']:>7.1f} {a['error_t10_max']:>9.2e} "
                f"{a['q_norm_error_t10_max']:>10.1e}"
            )


def accuracy_per_cost(rows, acc):
    """Per method at the largest size: error at t = 10 against seconds per member-step and
    per member to t = 10 (the cost a fixed-step and an adaptive method can be compared by)."""
    row = rows[-1]
    out = {"members": row["members"], "methods": {}}
    for name, r in row["methods"].items():
        out["methods"][name] = {
            "error_t10_max": acc["methods"][name]["error_t10_max"],
            "seconds_per_member_step": r["seconds_per_member_step"],
            "seconds_per_member_to_t10": r["seconds_per_member_to_t10"],
        }
    print(f"Accuracy per cost, {row['members']} members:")
    print(f"{'method':<18} {'err t=10':>9} {'µs/member-step':>14} {'ms/member to t=10':>17}")
    for name, r in out["methods"].items():
        print(
            f"{name:<18} {r['error_t10_max']:>9.2e} {r['seconds_per_member_step'] * 1e6:>14.3f} "
            f"{r['seconds_per_member_to_t10'] * 1e3:>17.3f}"
        )
    return out


def main():
    t0, info = time.perf_counter(), common.machine()
    common.log(f"methods {A.methods}, sizes {A.sizes}, load {common.load_average()}")
    acc, tol = accuracy()
    rows = [throughput(n, acc, tol) for n in A.sizes]
    config = {
        "dtype": A.dtype,
        "dt": A.dt,
        "steps_requested": A.steps,
        "max_body_steps_per_run": CAP,
        "min_steps": A.min_steps,
        "repeats": A.repeats,
        "methods": A.methods,
        "dla_module_landed": DLA_LANDED,
        "tsit5_pid_tol": tol,
        "tsit5_pid_tol_source": "--tsit5-tol" if A.tsit5_tol else "calibrated to RKMK4's error",
        "timing": "AOT-compiled, one warm-up call, then `repeats` rounds round robin over the "
        "methods, each call blocked; seconds = median",
        "jaxrigid": "jax.jit(simulate(integrator, model, state0, dt, steps, save_every=steps, "
        "model_axes=axes)), default integrator settings (DLA: default Newton)",
        "diffrax": "jax.vmap(diffeqsolve, in_axes=(axes, 0)) over members on "
        "RollingBall.vector_field (q as 4 Euclidean components), Tsit5, SaveAt(t1=True), dt0 = "
        "dt; diffrax_Tsit5: ConstantStepSize; diffrax_Tsit5_PID: PIDController(rtol=tol, "
        "atol=tol), default coefficients",
        "ball_steps": "members x steps (diffrax_Tsit5_PID: accepted steps summed over members); "
        "the harness's body_steps keys are the same numbers",
        "errors": "accuracy.methods (members 0..accuracy_members-1 to t = 10) copied into each "
        "size's entries; q_norm_error_end_max is over the whole timed ensemble at t = steps*dt",
    }
    record = {
        "machine": info,
        "case": PROBLEM.record(),
        "config": config,
        "accuracy": acc,
        "throughput": rows,
    }
    print_table(rows, acc)
    record["accuracy_per_cost"] = accuracy_per_cost(rows, acc)
    path = common.write_results(
        A.out, f"rolling_ball_throughput_{common.device_tag(A.dtype, A.quick)}.json", record, t0
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
