"""The drift of what each method does *not* claim to keep (issue 33): the contrast behind
`tests/test_order_registry.py`'s bound on the claims it does keep (`KEPT`).

For every pair of the order test (`PAIRS`), one run at its coarsest step `Δt₀` to its `t_end`,
and for each quantity the model's exact flow conserves that is named in the claims'
vocabulary (`K`, `pi1..3`, `RtR_error`, `L`, `height_error`, `quaternion_norm_error`,
`tangency_error`) but not claimed by the method (`preserves`): its deviation from the initial
value, relative to its initial size (at least 1). Prints the smallest 30, smallest first.

    PYTHONPATH=tests python bench/unclaimed_drift.py      # ≈ 1 min
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)

import test_order_registry as T  # noqa: E402
from helpers import integrate  # noqa: E402

VOCABULARY = {"K", "pi1", "pi2", "pi3", "RtR_error", "L", "height_error"}
VOCABULARY |= {"quaternion_norm_error", "tangency_error"}


def main():
    rows = []
    for pair in T.PAIRS:
        cls, case_name = pair.values
        integrator = cls()
        t_end, dt0 = T.PLAN[case_name][T._expected_order(integrator, case_name)]
        model, state0 = T._built(case_name, T._form(case_name, cls))
        n0 = round(t_end / dt0)
        final = integrate(integrator, model, state0, dt0, n0, chunk=n0)
        initial, end = model.invariants(0.0, state0), model.invariants(t_end, final)
        conserved = model.conserved_quantities() or set(initial)
        claimed = {n for c in integrator.preserves for n in T.INVARIANTS_OF.get(c, (c,))}
        for name in sorted((conserved & VOCABULARY) - claimed):
            x0 = float(initial[name])
            rows.append(
                (abs(float(end[name]) - x0) / max(abs(x0), 1.0), cls.__name__, case_name, name)
            )
    for row in sorted(rows)[:30]:
        drift, method, case, name = row
        print(f"{drift:.2e}  {method}  {case}  {name}")


if __name__ == "__main__":
    main()
