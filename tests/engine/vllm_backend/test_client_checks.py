"""What a vLLM server answers is checked before it is believed: a fake server on loopback
answers each way a real one could go wrong, and the client raises the typed error, one line."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.engine.vllm.client import SampledCompletion, VllmClient, parse_completions
from harness.engine.vllm.errors import (
    VllmMalformedOutput,
    VllmRequestError,
    VllmTiedHeadReload,
    VllmTimeout,
    VllmUnavailable,
)
from harness.engine.vllm.server import free_port

VOCAB = 100


def choice(index, tokens=(5, 6, 2), logprobs=(-0.5, -1.0, -0.1), finish="stop"):
    return {
        "index": index,
        "token_ids": list(tokens),
        "logprobs": {"token_logprobs": list(logprobs)},
        "finish_reason": finish,
    }


class FakeServer:
    """A loopback HTTP server that answers every POST with ``reply`` (status, bytes), or holds
    the request until the test ends when ``hold`` is set; it records the requests' bodies."""

    def __init__(self):
        self.reply: tuple[int, bytes] = (200, b"{}")
        self.hold = False
        self.release = threading.Event()
        self.bodies: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                fake.bodies.append(json.loads(raw) if raw else {})
                fake.headers = dict(self.headers)
                if fake.hold:
                    fake.release.wait()
                status, payload = fake.reply
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, payload, status: int = 200) -> None:
        self.reply = (status, payload if isinstance(payload, bytes) else json.dumps(payload).encode())

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake():
    server = FakeServer()
    yield server
    server.close()


def complete(client: VllmClient, prompts=((1, 2, 3),), n=1, max_tokens=8):
    return client.complete([list(p) for p in prompts], n=n, max_tokens=max_tokens, temperature=1.0, model="base")


def test_a_good_answer_is_read_in_prompt_and_sample_order_and_the_request_asks_for_sampler_logprobs(fake):
    # choices out of order: the index says which prompt and sample each is
    fake.answer(
        {
            "choices": [
                choice(3, (9,), (-0.25,), "length"),
                choice(0),
                choice(2, (7, 2), (-0.1, -0.2)),
                choice(1, (8, 8), (0.0, -3.0), "length"),
            ]
        }
    )
    client = VllmClient(fake.url, vocab_size=VOCAB, api_key="s3cret")
    rows = complete(client, prompts=((1, 2), (3,)), n=2)
    assert rows == [
        [SampledCompletion((5, 6, 2), (-0.5, -1.0, -0.1), "stop"), SampledCompletion((8, 8), (0.0, -3.0), "length")],
        [SampledCompletion((7, 2), (-0.1, -0.2), "stop"), SampledCompletion((9,), (-0.25,), "length")],
    ]
    body = fake.bodies[-1]
    assert body["prompt"] == [[1, 2], [3]] and body["n"] == 2 and body["logprobs"] == 0
    assert body["return_token_ids"] is True and body["top_k"] == 0 and body["repetition_penalty"] == 1.0
    assert fake.headers["Authorization"] == "Bearer s3cret" and "s3cret" not in repr(client)


