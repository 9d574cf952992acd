"""The documentation site's structure, read from its files (no mkdocs, no jax program): every
public name has its API entry, the nav and docs/ agree, the changelog page includes
CHANGELOG.md, every notebook is a page with its saved figures. The site itself is built in
strict mode by `.ci/run` (`mkdocs build --strict`), which fails on a broken link, a broken
anchor or an entry griffe cannot find."""

import ast
import base64
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"

ENTRY = re.compile(r"^:::\s+(jaxrigid(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*$", re.M)


def public_names() -> list[str]:
    """`jaxrigid.__all__`, read from the source (the build reads it statically too)."""
    tree = ast.parse((ROOT / "jaxrigid" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError("jaxrigid/__init__.py defines no __all__")


def api_entries() -> list[str]:
    """Every `::: jaxrigid.<name>` of docs/api/*.md, in page order."""
    entries = []
    for page in sorted((DOCS / "api").glob("*.md")):
        entries += ENTRY.findall(page.read_text(encoding="utf-8"))
    return entries


def config_block(key: str) -> list[str]:
    """The lines of a top-level key of mkdocs.yml (its value on the key's line and the
    indented lines after it): enough for `nav` and `exclude_docs` without a YAML parser."""
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
    block = [lines[start][len(key) + 1 :]]
    for line in lines[start + 1 :]:
        if line and not line[0].isspace() and not line.startswith("#"):
            break
        block.append(line)
    return block


def nav_pages() -> list[str]:
    pages = []
    for line in config_block("nav"):
        match = re.match(r"\s*-\s*(?:[^:]+:\s*)?([\w./-]+\.(?:md|ipynb))\s*$", line)
        if match:
            pages.append(match.group(1))
    return pages


def excluded(path: str) -> bool:
    """Whether docs/`path` matches one of `exclude_docs`'s patterns (the directory and file
    patterns this config uses: `/dir/` and `/file`)."""
    for pattern in config_block("exclude_docs")[1:]:
        pattern = pattern.strip()
        if not pattern or pattern.startswith("#"):
            continue
        anchored = pattern.lstrip("/")
        if pattern.endswith("/") and ("/" + path).startswith("/" + anchored):
            return True
        if path == anchored:
            return True
    return False


def test_every_public_name_has_its_api_entry():
    entries = {e.removeprefix("jaxrigid.") for e in api_entries()}
    missing = [name for name in public_names() if name not in entries]
    assert not missing, (
        f"names in jaxrigid.__all__ without a `::: jaxrigid.<name>` entry in docs/api/: {missing}"
    )


def test_each_api_entry_appears_once():
    entries = api_entries()
    repeated = sorted({e for e in entries if entries.count(e) > 1})
    assert not repeated, f"API entries documented twice (their anchors would clash): {repeated}"


def test_every_nav_page_exists():
    pages = nav_pages()
    assert "index.md" in pages and "changelog.md" in pages
    missing = [p for p in pages if not (DOCS / p).is_file()]
    assert not missing, f"pages in mkdocs.yml's nav that docs/ lacks: {missing}"


def test_every_page_is_in_the_nav():
    listed = set(nav_pages())
    pages = sorted(
        p.relative_to(DOCS).as_posix() for ext in ("md", "ipynb") for p in DOCS.rglob(f"*.{ext}")
    )
    orphans = [p for p in pages if p not in listed and not excluded(p)]
    assert not orphans, f"pages in docs/ that neither the nav nor exclude_docs lists: {orphans}"


def test_the_changelog_page_includes_the_changelog():
    text = (DOCS / "changelog.md").read_text(encoding="utf-8")
    assert re.search(r'^--8<--\s+"CHANGELOG\.md"\s*$', text, re.M), text
    assert (ROOT / "CHANGELOG.md").is_file()


def test_the_build_is_strict():
    config = CONFIG.read_text(encoding="utf-8")
    assert re.search(r"^strict:\s*true\s*$", config, re.M)
    for check in ("omitted_files", "unrecognized_links", "anchors", "not_found"):
        assert re.search(rf"^\s+{check}:\s*warn\s*$", config, re.M), check


def test_images_are_small():
    large = [
        (p.name, p.stat().st_size)
        for p in (DOCS / "assets").glob("*")
        if p.suffix.lower() in {".png", ".jpg", ".jpeg", ".svg", ".gif"}
        and p.stat().st_size > 300_000
    ]
    assert not large, f"images over 300 kB in docs/assets: {large}"


def notebook_figures(path: Path) -> list[list[int]]:
    """The sizes in bytes of the PNG figures each code cell of a saved notebook shows."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        [
            len(base64.b64decode("".join(out["data"]["image/png"])))
            for out in cell.get("outputs", [])
            if "image/png" in out.get("data", {})
        ]
        for cell in cells
        if cell["cell_type"] == "code"
    ]


def draws(source: str) -> bool:
    """Whether a code cell shows a figure when run: it calls `plt.show()` somewhere and runs
    something at its top level (a cell of definitions only draws nothing)."""
    if "plt.show()" not in source:
        return False
    top = [n for n in ast.parse(source).body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]
    return any(isinstance(node, ast.Call) for stmt in top for node in ast.walk(stmt))


def test_every_notebook_is_a_page():
    """Each notebook of notebooks/ is in the site: docs/notebooks/ links to it (one file, not a
    copy that could go stale) and the nav lists it."""
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    pages = sorted(p.removeprefix("notebooks/") for p in nav_pages() if p.endswith(".ipynb"))
    assert pages == notebooks
    for name in notebooks:
        page = DOCS / "notebooks" / name
        assert page.is_symlink() and page.resolve() == (ROOT / "notebooks" / name).resolve(), name


def test_every_notebook_page_has_its_figures():
    """The site shows the notebooks as saved (mkdocs-jupyter, `execute: false`): every cell that
    draws a figure (`draws`) must be saved with it, and each image small."""
    for page in nav_pages():
        if not page.endswith(".ipynb"):
            continue
        path = DOCS / page
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        figures = notebook_figures(path)
        missing = [s[:60] for s, f in zip(sources, figures) if draws(s) and not f]
        assert not missing, f"{page}: cells saved without their figures: {missing}"
        large = [size for sizes in figures for size in sizes if size > 300_000]
        assert not large, f"{page}: figures over 300 kB: {large}"
