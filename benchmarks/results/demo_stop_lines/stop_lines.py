"""A trial, kept as it ran: the demo with every sampled completion ended after its STOP_LINES-th
line (3 by default), as a stop string would end it, in training and in eval, to see whether the
drop to one clue comes from completions cut at the token limit (docs/performance.md).

    STOP_LINES=3 python benchmarks/results/demo_stop_lines/stop_lines.py --minutes 14 --out <dir>/demo_curve.json

The arguments are benchmarks/demo_curve.py's. Ending a completion after it was sampled gives the
same tokens as stopping there, since each token depends only on those before it.
"""

import dataclasses
import importlib
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import searchgrpo.policy.sampling as sampling  # noqa: E402

STOP_LINES = int(os.environ.get("STOP_LINES", "3"))
CALLERS = (
    "searchgrpo.policy.samplers",
    "searchgrpo.policy.scoring",
    "searchgrpo.train.rollouts",
    "searchgrpo.policy.executor",
)
sample = sampling.generate
newline_ids: dict[int, bool] = {}


def ended_at_line(completion, tokenizer):
    """The completion up to and including its STOP_LINES-th newline token, not marked as cut."""
    seen = 0
    for i, token in enumerate(completion.token_ids):
        if token not in newline_ids:
            newline_ids[token] = "\n" in tokenizer.decode([token])
        seen += newline_ids[token]
        if seen == STOP_LINES:
            ids = completion.token_ids[: i + 1]
            text = tokenizer.decode(ids, skip_special_tokens=True)
            return dataclasses.replace(completion, token_ids=ids, text=text, truncated=False)
    return completion


def generate(model, tokenizer, *args, **kwargs):
    return [[ended_at_line(c, tokenizer) for c in group] for group in sample(model, tokenizer, *args, **kwargs)]


for name in CALLERS:
    importlib.import_module(name).generate = generate
sys.argv = [str(ROOT / "benchmarks" / "demo_curve.py"), *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
