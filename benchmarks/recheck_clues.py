"""Re-run today's clue-copy checks on the clues of an older per-round eval report.

An eval report keeps every clue; a check added later (e.g. `reward.goal_copy`'s) can be applied to
them without re-running the policy, against the states the report was scored on (the traces that
`collect` wrote for its question set):

    python benchmarks/recheck_clues.py REPORT.json --traces ~/.cache/searchgrpo/collected/<set>/traces

prints, per policy, the share of clues that copy the Planner's sub-goal wording and the share that
carry a table row.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgrpo.data.states import load_states
from searchgrpo.env.clue_checks import copies_planner_wording, copies_table_row, state_planner_wording


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("report", type=Path, help="a per-round eval report (searchgrpo-eval-v2)")
    p.add_argument("--traces", type=Path, required=True, help="the traces folder its states came from")
    args = p.parse_args()
    report = json.loads(args.report.read_text())
    states = {s.state_id: s for s in load_states(args.traces, max_samples_per_question=10**6).states}
    totals: dict[str, list[int]] = {}
    missing = 0
    for row in report["per_state"]:
        state = states.get(row["state_id"])
        if state is None:
            missing += 1
            continue
        wording = state_planner_wording(state)
        for policy, result in row["results"].items():
            for sample in result["samples"]:
                t = totals.setdefault(policy, [0, 0, 0])
                t[0] += sum(1 for c in sample["clues"] if copies_planner_wording(c, wording))
                t[1] += sum(1 for c in sample["clues"] if copies_table_row(c))
                t[2] += len(sample["clues"])
    for policy, (goal, table, clues) in totals.items():
        print(
            f"{policy}: copied sub-goal wording {goal}/{clues} = {goal / max(clues, 1):.3f}; "
            f"copied table rows {table}/{clues} = {table / max(clues, 1):.3f}"
        )
    if missing:
        print(f"{missing} states of the report are not in {args.traces} (another collect?)")


if __name__ == "__main__":
    main()
