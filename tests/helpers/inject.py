"""`python -m tests.helpers.inject ARGS`: the searchgrpo CLI with one fault installed first.

The fault is named by $SEARCHGRPO_FAULT (comma-separated for several):

- `slow_save=S`: every file of a checkpoint takes S seconds more to write, so that a test can kill
  the process while a checkpoint folder is being written (it polls for the `.tmp-` folder).
- `enospc_at=N`: writing checkpoint step N fails halfway through `optimizer.pt` with ENOSPC
  ("No space left on device"), as a full disk would.
- `slow_merge=S`: a merge's parity check (inside its temporary output folder) takes S seconds
  more, so that a test can kill the process while that folder exists.

Nothing here changes searchgrpo's code: it wraps the library functions the checkpoint writer calls.
"""

from __future__ import annotations

import errno
import os
import time


def _step_of(path: object) -> int | None:
    """The step of a checkpoint being written, from a path inside `step-NNNNNN.tmp-*/`."""
    for part in reversed(str(path).split(os.sep)):
        if part.startswith("step-") and ".tmp-" in part:
            return int(part[5:11])
    return None


def install(spec: str) -> None:
    import safetensors.torch
    import torch

    for item in filter(None, spec.split(",")):
        name, _, arg = item.partition("=")
        if name == "slow_save":
            delay = float(arg)
            real_save, real_save_file = torch.save, safetensors.torch.save_file

            def slow_save(obj, f, *a, _real=real_save, _delay=delay, **kw):
                time.sleep(_delay)
                return _real(obj, f, *a, **kw)

            def slow_save_file(tensors, filename, *a, _real=real_save_file, _delay=delay, **kw):
                time.sleep(_delay)
                return _real(tensors, filename, *a, **kw)

            torch.save, safetensors.torch.save_file = slow_save, slow_save_file
        elif name == "enospc_at":
            at = int(arg)
            real = torch.save

            def full_disk(obj, f, *a, _real=real, _at=at, **kw):
                if _step_of(f) == _at and str(f).endswith("optimizer.pt"):
                    with open(f, "wb") as fh:  # half a file, then the disk is full
                        fh.write(b"PK\x03\x04" + b"\0" * 4096)
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(f))
                return _real(obj, f, *a, **kw)

            torch.save = full_disk
        elif name == "slow_merge":
            import searchgrpo.export.merge as merge

            delay, real_parity = float(arg), merge.parity_figures

            def slow_parity(*a, _real=real_parity, _delay=delay, **kw):
                time.sleep(_delay)
                return _real(*a, **kw)

            merge.parity_figures = slow_parity
        else:
            raise SystemExit(f"unknown fault {name!r}")


if __name__ == "__main__":
    install(os.environ.get("SEARCHGRPO_FAULT", ""))
    from searchgrpo.cli import main

    main()
