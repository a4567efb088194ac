"""Data: the multi-agent system's traces, the corpus, question sets, labels and the demo world."""
