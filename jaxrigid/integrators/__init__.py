"""Integrators: one module per family, and one registry of integrator classes."""

import re

from .._suggest import did_you_mean
from ..models import structures
from . import tableau as tableau
from .base import AbstractImplicitIntegrator as AbstractImplicitIntegrator
from .base import AbstractIntegrator as AbstractIntegrator
from .base import StepInfo as StepInfo
from .classical import CLASSICAL_CLASSES
from .classical import RK4 as RK4
from .classical import Euler as Euler
from .classical import Gauss2 as Gauss2
from .classical import Gauss4 as Gauss4
from .classical import Gauss6 as Gauss6
from .classical import ImplicitEuler as ImplicitEuler
from .classical import ImplicitMidpoint as ImplicitMidpoint
from .classical import RadauIIA5 as RadauIIA5
from .classical import RungeKutta as RungeKutta
from .classical import SunGeng5 as SunGeng5
from .composition import AbstractComposition as AbstractComposition
from .composition import Composition as Composition
from .composition import compose as compose
from .composition import triple_jump as triple_jump
from .dmv import DMV_METHODS as DMV_METHODS
from .dmv import PREPROCESSED_DMV_CLASSES
from .dmv import PREPROCESSED_DMV_METHODS as PREPROCESSED_DMV_METHODS
from .dmv import DMV4Body as DMV4Body
from .dmv import DMV4Spatial as DMV4Spatial
from .dmv import DMV6Body as DMV6Body
from .dmv import DMV6Spatial as DMV6Spatial
from .dmv import DMV8Body as DMV8Body
from .dmv import DMV8Spatial as DMV8Spatial
from .dmv import DMV10Body as DMV10Body
from .dmv import DMV10Spatial as DMV10Spatial
from .dmv import DMVBody as DMVBody
from .dmv import DMVSpatial as DMVSpatial
from .dmv import preprocessed_dmv as preprocessed_dmv
from .energy_momentum import ENERGY_MOMENTUM_METHODS as ENERGY_MOMENTUM_METHODS
from .energy_momentum import EnergyMomentumAVF as EnergyMomentumAVF
from .lie_group import IMID as IMID
from .lie_group import IMIDM as IMIDM
from .lie_group import TRAP as TRAP
from .lie_group import TRAPM as TRAPM
from .lie_group import BackwardEuler as BackwardEuler
from .lie_group import BackwardEulerMomentum as BackwardEulerMomentum
from .lie_group import ForwardEuler as ForwardEuler
from .lie_group import ForwardEulerMomentum as ForwardEulerMomentum
from .nonholonomic_lie import NONHOLONOMIC_LIE_CLASSES
from .nonholonomic_lie import NonholonomicDLA as NonholonomicDLA
from .nonholonomic_midpoint import NONHOLONOMIC_MIDPOINT_CLASSES
from .nonholonomic_midpoint import MidpointDLA as MidpointDLA
from .partitioned import PARTITIONED_CLASSES
from .partitioned import PartitionedRungeKutta as PartitionedRungeKutta
from .partitioned import StormerVerlet as StormerVerlet
from .partitioned import SymplecticEulerA as SymplecticEulerA
from .partitioned import SymplecticEulerB as SymplecticEulerB
from .rattle import RATTLE as RATTLE
from .rattle import RATTLE_METHODS as RATTLE_METHODS
from .reference_methods import AKW as AKW
from .reference_methods import BBTRAP as BBTRAP
from .reference_methods import BBTRAPWD as BBTRAPWD
from .reference_methods import SWC1 as SWC1
from .rkmk import MKRK as MKRK
from .rkmk import MKRK_CLASSES, RKMK_CLASSES
from .rkmk import MKRKRK4 as MKRKRK4
from .rkmk import RKMK2 as RKMK2
from .rkmk import RKMK4 as RKMK4
from .rkmk import RKMK8 as RKMK8
from .rkmk import MKRKGauss4 as MKRKGauss4
from .rkmk import MKRKGauss6 as MKRKGauss6
from .rkmk import MKRKMidpoint as MKRKMidpoint
from .rkmk import MKRKRK4Truncated as MKRKRK4Truncated
from .splitting import LiePoissonSplitting as LiePoissonSplitting
from .tableau import ButcherTableau as ButcherTableau
from .tableau.compositions import SCHEMES
from .tableau.compositions import CompositionScheme as CompositionScheme

COMPOSITION_SCHEMES = SCHEMES
"""The composition schemes by name (`compose(method, name)`; `--method <method>:<name>`)."""

REGISTRY: tuple[type[AbstractIntegrator], ...] = (
    # rigid bodies (Krysl 2007; Dixon's DMV): the free body and torqued ones
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
    *MKRK_CLASSES,
    DMVBody,  # also Dixon §8's two bodies with a ball-and-socket joint
    DMVSpatial,
    *PREPROCESSED_DMV_CLASSES,  # Hairer & Vilmart (2006): preprocessed DMV, orders 4–10
    LiePoissonSplitting,  # McLachlan (1993), Touma & Wisdom (1994): explicit, symmetric
    # canonical Hamiltonian systems (Chaurasia 2012, ch. 2); Gauss2/4/6 also the quaternion
    # chain (§3.3–3.5)
    *CLASSICAL_CLASSES,
    *PARTITIONED_CLASSES,
    EnergyMomentumAVF,  # Gebhardt & Romero: directors, standard & non-twisting
    RATTLE,  # rotation matrices with RᵀR = 1 (Chaurasia §3.2, App. B): a body or a chain
    *RKMK_CLASSES,  # the rolling ball (Putkaradze & Rogers), unit quaternions
    *NONHOLONOMIC_LIE_CLASSES,
    *NONHOLONOMIC_MIDPOINT_CLASSES,  # any LagrangeDAlembertSystem, and the unreduced ball
)
"""Every registered integrator class, each constructible with no arguments. Its canonical
name (the CLI's --method; lookup is case-insensitive) is its class fact `name`, one class's (one
class may integrate several structures: DMV-body the free and the coupled bodies). Which model
each integrates is its own fact (`integrates`), so a model's methods are found by asking
(`methods_for`)."""

