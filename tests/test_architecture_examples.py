"""docs/architecture.md's two worked examples, run as they stand on the page (so the page
cannot drift from the library): a new model integrated by an existing method, and a new
method, then that method added to the registry the way the page's "Registering it" does, and
found by every lookup the registry-driven tests use. Each example asserts its own properties
(conserved quantities, measured order) with its tolerances' reasons written beside them.
Cost in the default suite: a few small programs (the two runs, their value checks, the
gyrostat's invariants), about 8 s of CPU on top of the import; the contract test run on the
new method is in the slow suite."""

import re
import sys
import types
from pathlib import Path

import pytest

import jaxrigid as jr
from jaxrigid import integrators
from jaxrigid.cases import get_case
from jaxrigid.models.hamiltonian import pendulum

PAGE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
BLOCK = re.compile(r"<!-- example: ([\w-]+) -->\n```python\n(.*?)\n```", re.S)


def examples() -> dict[str, tuple[int, str]]:
    """The page's marked code blocks by name: `(line of the block's first line, code)`."""
    text = PAGE.read_text(encoding="utf-8")
    out = {}
    for match in BLOCK.finditer(text):
        out[match.group(1)] = (text.count("\n", 0, match.start(2)) + 1, match.group(2))
    return out


def run_example(name: str, monkeypatch) -> dict:
    """Execute the block `name` as a module of its own (as `python file.py` would; equinox's
    dataclasses look their module up in `sys.modules`) and return its namespace. Line
    numbers in a traceback are the page's."""
    line, code = examples()[name]
    module = types.ModuleType(f"architecture_example_{name.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile("\n" * (line - 1) + code, str(PAGE), "exec"), module.__dict__)
    return module.__dict__


def test_the_page_has_the_two_examples():
    assert set(examples()) == {"new-system", "new-method"}


def test_a_new_system_runs_with_an_existing_method(monkeypatch):
    """The block asserts the invariants' drift; here, that it found the model's methods by
    asking the registry, and that the run it checked is the ensemble it built."""
    ns = run_example("new-system", monkeypatch)
    gyrostat, solution = ns["gyrostat"], ns["solution"]
    assert [type(jr.get_method(n)).__name__ for n in jr.methods_for(gyrostat)] == [
        "RKMK2",
        "RKMK4",
        "RKMK8",
    ]
    assert solution.final_state.q.shape == (8, 4) and solution.ts.shape == (11,)
    assert set(ns["drift"]) == set(gyrostat.conserved_quantities())


def test_a_new_method_is_found_once_registered(monkeypatch):
    """The block asserts the method's order against the exact top. Added to `REGISTRY` (what
    the page's one registry line does), it is found by name and class name, listed for
    rigid bodies, grouped in the rigid-body family, and the contract test's first rigid-body
    case (`CASES_BY_FAMILY` in tests/test_contracts.py) is one it integrates."""
    ns = run_example("new-method", monkeypatch)
    cls = ns["ExplicitLieMidpoint"]
    assert cls not in integrators.REGISTRY
    with pytest.raises(ValueError, match="unknown method 'LieMidpoint'"):
        jr.get_method("LieMidpoint")

    monkeypatch.setattr(integrators, "REGISTRY", integrators.REGISTRY + (cls,))
    assert type(jr.get_method("LieMidpoint")) is cls
    assert type(jr.get_method("explicitliemidpoint")) is cls  # by class name, any case
    assert "LieMidpoint" in jr.methods_for(ns["top"])
    assert "LieMidpoint" not in jr.methods_for(pendulum())  # a HamiltonianSystem
    assert integrators.family_of(cls) == "rigid_body"
    case = get_case("krysl-slow-top")
    model, _ = case.build_for(cls())(case.resolve())
    assert cls().integrates(model)
    # the class facts test_integrator_classes reads: class variables, no Newton when explicit
    assert (cls.name, cls.order, cls.implicit, cls.symmetric) == ("LieMidpoint", 2, False, False)
    assert not hasattr(cls(), "newton")


@pytest.mark.slow
def test_the_contract_test_passes_for_the_new_method(monkeypatch):
    """The registry-driven contract test itself (tests/test_contracts.py), run on the page's
    method as registered: `jit(grad)` with respect to a parameter and `dt` against finite
    differences, `jit` = eager, `vmap` = a loop. Slow: importing that module builds every
    registered method's case (about 13 s of CPU) and the gradient program another 11 s."""
    import test_contracts

    ns = run_example("new-method", monkeypatch)
    cls = ns["ExplicitLieMidpoint"]
    monkeypatch.setattr(integrators, "REGISTRY", integrators.REGISTRY + (cls,))
    monkeypatch.setitem(integrators.METHODS_BY_FAMILY["rigid_body"], cls.name, cls)
    family, name, case_name = (
        "rigid_body",
        cls.name,
        test_contracts.CASES_BY_FAMILY["rigid_body"][0],
    )
    test_contracts.test_traced_parameter_and_dt_gradients_jit_and_vmap(family, name, case_name)