BAD_ANSWERS = {
    "not JSON": (b"<html>oops", "not JSON"),
    "no choices": ({"object": "error"}, "no list of choices"),
    "too few rows": ({"choices": [choice(0)]}, "1 choices for 1 prompts x 2 samples"),
    "index twice": ({"choices": [choice(0), choice(0)]}, "appears twice"),
    "index out of range": ({"choices": [choice(0), choice(5)]}, "choice index 5"),
    "token outside the vocabulary": ({"choices": [choice(0), choice(1, (5, VOCAB))]}, f"token id {VOCAB} outside"),
    "negative token": ({"choices": [choice(0), choice(1, (-1, 2, 3))]}, "token id -1 outside"),
    "fewer log-probs than tokens": ({"choices": [choice(0), choice(1, (5, 6), (-1.0,))]}, "1 log-probs for 2 tokens"),
    "no log-probs": ({"choices": [choice(0), {**choice(1), "logprobs": None}]}, "no log-probs for 3 tokens"),
    "positive log-prob": ({"choices": [choice(0), choice(1, (5,), (0.5,))]}, "log-prob 0.5"),
    "NaN log-prob": (
        b'{"choices": [' + json.dumps(choice(0)).encode() + b', {"index": 1, "token_ids": [5], '
        b'"logprobs": {"token_logprobs": [NaN]}, "finish_reason": "stop"}]}',
        "log-prob nan",
    ),
    "null log-prob": ({"choices": [choice(0), choice(1, (5,), (None,))]}, "log-prob None"),
    "over the budget": ({"choices": [choice(0), choice(1, tuple(range(9)), (-1.0,) * 9)]}, "9 tokens, over"),
    "aborted": ({"choices": [choice(0), choice(1, finish="abort")]}, "finished with 'abort'"),
    "token ids as text": ({"choices": [choice(0), {**choice(1), "token_ids": ["5", "6", "2"]}]}, "integer token_ids"),
}


@pytest.mark.parametrize("case", BAD_ANSWERS, ids=list(BAD_ANSWERS))
def test_a_malformed_answer_is_one_typed_line(fake, case):
    payload, words = BAD_ANSWERS[case]
    fake.answer(payload)
    with pytest.raises(VllmMalformedOutput) as caught:
        complete(VllmClient(fake.url, vocab_size=VOCAB), n=2)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_refusal_carries_the_servers_message(fake):
    fake.answer({"error": {"message": "The model `nope` does not exist.\nreally", "code": 404}}, status=404)
    with pytest.raises(VllmRequestError, match=r"HTTP 404 The model `nope` does not exist\. really$"):
        complete(VllmClient(fake.url, vocab_size=VOCAB))


def test_no_answer_in_time_is_a_timeout(fake):
    fake.hold = True
    with pytest.raises(VllmTimeout, match="gave no answer within 0.5 s"):
        complete(VllmClient(fake.url, vocab_size=VOCAB, timeout_s=0.5))


def test_nothing_listening_is_unavailable_or_the_owners_explanation():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(VllmUnavailable, match="does not answer"):
        complete(VllmClient(url, vocab_size=VOCAB))
    died = VllmUnavailable("the server died: exit code 3")
    with pytest.raises(VllmUnavailable, match="exit code 3"):
        complete(VllmClient(url, vocab_size=VOCAB, on_unreachable=lambda: died))


def test_parse_keeps_an_empty_completion_and_clips_rounding_above_zero():
    answer = {"choices": [choice(0, (), ()), choice(1, (4,), (3e-7,))]}
    rows = parse_completions(answer, prompts=1, n=2, max_tokens=4, vocab_size=VOCAB)
    assert rows == [[SampledCompletion((), (), "stop"), SampledCompletion((4,), (0.0,), "stop")]]


def test_full_weights_of_a_tied_model_are_refused_before_anything_is_sent(tmp_path):
    """Nothing listens at the URL: a tied model's reload is refused by its config alone (a request
    would have been VllmUnavailable); an untied one goes on to the request."""
    from transformers import LlamaConfig

    url = f"http://127.0.0.1:{free_port()}"
    small = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    for name, tied in [("tied", True), ("untied", False)]:
        LlamaConfig(tie_word_embeddings=tied, **small).save_pretrained(tmp_path / name)
    with pytest.raises(VllmTiedHeadReload, match="ties its LM head to its input embeddings") as refused:
        VllmClient(url, vocab_size=VOCAB).reload_weights(str(tmp_path / "tied"))
    assert "\n" not in str(refused.value)
    with pytest.raises(VllmUnavailable):
        VllmClient(url, vocab_size=VOCAB).reload_weights(str(tmp_path / "untied"))
