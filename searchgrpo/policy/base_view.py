"""The base model as a module tree of its own: the trainer's weights with every adapter layer skipped.

The in-process judge (`policy/judge.py`) runs the base model while, with `train.pipeline: on`,
the main thread trains the adapter on the same weights. peft's `disable_adapter()` switches a flag
on every LoRA layer of the one shared tree, for every thread at once: a judge forward under it
would turn the adapter off in the middle of a training forward (or a training forward would see
the judge's setting). `adapter_free_view` avoids that state altogether: it builds a second tree
of module objects (shallow copies: new objects whose parameters and buffers are the very tensors
of the original, so not one weight is copied) in which each LoRA layer is replaced by its base
layer. Nothing the trainer does to its tree (adapter on or off, train or eval mode, gradient
checkpointing, hooks, forward overrides for decoding, a second adapter loaded later) changes it,
and nothing it does changes the trainer's.

The view is always in eval mode. Hooks and instance-level `forward` overrides of the original
(accelerate's device hooks, the decoders' shortcuts) are not carried over: each module of the view
runs its class's own forward on the device its weights are on, which is the plain base model's
function for a model on one device. Parameters keep the original's `requires_grad` (the frozen
base: False); the judge calls the view under `torch.no_grad()`.
"""

from __future__ import annotations

import copy
from typing import Any

HOOK_DICTS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
)
"""nn.Module's per-instance hook registries, given empty ones in the view."""


def adapter_free_view(model: Any) -> Any:
    """The base model of `model` (a peft model or a plain transformers model) with adapter layers
    skipped, sharing every parameter and buffer with it (see the module docstring)."""
    root = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _view(root)


def _base_of(module: Any) -> Any:
    from peft.tuners.tuners_utils import BaseTunerLayer

    while isinstance(module, BaseTunerLayer):
        module = module.get_base_layer()
    return module


def _view(module: Any) -> Any:
    module = _base_of(module)
    clone = copy.copy(module)  # a new object; its _parameters and _buffers dicts are the original's
    clone.__dict__.pop("forward", None)
    for name in HOOK_DICTS:
        if name in module.__dict__:
            clone.__dict__[name] = type(module.__dict__[name])()
    clone._modules = {name: (_view(child) if child is not None else None) for name, child in module._modules.items()}
    clone.training = False
    return clone


def shares_weights(view: Any, model: Any) -> bool:
    """Every parameter of `view` is stored in a parameter of `model` (no weight was copied)."""
    owned = {p.data_ptr() for p in model.parameters()}
    return all(p.data_ptr() in owned for p in view.parameters())
