"""One namespace: every registered method is `jaxrigid.<ClassName>`, and `get_method` finds
each by its canonical or class name without a family."""

import pytest

import jaxrigid as jr
from jaxrigid.cases import get_case
from jaxrigid.integrators import REGISTRY, family_of


def test_every_registered_method_is_a_public_name():
    missing = [c.__name__ for c in REGISTRY if getattr(jr, c.__name__, None) is not c]
    assert not missing
    assert not [c.__name__ for c in REGISTRY if c.__name__ not in jr.__all__]


def test_every_public_name_exists_once():
    assert len(set(jr.__all__)) == len(jr.__all__)
    assert all(hasattr(jr, name) for name in jr.__all__)


@pytest.mark.parametrize("cls", REGISTRY, ids=lambda c: c.__name__)
def test_get_method_finds_each_class_by_its_names(cls):
    """By class name always; by canonical name within its family, and without one the first
    registered class of that name (the names two families share are listed below)."""
    assert type(jr.get_method(cls.__name__)) is cls
    assert type(jr.get_method(cls.__name__.upper())) is cls  # case-insensitive
    assert type(jr.get_method(cls.name, family=family_of(cls))) is cls
    first = next(c for c in REGISTRY if c.name.lower() == cls.name.lower())
    assert type(jr.get_method(cls.name)) is first


def test_a_name_two_families_share_goes_to_the_first_registered():
    shared = {}
    for c in REGISTRY:
        shared.setdefault(c.name.lower(), []).append(c)
    shared = {k: [c.__name__ for c in v] for k, v in shared.items() if len(v) > 1}
    assert shared == {}  # DMV-body/-spatial: one class each for the free and coupled bodies
    assert type(jr.get_method("dmv-body", family="coupled_bodies")) is jr.DMVBody
    assert type(jr.get_method("gauss6")) is jr.Gauss6
    assert type(jr.get_method("gauss6", family="chain")) is jr.Gauss6
    # a family's method is found without the family where its name is its own
    assert type(jr.get_method("RKMK4")) is jr.RKMK4
    assert type(jr.get_method("dla-midpoint")) is jr.MidpointDLA


def test_unknown_names_and_families_are_refused_with_the_nearest():
    with pytest.raises(
        ValueError,
        match=r"^unknown method 'RKMK5'; valid: TRAP, .*"
        r"did you mean 'RKMK2', 'RKMK4' or 'RKMK8'\?$",
    ):
        jr.get_method("RKMK5")
    with pytest.raises(
        ValueError,
        match=r"^unknown method 'gauss6' for rolling_ball cases; "
        r"valid: RKMK2, RKMK4, RKMK8, DLA$",
    ):
        jr.get_method("gauss6", family="rolling_ball")
    with pytest.raises(
        ValueError,
        match=r"^unknown family 'chian'; valid: rigid_body, .*"
        r"did you mean 'chain'\?$",
    ):
        jr.get_method("gauss6", family="chian")


def test_a_method_of_the_wrong_family_names_the_class_that_integrates_the_model():
    case = get_case("chain-tetrahedra-c1c1")
    model, state0 = case.build(case.resolve())
    with pytest.raises(
        jr.IncompatibleModelError,
        match=r"^radau5 does not integrate a QuaternionChain .*methods that do: "
        r"gauss2 \(jaxrigid\.Gauss2\), gauss4 \(jaxrigid\.Gauss4\)",
    ):
        jr.simulate(jr.get_method("radau5"), model, state0, 0.01, 2)
