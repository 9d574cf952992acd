"""Integrators are classes whose facts are class facts: over the registry, `name`, `order`,
`symmetric`, `implicit`, `preserves` (and `symplectic` where stated) are class variables equal
to what an instance reports; tableau methods derive them from their table once, when the class
is made; explicit methods carry no Newton settings; the call forms of the previous release
(`RungeKutta(tableau=...)`, `MKRK(tableau=...)`, `PartitionedRungeKutta()`, `Composition(...)`)
still build the method; the registry is one tuple of classes and the family dicts are views."""

import dataclasses
import inspect

import jax
import pytest

import jaxrigid as jr
from jaxrigid.integrators import (
    FAMILIES,
    METHODS_BY_FAMILY,
    MKRK,
    RATTLE,
    REGISTRY,
    AbstractComposition,
    AbstractImplicitIntegrator,
    Composition,
    PartitionedRungeKutta,
    RungeKutta,
    families_of,
    family_of,
    get_method,
    triple_jump,
)
from jaxrigid.integrators import tableau as tb
from jaxrigid.integrators.base import AbstractTableauIntegrator
from jaxrigid.integrators.classical import (
    AbstractExplicitRungeKutta,
    AbstractImplicitRungeKutta,
    Gauss6,
)
from jaxrigid.integrators.partitioned import STORMER_VERLET, StormerVerlet
from jaxrigid.integrators.rkmk import MKRKRK4, MKRKGauss4, MKRKMidpoint
from jaxrigid.models.structures import AbstractCanonicalSystem

FACTS = ("name", "order", "symmetric", "implicit", "preserves", "compensated_summation")


def _field_names(cls):
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("cls", REGISTRY, ids=lambda c: c.__name__)
def test_facts_are_class_variables_equal_to_the_instances(cls):
    instance = cls()
    facts = FACTS + (("symplectic",) if hasattr(cls, "symplectic") else ())
    for fact in facts:
        # a property on the class (the old per-instance facts) is not a class fact
        static = inspect.getattr_static(cls, fact)
        assert not isinstance(static, property), f"{cls.__name__}.{fact} is a property"
        assert getattr(cls, fact) == getattr(instance, fact)
    assert isinstance(cls.name, str) and isinstance(cls.order, int) and cls.order >= 1


@pytest.mark.parametrize("cls", REGISTRY, ids=lambda c: c.__name__)
def test_only_implicit_methods_carry_newton(cls):
    assert issubclass(cls, AbstractImplicitIntegrator) == cls.implicit
    assert ("newton" in _field_names(cls)) == cls.implicit


TABLEAU_CLASSES = [c for c in REGISTRY if issubclass(c, AbstractTableauIntegrator)]


@pytest.mark.parametrize("cls", TABLEAU_CLASSES, ids=lambda c: c.__name__)
def test_tableau_methods_take_their_facts_from_the_table(cls):
    table = cls.tableau
    assert cls.order == table.order
    assert cls.implicit == (not getattr(table, "explicit", False))
    if hasattr(cls, "symplectic"):  # the Hamiltonian tableau methods, and the chain's Gauss
        assert cls.name == table.name
        assert cls.symplectic == table.symplectic and cls.symmetric == table.symmetric
        if cls.structures[0] is AbstractCanonicalSystem:  # Kepler's L: quadratic
            assert cls.preserves == (frozenset({"L"}) if table.symplectic else frozenset())


def test_explicit_and_implicit_registry_methods_are_both_present():
    # the two previous tests would pass vacuously on a registry of one kind
    kinds = {c.implicit for c in TABLEAU_CLASSES}
    assert kinds == {True, False}


def test_a_table_under_the_wrong_base_is_refused():
    with pytest.raises(TypeError, match="tableau rk4 is explicit"):

        class ImplicitRK4(AbstractImplicitRungeKutta):
            tableau = tb.RK4

    with pytest.raises(TypeError, match="tableau gauss4 is implicit"):

        class ExplicitGauss4(AbstractExplicitRungeKutta):
            tableau = tb.GAUSS4


