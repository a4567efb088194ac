"""The learning-rate schedule: `train.lr_scheduler` after a linear warm-up of `train.warmup_steps`.

Counted in optimiser updates: a step makes `grpo.num_iterations` of them, so the warm-up lasts
`warmup_steps * num_iterations` updates and the schedule `total_steps * num_iterations`. As in
transformers (and so TRL), the warm-up's first update runs at lr 0 and the peak is reached after
the warm-up. `constant` is transformers' `constant_with_warmup`: with `warmup_steps: 0` it is the
plain constant schedule, and with a warm-up it honours it (transformers' `constant` ignores it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from searchgrpo.config import Config

if TYPE_CHECKING:
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LambdaLR

SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}
"""`train.lr_scheduler` to the name of transformers' schedule that implements it."""


def make_scheduler(cfg: Config, optimizer: Optimizer, total_steps: int) -> LambdaLR:
    """The run's schedule on `optimizer`, for a run of `total_steps` steps."""
    from transformers import get_scheduler

    updates = cfg.grpo.num_iterations
    return get_scheduler(
        SCHEDULES[cfg.train.lr_scheduler],
        optimizer,
        num_warmup_steps=cfg.train.warmup_steps * updates,
        num_training_steps=total_steps * updates,
    )
