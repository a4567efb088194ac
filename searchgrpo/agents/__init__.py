"""The frozen agents: the DocumentChecker backends, LLM agents, the chat client, the embedded server
and the verdict cache."""
