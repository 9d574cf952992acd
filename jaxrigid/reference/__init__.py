"""Independent references, sharing no code path with the integrators (scipy: the `test` or
`bench` extra):

- `free_body`: the free rigid body's exact solution (Jacobi elliptic functions);
- `lagrange_top`: the Lagrange top's exact solution (elliptic functions; `mpmath` for its
  40-digit check);
- `extended`: the free body's solution in extended precision, from decimal inputs;
- `split_form`: the non-twisting director body by DOP853 on its split form (69)–(71);
- `dop853`: any rigid body's `(R, Π)` by scipy's DOP853 at tight tolerance
  (`rigid_body_reference`, importable from here).
"""

from .dop853 import rigid_body_reference as rigid_body_reference
