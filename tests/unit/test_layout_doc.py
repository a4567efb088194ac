"""docs/layout.md lists every package and module with the start of its docstring, so it can never
drift from the tree: this test regenerates the block and compares. After adding, moving or
re-describing a module, run `python -m tests.unit.test_layout_doc` to rewrite the block."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import ROOT

LAYOUT = ROOT / "docs" / "layout.md"
WIDTH = 76
"""Characters of description per line; the module's docstring says the rest."""
BLOCK = re.compile(r"(# Project layout\n.*?```\n)(.*?)(```)", re.S)


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, cut to WIDTH at a word."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    line = " ".join(doc.split("\n\n")[0].split()).split(". ")[0].rstrip(".")
    return line if len(line) <= WIDTH else line[:WIDTH].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def layout() -> str:
    lines = []
    for package in ("searchgrpo", "tui"):
        root = ROOT / package
        lines.append(f"{package}/")
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            if rel.name == "__main__.py" or rel == Path("__init__.py"):
                continue
            if rel.name == "__init__.py":
                lines.append(f"  {str(rel.parent) + '/':<22} {summary(path)}")
            elif rel.parent == Path("."):
                lines.append(f"  {rel.name:<22} {summary(path)}")
            else:
                lines.append(f"    {rel.name:<20} {summary(path)}")
    return "\n".join(lines) + "\n"


def test_the_layout_page_is_current():
    found = BLOCK.search(LAYOUT.read_text(encoding="utf-8"))
    assert found, "docs/layout.md has no code block under '# Project layout'"
    assert found.group(2) == layout(), "docs/layout.md's layout is stale: run `python -m tests.unit.test_layout_doc`"


def test_every_module_has_a_docstring():
    missing = [
        str(p.relative_to(ROOT))
        for pkg in ("searchgrpo", "tui")
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if p.name != "__main__.py" and not summary(p)
    ]
    assert not missing, f"modules without a docstring: {missing}"


if __name__ == "__main__":
    text = LAYOUT.read_text(encoding="utf-8")
    LAYOUT.write_text(BLOCK.sub(lambda m: m.group(1) + layout() + m.group(3), text, count=1), encoding="utf-8")
    print("rewrote docs/layout.md's project layout")
