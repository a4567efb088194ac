"""The suite's one helpers package: what tests of every tier share (conftest.py files hold only
fixtures and hooks).

- `waiting`: wait for a state, never for a time (`wait_until`, `until`, the `CEILING_S` hang guard).
- `tiny`: the tiny config (`TINY_OVERRIDES`, `SETS`, `tiny_config`) and the CLI in a subprocess.
- `faults`: the fault suite's tools (the CLI in a subprocess or in-process, a fault-injecting HTTP
  server, a demo world to damage); `inject`: the CLI with one fault installed (`python -m`);
  `soak_run`: the soak harness (the test and `benchmarks/soak.py`).
- `console`: apps over a scripted backend and waiting for them; `scripted_events` and `scripted`:
  deterministic event streams, and the scripted runner and backend that play them.
- `prompt_reference`: the Executor's prompt as the code wrote it before templates, frozen.
- `cpu_profile`: a pytest plugin recording each test's CPU time (`make test-profile`).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (the `PYTHONPATH` of every subprocess a test starts)."""
