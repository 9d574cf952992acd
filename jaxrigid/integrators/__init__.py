"""Integrators: one module per family, and a registry by the papers' names."""

from . import tableau as tableau
from .base import AbstractImplicitIntegrator as AbstractImplicitIntegrator
from .base import AbstractIntegrator as AbstractIntegrator
from .base import StepInfo as StepInfo
from .composition import Composition as Composition
from .composition import triple_jump as triple_jump
from .dmv import DMV_METHODS
from .dmv import DMVBody as DMVBody
from .dmv import DMVSpatial as DMVSpatial
from .dmv_coupled import DMV_COUPLED_METHODS
from .dmv_coupled import DMVCoupledBody as DMVCoupledBody
from .dmv_coupled import DMVCoupledSpatial as DMVCoupledSpatial
from .energy_momentum import ENERGY_MOMENTUM_METHODS
from .energy_momentum import EnergyMomentumAVF as EnergyMomentumAVF
from .hamiltonian_methods import HAMILTONIAN_METHODS
from .lie_group import IMID as IMID
from .lie_group import IMIDM as IMIDM
from .lie_group import TRAP as TRAP
from .lie_group import TRAPM as TRAPM
from .lie_group import BackwardEuler as BackwardEuler
from .lie_group import BackwardEulerMomentum as BackwardEulerMomentum
from .lie_group import ForwardEuler as ForwardEuler
from .lie_group import ForwardEulerMomentum as ForwardEulerMomentum
from .munthe_kaas import MKRK as MKRK
from .rattle import RATTLE as RATTLE
from .rattle import RATTLE_METHODS
from .reference_methods import AKW as AKW
from .reference_methods import BBTRAP as BBTRAP
from .reference_methods import BBTRAPWD as BBTRAPWD
from .reference_methods import SWC1 as SWC1
from .tableau import ButcherTableau as ButcherTableau

# The rigid-body methods by canonical name (the CLI's --method; lookup is case-insensitive).
RIGID_BODY_METHODS = {
    cls.name: cls
    for cls in (
        TRAP,
        IMID,
        TRAPM,
        IMIDM,
        SWC1,
        AKW,
        BBTRAP,
        BBTRAPWD,
        ForwardEuler,
        BackwardEuler,
        ForwardEulerMomentum,
        BackwardEulerMomentum,
    )
}
RIGID_BODY_METHODS["MKRK"] = MKRK  # default tableau ½|1 (= IMIDM)
RIGID_BODY_METHODS["MKRK-gauss4"] = lambda: MKRK(tableau=tableau.GAUSS4)
RIGID_BODY_METHODS["MKRK-rk4"] = lambda: MKRK(tableau=tableau.RK4)
RIGID_BODY_METHODS.update(DMV_METHODS)  # torque-free only (they reject a torqued body)

METHODS_BY_FAMILY = {
    "rigid_body": RIGID_BODY_METHODS,
    "hamiltonian": HAMILTONIAN_METHODS,
    "director": ENERGY_MOMENTUM_METHODS,  # Gebhardt & Romero: directors, standard & non-twisting
    "constrained": RATTLE_METHODS,  # rotation matrices with RᵀR = 1 (Chaurasia App. B)
    "coupled_bodies": DMV_COUPLED_METHODS,  # Dixon §8: two bodies, ball-and-socket joint
}


REGISTRY = tuple(
    (name, factory) for methods in METHODS_BY_FAMILY.values() for name, factory in methods.items()
)
"""Every integrator by canonical name, with a zero-argument factory (a name may recur: the
coupled-bodies DMV shares its paper's name with the single-body one). Which model each
integrates is its own class fact (`integrates`), so a model's methods are found by asking."""


def methods_for(model) -> list[str]:
    """The canonical names of the registered integrators that integrate `model`."""
    names = []
    for name, factory in REGISTRY:
        if name not in names and factory().integrates(model):
            names.append(name)
    return names


def get_method(name: str, family: str = "rigid_body"):
    """A fresh integrator by (case-insensitive) name; `ValueError` listing the valid names."""
    methods = METHODS_BY_FAMILY[family]
    for key, factory in methods.items():
        if key.lower() == name.lower():
            return factory()
    raise ValueError(f"unknown method {name!r} for {family} cases; valid: {', '.join(methods)}")
