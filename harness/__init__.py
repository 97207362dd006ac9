"""harness: an experiment-comparison and ablation harness for RL fine-tuning of language models."""

__version__ = "0.1.0"


def results(study, **kw):
    """The study's results frames (``harness.tracking.results.load_results``); imported lazily.

    Importing ``harness.tracking.results`` rebinds this name to that module, which is callable too.
    """
    from harness.tracking.results import load_results

    return load_results(study, **kw)
