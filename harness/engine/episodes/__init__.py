"""Tool-calling episodes: the turn formats (plain text, chat template) and the batched sampler."""

from harness.engine.episodes.sampler import Episode, demonstration, sample_episodes

__all__ = ["Episode", "demonstration", "sample_episodes"]
