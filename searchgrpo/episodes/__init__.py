"""The multi-agent loop: playing whole questions (collect, episode eval)."""
