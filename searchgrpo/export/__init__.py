"""Export: merging a LoRA checkpoint into a full model that vLLM serves, with a parity check."""