FAMILIES: dict[str, tuple[type, ...]] = {
    "rigid_body": (structures.AbstractLiePoissonBody,),
    "hamiltonian": (structures.AbstractCanonicalSystem,),
    "director": (structures.AbstractDirectorBody,),
    "constrained": (structures.AbstractConstrainedBodies,),
    "coupled_bodies": (structures.AbstractCoupledBodies,),
    # one example in two forms (cases/chain.py); RATTLE's structure is the constrained body's
    "chain": (structures.AbstractCanonicalChain, structures.AbstractConstrainedBodies),
    "rolling_ball": (structures.AbstractAttitudeQuaternion, structures.AbstractRollingBall),
    "lagrange_d_alembert_system": (structures.AbstractLagrangeDAlembert,),
}
"""The families of methods, by the model structures they integrate (the CLI's grouping)."""


def families_of(cls: type[AbstractIntegrator]) -> list[str]:
    """The families of an integrator class: those whose structures include one it integrates
    (RATTLE's constrained bodies are the `"constrained"` family's and the `"chain"`'s; Gauss6
    integrates the `"hamiltonian"` family's canonical system and the chain's), in
    `FAMILIES`' order; a structure of no listed family names its own
    (`AbstractGyrostat` → `gyrostat`)."""
    found = [f for f, listed in FAMILIES.items() if set(listed) & set(cls.structures)]
    if found:
        return found
    structure = cls.structures[0]
    return [re.sub(r"(?<!^)(?=[A-Z])", "_", structure.__name__.removeprefix("Abstract")).lower()]


def family_of(cls: type[AbstractIntegrator]) -> str:
    """The first of `families_of(cls)`."""
    return families_of(cls)[0]


METHODS_BY_FAMILY: dict[str, dict[str, type]] = {family: {} for family in FAMILIES}
for _cls in REGISTRY:
    for _family in families_of(_cls):
        METHODS_BY_FAMILY.setdefault(_family, {})[_cls.name] = _cls
"""A view of `REGISTRY`: family → {canonical name → class} (each class is a zero-argument
factory, as the values of this dict have always been), `FAMILIES` first, then the others in
registry order; a family's methods in registry order."""


def family_structures(family: str) -> tuple[type, ...]:
    """The model structures of a family of `METHODS_BY_FAMILY`: `FAMILIES`' entry, or (a
    family named after a structure) the structures its methods name first."""
    if family in FAMILIES:
        return FAMILIES[family]
    classes: list[type[AbstractIntegrator]] = list(METHODS_BY_FAMILY[family].values())
    return tuple(dict.fromkeys(cls.structures[0] for cls in classes))


RIGID_BODY_METHODS = METHODS_BY_FAMILY["rigid_body"]
"""The rigid-body methods by canonical name (a view of `REGISTRY`)."""

HAMILTONIAN_METHODS = METHODS_BY_FAMILY["hamiltonian"]
"""The methods for canonical Hamiltonian systems by canonical name, the names of Chaurasia
(2012) ch. 2 (a view of `REGISTRY`: the classical and partitioned Runge–Kutta methods)."""


def classes_for(model) -> list[type[AbstractIntegrator]]:
    """The registered integrator classes that integrate `model`, in registry order."""
    return [cls for cls in REGISTRY if cls().integrates(model)]


def methods_for(model) -> list[str]:
    """The canonical names of the registered integrators that integrate `model`, in registry
    order."""
    return list(dict.fromkeys(cls.name for cls in classes_for(model)))


def get_method(name: str, family: str | None = None):
    """A fresh integrator by (case-insensitive) canonical name (`"IMIDM"`, `"rkmk4"`,
    `"dmv-body"`) or class name (`"MKRKMidpoint"`, `"Gauss6"`); `ValueError` listing the
    valid names. `<method>:<scheme>` is the method composed by a scheme of
    `COMPOSITION_SCHEMES` (`IMIDM:kahan-li8`; `compose`).

    Without `family` every registered method is searched, in registry order (the first
    registered wins); `family` (`"coupled_bodies"`) searches that family's methods only. (One
    class in two families, `dmv-body`, `gauss6` or `rattle`, is found in either.)"""
    base, sep, scheme = name.partition(":")
    if sep:
        return compose(get_method(base, family), scheme.lower())
    if family is not None and family not in METHODS_BY_FAMILY:
        raise ValueError(
            f"unknown family {family!r}; valid: {', '.join(METHODS_BY_FAMILY)}"
            + did_you_mean(family, METHODS_BY_FAMILY)
        )
    classes = [c for c in REGISTRY if family is None or family in families_of(c)]
    wanted = name.lower()
    for by in (lambda c: c.name, lambda c: c.__name__):
        for cls in classes:
            if by(cls).lower() == wanted:
                return cls()
    names = list(dict.fromkeys(c.name for c in classes))
    where = "" if family is None else f" for {family} cases"
    raise ValueError(
        f"unknown method {name!r}{where}; valid: {', '.join(names)}"
        + did_you_mean(name, names + [c.__name__ for c in classes])
    )
