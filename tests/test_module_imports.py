"""The library does not depend on the command (issue 33): no module of `jaxrigid` outside
`jaxrigid/cli/` imports from `jaxrigid.cli`."""

from __future__ import annotations

import ast
from pathlib import Path

import jaxrigid

PACKAGE = Path(jaxrigid.__file__).parent
# `python -m jaxrigid` is the command's entry point, not a library module
ENTRY_POINTS = {"__main__.py"}


def _imported(path: Path) -> list[tuple[int, str]]:
    """`(line, module)` of every import in `path`, relative ones resolved to absolute
    names (`from ..cli import x` in `jaxrigid/sweep/program.py` is `jaxrigid.cli`)."""
    package = ("jaxrigid", *path.relative_to(PACKAGE).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)] if node.level else ()
            module = ".".join((*base, *([node.module] if node.module else [])))
            # `from .. import cli` names the package in an alias
            names = [f"{module}.{alias.name}" for alias in node.names]
            found += [(node.lineno, name) for name in ([module] if module else []) + names]
    return found


def _from_cli(module: str) -> bool:
    return module == "jaxrigid.cli" or module.startswith("jaxrigid.cli.")


def _cli_imports(path: Path) -> dict[int, str]:
    """The first module of `jaxrigid.cli` that each line of `path` imports, by line."""
    found: dict[int, str] = {}
    for line, module in _imported(path):
        if _from_cli(module):
            found.setdefault(line, module)
    return found


def test_the_scan_sees_relative_imports():
    """The scan resolves the command's own relative imports (it would miss none elsewhere)."""
    imported = {m for _, m in _imported(PACKAGE / "cli" / "run.py")}
    assert {"jaxrigid.cli.errors", "jaxrigid.runs", "jaxrigid.cli.output"} <= imported
    assert "jaxrigid.cli.errors" in {m for _, m in _imported(PACKAGE / "cli" / "__init__.py")}


def test_no_library_module_imports_from_the_command():
    offending = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "cli"
        and str(path.relative_to(PACKAGE)) not in ENTRY_POINTS
        for line, module in _cli_imports(path).items()
    ]
    assert not offending, "library modules import the command: " + "; ".join(offending)
