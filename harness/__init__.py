"""harness: an experiment-comparison and ablation harness for RL fine-tuning of language models."""

from harness.version import __version__

__all__ = ["__version__", "results"]


def results(study, **kw):
    """The study's results frames (``harness.tracking.results.load_results``); imported lazily.

    Importing ``harness.tracking.results`` rebinds this name to that module, which is callable too.
    """
    from harness.tracking.results import load_results

    return load_results(study, **kw)
