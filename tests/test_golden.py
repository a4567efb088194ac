"""Golden numbers: three GRPO steps of the tiny model with fixed seeds reproduce recorded figures.

Every run of the suite checks that the maths and the data order did not change by accident. When a
change alters them on purpose (a new reward term, another sampling order), re-record the numbers
with the command below and say why in the commit:

    python -c "from tests.test_golden import record; record()"
"""

from __future__ import annotations

import json

import pytest

from searchgrpo.events import StepFinished
from searchgrpo.train.trainer import Trainer
from tests.conftest import tiny_config

KEYS = ("loss/total", "grad/norm", "reward/mean", "loss/kl")
GOLDEN = [
    {"loss/total": 1.9868215517249155e-08, "grad/norm": 0.3073073923587799, "reward/mean": -1.0133333333333334,
     "loss/kl": 0.0},
    {"loss/total": 0.0008141398429870605, "grad/norm": 0.28382426500320435, "reward/mean": -0.9183333333333334,
     "loss/kl": 0.020352572202682495},
    {"loss/total": 0.0019820332527160645, "grad/norm": 0.2863369882106781, "reward/mean": -1.0216666666666667,
     "loss/kl": 0.049552205536100596},
]


def three_steps(tmp_path) -> list[dict[str, float]]:
    events: list = []
    Trainer(tiny_config(tmp_path, "train.max_steps=3", "grpo.beta=0.04"), sink=events.append).train()
    return [{k: e.metrics[k] for k in KEYS} for e in events if isinstance(e, StepFinished)]


def test_three_steps_reproduce_the_recorded_numbers(tmp_path):
    got = three_steps(tmp_path)
    assert len(got) == len(GOLDEN)
    for step, (seen, want) in enumerate(zip(got, GOLDEN), 1):
        for key in KEYS:
            assert seen[key] == pytest.approx(want[key], rel=1e-4, abs=1e-7), (step, key, seen[key], want[key])


def record() -> None:
    """Print the numbers to paste into GOLDEN."""
    import tempfile
    from pathlib import Path

    for row in three_steps(Path(tempfile.mkdtemp())):
        print(json.dumps(row))
