"""The methods' coefficients as validated data, defining no integrator: the Butcher tables of
the Runge–Kutta families (`butcher`, and Prince & Dormand's 8th-order table in `dopri8`) and
the symmetric composition schemes (`compositions`). Each table or scheme checks its order
conditions when it is built. The Butcher tables and
`ButcherTableau` are importable from here (`jaxrigid.integrators.tableau.GAUSS4`)."""

from .butcher import EULER as EULER
from .butcher import GAUSS2 as GAUSS2
from .butcher import GAUSS4 as GAUSS4
from .butcher import GAUSS6 as GAUSS6
from .butcher import HEUN as HEUN
from .butcher import IMPLICIT_EULER as IMPLICIT_EULER
from .butcher import IMPLICIT_MIDPOINT as IMPLICIT_MIDPOINT
from .butcher import RADAU_IIA5 as RADAU_IIA5
from .butcher import RK4 as RK4
from .butcher import SUN_GENG5 as SUN_GENG5
from .butcher import TRAPEZOIDAL as TRAPEZOIDAL
from .butcher import ButcherTableau as ButcherTableau
from .butcher import rooted_tree_residual as rooted_tree_residual
from .butcher import tree_conditions as tree_conditions
from .compositions import SCHEMES as SCHEMES
from .compositions import CompositionScheme as CompositionScheme
from .dopri8 import DOPRI8 as DOPRI8
