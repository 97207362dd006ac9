"""Requests to a vLLM server, and every answer checked before it is believed.

Completions go through ``/v1/completions`` with the prompts as token ids (the harness's own
tokenizer and chat template built them, so both backends see the same prompts), ``n`` samples
per prompt, ``logprobs: 0`` (the log-prob of each sampled token) and ``return_token_ids`` (the
sampled tokens themselves, not text to re-tokenise). The server is started with
``--logprobs-mode processed_logprobs`` (``server.VllmServer``), so the log-probs are those of
the distribution the token was drawn from, after temperature and top-p, as the ``hf`` backend's
are (``harness.engine.rollout``); vLLM's default, ``raw_logprobs``, is the unscaled model's.
Every sampling field the server could fill from a default of its own (top-k, min-p, penalties)
is sent explicitly.

Weights reach the server two ways: a LoRA adapter folder loaded at run time under a new name
(``load_adapter``; the server runs with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``), or a full model
folder reloaded in place (``reload_weights``: vLLM 0.32's worker method ``reload_weights`` with
``weights_path``, through ``POST /collective_rpc``, which the server offers with
``VLLM_SERVER_DEV_MODE=1``; then the prefix cache is reset, as it holds keys and values of the
old weights).
"""

from __future__ import annotations

import http.client
import json
import math
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.engine.vllm.errors import (
    VllmMalformedOutput,
    VllmRequestError,
    VllmTiedHeadReload,
    VllmTimeout,
    VllmUnavailable,
)
from harness.errors import squeeze

#: finish reasons a finished completion may give: a stop token (EOS included) or the token budget
FINISH_REASONS = ("stop", "length")
#: how far above 0 a log-prob may round (a log-softmax in fp32 is <= 0 up to this)
LOGPROB_SLACK = 1e-5


@dataclass(frozen=True)
class SampledCompletion:
    """One sample: its tokens (a stop token it ended on included), the sampler's log-prob of
    each, and why it ended (``stop`` or ``length``)."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str


class VllmClient:
    """A checked HTTP client of one vLLM server (stdlib ``urllib``: no new dependency).

    ``vocab_size`` bounds the token ids the server may return. ``on_unreachable`` is asked, when
    the server stops answering, for the error that explains it (``VllmServer`` says whether its
    process died, with its exit code and log); None keeps the plain ``VllmUnavailable``."""

    def __init__(
        self,
        base_url: str,
        *,
        vocab_size: int,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        on_unreachable: Callable[[], Exception | None] | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.vocab_size = vocab_size
        self.timeout_s = timeout_s
        self._api_key = api_key
        self._on_unreachable = on_unreachable

    def __repr__(self) -> str:  # the key never shows
        return f"VllmClient({self.base_url!r}, vocab_size={self.vocab_size})"

    # ---- generation -------------------------------------------------------------------------

    def complete(
        self,
        prompt_token_ids: Sequence[Sequence[int]],
        *,
        n: int,
        max_tokens: int,
        temperature: float,
        model: str,
        top_p: float = 1.0,
        stop_token_ids: Sequence[int] = (),
    ) -> list[list[SampledCompletion]]:
        """``n`` samples of at most ``max_tokens`` tokens per prompt, one list per prompt in the
        prompts' order. ``temperature`` 0 is greedy. ``model`` is the served model's name or an
        adapter's. Each sample stops at the model's EOS or at one of ``stop_token_ids``, which
        it keeps."""
        if not prompt_token_ids:
            return []
        body = {
            "model": model,
            "prompt": [list(map(int, p)) for p in prompt_token_ids],
            "n": n,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "top_k": 0,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "stop_token_ids": list(map(int, stop_token_ids)),
            "logprobs": 0,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        answer = self._post("/v1/completions", body)
        return parse_completions(answer, len(prompt_token_ids), n, max_tokens, self.vocab_size)

    # ---- weights ----------------------------------------------------------------------------

    def load_adapter(self, name: str, path: str) -> None:
        """Load the LoRA adapter folder ``path`` under ``name`` (then ``complete(model=name)``)."""
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)}, expect_json=False)

    def unload_adapter(self, name: str) -> None:
        self._post("/v1/unload_lora_adapter", {"lora_name": name}, expect_json=False)

    def reload_weights(self, folder: str) -> None:
        """Replace the served model's weights, in place, by those of the model folder ``folder``
        (same architecture), and drop the prefix cache computed with the old ones. A model with
        tied input and output embeddings is refused before anything is sent (``VllmTiedHeadReload``)."""
        if ties_embeddings(folder):
            raise VllmTiedHeadReload(
                f"cannot sync full weights to the vLLM server: the model in {folder} ties its LM head to its "
                "input embeddings, and vLLM's in-place reload keeps the LM head it started with (the server "
                "would sample from neither the old policy nor the new one); train a LoRA adapter (model.lora) "
                "or a model with untied embeddings, or use rollout.backend: hf"
            )
        self._post(
            "/collective_rpc",
            {"method": "reload_weights", "kwargs": {"weights_path": str(folder)}},
            expect_json=False,
        )
        self._post("/reset_prefix_cache", None, expect_json=False)

    # ---- state ------------------------------------------------------------------------------

    def healthy(self, timeout_s: float = 5.0) -> bool:
        """Whether ``/health`` answers 200 now (any failure to answer is False)."""
        try:
            with urllib.request.urlopen(self._request("/health", None, method="GET"), timeout=timeout_s) as reply:
                return reply.status == 200
        except (OSError, ValueError):
            return False

    def served_models(self) -> list[str]:
        """The names ``/v1/models`` lists: the base model and the adapters loaded."""
        answer = self._get("/v1/models")
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
            raise VllmMalformedOutput(f"{self.base_url}/v1/models: no list of models with ids in its answer")
        return [m["id"] for m in data]

    # ---- transport --------------------------------------------------------------------------

    def _request(self, path: str, body: dict | None, method: str = "POST") -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = None if body is None else json.dumps(body).encode()
        if method == "POST" and data is None:
            data = b""
        return urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)

    def _get(self, path: str):
        return self._send(self._request(path, None, method="GET"), path, expect_json=True)

    def _post(self, path: str, body: dict | None, *, expect_json: bool = True):
        return self._send(self._request(path, body), path, expect_json=expect_json)

    def _send(self, request: urllib.request.Request, path: str, *, expect_json: bool):
        where = f"vLLM server {self.base_url}{path}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                raw = reply.read()
        except urllib.error.HTTPError as err:
            detail = _error_detail(err)
            raise VllmRequestError(f"{where} refused the request: HTTP {err.code} {detail}") from None
        except TimeoutError:
            raise self._unreachable(VllmTimeout(f"{where} gave no answer within {self.timeout_s:g} s")) from None
        except urllib.error.URLError as err:
            if isinstance(err.reason, TimeoutError):
                raise self._unreachable(VllmTimeout(f"{where} gave no answer within {self.timeout_s:g} s")) from None
            reason = squeeze(str(err.reason), 200)
            raise self._unreachable(VllmUnavailable(f"{where} does not answer ({reason})")) from None
        except (ConnectionError, http.client.HTTPException) as err:
            reason = squeeze(str(err), 200)
            raise self._unreachable(VllmUnavailable(f"{where} broke off its answer ({reason})")) from None
        if not expect_json:
            return None
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise VllmMalformedOutput(f"{where} answered with something that is not JSON ({err})") from None

    def _unreachable(self, plain: Exception) -> Exception:
        """The error that explains a server that stopped answering: its process's death if the
        owner knows of one, else ``plain``."""
        found = self._on_unreachable() if self._on_unreachable else None
        return found or plain


def _error_detail(err: urllib.error.HTTPError) -> str:
    """What a refusing server said, on one line: its error message when it sent vLLM's JSON."""
    try:
        text = err.read().decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        data = json.loads(text)
        message = data.get("error", {}).get("message") if isinstance(data.get("error"), dict) else data.get("message")
        text = str(message or data.get("detail") or text)
    except (json.JSONDecodeError, AttributeError):
        pass
    return squeeze(text, 300)


