"""Data-parallel training across processes (accelerate / torch.distributed), and the single
process case as a no-op.

`accelerate launch -m searchgrpo train --headless ...` (or `searchgrpo train --num-processes N`)
starts one process per device; accelerate's `PartialState` joins them into a process group (NCCL
on GPUs, gloo on CPUs). GRPO needs only a few collectives, all here:

- each rank takes every `world`-th state of a step, so a group never spans ranks;
- each rank's loss is its share of the global loss (global denominators), so summing the
  gradients across ranks (`all_reduce_grads`) gives exactly the one-process gradient, and a
  weight without a gradient on any rank keeps none (a step without signal moves nothing);
- metrics and events are gathered as JSON (no pickle) and only rank 0 writes files.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any


class Dist:
    """This process's place in the job, and the collectives the trainer uses."""

    def __init__(self, device: str = "auto") -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self._state: Any = None
        if self.world > 1:
            os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast can take shared GPUs down
            import torch
            from accelerate import PartialState

            # accelerate only forms a CPU (gloo) group when told the job runs on CPUs.
            self._state = PartialState(cpu=device == "cpu" or not torch.cuda.is_available())
            self.rank, self.world = self._state.process_index, self._state.num_processes
            self.local_rank = self._state.local_process_index

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    def device(self, requested: str) -> Any:
        """The device of this rank: its own GPU under a multi-GPU launch."""
        import torch

        if self.enabled and requested in ("auto", "cuda") and torch.cuda.is_available():
            return torch.device("cuda", self.local_rank)
        return None

    def shard(self, items: Sequence[Any]) -> list[Any]:
        """This rank's share: every world-th item, starting at its rank."""
        return list(items[self.rank :: self.world])

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as td

            td.barrier()

    @contextlib.contextmanager
    def main_first(self) -> Iterator[None]:
        """Rank 0 runs the block first (building caches), then the others (reading them)."""
        if not self.is_main:
            self.barrier()
        yield
        if self.is_main:
            self.barrier()

    def all_reduce_grads(self, params: Sequence[Any]) -> bool:
        """Sum gradients over ranks, in one flat buffer; whether any weight now has a gradient.

        A weight that no rank has a gradient for keeps `grad` None on every rank, as one process
        leaves it: AdamW then leaves it alone (no moment decay, no step count) everywhere, where
        zeros would make it take a momentum step on N processes only."""
        has = [p.grad is not None for p in params]
        if not self.enabled or not params:
            return any(has)
        import torch
        import torch.distributed as td

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flags = torch.tensor(has, dtype=torch.float32, device=grads[0].device)  # summed: ranks with a gradient
        flat = torch.cat([*(g.reshape(-1).float() for g in grads), flags])
        td.all_reduce(flat)
        offset = 0
        for p, g, had in zip(params, grads, flat[-len(params) :].tolist()):
            n = g.numel()
            p.grad = flat[offset : offset + n].view_as(g).to(g.dtype) if had > 0 else None
            offset += n
        return any(p.grad is not None for p in params)

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over ranks."""
        if not self.enabled:
            return [float(v) for v in values]
        import torch
        import torch.distributed as td

        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self._collective_device())
        td.all_reduce(t)
        return t.tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on one."""
        return self.sum([1.0 if flag else 0.0])[0] > 0

    def gather_json(self, obj: Any) -> list[Any]:
        """Every rank's JSON-serialisable `obj`, in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        import torch
        import torch.distributed as td

        device = self._collective_device()
        data = torch.tensor(list(json.dumps(obj).encode("utf-8")), dtype=torch.uint8, device=device)
        sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(self.world)]
        td.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.long, device=device))
        width = int(max(s.item() for s in sizes))
        padded = torch.zeros(width, dtype=torch.uint8, device=device)
        padded[: data.numel()] = data
        chunks = [torch.zeros(width, dtype=torch.uint8, device=device) for _ in range(self.world)]
        td.all_gather(chunks, padded)
        return [json.loads(bytes(c[: int(s.item())].tolist()).decode("utf-8")) for c, s in zip(chunks, sizes)]

    def _collective_device(self) -> Any:
        import torch
        import torch.distributed as td

        return torch.device("cuda", self.local_rank) if td.get_backend() == "nccl" else torch.device("cpu")
