"""scoville: measure, predict and compare LLM inference frontiers."""

__version__ = "0.1.0"
