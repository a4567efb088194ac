"""Where the in-process judge's time goes (issue 22: on one H200 a judged step took 1.80x the gold step).

    python benchmarks/judge_profile.py --tokenizer tok/ --model-dir /tmp/models        # one H200
    python benchmarks/judge_profile.py --shape qwen3-tiny --set model.device=cpu --set model.dtype=float32  # dry run

Trains `step_table.py --preset h200`'s work (the Qwen3-8B-shaped random model, 4 states x K=8,
1024-token prompts) with `checker.backend=base`, verdict cache off. At the judge's `--at`-th call
that has documents to judge (a step after the warm-up) the same requests, one state at a time, are
scored again in several ways (a random model's clues may find nothing: then, after the last step,
the first four training states each with `--docs` documents of the corpus, seeded), each
`--repeats` times with the device synchronised around it, in the trainer's own process and memory
state:

- `shipped`: `BaseJudge.label_logprobs` as the trainer calls it (prefix once, documents packed);
- `copied-cache`: the same with the prefix's KV copied per row instead of broadcast;
- `additive-mask`: the same with the mask given as a float additive mask instead of a boolean one;
- `plain`: one row per (document, label), the whole prompt, no custom mask;
- `fresh-shapes`: `shipped` on new shapes every time (a few words more in every question and
  title), as in training, where each call's prefix and document widths differ; then the same with
  every attention kernel allowed (`fresh-shapes-any-kernel`: cuDNN's too, which `judge_attention`
  leaves out), then `shipped`'s again;
- `causal-floor`: one causal forward of the same documents' whole prompts with no mask and no
  labels, the least work any scoring of them can do (not a judge: a floor to compare with).

Then `shipped` once more under `torch.profiler`, whose kernel table (by device time) is printed and
written with the timings to --out. Every variant's label log-probabilities are checked against
`shipped`'s (largest absolute difference reported), so a faster variant is also a correct one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.step_table import H200_WORK, LongPrompts  # noqa: E402
from searchgrpo.agents.checker import CheckRequest  # noqa: E402
from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.data.corpus import parse_document  # noqa: E402
from searchgrpo.policy import judge as judge_module  # noqa: E402
from searchgrpo.policy.judge import BaseJudge, encode, judge_prompt_text  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device, repeats: int) -> tuple[float, Any]:
    """Median seconds of `repeats` calls of fn (device synchronised around each) and its last result."""
    seconds, result = [], None
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        result = fn()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def per_state(judge: BaseJudge, groups: list[list[CheckRequest]]) -> torch.Tensor:
    return torch.cat([judge.label_logprobs(g) for g in groups])


def copied_cache(prefix_cache: Any, rows: int) -> Any:
    import copy

    cache = copy.deepcopy(prefix_cache)
    cache.batch_repeat_interleave(rows)
    return cache


def additive(judge: BaseJudge) -> Callable[[torch.Tensor], torch.Tensor]:
    def mask(m: torch.Tensor) -> torch.Tensor:
        dtype = next(judge.view.parameters()).dtype
        return torch.zeros(m.shape, dtype=dtype, device=m.device).masked_fill(~m, torch.finfo(dtype).min)

    return mask


def prompt_ids(judge: BaseJudge, group: list[CheckRequest]) -> list[list[int]]:
    """Each request's whole judge prompt, tokenized as the judge tokenizes it."""
    return [encode(judge.tokenizer, judge_prompt_text(judge.tokenizer, r, judge.max_doc_chars)) for r in group]


def plain(judge: BaseJudge, groups: list[list[CheckRequest]]) -> torch.Tensor:
    return torch.cat([judge._plain(prompt_ids(judge, g)) for g in groups])


@torch.no_grad()
def causal_floor(judge: BaseJudge, groups: list[list[CheckRequest]]) -> None:
    for g in groups:
        fulls = prompt_ids(judge, g)
        for start in range(0, len(fulls), judge.batch_size):
            chunk = fulls[start : start + judge.batch_size]
            width = max(map(len, chunk))
            ids = torch.full((len(chunk), width), judge.pad_id, dtype=torch.long)
            for r, f in enumerate(chunk):
                ids[r, width - len(f) :] = torch.tensor(f)
            judge.view(input_ids=ids.to(judge.device), logits_to_keep=1)


def kernel_table(prof: Any, device: torch.device, rows: int = 30) -> str:
    """The profile's operators and kernels, the costliest first (self time on the device, else the CPU)."""
    key = "self_cpu_time_total" if device.type != "cuda" else "self_device_time_total"
    try:
        return str(prof.key_averages().table(sort_by=key, row_limit=rows))
    except (AttributeError, KeyError, RuntimeError):  # torch before the "device" names
        return str(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=rows))


