"""llama.cpp's busy-wait (`poll`) for the embedded checker server, on a quiet machine and beside
CPU-bound neighbours.

    python benchmarks/server_poll.py [--docs 24] [--repeats 3] [--neighbours 2]

Labels the same demo-world documents with the LLM checker (no verdict cache, greedy, 2 slots) on
the embedded SmolLM2 server started with `poll` 50 (llama.cpp's default) and 0 (ours,
`searchgrpo.agents.server.SERVER_POLL`), alternating, first with nothing else running, then beside
`--neighbours` processes that spin on the CPU (a trainer or other jobs on a shared box). Reports,
per condition, the median wall and CPU seconds of this process (the server runs inside it) and the
ratio poll 0 / poll 50 measured in the same run. Writes benchmarks/results/server_poll.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchgrpo.agents.chat_client import ChatClient  # noqa: E402
from searchgrpo.agents.checker import CheckRequest  # noqa: E402
from searchgrpo.agents.llm_checker import LLMChecker  # noqa: E402
from searchgrpo.agents.server import EmbeddedServer  # noqa: E402
from searchgrpo.data.demo_world import generate_world  # noqa: E402
from searchgrpo.embedded import EMBEDDED_NAME, embedded_gguf_path  # noqa: E402

POLLS = (50, 0)


def spin() -> None:
    while True:
        pass


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def label_once(poll: int, requests: list[CheckRequest]) -> tuple[float, float]:
    """Wall and CPU seconds to start a server with `poll`, label `requests` and stop it."""
    wall, cpu = time.perf_counter(), cpu_s()
    with EmbeddedServer(embedded_gguf_path(), parallel=2, poll=poll) as server:
        checker = LLMChecker(
            ChatClient(server.base_url, timeout_s=120),
            EMBEDDED_NAME,
            structured_output="grammar",
            max_tokens=6,
            max_concurrency=2,
        )
        verdicts = checker.check(requests)
        checker.close()
    assert len(verdicts) == len(requests)
    return time.perf_counter() - wall, cpu_s() - cpu


def measure(requests: list[CheckRequest], repeats: int) -> dict:
    runs: dict[int, list[tuple[float, float]]] = {poll: [] for poll in POLLS}
    for _ in range(repeats):
        for poll in POLLS:
            runs[poll].append(label_once(poll, requests))
    out = {
        f"poll_{poll}": {
            "wall_s": statistics.median(w for w, _ in r),
            "cpu_s": statistics.median(c for _, c in r),
            "runs": [{"wall_s": round(w, 2), "cpu_s": round(c, 2)} for w, c in r],
        }
        for poll, r in runs.items()
    }
    for key in ("wall_s", "cpu_s"):
        out[f"ratio_{key}"] = round(out["poll_0"][key] / out["poll_50"][key], 3)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=24, help="documents labelled per run")
    p.add_argument("--repeats", type=int, default=3, help="runs per poll value and condition")
    p.add_argument("--neighbours", type=int, default=2, help="CPU-bound processes in the busy condition")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "server_poll.json")
    args = p.parse_args()
    world = generate_world(6, 40, seed=5)
    question = world.questions[0]
    docs = world.documents[: args.docs]
    requests = [
        CheckRequest(question.id, question.question, question.sub_goals, d.docid, d.title, d.text) for d in docs
    ]
    label_once(0, requests[:2])  # warm the page cache and the wheel's first load
    result: dict = {
        "command": "python benchmarks/server_poll.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": multiprocessing.cpu_count()},
        "docs": len(requests),
        "quiet": measure(requests, args.repeats),
    }
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.neighbours)]
    for s in spinners:
        s.start()
    try:
        result[f"beside_{args.neighbours}_busy"] = measure(requests, args.repeats)
    finally:
        for s in spinners:
            s.terminate()
            s.join()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for condition in ("quiet", f"beside_{args.neighbours}_busy"):
        r = result[condition]
        print(
            f"{condition:>16}: poll 50 {r['poll_50']['wall_s']:.1f} s wall {r['poll_50']['cpu_s']:.1f} s CPU, "
            f"poll 0 {r['poll_0']['wall_s']:.1f} s wall {r['poll_0']['cpu_s']:.1f} s CPU "
            f"(ratio {r['ratio_wall_s']:.2f} wall, {r['ratio_cpu_s']:.2f} CPU)"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
