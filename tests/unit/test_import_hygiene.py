"""The core never imports the console; the console and the CLI's help do not load torch."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import searchgrpo
from tests.helpers import ROOT

CORE_MODULES = sorted(
    m.name for m in pkgutil.walk_packages(searchgrpo.__path__, "searchgrpo.") if m.name != "searchgrpo.__main__"
)


def _loaded_after(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(out.stdout.split())


def test_every_core_module_is_found():
    assert {"searchgrpo.data.traces", "searchgrpo.train.trainer", "searchgrpo.runs"} <= set(CORE_MODULES)


def test_layers_hold():
    """The import-linter contracts of pyproject.toml: stages import only lower stages, the core
    never the console, the console never torch."""
    out = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_help_does_not_import_torch():
    loaded = _loaded_after("from searchgrpo.cli import app")
    assert "torch" not in loaded and "transformers" not in loaded


def test_only_the_cli_mentions_the_console():
    for path in (ROOT / "searchgrpo").rglob("*.py"):
        text = path.read_text()
        if path.name != "cli.py":
            assert "import tui" not in text and "from tui" not in text, path
            assert "import textual" not in text and "from textual" not in text, path


TUI_MODULES = sorted(
    ".".join(("tui", *p.relative_to(ROOT / "tui").with_suffix("").parts)).removesuffix(".__init__")
    for p in (ROOT / "tui").rglob("*.py")
)
HEAVY = ("torch", "transformers", "peft", "bitsandbytes")


def test_every_tui_module_is_found():
    assert {"tui.app", "tui.launch", "tui.model", "tui.widgets.group_table", "tui.screens.eval_pane"} <= set(
        TUI_MODULES
    )


def test_console_imports_no_torch():
    loaded = _loaded_after("\n".join(f"import {m}" for m in TUI_MODULES))
    assert not [m for m in HEAVY if m in loaded]


def test_console_model_needs_no_textual():
    loaded = _loaded_after("import tui.model, tui.inbox, tui.sources, tui.format, searchgrpo.evaluate.report")
    assert "textual" not in loaded


def test_tests_never_load_benchmarks():
    """Benchmarks are scripts that change with what they measure; a test that loads one breaks
    when they do. Shared harnesses live under tests/ (the soak benchmark calls the tests' harness).
    Any import of, or path into, benchmarks/ counts; the secret scanner, which reads every source
    folder as text, and this test are the exceptions."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name in ("test_security.py", "test_import_hygiene.py"):  # they name the folder to scan for it
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                names = [node.value]
            else:
                continue
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {n}"
                for n in names
                if n == "benchmarks" or n.startswith(("benchmarks.", "benchmarks/"))
            ]
    assert not offenders, offenders
