"""The search-round environment: prompts, clue parsing, the reward and retrieval metrics."""
