"""Which models a method integrates is said one way: every model declares its structure by
subclassing one of `models.structures`; every integrator declares the structures it integrates
in its class fact `structures`, read by the one `integrates` of `integrators/base.py`, and
what it needs beyond them in its one hook `requires`, whose words are its refusal; no
integrator module asks a model for its class."""

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrigid as jr
from jaxrigid.cases import CASES
from jaxrigid.cases.base import sketch
from jaxrigid.integrators import REGISTRY, Composition, compose
from jaxrigid.integrators.base import AbstractIntegrator
from jaxrigid.models import structures
from jaxrigid.models.base import AbstractModel
from jaxrigid.models.rigid_body import AbstractPotential, AxialPowerPotential, HeavyTopPotential
from jaxrigid.simulation import check_integrates

INTEGRATORS = pathlib.Path(jr.__file__).parent / "integrators"
# the names the former ways of saying it had: none may come back
FORMER = {"model_types", "model_requirement", "torque_free_only", "accepted_torques"}


@pytest.mark.parametrize("cls", REGISTRY, ids=lambda c: c.__name__)
def test_every_method_declares_its_structures_in_the_one_fact(cls):
    assert cls.structures and all(s in structures.STRUCTURES for s in cls.structures)
    for klass in cls.__mro__:
        if klass is not AbstractIntegrator:  # the one `integrates` and `refusal`
            assert not {"integrates", "refusal"} & set(vars(klass)), klass
        assert not FORMER & set(vars(klass)), klass


def _model_classes(base):
    found, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("jaxrigid.") and not sub.__name__.startswith("Abstract"):
                found.append(sub)
    return found


def test_every_model_declares_a_structure():
    """Every model class of the library subclasses a structure, except the rolling disk, which
    no method integrates (its case integrates the ball in the disk's configuration)."""
    undeclared = {
        c.__name__
        for c in _model_classes(AbstractModel)
        if not issubclass(c, structures.AbstractStructure)
    }
    assert undeclared == {"RollingDisk"}


def _pairs():
    """(method class, case, the stand-in of the case's first form) for every registered class
    and case: what the command asks (no model is built)."""
    return [(cls, name, case.sketches()[0]) for cls in REGISTRY for name, case in CASES.items()]


def test_integrates_and_the_refusal_agree_for_every_method_and_case():
    """`integrates` is true exactly where `refusal` is `None`, over every (registered method,
    case), with both answers on each side; and `simulate` refuses in the method's words (asked
    once per method and answer: the registry search that names the valid methods is what
    costs)."""
    answers, asked = set(), set()
    for cls, name, model in _pairs():
        method = cls()
        why = method.refusal(model)
        answers.add(why is None)
        assert method.integrates(model) == (why is None), (cls.__name__, name)
        if (cls, why) in asked:
            continue
        asked.add((cls, why))
        if why is None:
            check_integrates(method, model)
        else:
            assert why.startswith("it integrates "), why
            with pytest.raises(jr.IncompatibleModelError) as refused:
                check_integrates(method, model)
            assert f"{method.name} does not integrate a " in str(refused.value)
            assert f"({why}); methods that do: " in str(refused.value)
    assert answers == {True, False}


def test_a_composition_refuses_in_its_first_refusing_members_words():
    """A composition integrates what every member does: on Krysl's Coulomb wall (a potential
    DMV does not take) IMIDM∘DMV-body refuses in DMV-body's words, and DMV-body composed
    with itself does too; on the heavy top both take it."""
    wall = sketch(jr.RigidBody, potential=AxialPowerPotential)
    top = sketch(jr.RigidBody, potential=HeavyTopPotential)
    dmv = jr.DMVBody()
    mixed = Composition((jr.IMIDM(), dmv), (0.5, 0.5), 1)
    assert dmv.refusal(wall) is not None and jr.IMIDM().refusal(wall) is None
    for composition in (mixed, compose(dmv, "triple-jump")):
        assert composition.refusal(wall) == dmv.refusal(wall)
        assert not composition.integrates(wall)
        assert composition.integrates(top) and composition.refusal(top) is None


class _Gravity(AbstractPotential):
    """Uniform gravity that is no `HeavyTopPotential`: DMV asks the fact, not the class."""

    autonomous = True
    uniform_gravity = True
    weighted_com: jax.Array
    up: jax.Array

    def __call__(self, t, R):
        del t
        return jnp.dot(self.up, R @ self.weighted_com)

    def symmetry_axis(self) -> jax.Array:
        return self.up


