"""Evaluation: the fine-tuned Executor against the baseline, per round and per episode."""
