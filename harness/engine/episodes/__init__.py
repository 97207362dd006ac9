"""Tool-calling episodes: the turn formats (plain text, chat template) and the batched sampler."""

from harness.engine.episodes.sampler import Episode, demonstration, sample_episodes
from harness.engine.episodes.turn_format import format_of

__all__ = ["Episode", "demonstration", "format_of", "sample_episodes"]
