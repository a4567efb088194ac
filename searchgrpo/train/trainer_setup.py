"""Setting a trainer up: check, load and claim, as named steps (`TrainerSetup.setup`).

`TrainerSetup` holds everything a trainer has (declared in its `__init__`, None until set up) and
the steps that make it, in order: the data and the base model's sizes, the state pool, the data's
issues and fingerprint, on --resume the refusals and the lock, the policy and its sampler, the
environment and its checker, the optimiser, the step runner, the claim of the run folder, the
checkpoint to resume from and the record of the start. `trainer.Trainer` runs the steps.

Setup checks everything it can before it writes anything or loads a weight: the data, the model's
sizes (`policy.preflight`), and on `--resume` the run's lock, config and data (`run_history`), so a
bad start leaves no run folder behind. The folder is claimed last (`run_lock`): a fresh run's id is
made unique with an exclusive mkdir, and the folder is locked for as long as the trainer writes it;
`on_claimed(run_dir)` is then called (the event log opens there). A resumed run that has no steps
left is a no-op that says so. The run folder holds the prompt the run trains with
(`prompt_template.jinja`, `prompt.json`: `env.prompt_record`), and each start's history entry its
digest: a resume with another template text is refused without --allow-changes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchgrpo.agents.llm_checker import PROMPT_VERSION, LLMChecker
from searchgrpo.config import Config
from searchgrpo.data.dataset import Dataset
from searchgrpo.data.fingerprint import data_fingerprint
from searchgrpo.env.prompt_template import PromptTemplate, load_template
from searchgrpo.env.search_round import SearchRoundEnv
from searchgrpo.errors import UserError
from searchgrpo.events import EventSink, LogMessage
from searchgrpo.policy.samplers import Sampler
from searchgrpo.policy.sampling import Prompts
from searchgrpo.train.checkpoints import CheckpointInfo, check_base_model, checkpoint_adapter, newest_usable
from searchgrpo.train.control import TrainerControl
from searchgrpo.train.distributed import Dist
from searchgrpo.train.informative_pool import make_pool
from searchgrpo.train.judge_radar import JudgeRadar
from searchgrpo.train.run_history import check_prompt, check_resume
from searchgrpo.train.run_lock import RunLock, claim
from searchgrpo.train.run_start import record_start, remove_leftovers, restore_newest
from searchgrpo.train.schedule import make_scheduler
from searchgrpo.train.state_pool import StatePool
from searchgrpo.train.step_runner import StepRunner
from searchgrpo.world import load_dataset, make_env

if TYPE_CHECKING:
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

    from searchgrpo.policy.model import BaseModel, Policy

MAX_ISSUES_SHOWN = 20


class TrainerSetup:
    """A trainer's state and the steps that set it up (see the module docstring)."""

    def __init__(
        self,
        cfg: Config,
        *,
        sink: EventSink | None,
        control: TrainerControl | None,
        run_dir: Path,
        fresh_id: bool,
        resume: bool,
        dataset: Dataset | None,
        allow_changes: bool,
    ) -> None:
        self.cfg = cfg
        self.dist = Dist(cfg.model.device)
        self.sink: EventSink = sink or (lambda event: None)
        self.control = control or TrainerControl()
        self.resume = resume
        self.allow_changes = allow_changes
        """Resume even though the config or the data changed in ways that alter the optimisation."""
        self.run_dir = run_dir
        self._fresh_id = fresh_id
        """Whether `run_dir`'s name is a fresh timestamp (then made unique as it is claimed)."""
        self.on_claimed: Callable[[Path], None] | None = None
        """Called with the run folder once this trainer holds it (the event log opens there)."""
        self.lock: RunLock | None = None
        self.finished: CheckpointInfo | None = None
        """On resume: the checkpoint of a run that has no steps left (then train() does nothing)."""
        self.dataset = dataset
        self.step = 0
        self.last_saved = -1
        self.last_metrics: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self.last_eval_step: int | None = None
        """The step `last_eval` was measured at."""
        # What setup() makes, in its order (None, or 0, until then).
        self.template: PromptTemplate | None = None
        self.base: BaseModel | None = None
        """The base model's folder (resolved before anything is loaded, for the size checks)."""
        self.pool: StatePool | None = None
        self.steps_per_epoch = 0
        self.total_steps = 0
        self.fingerprint: dict[str, str] = {}
        """The data's digests (`data_fingerprint`), recorded in the run's history."""
        self.changes: list[tuple[str, Any, Any]] = []
        """On resume: every key that changed since the run's last start (key, old, new)."""
        self.policy: Policy | None = None
        self.sampler: Sampler | None = None
        self.prompts: Prompts | None = None
        self.env: SearchRoundEnv | None = None
        self.radar: JudgeRadar | None = None
        self.optimizer: Optimizer | None = None
        self.scheduler: LRScheduler | None = None
        self.runner: StepRunner | None = None
        self._probs_noted = False
        """Whether the checker's verdicts without label probabilities have been reported."""

    # ------------------------------------------------------------------ setup

    def setup(self) -> None:
        """Check, load and claim (see the module docstring): nothing is written before the claim,
        and a resumed run with no steps left stops after the checks (`finished`)."""
        if not self.dist.is_main:
            self.sink = lambda event: None  # rank 0 speaks for the job
        self._setup_data()
        self._setup_pool()
        self._setup_data_notes()
        if self.resume:
            self._setup_resume_checks()  # the refusals first, then the lock: a refused resume writes nothing
            if self.finished is not None:
                return
        self._setup_policy()
        self._setup_env()
        self._setup_optimizer()
        self._setup_runner()
        self._claim()
        if self.dist.is_main:
            remove_leftovers(self.run_dir, self.sink)
        self.dist.barrier()
        if self.resume:
            self._setup_restore()
        if self.dist.is_main:
            self._setup_record()

    def _setup_data(self) -> None:
        """The prompt template, the data and the base model's folder, and whether they fit."""
        from searchgrpo.policy.model import resolve_base
        from searchgrpo.policy.preflight import check_fits_model

        cfg, dist = self.cfg, self.dist
        self.template = load_template(cfg.prompt.template, cfg.prompt.clue_format)  # a bad one: one line, at once
        with dist.main_first():  # rank 0 builds the demo world and converts the model once
            if self.dataset is None:
                self.dataset = load_dataset(cfg)
            self.base = resolve_base(cfg)
        check_fits_model(cfg, self.base)
        per, train = cfg.train.states_per_step, self.dataset.train
        if per < dist.world:
            raise UserError(f"train.states_per_step = {per} is below the {dist.world} processes: each needs a state")
        if len(train) < per:
            raise UserError(f"{len(train)} train states, fewer than train.states_per_step = {per}")

    def _setup_pool(self) -> None:
        """The state pool (`train.state_sampler`) and the run's length in steps."""
        assert self.dataset is not None
        self.pool = make_pool(self.dataset.train, self.cfg)
        self.steps_per_epoch = self.pool.steps_per_epoch
        total = self.steps_per_epoch * self.cfg.train.epochs
        self.total_steps = min(total, self.cfg.train.max_steps) if self.cfg.train.max_steps else total

    def _setup_data_notes(self) -> None:
        """Warn of the data's issues; fingerprint it."""
        assert self.dataset is not None
        for text in self.dataset.issue_summary(MAX_ISSUES_SHOWN):
            self.sink(LogMessage("warning", text))
        self.fingerprint = data_fingerprint(self.dataset)

    def _setup_resume_checks(self) -> None:
        """Refuse a resume whose config, data or prompt changed (without --allow-changes), lock the
        run, and note a run that has no steps left (`finished`)."""
        assert self.template is not None
        allow = self.allow_changes
        self.changes, warnings = check_resume(self.run_dir, self.cfg, self.fingerprint, allow_changes=allow)
        warnings += check_prompt(self.run_dir, self.template.digest, str(self.template.path), allow_changes=allow)
        if self.dist.is_main:
            self._lock(self.run_dir)
        for text in warnings:
            self.sink(LogMessage("warning", text))
        newest = newest_usable(self.run_dir)
        if newest is not None:
            check_base_model(newest, self.cfg.model.base)
        if newest is not None and newest.step >= self.total_steps:
            self.finished = newest

    def _setup_policy(self) -> None:
        """The policy (base + LoRA), where its samples come from (`grpo.sampler`) and its prompts."""
        from searchgrpo.policy.model import load_policy
        from searchgrpo.policy.samplers import make_sampler

        start_from = self.cfg.train.init_adapter
        if start_from is not None and self.resume and newest_usable(self.run_dir) is not None:
            start_from = None  # the run's own checkpoint holds its adapter
        adapter = None
        if start_from is not None:
            from searchgrpo.policy.model_files import adapter_fit, check_adapter_lora

            assert self.base is not None
            adapter = checkpoint_adapter(start_from, self.cfg.model.base, flag="train.init_adapter")
            check_adapter_lora(adapter, self.cfg.lora, f"train.init_adapter {start_from}")
            adapter_fit(adapter, self.base.path)  # its layers and shapes, before any weight loads
            self.sink(LogMessage("info", f"adapter: starting from {adapter} (train.init_adapter)"))
        with self.dist.main_first():
            self.policy = load_policy(self.cfg, adapter=adapter, device=self.dist.device(self.cfg.model.device))
        self.sampler = make_sampler(self.cfg, self.policy)
        self.prompts = Prompts(self.policy.tokenizer, self.cfg, self.template)

    def _setup_env(self) -> None:
        """The search-round environment and its checker (a `base` one judges with the policy's base
        weights), and the judge radar; say which checker judges."""
        assert self.dataset is not None and self.policy is not None
        self.env = make_env(self.cfg, self.dataset, notice=self._notice, policy=self.policy)
        self.radar = JudgeRadar(self.dataset.corpus, self.dataset.labels)
        checker = self.env.checker
        if isinstance(checker, LLMChecker):
            line = (
                f"checker: {checker.model} at {checker.client.base_url} "
                f"({checker.structured_output} output, prompt {PROMPT_VERSION})"
            )
            self.sink(LogMessage("info", line))
        elif self.cfg.checker.backend == "base":
            self.sink(LogMessage("info", f"checker: {checker.describe()} on {self.policy.device}"))

    def _setup_optimizer(self) -> None:
        """AdamW on the adapter's parameters, and the learning-rate schedule."""
        import torch

        assert self.policy is not None
        t = self.cfg.train
        self.optimizer = torch.optim.AdamW(self.policy.trainable_parameters(), lr=t.lr, weight_decay=t.weight_decay)
        self.scheduler = make_scheduler(self.cfg, self.optimizer, self.total_steps)

    def _setup_runner(self) -> None:
        """The step runner: rollouts and updates, one step after another (`train.pipeline`)."""
        assert self.policy is not None and self.env is not None and self.pool is not None
        self.runner = StepRunner(
            self.cfg,
            self.policy,
            self.env,
            self.optimizer,
            self.scheduler,
            self.pool,
            prompt_of=self.prompts,
            dist=self.dist,
            sampler=self.sampler,
            total_steps=self.total_steps,
            radar=self.radar,
        )

    def _setup_restore(self) -> None:
        """On resume: continue from the newest checkpoint that loads (`run_start.restore_newest`)."""
        assert self.policy is not None and self.optimizer is not None and self.scheduler is not None
        assert self.pool is not None and self.runner is not None
        info = restore_newest(
            self.run_dir,
            self.cfg,
            policy=self.policy,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            pool=self.pool,
            runner=self.runner,
            sink=self.sink,
        )
        if info is not None:
            self.step = self.last_saved = info.step
            self.last_eval = info.state.get("last_eval", {})
            self.last_eval_step = info.state.get("last_eval_step")

    def _setup_record(self) -> None:
        """Write config.yaml, the prompt and this start's history entry (`run_start.record_start`)."""
        assert self.template is not None and self.dataset is not None
        record_start(
            self.run_dir,
            self.cfg,
            self.template,
            step=self.step,
            fingerprint=self.fingerprint,
            changes=self.changes,
            allow_changes=self.allow_changes,
            train=self.dataset.train,
        )

    def _lock(self, run_dir: Path) -> None:
        self.run_dir, self.lock = claim(run_dir, fresh_id=self._fresh_id and not self.resume, resume=self.resume)
        if self.lock.notice:
            self.sink(LogMessage("warning", self.lock.notice))

    def _claim(self) -> None:
        """Make the run folder this trainer's (`run_lock.claim`), on rank 0; every rank writes there."""
        if self.dist.is_main and self.lock is None:
            self._lock(self.run_dir)
        if self.dist.enabled:
            self.run_dir = Path(self.dist.gather_json(str(self.run_dir))[0])
        if self.on_claimed is not None:
            self.on_claimed(self.run_dir)

    def _notice(self, text: str) -> None:
        """Pass on a notice of the checker's (a server still loading its model)."""
        self.sink(LogMessage("info", text))