def test_call_forms_build_the_named_classes():
    assert type(RungeKutta(tableau=tb.GAUSS6)) is Gauss6
    assert type(RungeKutta()) is METHODS_BY_FAMILY["hamiltonian"]["rk4"]  # default RK4
    newton = jr.Newton(max_steps=7)
    assert RungeKutta(tb.GAUSS6, newton).newton is newton
    assert type(MKRK()) is MKRKMidpoint and MKRK().name == "MKRK"
    assert type(MKRK(tableau=tb.GAUSS4)) is MKRKGauss4 and MKRKGauss4.name == "MKRK-gauss4"
    assert type(MKRK(tableau=tb.RK4)) is MKRKRK4 and not MKRKRK4.implicit
    assert type(PartitionedRungeKutta()) is StormerVerlet
    assert type(PartitionedRungeKutta(tableau=STORMER_VERLET)) is StormerVerlet
    # an explicit method has no Newton settings: one given is refused
    with pytest.raises(TypeError, match="rk4 is explicit and takes no newton"):
        RungeKutta(tableau=tb.RK4, newton=newton)
    assert "newton" not in _field_names(type(RungeKutta(tableau=tb.RK4)))


def test_a_users_table_gets_one_class_with_its_facts():
    heun = tb.ButcherTableau("heun", [[0.0, 0.0], [1.0, 0.0]], [0.5, 0.5], [0.0, 1.0], 2)
    first, second = RungeKutta(tableau=heun), RungeKutta(tableau=heun)
    # one class per table: equal pytree structures, so one compiled program for both
    assert type(first) is type(second)
    assert jax.tree_util.tree_structure(first) == jax.tree_util.tree_structure(second)
    assert (first.name, first.order, first.implicit) == ("heun", 2, False)
    assert isinstance(first, AbstractExplicitRungeKutta)
    radau3 = tb.ButcherTableau(
        "radau3", [[5 / 12, -1 / 12], [3 / 4, 1 / 4]], [3 / 4, 1 / 4], [1 / 3, 1.0], 3
    )
    method = RungeKutta(tableau=radau3)
    assert isinstance(method, AbstractImplicitRungeKutta) and type(method).implicit
    assert (type(method).name, type(method).order, type(method).symplectic) == ("radau3", 3, False)
    assert MKRK(tableau=radau3).name == "MKRK-radau3" and type(MKRK(tableau=radau3)).order == 3


def test_a_composition_is_a_class_with_facts_from_its_members():
    tj = triple_jump(jr.IMIDM())
    assert isinstance(tj, AbstractComposition)
    cls = type(tj)
    assert type(triple_jump(jr.IMIDM(newton=jr.Newton(chord=True)))) is cls  # settings differ
    assert (cls.order, cls.implicit, cls.compensated_summation) == (4, True, True)
    assert cls.symmetric  # symmetric members, palindromic fractions
    assert tj.order == 4 and len(cls.fractions) == 3
    lopsided = Composition((jr.IMIDM(), jr.IMIDM()), (0.3, 0.7), stated_order=2)
    assert not type(lopsided).symmetric  # the fractions do not read the same backwards
    euler_pair = Composition(
        (jr.integrators.ForwardEuler(), jr.integrators.BackwardEuler()), (0.5, 0.5), 2
    )
    assert type(euler_pair).implicit and not type(euler_pair).symmetric
    assert not type(euler_pair).compensated_summation  # bE has no compensated summation
    with pytest.raises(ValueError, match="one fraction per integrator"):
        Composition((jr.IMIDM(),), (0.5, 0.5))


def test_family_views_are_the_registry():
    # every class in each of its families (RATTLE in two), in registry order within each
    for cls in REGISTRY:
        assert [f for f, m in METHODS_BY_FAMILY.items() if cls in m.values()] == families_of(cls)
    assert family_of(RATTLE) == "constrained" and families_of(RATTLE) == ["constrained", "chain"]
    assert families_of(Gauss6) == ["hamiltonian", "chain"]
    assert families_of(jr.RadauIIA5) == ["hamiltonian"]  # only the Gauss methods take chains
    assert list(METHODS_BY_FAMILY)[: len(FAMILIES)] == list(FAMILIES)
    for family, methods in METHODS_BY_FAMILY.items():
        order = [REGISTRY.index(cls) for cls in methods.values()]
        assert order == sorted(order)
        for name, cls in methods.items():
            assert cls.name == name and family in families_of(cls)
            if family in FAMILIES:
                assert set(cls.structures) & set(FAMILIES[family])
            assert type(get_method(name.upper(), family)) is cls
