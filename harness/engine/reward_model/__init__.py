"""Learned reward models (RLHF's proxy reward): a causal LM's trunk with a scalar head, fitted to
preference pairs with the Bradley-Terry loss, cached by content hash, and scoring a task's
completions in place of (or beside) its verifier.

One module per job:

- ``key``: what a training reads, the key that hashes it, the id and folder, and the torch-free
  checks that a folder is a reward model (``harness validate`` runs them);
- ``pairs``: preference pairs, read from a JSONL file or built from the verifier, split by prompt;
- ``bradley_terry``: the loss and the metrics of score differences;
- ``model``: the model as it scores, saved to and loaded from its folder (checksums checked);
- ``training``: the fit, the held-out metrics and the cache entry (``harness reward-model train``);
- ``scorer``: a task's training reward from a reward model (``task.reward: {model: ...}``).

The package imports none of them, so the torch-free ones stay torch-free.
"""
