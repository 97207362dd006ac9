"""harness: an experiment-comparison and ablation harness for RL fine-tuning of language models."""

__version__ = "0.1.0"
