"""benchmarks/compare_reports.py's table: bold marks a difference whose CI excludes zero, only that."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("compare_reports", ROOT / "benchmarks" / "compare_reports.py")
assert spec is not None and spec.loader is not None
compare_reports = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_reports)


def test_only_a_difference_whose_ci_excludes_zero_is_bold():
    figures = {
        "above": {"diff": 0.024, "ci": [0.010, 0.040], "questions": 92},
        "below": {"diff": -0.7, "ci": [-1.35, -0.2], "questions": 100},
        "spans": {"diff": 0.027, "ci": [-0.002, 0.057], "questions": 165},
        "touches": {"diff": 0.04, "ci": [0.0, 0.08], "questions": 100},
        "nothing": {"diff": 0.0, "ci": [0.0, 0.0], "questions": 92},
        "median_rounds_to_full": {"diff": 0.0, "a": 7.0, "b": 7.0},
    }
    rows = {
        line.split(" | ")[1]: line.split(" | ")[2] for line in compare_reports.table({"set": figures}).splitlines()[2:]
    }
    assert rows["above"] == "**+0.024** [+0.010, +0.040]"
    assert rows["below"] == "**-0.700** [-1.350, -0.200]"
    assert rows["spans"] == "+0.027 [-0.002, +0.057]"
    assert rows["touches"] == "+0.040 [+0.000, +0.080]"
    assert rows["nothing"] == "+0.000 [+0.000, +0.000]"
    assert rows["median_rounds_to_full"] == "+0.000 (7.00 -> 7.00)"
