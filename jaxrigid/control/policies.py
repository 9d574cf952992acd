"""Feedback policies for the rolling ball: maps from what the controller measures at the start
of a control interval to the controls of that interval.

A closed loop (`closed_loop`) runs the horizon as `R` intervals of length `H` (as MPC runs
its re-plans). At the start `tₖ = kH` of interval `k` the policy sees an `Observation`
(the plant's centre `x[:2]`, body angular velocity `Ω`, attitude `q`, the rails' `θₖ`,
`θ̇ₖ`, the target `x*`, the time left `T − tₖ`, the index `k`) and returns the coefficients
of interval `k`'s plan, in the problems' own parametrisation (P1) in local time `s = t − tₖ`:

    θ(s) = θₖ + θ̇ₖ s + Σⱼ φⱼ(s) cⱼ,        c = policy(observation)                    (F1)

(`θₖ`, `θ̇ₖ` the previous plan's at `H`, so the rails stay C¹ across intervals; a clamped
B-spline on `[0, T]` whose knot spacing `Δ` divides `H`). Only the first `p + H/Δ − 2` rows
of `c` have a basis function nonzero on `[0, H)` (`active_rows`), so a policy returns those
rows, `(rows, n)`; the rest are zero.

- `LinearFeedback`: a time-varying linear feedback around a nominal (open-loop) plan,

      cₖ = c̄ₖ + Kₖ (f(observation) − f̄ₖ),   f = (x[:2], Ω, q, θ, θ̇)                  (F2)

  with `c̄ₖ` the open-loop optimum's tail on interval `k` (`mpc.warm_start`, exact when
  `Δ` divides `H`), `f̄ₖ` the features of the nominal run at `tₖ`, and `Kₖ (rows·n, F)`
  the trainable gains; `K = 0` is the open loop exactly.
- `QuadraticFeedback`: (F2) with a second-order term in the same deviation `δ = f − f̄ₖ`,

      cₖ = c̄ₖ + Kₖ δ + Qₖ (δᵢδⱼ)_{i≤j}                                                  (F4)

  (`Qₖ (rows·n, F(F+1)/2)`, zero from `from_linear`: then (F2) exactly). The corrections a
  first-order law gets wrong under large disturbances are second order in `δ`
  (`tuning`: trained per task, it reaches targets (F2) trained the same way misses).
- `MLPPolicy`: `c = s · MLP(normalised (x[:2] − x*, x*, Ω, q, sin θ, cos θ, θ̇, (T − tₖ)/T))`
  (F3), `tanh` hidden layers (smooth, so the closed loop's gradient is), the last layer's
  weights scaled down at initialisation so an untrained policy barely moves the masses.

The nominal arrays and normalisations pass through `stop_gradient`: a policy's gradient is
its trainable parameters' only (gains; the MLP's weights and biases).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = [
    "LinearFeedback",
    "MLPPolicy",
    "Observation",
    "PlantInformedFeedback",
    "QuadraticFeedback",
    "active_rows",
    "n_features",
    "plant_deviation",
]


class Observation(NamedTuple):
    """What a policy sees at the start of interval `k`: `x (2,)` the plant's centre in the
    plane, `Omega (3,)`, `q (4,)`, `theta (n,)`, `theta_dot (n,)` the rails' (the running
    plan's), `target (2,)`, `remaining ()` the time left `T − tₖ`, `interval ()` `k`
    (int32)."""

    x: jax.Array
    Omega: jax.Array
    q: jax.Array
    theta: jax.Array
    theta_dot: jax.Array
    target: jax.Array
    remaining: jax.Array
    interval: jax.Array
    plant: jax.Array | None = None


def plant_deviation(mass_scale, inertia_scale):
    """The plant's parameters as deviations from the model, `(mᵢ/mᵢ⁰ − 1, λⱼ/λⱼ⁰ − 1)`
    ((S1)'s scales less one), `(n + 3,)`: what `PlantInformedFeedback` is told."""
    return jnp.concatenate([mass_scale, inertia_scale]) - 1


def n_features(n_masses: int) -> int:
    """The length of (F2)'s features `(x[:2], Ω, q, θ, θ̇)`: `9 + 2n`."""
    return 9 + 2 * n_masses


def features(obs: Observation):
    """(F2)'s features `(x[:2], Ω, q, θ, θ̇)` concatenated, `(9 + 2n,)`."""
    return jnp.concatenate([obs.x, obs.Omega, obs.q, obs.theta, obs.theta_dot])


def active_rows(plan, interval: float) -> int:
    """The coefficient rows of a clamped B-spline control (P1) whose basis functions are
    nonzero somewhere on `[0, interval)`: `B_{j+2}` starts at `max(0, (j + 2 − p)Δ)`, so rows
    `j < p + h − 2` with `h = interval/Δ` knot intervals (rounded up); at most all `M`."""
    spacing = plan.t_end / plan.n_intervals
    h = math.ceil(interval / spacing - 1e-9)
    return min(plan.n_basis, plan.degree + h - 2)


class LinearFeedback(eqx.Module):
    """(F2): `gains (R, rows·n, F)` trainable; `nominal_coefficients (R, rows, n)` and
    `nominal_features (R, F)` fixed (the open-loop optimum's, `closed_loop.linear_feedback`
    builds them). Called on an `Observation`, returns interval `k`'s `(rows, n)`."""

    gains: jax.Array
    nominal_coefficients: jax.Array
    nominal_features: jax.Array

    @property
    def rows(self) -> int:
        return self.nominal_coefficients.shape[1]

    @property
    def n_masses(self) -> int:
        return self.nominal_coefficients.shape[2]

    @property
    def intervals(self) -> int:
        return self.nominal_coefficients.shape[0]

    @classmethod
    def zeros(cls, nominal_coefficients, nominal_features) -> LinearFeedback:
        """Zero gains: the nominal (open-loop) plan on every interval."""
        R, rows, n = nominal_coefficients.shape
        F = nominal_features.shape[-1]
        gains = jnp.zeros((R, rows * n, F), nominal_coefficients.dtype)
        return cls(gains, nominal_coefficients, nominal_features)

    def sizes(self) -> dict:
        """What rebuilds this policy's structure (`skeleton`), for a policy file's header."""
        R, rows, n = self.nominal_coefficients.shape
        return {"intervals": R, "rows": rows, "n_masses": n, "features": self.gains.shape[-1]}

    @classmethod
    def skeleton(cls, sizes: dict, dtype) -> LinearFeedback:
        """A policy of the structure `sizes` describes (zeros), for reading a file into."""
        R, rows, n, F = sizes["intervals"], sizes["rows"], sizes["n_masses"], sizes["features"]
        return cls.zeros(jnp.zeros((R, rows, n), dtype), jnp.zeros((R, F), dtype))

    def __call__(self, obs: Observation):
        k = obs.interval
        c_bar = jax.lax.stop_gradient(self.nominal_coefficients)[k]
        f_bar = jax.lax.stop_gradient(self.nominal_features)[k]
        dc = self.gains[k] @ (features(obs) - f_bar)
        return c_bar + dc.reshape(c_bar.shape)


class QuadraticFeedback(eqx.Module):
    """(F4): `gains (R, rows·n, F)` and `quad (R, rows·n, F(F+1)/2)` trainable; the nominal
    arrays fixed, as `LinearFeedback`'s."""

    gains: jax.Array
    quad: jax.Array
    nominal_coefficients: jax.Array
    nominal_features: jax.Array

    @classmethod
    def from_linear(cls, policy: LinearFeedback) -> QuadraticFeedback:
        """`policy` with a zero second-order term (the same law). Batched (`PerTask`) members
        keep their leading axis."""
        F = policy.nominal_features.shape[-1]
        shape = policy.gains.shape[:-1] + (F * (F + 1) // 2,)
        quad = jnp.zeros(shape, policy.gains.dtype)
        return cls(policy.gains, quad, policy.nominal_coefficients, policy.nominal_features)

    def sizes(self) -> dict:
        """What rebuilds this policy's structure (`skeleton`): `LinearFeedback`'s."""
        return LinearFeedback(self.gains, self.nominal_coefficients, self.nominal_features).sizes()

    @classmethod
    def skeleton(cls, sizes: dict, dtype) -> QuadraticFeedback:
        """A policy of the structure `sizes` describes (zeros), for reading a file into."""
        return cls.from_linear(LinearFeedback.skeleton(sizes, dtype))

    def __call__(self, obs: Observation):
        k = obs.interval
        c_bar = jax.lax.stop_gradient(self.nominal_coefficients)[k]
        d = features(obs) - jax.lax.stop_gradient(self.nominal_features)[k]
        i, j = jnp.triu_indices(d.shape[0])
        dc = self.gains[k] @ d + self.quad[k] @ (d[i] * d[j])
        return c_bar + dc.reshape(c_bar.shape)


class PlantInformedFeedback(eqx.Module):
    """(F5): a (F2)/(F4) law `base` plus a term linear in the plant's deviation from the
    model `δϑ = obs.plant` (`plant_deviation`), from interval `identify_at` on,

        cₖ = base(observation) + [k ≥ k_id] Lₖ δϑ,                                          (F5)

    `plant_gains (R, rows·n, n + 3)` trainable (zero: the base law exactly). Before `k_id`
    the law sees none of `δϑ`. Where it comes from is `source` (static):

    - `"fitted"` (the law as deployed): the closed loop fits (I1) at the start of interval
      `k_id` to the intervals it measured (`identification.identified_deviation`, the
      identifying re-planner's fit) and tells the law its masses' and moments' scales;
    - `"told"` (training, `tuning.tune_feedback`): the scenario's own, which the trainer drew.
      From exact measurements (I1) recovers them to 1e-9 (`tests/test_control_hindsight.py`),
      so a law trained told runs the same fitted; the fit (8 Levenberg–Marquardt steps on
      `jacfwd` through `k_id` intervals) would cost training far more than the rollout."""

    base: LinearFeedback | QuadraticFeedback
    plant_gains: jax.Array
    identify_at: int = eqx.field(static=True)
    source: str = eqx.field(default="fitted", static=True)

    def __check_init__(self):
        # any other word would fall through to the told (oracle) form: refuse it
        if self.source not in ("fitted", "told"):
            raise ValueError(f"source must be 'fitted' or 'told', got {self.source!r}")

    @classmethod
    def from_base(cls, base, identify_at: int = 3) -> PlantInformedFeedback:
        """`base` with zero plant gains (the same law); batched members keep their axis."""
        if not 1 <= identify_at < base.nominal_coefficients.shape[-3]:
            raise ValueError(
                f"identify_at must be in [1, {base.nominal_coefficients.shape[-3] - 1}] (an "
                f"interval after the first, before the end), got {identify_at!r}"
            )
        n = base.nominal_coefficients.shape[-1]
        shape = base.gains.shape[:-1] + (n + 3,)
        return cls(base, jnp.zeros(shape, base.gains.dtype), identify_at)

    def sizes(self) -> dict:
        """What rebuilds this policy's structure (`skeleton`): the base's kind and sizes, and
        `identify_at` (a file holds the deployed, fitted, form)."""
        kind = type(self.base).__name__
        return {"base": kind, **self.base.sizes(), "identify_at": self.identify_at}

    @classmethod
    def skeleton(cls, sizes: dict, dtype) -> PlantInformedFeedback:
        """A policy of the structure `sizes` describes (zeros), for reading a file into."""
        kind = sizes["base"]
        if kind not in ("LinearFeedback", "QuadraticFeedback"):
            raise ValueError(f"unknown base {kind!r} (LinearFeedback or QuadraticFeedback)")
        linear = LinearFeedback.skeleton(sizes, dtype)
        base = linear if kind == "LinearFeedback" else QuadraticFeedback.from_linear(linear)
        return cls.from_base(base, sizes["identify_at"])

    def __call__(self, obs: Observation):
        k = obs.interval
        c = self.base(obs)
        if obs.plant is None:
            raise ValueError("PlantInformedFeedback needs the observation's plant deviation")
        told = jnp.where(k >= self.identify_at, obs.plant, jnp.zeros_like(obs.plant))
        return c + (self.plant_gains[k] @ told).reshape(c.shape)


class MLPPolicy(eqx.Module):
    """(F3): `mlp` an `eqx.nn.MLP` (`tanh`) from `2·2 + 7 + 3n + 1` normalised inputs to
    `rows·n` outputs, scaled by `output_scale`; static `rows`, `n_masses`, `horizon` (`T`, the
    time normalisation), `radius` (the position normalisation), `width`, `depth`."""

    mlp: eqx.nn.MLP
    rows: int = eqx.field(static=True)
    n_masses: int = eqx.field(static=True)
    horizon: float = eqx.field(static=True)
    radius: float = eqx.field(static=True)
    output_scale: float = eqx.field(static=True)
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)

    def __init__(
        self,
        rows: int,
        n_masses: int,
        horizon: float,
        radius: float,
        *,
        key,
        width: int = 64,
        depth: int = 2,
        output_scale: float = 1.0,
        last_layer_scale: float = 1e-2,
        dtype=None,
    ):
        self.rows, self.n_masses, self.width, self.depth = rows, n_masses, width, depth
        self.horizon, self.radius, self.output_scale = horizon, radius, output_scale
        mlp = eqx.nn.MLP(
            self.in_size(n_masses),
            rows * n_masses,
            width,
            depth,
            activation=jnp.tanh,
            dtype=jnp.result_type(float) if dtype is None else dtype,
            key=key,
        )
        # an untrained policy is gentle: its output is `last_layer_scale` of a default init's
        last = mlp.layers[-1]
        assert last.bias is not None  # use_final_bias=True
        mlp = eqx.tree_at(
            lambda m: (m.layers[-1].weight, m.layers[-1].bias),
            mlp,
            (last.weight * last_layer_scale, jnp.zeros_like(last.bias)),
        )
        self.mlp = mlp

    def sizes(self) -> dict:
        """What rebuilds this policy's structure (`skeleton`), for a policy file's header."""
        names = ("rows", "n_masses", "horizon", "radius", "width", "depth", "output_scale")
        return {name: getattr(self, name) for name in names}

    @classmethod
    def skeleton(cls, sizes: dict, dtype) -> MLPPolicy:
        """A policy of the structure `sizes` describes (any weights), for reading a file into."""
        s = sizes
        return cls(
            s["rows"], s["n_masses"], s["horizon"], s["radius"], key=jax.random.key(0),
            width=s["width"], depth=s["depth"], output_scale=s["output_scale"], dtype=dtype,
        )  # fmt: skip

    @staticmethod
    def in_size(n_masses: int) -> int:
        """`(x − x*)/r (2), x*/r (2), Ω (3), q (4), sin θ, cos θ, θ̇/ω₀ (3n), (T − t)/T (1)`."""
        return 12 + 3 * n_masses

    def inputs(self, obs: Observation):
        """(F3)'s normalised inputs: positions over `radius`, rail speeds over `2π/T` (a mass
        going round its rail once over the horizon), the time left over `T`."""
        r = self.radius
        omega0 = 2 * math.pi / self.horizon
        return jnp.concatenate(
            [
                (obs.x - obs.target) / r,
                obs.target / r,
                obs.Omega,
                obs.q,
                jnp.sin(obs.theta),
                jnp.cos(obs.theta),
                obs.theta_dot / omega0,
                jnp.reshape(obs.remaining / self.horizon, (1,)),
            ]
        )

    def __call__(self, obs: Observation):
        out = self.mlp(self.inputs(obs).astype(self.mlp.layers[0].weight.dtype))
        return self.output_scale * out.reshape(self.rows, self.n_masses)
