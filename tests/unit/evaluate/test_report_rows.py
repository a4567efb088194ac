"""Eval report rows: a censored median of rounds to full evidence reads '>N', not N + 1."""

import json

from searchgrpo.evaluate.report import aggregate_rows, load_report


def test_a_median_past_the_last_round_reads_as_more_than_the_rounds(tmp_path):
    path = tmp_path / "episodes.json"
    path.write_text(
        json.dumps(
            {
                "format": "searchgrpo-episodes-v1",
                "rounds": 6,
                "questions": 9,
                "policies": [{"name": "baseline"}, {"name": "step-000100"}],
                "aggregate": {
                    "baseline": {"median_rounds_to_full": 7.0, "full_coverage": 0.3},
                    "step-000100": {"median_rounds_to_full": 4.0, "full_coverage": 0.6},
                },
            }
        )
    )
    rows = {row[0]: row[1:] for row in aggregate_rows(load_report(path))}
    assert rows["median rounds to full evidence"] == [">6", "4.000"]
    assert rows["fully covered"] == ["0.300", "0.600"]
