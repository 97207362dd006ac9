"""A program trial judged through vLLM (``rollout.backend: vllm``, ``scores: judge``) fails, with
the server's failure as its one-line reason and as its typed error record, when the server
answers malformed output or is not there; the program's checkpoint is never scored by anything
else. The server is a stand-in on loopback given as ``rollout.vllm.url``, as a user's server is."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from trainer_helpers import SAVE_START

from harness.engine.vllm.errors import VllmMalformedOutput, VllmUnavailable
from harness.engine.vllm.server import free_port
from harness.errors import ErrorRecord
from harness.runner import child
from harness.trainers.dispatch import run_trial

pytestmark = pytest.mark.slow  # a warm start and a program run

SAVE_FINAL = (
    SAVE_START
    + """
model.save_pretrained(trial["checkpoint_dir"])
"""
)


@pytest.fixture
def malformed_server():
    """Lists a model, then answers every completion with token ids outside any vocabulary."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):
            self._send({"data": [{"id": "base"}]})

        def do_POST(self):
            asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            rows = len(asked["prompt"]) * asked["n"]
            bad = {"token_ids": [10**9], "logprobs": {"token_logprobs": [-0.5]}, "finish_reason": "stop"}
            self._send({"choices": [{"index": i, **bad} for i in range(rows)]})

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _judged_through(program_spec, script, url: str):
    return program_spec(script(SAVE_FINAL), rollout={"backend": "vllm", "vllm": {"url": url}})


def test_malformed_output_fails_the_trial_with_a_typed_record(program_spec, script, malformed_server, tmp_path):
    spec = _judged_through(program_spec, script, malformed_server)
    with pytest.raises(VllmMalformedOutput, match="outside the vocabulary"):
        run_trial(spec)
    spec_path, result = tmp_path / "t.spec.json", tmp_path / "t.result.json"
    spec_path.write_text(spec.model_dump_json())
    assert child.run(spec_path, result, child.DEFAULT_TRIAL_FN) == 1
    payload = json.loads(result.read_text())
    record = ErrorRecord.from_dict(payload["error"])
    assert payload["ok"] is False and "result" not in payload
    assert record.type == "VllmMalformedOutput" and "token id 1000000000 outside the vocabulary" in record.message


def test_no_server_at_the_url_fails_the_trial(program_spec, script):
    spec = _judged_through(program_spec, script, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(VllmUnavailable, match="does not answer"):
        run_trial(spec)


def test_the_judge_backend_is_refused_for_a_program_that_hands_in_its_scores(program_spec, script):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="samples with its own program"):
        program_spec(script(SAVE_FINAL), trainer={"scores": "program"}, rollout={"backend": "vllm"})
