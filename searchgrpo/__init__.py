"""searchgrpo: GRPO + LoRA fine-tuning of a deep-search Executor's search clues.

The headless core. It never imports the console (`tui/`); heavy libraries (torch, transformers,
peft) are imported by the modules that need them, not here.
"""

__version__ = "0.1.0"
