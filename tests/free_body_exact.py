"""Exact body momentum of the free rigid body by Jacobi elliptic functions (numpy + scipy only,
independent of jaxrigid).

Euler's equations `Π̇ = Π × 𝕀⁻¹Π` for a diagonal inertia `(I_1, I_2, I_3)` keep `L² = |Π|²`
and `2H = Σ Π_i²/I_i`. With `m` the axis of the middle moment, `s` the extreme axis whose
component keeps its sign and `c` the other extreme axis,

    Π_c = A_c cn(u),  Π_m = ε_m A_m sn(u),  Π_s = ε_s A_s dn(u | k²),  u = λt + u₀,

where eliminating two components from the invariants gives
`A_c² = (L²/I_s − 2H)/(1/I_s − 1/I_c)`, `A_m² = (L²/I_s − 2H)/(1/I_s − 1/I_m)`,
`A_s² = (2H − L²/I_c)/(1/I_s − 1/I_c)`, `k² = (A_m/A_s)² (1/I_m − 1/I_c)/(1/I_s − 1/I_c)`,
and substituting into `Π̇_m = ε_{mcs} Π_c Π_s (1/I_s − 1/I_c)` gives
`λ = A_c A_s |1/I_s − 1/I_c| / A_m` and the sign `ε_m`. Of the two extreme axes, `s` is the one
for which these are positive with `k² ≤ 1`. Equal moments (`k = 0`: sn, cn, dn = sin, cos, 1)
are covered; the separatrix (`k = 1`) is not.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ellipj, ellipkinc


def _levi_civita(i, j, k):
    return float(np.linalg.det(np.eye(3)[[i, j, k]]))


def free_body_momentum(moments, Pi0, ts):
    """Body momentum `Π(t) (len(ts), 3)` from `Π(0) = Pi0` for the diagonal inertia `moments`."""
    I = np.asarray(moments, float)
    P = np.asarray(Pi0, float)
    ts = np.atleast_1d(np.asarray(ts, float))
    L2, H2 = P @ P, P @ (P / I)
    order = np.argsort(I, kind="stable")
    m = order[1]
    for s, c in ((order[0], order[2]), (order[2], order[0])):
        ds, dc = 1 / I[s] - 1 / I[c], 1 / I[s] - 1 / I[m]
        if ds == 0 or dc == 0:
            continue
        Ac2, Am2 = (L2 / I[s] - H2) / ds, (L2 / I[s] - H2) / dc
        As2 = (H2 - L2 / I[c]) / ds
        if min(Ac2, Am2, As2) <= 0:
            continue
        k2 = Am2 / As2 * (1 / I[m] - 1 / I[c]) / ds
        if 0 <= k2 < 1:
            break
    else:
        raise ValueError("on (or numerically at) a separatrix or a fixed point: not supported")
    Ac, Am, As = np.sqrt([Ac2, Am2, As2])
    eps_s = np.sign(P[s])
    eps_m = _levi_civita(m, c, s) * eps_s * np.sign(ds)
    lam = Ac * As * abs(ds) / Am
    # Initial phase: am(u₀) = atan2(sn, cn).
    phi0 = np.arctan2(np.clip(eps_m * P[m] / Am, -1, 1), np.clip(P[c] / Ac, -1, 1))
    u0 = ellipkinc(phi0, k2)
    sn, cn, dn, _ = ellipj(lam * ts + u0, k2)
    out = np.empty((ts.size, 3))
    out[:, c], out[:, m], out[:, s] = Ac * cn, eps_m * Am * sn, eps_s * As * dn
    return out