def test_dmv_takes_any_potential_that_declares_uniform_gravity():
    """DMV's kicks read the potential's `up` and `weighted_com` where it declares
    `uniform_gravity`: a step of a body in `_Gravity` equals, bit for bit, the step in the
    same `HeavyTopPotential` (the same operations on the same numbers), and a potential that
    does not declare it is refused."""
    inertia = jnp.diag(jnp.array([1.0, 2.0, 3.0]))
    com, up = jnp.array([0.1, 0.0, 0.5]), jnp.array([0.0, 0.0, 1.0])
    ours = jr.RigidBody(inertia, _Gravity(com, up))
    theirs = jr.RigidBody(inertia, HeavyTopPotential(com, up))
    state = jr.RigidBodyState(jnp.eye(3), jnp.array([0.3, -0.2, 1.0]))
    dmv = jr.DMVBody()
    assert dmv.integrates(ours)
    a, _, _ = dmv.step(ours, state, None, 0.0, 0.1)
    b, _, _ = dmv.step(theirs, state, None, 0.0, 0.1)
    np.testing.assert_array_equal(a.Pi, b.Pi)
    np.testing.assert_array_equal(a.R, b.R)
    assert {"Pi_dot_Gamma", "Gamma_norm"} <= set(ours.conserved_quantities())
    wall = jr.RigidBody(inertia, AxialPowerPotential(*jnp.array([1.0, -0.001, 1.1])))
    assert not dmv.integrates(wall)
    with pytest.raises(jr.IncompatibleModelError, match="free rigid body and the heavy top"):
        check_integrates(dmv, wall)


def test_a_structure_enforces_its_abstract_members():
    """A model of a structure that lacks a member of its contract cannot be made."""

    class Spinner(structures.AbstractAttitudeQuaternion):
        def state_event_ndims(self):
            return None

        def vector_field(self, t, state):
            return state

    with pytest.raises(TypeError, match="angular_velocity"):
        Spinner()


def _isinstance_of_a_model(tree, module: str):
    """The `isinstance`/`issubclass` calls, and the `getattr` calls on a model, in `tree` that
    ask a model for its class or probe it: a first argument `model…`, or a second naming a
    model or potential class (the one `isinstance(model, self.structures)` of the base is the
    declared structure check)."""
    model_names = {c.__name__ for c in _model_classes(AbstractModel)}
    model_names |= {c.__name__ for c in _model_classes(AbstractPotential)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        first = ast.unparse(node.args[0]) if node.args else ""
        if node.func.id == "getattr" and first.startswith("model"):
            found.append(ast.unparse(node))
        if node.func.id not in ("isinstance", "issubclass") or len(node.args) != 2:
            continue
        second = ast.unparse(node.args[1])
        sanctioned = module == "base.py" and second == "self.structures"
        named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
        named |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
        if not sanctioned and (first.startswith("model") or named & model_names):
            found.append(ast.unparse(node))
    return found


def test_no_integrator_asks_a_model_for_its_class():
    """No integrator module branches on a model's class or probes it with `getattr` (the
    check left: the base's structure check)."""
    found = {
        path.name: hits
        for path in sorted(INTEGRATORS.glob("*.py"))
        if (hits := _isinstance_of_a_model(ast.parse(path.read_text()), path.name))
    }
    assert found == {}
    # the check sees such a call: the branch `MidpointDLA.step` had
    probe = "if isinstance(model, RollingBallUnreduced):\n    pass\n"
    assert _isinstance_of_a_model(ast.parse(probe), "x.py")
    assert _isinstance_of_a_model(ast.parse("getattr(model, 'q', None)"), "x.py")


def test_no_integrator_asks_a_linear_solver_for_its_class():
    """What a linear solver does for a method's stage equations is its own member
    (`stage_preconditioner`, `resolve`), never an `isinstance` on it in an integrator (the
    chain's Gauss once asked whether its solver was the `StageJacobian`)."""
    found = [
        (path.name, ast.unparse(node))
        for path in sorted(INTEGRATORS.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("isinstance", "issubclass")
        and "solver" in ast.unparse(node)
    ]
    assert found == []