def experiment(judge: BaseJudge, groups: list[list[CheckRequest]], repeats: int) -> dict[str, Any]:
    device = judge.device
    shapes = [{"documents": len(g), "prompt_tokens": [len(ids) for ids in prompt_ids(judge, g)]} for g in groups]
    out: dict[str, Any] = {"states": len(groups), "documents": sum(map(len, groups)), "shapes": shapes}
    if device.type == "cuda":
        out["memory_before"] = {
            k: v for k, v in torch.cuda.memory_stats(device).items() if "retries" in k or "ooms" in k
        }
        out["reserved_gib"] = torch.cuda.memory_reserved(device) / 2**30
        out["allocated_gib"] = torch.cuda.memory_allocated(device) / 2**30
    seconds, reference = timed(lambda: per_state(judge, groups), device, repeats)
    out["shipped_s"] = seconds
    variants: dict[str, Callable[[], Any]] = {
        "plain": lambda: plain(judge, groups),
        "causal-floor": lambda: causal_floor(judge, groups),
    }
    for name, fn in variants.items():
        seconds, result = timed(fn, device, repeats)
        out[f"{name}_s"] = seconds
        if isinstance(result, torch.Tensor):
            out[f"{name}_max_diff"] = float((result - reference).abs().max())
    original_cache, original_mask = judge_module.batched_cache, judge._mask
    try:
        judge_module.batched_cache = copied_cache
        seconds, result = timed(lambda: per_state(judge, groups), device, repeats)
        out["copied-cache_s"], out["copied-cache_max_diff"] = seconds, float((result - reference).abs().max())
    finally:
        judge_module.batched_cache = original_cache
    try:
        judge._mask = additive(judge)  # type: ignore[method-assign]
        seconds, result = timed(lambda: per_state(judge, groups), device, repeats)
        out["additive-mask_s"], out["additive-mask_max_diff"] = seconds, float((result - reference).abs().max())
    finally:
        judge._mask = original_mask  # type: ignore[method-assign]

    # New shapes on every call, as in training (each state's prefix and documents differ): a few
    # words more in each question and title on each repeat, with and without cuDNN's attention.
    def fresh_shapes(round_: int) -> float:
        seconds = []
        for i in range(repeats):
            n = 1 + i + repeats * round_
            changed = [
                [dataclasses.replace(r, question=r.question + " again" * n, title=r.title + " more" * n) for r in g]
                for g in groups
            ]
            synchronize(device)
            start = time.perf_counter()
            per_state(judge, changed)
            synchronize(device)
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds)

    out["fresh-shapes_s"] = fresh_shapes(0)
    shipped_attention = judge_module.judge_attention
    try:  # every attention kernel allowed (cuDNN's included), as before judge_attention
        judge_module.judge_attention = lambda device: contextlib.nullcontext()  # type: ignore[assignment]
        out["fresh-shapes-any-kernel_s"] = fresh_shapes(1)
    finally:
        judge_module.judge_attention = shipped_attention
    out["fresh-shapes-again_s"] = fresh_shapes(2)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        per_state(judge, groups)
        synchronize(device)
    out["profile"] = kernel_table(prof, device)
    out["profile_by_shape"] = str(
        prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total", row_limit=15)
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--at", type=int, default=3, help="experiment at the judge's n-th check call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--docs", type=int, default=8, help="documents per state when the clues found none")
    parser.add_argument("--steps", type=int, default=2, help="training steps in all")
    parser.add_argument("--model-dir", default=tempfile.gettempdir())
    parser.add_argument("--shape", default="qwen3-8b")
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_profile.json")
    args = parser.parse_args()
    quiet_libraries()
    from benchmarks.random_model import make_random_model
    from searchgrpo.policy.model import resolve_base
    from searchgrpo.train.trainer import Trainer
    from searchgrpo.world import resolve_data_paths

    tokenizer = Path(args.tokenizer) if args.tokenizer else resolve_base(load_config(None, [])).path
    folder = make_random_model(Path(args.model_dir) / args.shape, tokenizer, args.shape)
    report: dict[str, Any] = {"command": "python " + " ".join(sys.argv), "calls": []}
    original = BaseJudge._judge

    def recording(self: BaseJudge, todo: dict[Any, CheckRequest]) -> Any:
        groups: dict[tuple[str, tuple[str, ...]], list[CheckRequest]] = {}
        for request in todo.values():
            groups.setdefault((request.question, request.sub_goals), []).append(request)
        synchronize(self.device)
        start = time.perf_counter()
        result = original(self, todo)
        synchronize(self.device)
        report["calls"].append({"documents": len(todo), "states": len(groups), "s": time.perf_counter() - start})
        print(f"judge call {len(report['calls'])}: {report['calls'][-1]}", flush=True)
        if len([c for c in report["calls"] if c["documents"]]) == args.at and groups:
            report["experiment"] = experiment(self, list(groups.values()), args.repeats)
            shown = {k: v for k, v in report["experiment"].items() if not k.startswith("profile")}
            print(json.dumps(shown, indent=1), flush=True)
            print(report["experiment"]["profile"], flush=True)
        return result

    BaseJudge._judge = recording  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(
            None,
            [
                *H200_WORK,
                f"model.base={folder}",
                f"train.max_steps={args.steps}",
                f"train.output_dir={tmp}/run",
                "checker.backend=base",
                "checker.cache=false",
                *args.overrides,
            ],
        )
        trainer = Trainer(cfg, sink=lambda event: None)
        try:
            trainer.setup()
            prompts = LongPrompts(trainer.policy.tokenizer, list(trainer.dataset.train), cfg)
            trainer.prompts = trainer.runner.prompt_of = prompts  # type: ignore[assignment]
            trainer._loop()
            if "experiment" not in report:  # the clues found nothing to judge: a seeded sample
                _, corpus_path, _ = resolve_data_paths(cfg)
                lines = corpus_path.read_text().splitlines()
                rng = random.Random(0)
                groups = []
                for state in list(trainer.dataset.train)[:4]:
                    docs = [parse_document(json.loads(line)) for line in rng.sample(lines, args.docs)]
                    groups.append(
                        [
                            CheckRequest(state.question_id, state.question, state.sub_goals, d.docid, d.title, d.text)
                            for d in docs
                        ]
                    )
                judge = trainer.env.checker
                assert isinstance(judge, BaseJudge), judge
                report["experiment"] = experiment(judge, groups, args.repeats)
                report["experiment"]["sampled"] = True
                shown = {k: v for k, v in report["experiment"].items() if not k.startswith("profile")}
                print(json.dumps(shown, indent=1), flush=True)
                print(report["experiment"]["profile"], flush=True)
        finally:
            trainer.close()
    report["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
