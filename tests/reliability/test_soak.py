"""The load test's fast version: ~30 steps of the real trainer with checkpoints, evals and the
event log, through the soak harness (`soak_run.py`; the hour-long soak, `benchmarks/soak.py`, runs
it outside CI), sampling this process's memory and file descriptors. No descriptor may leak (during
the run or after it is closed) and resident memory may grow only by a stated bound after warm-up.
A second run talks to an HTTP checker, where a leaked socket or thread per request would show at
once."""

from __future__ import annotations

import dataclasses

from tests.helpers.faults import FaultServer
from tests.helpers.soak_run import soak
from tests.helpers.tiny import TINY_OVERRIDES

RSS_BOUND_MB = 32.0
"""Growth allowed after warm-up over ~25 steps (the hour-long soak's bound is 64 MB)."""


def check(report: dict) -> None:
    assert report["passed"]["fds_no_leak"], report["fds"]
    assert report["passed"]["fds_released"], report["fds"]
    assert report["passed"]["rss_growth"], report["rss_mb"]
    assert not report["threads"]["started_after_warmup_alive_at_end"], report["threads"]


def test_thirty_steps_leak_no_descriptor_and_stay_within_the_memory_bound(tmp_path):
    report = soak(
        [
            *TINY_OVERRIDES,
            f"train.output_dir={tmp_path / 'runs'}",
            "train.save_every=5",
            "train.eval_every=10",
            "train.eval_states=2",
            "train.keep_last=2",
        ],
        steps=30,
        sample_every=5,
        warmup=0.3,
        rss_bound_mb=RSS_BOUND_MB,
    )
    assert report["steps"] == 30 and len(report["samples"]) == 7
    check(report)


def test_an_http_checker_leaks_no_socket_or_thread(tmp_path, monkeypatch):
    import searchgrpo.policy.samplers as samplers

    real_generate = samplers.generate
    monkeypatch.setattr(
        samplers,
        "generate",
        lambda *a, **kw: [
            [dataclasses.replace(c, text="founder company\nuniversity city born") for c in g]
            for g in real_generate(*a, **kw)
        ],
    )
    with FaultServer() as server:
        server.label = "RELEVANT"
        report = soak(
            [
                *TINY_OVERRIDES,
                f"train.output_dir={tmp_path / 'runs'}",
                "checker.backend=llm",
                f"checker.server={server.url}",
                f"checker.cache_path={tmp_path / 'v.sqlite'}",
                "checker.max_retries=2",
                "checker.timeout_s=10",  # a failure fails fast
                "train.save_every=10",
                "grpo.num_generations=2",
                "env.top_k=2",
            ],
            steps=20,
            sample_every=5,
            warmup=0.3,
            rss_bound_mb=RSS_BOUND_MB,
        )
        requests = len(server.chat_requests())
    assert report["steps"] == 20 and requests > 20
    check(report)