def ties_embeddings(folder: str | Path) -> bool:
    """Whether the model folder's config ties the LM head to the input embeddings, as transformers
    reads it (its model type's default where the file says nothing); False where it cannot be read."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError):
        return False
    return bool(getattr(config.get_text_config(), "tie_word_embeddings", False))


def parse_completions(answer, prompts: int, n: int, max_tokens: int, vocab_size: int) -> list[list[SampledCompletion]]:
    """A ``/v1/completions`` answer as ``n`` checked samples per prompt: choice ``i`` is prompt
    ``i // n``'s sample ``i % n`` (vLLM numbers them so); every index exactly once; token ids
    in the vocabulary; one finite log-prob <= 0 per token; at most ``max_tokens`` tokens; a
    finish reason of ``stop`` or ``length``. Anything else is a ``VllmMalformedOutput``."""

    def bad(what: str) -> VllmMalformedOutput:
        return VllmMalformedOutput(f"vLLM completions: {what}")

    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list):
        raise bad("the answer has no list of choices")
    if len(choices) != prompts * n:
        raise bad(f"{len(choices)} choices for {prompts} prompts x {n} samples")
    rows: list[SampledCompletion | None] = [None] * (prompts * n)
    for choice in choices:
        if not isinstance(choice, dict):
            raise bad("a choice is not an object")
        index = choice.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < prompts * n:
            raise bad(f"choice index {index!r} is not one of 0..{prompts * n - 1}")
        if rows[index] is not None:
            raise bad(f"choice index {index} appears twice")
        rows[index] = _sample(choice, index, max_tokens, vocab_size, bad)
    return [rows[p * n : (p + 1) * n] for p in range(prompts)]  # type: ignore[misc]


def _sample(choice: dict, index: int, max_tokens: int, vocab_size: int, bad) -> SampledCompletion:
    tokens = choice.get("token_ids")
    logprobs = choice.get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    reason = choice.get("finish_reason")
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise bad(f"choice {index} has no list of integer token_ids")
    if outside := [t for t in tokens if not 0 <= t < vocab_size]:
        raise bad(f"choice {index} has token id {outside[0]} outside the vocabulary of {vocab_size}")
    if len(tokens) > max_tokens:
        raise bad(f"choice {index} has {len(tokens)} tokens, over the budget of {max_tokens}")
    if not isinstance(values, list) or len(values) != len(tokens):
        got = len(values) if isinstance(values, list) else "no"
        raise bad(f"choice {index} has {got} log-probs for {len(tokens)} tokens")
    for value in values:
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if number is None or not math.isfinite(number) or number > LOGPROB_SLACK:
            raise bad(f"choice {index} has log-prob {value!r}: not a finite number <= 0")
    if reason not in FINISH_REASONS:
        raise bad(f"choice {index} finished with {reason!r}, not one of {', '.join(FINISH_REASONS)}")
    return SampledCompletion(tuple(tokens), tuple(min(float(v), 0.0) for v in values), reason)
