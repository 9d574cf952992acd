"""Pure geometry, no dynamics: SO(3), unit quaternions and the unit sphere S²."""

from . import quaternion as quaternion
from . import so3 as so3
from . import sphere as sphere
from .so3 import cayley as cayley
from .so3 import compose_exp as compose_exp
from .so3 import dexp as dexp
from .so3 import dexpinv as dexpinv
from .so3 import exp as exp
from .so3 import expm1 as expm1
from .so3 import hat as hat
from .so3 import log as log
from .so3 import orthogonality_error as orthogonality_error
from .so3 import vee as vee
