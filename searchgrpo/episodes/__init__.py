"""The multi-agent loop: playing whole questions (collect, episode eval) and assembling a run's world."""
