"""The papers' continuous vector fields, written by hand in plain numpy (float64), for one state.

An independent check of the models' `vector_field`: nothing here comes from jaxrigid; every
formula is taken from the paper (equation cited) or derived below from the paper's physics.
Conventions (DESIGN.md): `R` maps body to spatial vectors, `Ṙ = R Ω̂`, `Π = 𝕀Ω`, `π = RΠ`,
`hat(w) @ a = w × a`.
"""

from __future__ import annotations

import numpy as np

E3 = np.array([0.0, 0.0, 1.0])


def hat(w):
    """`hat(w) @ a = w × a`."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


# --- Krysl (2007) -----------------------------------------------------------------------------


def krysl_rigid_body(R, Pi, inertia, body_torque=None):
    """Krysl (2007) eq. (7): `Π̇ = −skew[𝕀⁻¹Π] Π + T`, `Ṙ = R skew[𝕀⁻¹Π]`.

    `−skew[Ω]Π = −Ω × Π = Π × Ω`. `T (3,)` is the applied torque in the body frame (zero: the
    free body of §5.1). Returns `(Ṙ (3, 3), Π̇ (3,))`."""
    Omega = np.linalg.solve(inertia, Pi)
    T = np.zeros(3) if body_torque is None else body_torque
    return R @ hat(Omega), -hat(Omega) @ Pi + T


def krysl_top_spatial_torque(R, weighted_com=(0.0, 0.0, 20.0), up=E3):
    """Krysl (2007) §5.2–5.3: the spatial torque of the Lagrangian top, printed as
    `t = −20 R(:,3) × [0; 0; 1]`.

    Physics: gravity pulls the centre of mass, at `Rχ` in space, with the force `−m g up`; its
    torque about the support is `t = Rχ × (−m g up) = −(R c) × up` with the weighted centre of
    mass `c = m g χ` (body frame). `c = (0, 0, 20)`, `up = e₃` is the printed formula
    (`R c = 20 R(:,3)`). Returns `t (3,)`."""
    c = np.asarray(weighted_com, dtype=np.float64)
    return -np.cross(R @ c, np.asarray(up, dtype=np.float64))


def krysl_heavy_top(R, Pi, inertia, weighted_com=(0.0, 0.0, 20.0), up=E3):
    """Krysl (2007) eq. (7) with the body torque `T = Rᵀ t` of §5.2–5.3
    (`krysl_top_spatial_torque`). Returns `(Ṙ, Π̇)`."""
    t = krysl_top_spatial_torque(R, weighted_com, up)
    return krysl_rigid_body(R, Pi, inertia, R.T @ t)


def dixon_heavy_top(R, M, inertia, mg_chi0, zhat=E3):
    """Dixon §7 (body representation), the heavy top in the paper's notation: body momentum
    `M`, the vertical seen from the body `Γ = Λᵀ ẑ` (advected), the centre of mass `χ₀` fixed
    in the body, weight `m g`:

        Ṁ = M × Ω + m g Γ × χ₀,     Γ̇ = Γ × Ω,     Λ̇ = Λ Ω̂,     Ω = 𝕀⁻¹M,

    the continuous limit of eq. (46), `M_{k+1} = Ad*_{Ω_k} M_k + m g Γ_k ⋄ χ₀`,
    `Γ_{k+1} = Ω_{k+1} Γ_k`. The torque term is gravity's: the force `−m g ẑ` at `Λχ₀` has the
    spatial torque `Λχ₀ × (−m g ẑ) = m g ẑ × Λχ₀`, in the body `m g (Λᵀẑ) × χ₀ = m g Γ × χ₀`;
    `Γ̇ = d(Λᵀẑ)/dt = −Ω̂ Λᵀẑ = Γ × Ω`. `mg_chi0 = m g χ₀`; `zhat` (any length) scales the
    field. Returns `(Λ̇, Ṁ, Γ̇)`."""
    Omega = np.linalg.solve(inertia, M)
    Gamma = R.T @ np.asarray(zhat, dtype=np.float64)
    Mdot = np.cross(M, Omega) + np.cross(Gamma, np.asarray(mg_chi0, dtype=np.float64))
    return R @ hat(Omega), Mdot, np.cross(Gamma, Omega)


def krysl_coulomb_spatial_torque(R, offset=1.1, coulomb=1.0, wall=0.01):
    """Krysl (2007) §5.4, exactly as printed (with `offset = 1.1`, `coulomb = 1`, `wall = 0.01`):

        [t] = (−(1.1 + R₃₃)⁻² + 0.01 (1.1 + R₃₃)⁻¹¹) [−R₂₃; R₁₃; 0],

    here `t = (−coulomb u⁻² + wall u⁻¹¹)(−R₂₃, R₁₃, 0)`, `u = offset + R₃₃` (`R` zero-based:
    `R[1, 2] = R₂₃`). Returns the spatial torque `t (3,)`."""
    u = offset + R[2, 2]
    return (-coulomb * u**-2 + wall * u**-11) * np.array([-R[1, 2], R[0, 2], 0.0])


def krysl_coulomb_wall(R, Pi, inertia, offset=1.1, coulomb=1.0, wall=0.01):
    """Krysl (2007) eq. (7) with the body torque `T = Rᵀ t` of §5.4
    (`krysl_coulomb_spatial_torque`). Returns `(Ṙ, Π̇)`."""
    t = krysl_coulomb_spatial_torque(R, offset, coulomb, wall)
    return krysl_rigid_body(R, Pi, inertia, R.T @ t)


# --- Dixon §8: two bodies and a ball-and-socket joint ------------------------------------------


def _coupled_kinematics(R1, Lam, inertia, mass, joint):
    """Linear maps of the two bodies' body angular velocities `w = (Ω₁, Ω₂) (6,)`.

    Dixon §8: the centre of mass of the pair rests at the origin; body `i` (mass `m_i`, inertia
    `𝕀_i` about its own centre of mass `x_i`) carries the joint at `d_i` from `x_i` (body `i`'s
    frame), so `x₁ + R₁d₁ = x₂ + R₂d₂` and `m₁x₁ + m₂x₂ = 0`:
    `x₁ = (m₂/m) r`, `x₂ = −(m₁/m) r` with `r = x₁ − x₂ = R₂d₂ − R₁d₁`, `R₂ = R₁Λ`.
    Returns `(R2, V (2, 3, 6))`: `ẋ_i = V_i w` (from `Ṙ_i d_i = R_i(Ω_i × d_i)`)."""
    m1, m2 = mass
    m = m1 + m2
    R2 = R1 @ Lam
    # ṙ = R₂(Ω₂ × d₂) − R₁(Ω₁ × d₁) = R₁ hat(d₁) Ω₁ − R₂ hat(d₂) Ω₂
    rdot = np.hstack([R1 @ hat(joint[0]), -R2 @ hat(joint[1])])
    return R2, np.stack([(m2 / m) * rdot, -(m1 / m) * rdot])


def coupled_kinetic_energy(R1, Lam, Omega, inertia, mass, joint):
    """`T = Σ_i ½ m_i |ẋ_i|² + ½ Ω_iᵀ𝕀_iΩ_i`: the kinetic energy of the two bodies (Dixon eq. 52
    is its discrete form), from the positions of `_coupled_kinematics`."""
    _, V = _coupled_kinematics(R1, Lam, inertia, mass, joint)
    w = np.concatenate(Omega)
    T = sum(0.5 * mass[i] * np.dot(V[i] @ w, V[i] @ w) for i in range(2))
    return T + sum(0.5 * Omega[i] @ inertia[i] @ Omega[i] for i in range(2))


def coupled_momenta_map(R1, Lam, inertia, mass, joint):
    """The 6×6 matrix `K` with `(Π₁, Π₂) = K (Ω₁, Ω₂)`, `Π_i = ∂T/∂Ω_i` (Dixon §8.1, `M_i`).

    `T` is quadratic in `w = (Ω₁, Ω₂)`: `T = Σ_i ½ m_i|V_i w|² + ½ Ω_iᵀ𝕀_iΩ_i`, so
    `∂T/∂w = Σ_i m_i V_iᵀV_i w + diag(𝕀₁, 𝕀₂) w`. (`Π_i = 𝕀_iΩ_i − d_i × R_iᵀp_i`, `p_i = m_iẋ_i`:
    body `i`'s angular momentum about the joint, in its own frame.)"""
    _, V = _coupled_kinematics(R1, Lam, inertia, mass, joint)
    K = sum(mass[i] * V[i].T @ V[i] for i in range(2))
    K[:3, :3] += inertia[0]
    K[3:, 3:] += inertia[1]
    return K


def dixon_coupled_bodies(R1, Lam, Pi, inertia, mass, joint):
    """Dixon §8 (eqs. 52, 59–60 in continuous time): two rigid bodies joined by a ball and
    socket, free in space, in body 1's frame. State: `R₁`, the relative orientation
    `Λ = R₁ᵀR₂` (advected, eq. 60: `Λ̇ = ΛΩ̂₂ − Ω̂₁Λ`), the body momenta `Π_i = ∂T/∂Ω_i (2, 3)`.

    Derived here by Newton–Euler with the joint reaction `F` (spatial; on body 1, `−F` on
    body 2), not from the reduced Lagrangian:

        m₁ẍ₁ = F,   m₂ẍ₂ = −F,
        𝕀₁Ω̇₁ + Ω₁ × 𝕀₁Ω₁ = d₁ × R₁ᵀF,   𝕀₂Ω̇₂ + Ω₂ × 𝕀₂Ω₂ = −d₂ × R₂ᵀF,
        ẍ₁ + R₁(Ω₁ × (Ω₁ × d₁) + Ω̇₁ × d₁) = ẍ₂ + R₂(Ω₂ × (Ω₂ × d₂) + Ω̇₂ × d₂)   (the joint),

    nine linear equations for `(Ω̇₁, Ω̇₂, F)`; then `Π̇_i` by the product rule on
    `Π_i = 𝕀_iΩ_i − d_i × R_iᵀp_i` (`p₁ = m₁ẋ₁`, `ṗ₁ = F`; `p₂ = m₂ẋ₂`, `ṗ₂ = −F`):
    `Π̇_i = 𝕀_iΩ̇_i − d_i × (−Ω_i × R_iᵀp_i + R_iᵀṗ_i)`. Returns `(Ṙ₁, Λ̇, Π̇ (2, 3))`."""
    inertia, mass, joint = (np.asarray(x, dtype=np.float64) for x in (inertia, mass, joint))
    R2, V = _coupled_kinematics(R1, Lam, inertia, mass, joint)
    K = coupled_momenta_map(R1, Lam, inertia, mass, joint)
    w = np.linalg.solve(K, np.concatenate(Pi))
    O1, O2 = w[:3], w[3:]
    d1, d2 = joint
    # unknowns z = (Ω̇₁, Ω̇₂, F)
    A = np.zeros((9, 9))
    rhs = np.zeros(9)
    A[0:3, 0:3] = inertia[0]
    A[0:3, 6:9] = -hat(d1) @ R1.T
    rhs[0:3] = -np.cross(O1, inertia[0] @ O1)
    A[3:6, 3:6] = inertia[1]
    A[3:6, 6:9] = hat(d2) @ R2.T
    rhs[3:6] = -np.cross(O2, inertia[1] @ O2)
    # joint: F/m₁ + R₁(Ω̇₁ × d₁) + F/m₂ − R₂(Ω̇₂ × d₂) = R₂ Ω₂×(Ω₂×d₂) − R₁ Ω₁×(Ω₁×d₁)
    A[6:9, 0:3] = -R1 @ hat(d1)
    A[6:9, 3:6] = R2 @ hat(d2)
    A[6:9, 6:9] = (1 / mass[0] + 1 / mass[1]) * np.eye(3)
    rhs[6:9] = R2 @ np.cross(O2, np.cross(O2, d2)) - R1 @ np.cross(O1, np.cross(O1, d1))
    z = np.linalg.solve(A, rhs)
    dO1, dO2, F = z[0:3], z[3:6], z[6:9]
    p1, p2 = mass[0] * (V[0] @ w), mass[1] * (V[1] @ w)
    Pidot1 = inertia[0] @ dO1 - np.cross(d1, -np.cross(O1, R1.T @ p1) + R1.T @ F)
    Pidot2 = inertia[1] @ dO2 - np.cross(d2, -np.cross(O2, R2.T @ p2) - R2.T @ F)
    return R1 @ hat(O1), Lam @ hat(O2) - hat(O1) @ Lam, np.stack([Pidot1, Pidot2])


def coupled_angular_velocity(R1, Lam, Pi, inertia, mass, joint):
    """`(Ω₁, Ω₂) (2, 3)` from `Π` through `coupled_momenta_map`."""
    K = coupled_momenta_map(R1, Lam, *(np.asarray(x, np.float64) for x in (inertia, mass, joint)))
    return np.linalg.solve(K, np.concatenate(Pi)).reshape(2, 3)


def coupled_spatial_momentum(R1, Lam, Pi):
    """Total angular momentum about the system's centre of mass, `R₁Π₁ + R₂Π₂`
    (Dixon Lemma 8.1.1: conserved)."""
    return R1 @ Pi[0] + R1 @ Lam @ Pi[1]
