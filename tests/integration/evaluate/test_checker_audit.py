"""The checker audit tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/evaluate/test_checker_audit.py`."""

from __future__ import annotations

import re

from tests.helpers.tiny import SETS, searchgrpo, tiny_config
from tests.unit.evaluate.test_checker_audit import _demo_traces_without_gold


def test_cli_audit_and_its_one_line_errors(tmp_path):
    out = tmp_path / "cli.json"
    proc = searchgrpo("audit-checker", *SETS, "--pairs", "40", "--output", str(out), cwd=tmp_path)
    text, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, text
    # The console wraps long lines at its width: the path (longer under pytest-xdist, in a worker's
    # temporary folder) may start or break on the next line.
    assert "agreement (3 labels)" in text and f"report:{out}" in re.sub(r"\s+", "", text), text
    assert out.is_file() and out.with_suffix(".png").is_file()
    cfg = tiny_config(tmp_path)
    traces, corpus = _demo_traces_without_gold(cfg, tmp_path)
    proc = searchgrpo(
        "audit-checker", *SETS, "--traces", str(traces), "--corpus", str(corpus), "--no-plot", cwd=tmp_path
    )
    text, _ = proc.communicate(timeout=600)
    assert proc.returncode == 2, text
    assert text.count("\n") == 1 and text.startswith("error:") and "gold_docids" in text
