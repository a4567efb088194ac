"""GRPO training: the loss maths, one step, the trainer loop, checkpoints and data parallelism."""
