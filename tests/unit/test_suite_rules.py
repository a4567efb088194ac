"""Rules the suite keeps so that it never flakes, checked on its own source.

- A console test clicks a button through `tests.helpers.console.click_button`, never with a bare
  `pilot.click`: a Textual Button ignores a click during its 0.2 s pressed effect, so a bare
  second click is lost on a fast machine or when the load delays the effect's timer (CI,
  2026-12-06: the eval never started and the test hung until its guard).
"""

from __future__ import annotations

import re

from tests.conftest import TESTS

HELPERS = TESTS / "helpers"
BARE_CLICK = re.compile(r"\bpilot\.click\(")


def test_no_test_clicks_with_a_bare_pilot_click():
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if HELPERS not in path.parents
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BARE_CLICK.search(line)
    ]
    assert not offenders, f"use click_button(pilot, selector) instead of pilot.click: {offenders}"
