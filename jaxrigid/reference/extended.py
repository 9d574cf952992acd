"""Extended-precision reference trajectories for a rigid body in an axial potential (numpy only;
shares no code with the library's integrators or with scipy).

**Problem.** The embedded 12-dimensional ODE of a body with diagonal inertia `moments` in a
potential `V(R) = f(u)`, `u = R₃₃` (`R` maps body to spatial vectors):

    Ṙ = RΩ̂,   Ω = 𝕀⁻¹Π,   Π̇ = Π × Ω + T,   T = f′(u) Γ × e₃,   Γ = Rᵀe₃.

For `R → R exp(εŵ)`, `δu = ε e₃ᵀRŵe₃ = ε Γ·(w × e₃) = ε w·(e₃ × Γ)`, so the body torque
`T = −∂V/∂w = f′(u) Γ × e₃`; for the heavy top `f = c·u` its spatial form `RT = −c R(:,3) × e₃`
is Krysl's. Row `i` of `Ṙ` is `(row i of R) × Ω`, so all four 3-vectors (the rows of `R`, and `Π`)
are crossed with `Ω` at once.

**Method.** Gragg–Bulirsch–Stoer extrapolation (Hairer, Nørsett & Wanner, *Solving ODEs I*,
§II.9; Gragg 1965, Bulirsch & Stoer 1966): over each macro step `H` the modified midpoint rule
with `n_j = 2j` substeps (`j = 1…columns`, Deuflhard's sequence) has an error expansion in even
powers of `H/n_j`; Aitken–Neville extrapolation to `h² → 0` of the `columns` results gives
`T_{kk}`, of order `2·columns`, at `1 + columns²` evaluations per macro step. The `columns`
midpoint sequences run side by side as one batch (`2·columns` vectorised evaluations per macro
step, vectorised also over the ensemble). All arithmetic is in `np.longdouble` (80-bit x87 on
x86-64, eps ≈ 1.08e-19). To keep round-off at the level of the increment, the midpoint values and
the tableau hold `z − y₀`, and the state is accumulated by Kahan's compensated summation. The
extrapolation multiplies the midpoint results' round-off by its Lebesgue constant `Σ|w_j|` (119 for
8 columns, 553 for 10, 2618 for 12), so more columns are not always more accurate.

**Error estimate.** The whole run repeated with one column fewer (same macro steps, order
`2·columns − 2`, cost `(columns − 1)/columns` of a run); the reported difference is, while
truncation dominates, an upper estimate of the returned run's error (the shorter tableau errs by a
factor `~ (C·H)⁻²` more), and when round-off dominates, the size of two independent round-off
realisations' difference. It does not see errors common to both runs (the problem's definition).

**Settings for Krysl's Coulomb wall** (measured on x86-64): `H = 1/8`, 8 columns. Its error
estimate (16 members, R) is 5e-16, 1.2e-14, 4.5e-13 at t = 10², 10³, 10⁴; for 2 members it
agrees with `H = 1/16` to 3e-16, 4e-15, 1.2e-13 there. Larger `H` shows the truncation error
(`H = 1/4`: 8e-13 at t = 10³); more columns raise the round-off (9, 10 columns: ≈ 3e-14 at
t = 10³).

Float64 inputs (initial states, parameters) are converted to longdouble exactly, never re-parsed
from decimals, so the reference solves the very problem the float64 integrators solve.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Real
from typing import NamedTuple

import numpy as np

_LD = np.longdouble
_EPS_LD = float(np.finfo(_LD).eps)
_A, _B = [1, 2, 0], [2, 0, 1]  # (a × b)_i = a[_A] b[_B] − a[_B] b[_A]


class ExtendedReference(NamedTuple):
    """`R (len(ts), M, 3, 3)`, `Pi (len(ts), M, 3)` in longdouble; `error_R`, `error_Pi`
    `(len(ts), M)` float64: the largest entry of `|R − R'|`, `|Π − Π'|` against the run with one
    column fewer (module docstring), or None when not estimated."""

    R: np.ndarray
    Pi: np.ndarray
    error_R: np.ndarray | None
    error_Pi: np.ndarray | None


def _ld(x):
    """Exact longdouble copy of float64 data (longdouble data is kept as it is)."""
    a = np.asarray(x)
    return a.copy() if a.dtype == _LD else np.asarray(a, np.float64).astype(_LD)


def coulomb_wall_dfdu(coulomb, wall, offset) -> Callable:
    """`f′(u)` of Krysl's Coulombic wall `f = coulomb/v + wall/v¹⁰`, `v = offset + u`, from the
    float64 values of the parameters (`f′ = −coulomb/v² − 10·wall/v¹¹`)."""
    c, w10, off = _ld(coulomb), 10 * _ld(wall), _ld(offset)  # 10·wall is exact in longdouble
    if any(np.ndim(x) for x in (c, w10, off)) or not np.isfinite([c, w10, off]).all():
        raise ValueError("coulomb, wall and offset must be finite scalars")

    def dfdu(u):
        iv = 1 / (off + u)
        iv2 = iv * iv
        iv8 = (iv2 * iv2) ** 2
        return -iv2 * (c + w10 * iv8 * iv)

    return dfdu


def _rhs(y, I, dfdu):
    """`ẏ` for `y (4, 3, …)`: rows of `R`, then `Π`."""
    Om = y[3] / I
    dy = y[:, _A] * Om[_B] - y[:, _B] * Om[_A]
    if dfdu is not None:
        g = y[2]  # Γ = Rᵀe₃, the third row of R
        fp = dfdu(g[2])
        dy[3, 0] += fp * g[1]
        dy[3, 1] -= fp * g[0]
    return dy


def _gbs_increment(y, H, ns, inv_c, I, dfdu):
    """`T_kk − y` over one macro step `H` from `y (4, 3, 1, M)` (HNW I, §II.9)."""
    h = (H / ns)[:, None]
    odd = h * _rhs(y, I, dfdu)  # z₁ − y for every sequence; z₀ − y = 0
    even = np.zeros_like(odd)
    first = 0
    for m in range(1, int(ns[-1])):  # z_{m+1} = z_{m−1} + 2h f(z_m)
        while ns[first] <= m:
            first += 1  # sequences done (n_j ≤ m) stay frozen at z_{n_j}, in `even`
        src, dst = (odd, even) if m % 2 else (even, odd)
        a = slice(first, None)
        dst[:, :, a] += 2 * h[a] * _rhs(y + src[:, :, a], I, dfdu)
    # Aitken–Neville in h²: T_{j,l+1} = T_{j,l} + (T_{j,l} − T_{j−1,l})/((n_j/n_{j−l})² − 1)
    T = even
    for l in range(1, len(ns)):
        T[:, :, l:] += (T[:, :, l:] - T[:, :, l - 1 : -1]) * inv_c[l]
    return T[:, :, -1:]


def _run(y, counts, lengths, columns, I, dfdu):
    """States `(len(counts), 4, 3, M)` at the ends of segments `lengths[i]` of `counts[i]` macro
    steps each, from `y (4, 3, 1, M)`."""
    ns = 2 * np.arange(1, columns + 1).astype(_LD)
    inv_c = [None] + [(1 / ((ns[l:] / ns[:-l]) ** 2 - 1))[:, None] for l in range(1, columns)]
    comp, out = np.zeros_like(y), []
    for n, L in zip(counts, lengths):
        for _ in range(n):
            t = _gbs_increment(y, L / n, ns, inv_c, I, dfdu) - comp  # Kahan summation
            s = y + t
            comp = (s - y) - t
            y = s
        out.append(y - comp)
    return np.stack(out)[:, :, :, 0]


def axial_potential_reference(
    moments, dfdu, R0, Pi0, ts, *, macro_step, columns=8, estimate=True
) -> ExtendedReference:
    """`(R(t), Π(t))` at the times `ts` (increasing, ≥ 0, each a whole number of `macro_step`s)
    by GBS extrapolation with `columns` columns (order `2·columns`) in longdouble (module
    docstring). `moments (3,)` (or a diagonal matrix); `dfdu` maps longdouble arrays `u` to
    longdouble `f′(u)`, or is a number (constant `f′`: 0 the free body, `c` the heavy top);
    `R0 (M, 3, 3)`, `Pi0 (M, 3)`, converted exactly. With `estimate`, the run is repeated with
    `columns − 1` columns and the differences are returned (module docstring)."""
    if not _EPS_LD < 1e-18:
        raise ValueError(
            f"np.longdouble on this platform has eps = {_EPS_LD:.3g}, not below 1e-18 "
            "(it is float64 here, e.g. on Windows or Apple silicon): no extended precision"
        )
    I = _ld(moments)
    if I.shape == (3, 3):
        if np.any(I != np.diag(np.diag(I))):
            raise ValueError("the inertia must be diagonal (principal axes)")
        I = np.diag(I).copy()
    if I.shape != (3,) or not np.all(np.isfinite(I)) or not np.all(I > 0):
        raise ValueError(f"moments must be 3 finite positive numbers, got {moments!r}")
    R0, Pi0 = _ld(R0), _ld(Pi0)
    if R0.ndim != 3 or R0.shape[1:] != (3, 3) or Pi0.shape != (R0.shape[0], 3) or not len(R0):
        raise ValueError(f"need R0 (M, 3, 3) and Pi0 (M, 3), got {R0.shape} and {Pi0.shape}")
    if not (np.all(np.isfinite(R0)) and np.all(np.isfinite(Pi0))):
        raise ValueError("R0 and Pi0 must be finite")
    RtR = np.einsum("mki,mkj->mij", R0, R0) - np.eye(3, dtype=_LD)
    if np.max(np.abs(RtR)) > 1e-12 or np.any(np.linalg.det(R0.astype(float)) <= 0):
        raise ValueError("R0 must be rotation matrices (orthonormal to 1e-12, det +1)")
    if isinstance(dfdu, Real) and not isinstance(dfdu, bool):
        const = _ld(dfdu)
        if not np.isfinite(const):
            raise ValueError("a constant dfdu must be finite")
        dfdu = None if const == 0 else (lambda u: const)
    elif not callable(dfdu):
        raise ValueError("dfdu must be a callable u -> f'(u) or a number")
    else:
        probe = np.asarray(dfdu(R0[:, 2, 2]))
        if probe.dtype != _LD or probe.shape not in ((), (len(R0),)):
            raise ValueError(f"dfdu must map longdouble arrays to longdouble, got {probe.dtype}")
    H = float(macro_step)
    ts = np.atleast_1d(np.asarray(ts, np.float64))
    if not np.isfinite(H) or H <= 0:
        raise ValueError(f"macro_step must be positive and finite, got {macro_step!r}")
    if ts.ndim != 1 or not np.all(np.isfinite(ts)) or ts[0] < 0 or np.any(np.diff(ts) <= 0):
        raise ValueError("ts must be a finite, strictly increasing 1-D array of times ≥ 0")
    N = np.rint(ts / H)
    if np.any(np.abs(ts - N * H) > 1e-9 * H):
        raise ValueError(f"every time in ts must be a whole number of macro steps {H}")
    if isinstance(columns, bool) or int(columns) != columns or not 3 <= columns <= 16:
        raise ValueError(f"columns must be an integer in [3, 16], got {columns!r}")
    counts = np.diff(N, prepend=0).astype(int)
    lengths = np.diff(ts.astype(_LD), prepend=_LD(0))
    y0 = np.concatenate([np.transpose(R0, (1, 2, 0)), Pi0.T[None]])[:, :, None, :]
    args = (I[:, None, None], dfdu)
    with np.errstate(over="ignore", invalid="ignore"):
        Y = _run(y0, counts, lengths, int(columns), *args)
    if not np.all(np.isfinite(Y)):
        raise FloatingPointError("the extrapolated solution is not finite: reduce macro_step")
    R, Pi = np.transpose(Y[:, :3], (0, 3, 1, 2)), np.transpose(Y[:, 3], (0, 2, 1))
    if not estimate:
        return ExtendedReference(R, Pi, None, None)
    with np.errstate(all="ignore"):  # a comparison run that diverges estimates an infinite error
        D = np.abs(Y - _run(y0, counts, lengths, int(columns) - 1, *args)).astype(float)
    D[~np.isfinite(D)] = np.inf
    return ExtendedReference(R, Pi, D[:, :3].max(axis=(1, 2)), D[:, 3].max(axis=1))
