"""How the console copes with bursts of events: events/s folded in, and keypress latency.

    PYTHONPATH=. python benchmarks/tui_events.py [--bursts 5] [--burst-size 5000]

A scripted runner thread pushes bursts of real core events (GroupScored with documents and
StepFinished, as a fast trainer would) through the same sink as the live trainer. While each
burst is in flight, the benchmark presses a key (bound to a no-op action that records when it
ran) and measures the time from the press to its handler. It prints what it measured in this
run: events/s handled by the app, and keypress latency (median and worst) during bursts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual.binding import Binding

from searchgrpo.config import load_config
from tests.helpers.scripted import ScriptedBackend
from tests.helpers.scripted_events import run_started, step_events
from tui.app import ConsoleApp


class ProbeApp(ConsoleApp):
    """The console plus a key whose handler records when it ran."""

    BINDINGS = [*ConsoleApp.BINDINGS, Binding("z", "probe", "probe", show=False)]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.probe_times: list[float] = []

    def action_probe(self) -> None:
        self.probe_times.append(time.perf_counter())


def make_burst(size: int, first_step: int) -> list:
    events, step = [], first_step
    while len(events) < size:
        events += step_events(step, total=10**6)
        step += 1
    return events[:size]


async def main(bursts: int, burst_size: int) -> None:
    ready = [make_burst(burst_size, 1 + i * burst_size) for i in range(bursts)]
    go = [threading.Event() for _ in range(bursts)]

    def runner(cfg, sink, control, run_dir, resume):
        sink(run_started(10**6))
        for event_set, events in zip(go, ready):
            event_set.wait()
            for event in events:
                sink(event)

    cfg = load_config(None, ["model.base=tiny"])
    app = ProbeApp(cfg, "benchmark", backend=ScriptedBackend(runner), start=True)
    latencies, rates = [], []
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.2)
        for i in range(bursts):
            target = app.inbox.received + burst_size
            start = time.perf_counter()
            go[i].set()
            await asyncio.sleep(0.005)  # the burst is under way
            pressed = time.perf_counter()
            before = len(app.probe_times)
            await pilot.press("z")
            while len(app.probe_times) == before:
                await asyncio.sleep(0)
            latencies.append(app.probe_times[-1] - pressed)
            while app.inbox.received < target or len(app.inbox):
                await asyncio.sleep(0.001)
            await pilot.pause()
            rates.append(burst_size / (time.perf_counter() - start))
        steps = app.model.run.step
    print(f"bursts: {bursts} x {burst_size} events (GroupScored: 4 samples, 6-9 documents each; StepFinished)")
    print("per burst, ms to handle a keypress: " + ", ".join(f"{x * 1000:.1f}" for x in latencies))
    print("per burst, events/s: " + ", ".join(f"{r:,.0f}" for r in rates))
    print(f"events handled: {statistics.median(rates):,.0f}/s median, {min(rates):,.0f}/s slowest burst")
    print(
        f"keypress to handler during a burst: {statistics.median(latencies) * 1000:.1f} ms median, "
        f"{max(latencies) * 1000:.1f} ms worst"
    )
    print(f"steps folded into the model: {steps}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--burst-size", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(main(args.bursts, args.burst_size))
