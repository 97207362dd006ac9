"""The learned (Bradley-Terry) reward model: the loss and its gradient against the seed text's
formulas, the calibration numbers against a direct computation, learning a learnable preference,
label noise, the pair file's one-line errors, the cache, and the scorer a study trains on.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.reward_model import key as rm_key
from harness.engine.reward_model import model as rm_model
from harness.engine.reward_model import training as rm_training
from harness.engine.reward_model.bradley_terry import (
    bradley_terry_loss,
    expected_calibration_error,
    pair_metrics,
)
from harness.engine.reward_model.key import HEAD_FILE, MANIFEST_FILE, read_manifest
from harness.engine.reward_model.model import load_reward_model, new_reward_model
from harness.engine.reward_model.pairs import (
    Pair,
    group_candidates,
    label_pairs,
    read_pairs,
    split_pairs,
)
from harness.engine.reward_model.settings import RewardModelRecipe, RewardTraining
from harness.engine.reward_model.training import (
    RewardModelCacheWarning,
    fit,
    measure,
    train_reward_model,
)
from harness.engine.spec import ModelConfig, TinyModelConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.base import Item
from harness.errors import ConfigError
from harness.ground.checked_cache import FIELDS_SHA256, fields_sha256

SMALL = ModelConfig(
    tiny=TinyModelConfig(hidden_size=32, layers=1, heads=2, intermediate_size=64), dtype="float32", device="cpu"
)
ALPHABET = "0123456789+="


def parity_pairs(n: int, seed: int = 0) -> list[Pair]:
    """A learnable preference: of two answers to ``a+b=``, the one ending in an even digit."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        even, odd = f"{rng.randrange(50) * 2:03d}", f"{rng.randrange(50) * 2 + 1:03d}"
        pairs.append(Pair(f"{a:02d}+{b:02d}=", even, odd, gold=True))
    return pairs


def tiny_lm(seed: int = 0) -> LoadedModel:
    tok = char_tokenizer(ALPHABET)
    return LoadedModel(build_tiny_model(SMALL, len(tok), tok, seed=seed), tok, torch.device("cpu"), False)


def write_pairs(path: Path, pairs: list[Pair]) -> Path:
    path.write_text(
        "".join(json.dumps({"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected}) + "\n" for p in pairs)
    )
    return path


# ---------------------------------------------------------------------------------------------- the loss


def test_bt_loss_matches_the_hand_worked_numbers():
    zero = bradley_terry_loss(torch.tensor([0.3]), torch.tensor([0.3]))
    two = bradley_terry_loss(torch.tensor([2.5]), torch.tensor([0.5]))
    wrong = bradley_terry_loss(torch.tensor([0.0]), torch.tensor([2.0]))
    assert float(zero) == pytest.approx(math.log(2))  # Delta = 0: log 2
    assert float(two) == pytest.approx(math.log(1 + math.exp(-2)))  # Delta = 2
    assert float(wrong) == pytest.approx(math.log(1 + math.exp(2)))  # Delta = -2
    both = bradley_terry_loss(torch.tensor([2.5, 0.0]), torch.tensor([0.5, 2.0]))
    assert float(both) == pytest.approx((math.log(1 + math.exp(-2)) + math.log(1 + math.exp(2))) / 2)


def test_bt_gradient_is_the_seed_texts_formula():
    """d L / d r_w = -(1 - sigma(Delta)) / N and d L / d r_l = +(1 - sigma(Delta)) / N (seed §2)."""
    chosen = torch.tensor([2.0, -0.5, 0.1, 3.0], dtype=torch.float64, requires_grad=True)
    rejected = torch.tensor([0.0, 1.0, 0.1, -1.0], dtype=torch.float64, requires_grad=True)
    bradley_terry_loss(chosen, rejected).backward()
    delta = (chosen - rejected).detach()
    expected = -(1 - torch.sigmoid(delta)) / len(delta)
    torch.testing.assert_close(chosen.grad, expected)
    torch.testing.assert_close(rejected.grad, -expected)


def test_calibration_numbers_match_a_direct_computation():
    delta = np.array([2.0, -1.0, 0.5, 3.0, 0.0, -0.2])
    p = 1 / (1 + np.exp(-delta))
    m = pair_metrics(delta)
    assert m["accuracy"] == pytest.approx((3 + 0.5) / 6)  # a tie is half right
    assert m["loss"] == pytest.approx(np.mean(-np.log(p)))
    assert m["brier"] == pytest.approx(np.mean((1 - p) ** 2))
    # ECE by hand: confidence sigmoid(|delta|) in 10 bins over [0.5, 1]
    conf = 1 / (1 + np.exp(-np.abs(delta)))
    correct = np.array([1, 0, 1, 1, 0.5, 0])
    bins = np.minimum(((conf - 0.5) / 0.05).astype(int), 9)
    ece = sum((bins == b).mean() * abs(correct[bins == b].mean() - conf[bins == b].mean()) for b in set(bins))
    assert m["ece"] == pytest.approx(ece)
    assert expected_calibration_error(delta) == pytest.approx(ece)
    gold = np.array([True, False, True, True, True, False])  # pairs 2 and 6 were flipped
    g = pair_metrics(delta, gold)
    assert g["accuracy_gold"] == pytest.approx((5 + 0.5) / 6)
    assert g["brier_gold"] == pytest.approx(np.mean((1 - 1 / (1 + np.exp(-np.where(gold, delta, -delta)))) ** 2))


def test_a_perfectly_calibrated_model_has_a_small_ece():
    rng = np.random.default_rng(0)
    delta = rng.normal(0, 2, 200_000)
    right = rng.random(delta.size) < 1 / (1 + np.exp(-delta))  # each pair's label drawn from sigmoid(delta)
    assert expected_calibration_error(np.where(right, delta, -delta)) < 0.01
    assert expected_calibration_error(np.where(right, 3 * delta, -3 * delta)) > 0.05  # overconfident


# ---------------------------------------------------------------------------------------------- learning


def test_a_tiny_reward_model_learns_a_learnable_preference():
    train, held = parity_pairs(256, seed=1), parity_pairs(64, seed=2)
    model = new_reward_model(tiny_lm(), seed=0)
    before = measure(model, held)
    info = fit(model, train, RewardTraining(lr=3e-3, batch_size=32), steps=40)
    after = measure(model, held)
    assert before["accuracy"] < 0.8
    assert after["accuracy"] >= 0.9, after
    assert after["loss"] < before["loss"] and info["train/loss"] < math.log(2)


def test_label_noise_lowers_agreement_with_the_noisy_labels_as_expected():
    """Labels flipped with probability p: a model that learned the preference agrees with the
    noisy held-out labels about (1 - p) acc + p (1 - acc) of the time, and with the clean ones at acc."""
    rng = random.Random(5)
    clean = parity_pairs(320, seed=3)
    noisy = label_pairs([(p.prompt, p.chosen, p.rejected) for p in clean], 0.3, rng)
    flipped = sum(p.gold is False for p in noisy) / len(noisy)
    assert 0.22 < flipped < 0.38
    train, held = noisy[:256], noisy[256:]
    model = new_reward_model(tiny_lm(), seed=0)
    fit(model, train, RewardTraining(lr=3e-3, batch_size=32), steps=100)
    m = measure(model, held)
    acc, p = m["accuracy_gold"], sum(q.gold is False for q in held) / len(held)
    assert acc >= 0.8, m
    assert m["accuracy"] == pytest.approx((1 - p) * acc + p * (1 - acc), abs=0.05)


def test_training_is_seeded():
    pairs = parity_pairs(64)
    a, b = new_reward_model(tiny_lm(), seed=0), new_reward_model(tiny_lm(), seed=0)
    fit(a, pairs, RewardTraining(lr=3e-3, batch_size=16), steps=6)
    fit(b, pairs, RewardTraining(lr=3e-3, batch_size=16), steps=6)
    assert a.scores(["01+02="], ["004"]) == b.scores(["01+02="], ["004"])


def test_group_candidates_pair_a_better_with_a_worse_sample():
    rng = random.Random(0)
    found = group_candidates("p", ["042", "041", "042", "040"], [1.0, 0.0, 1.0, 0.0], 5, rng)
    assert sorted(found) == [("p", "042", "040"), ("p", "042", "041")]
    assert group_candidates("p", ["1", "2"], [0.0, 0.0], 3, rng) == []  # a group the verifier cannot split


def test_held_out_pairs_are_whole_prompts():
    pairs = [Pair(f"p{i // 3}", f"a{i}", f"b{i}") for i in range(60)]
    train, held = split_pairs(pairs, 0.25, seed=0)
    assert len(held) == 15 and len(train) == 45
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    assert split_pairs(pairs, 0.25, seed=0) == (train, held)


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "line, problem",
    [
        ('{"prompt": "1+1=", "chosen": "2"}', "missing field rejected"),
        ('{"prompt": "1+1=", "chosen": "2", "rejected": "2"}', "chosen and rejected are identical"),
        ('{"prompt": "1+1=", "chosen": "2", "rejected": 3}', "field rejected must be a string, not int"),
        ('{"prompt": "1+1=", "chosen": "2", ', "not valid JSON"),
        ('["1+1=", "2", "3"]', "must be a JSON object"),
    ],
)
def test_a_bad_pair_line_is_one_line_naming_file_and_line(tmp_path, line, problem):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"prompt": "1+2=", "chosen": "3", "rejected": "4"}\n\n' + line + "\n")
    with pytest.raises(ConfigError) as err:
        read_pairs(path)
    message = str(err.value)
    assert message.startswith(f"{path}:3: ") and problem in message and "\n" not in message


def test_an_empty_or_missing_pair_file_is_one_line(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    with pytest.raises(ConfigError, match="holds no pairs"):
        read_pairs(empty)
    with pytest.raises(ConfigError, match="no such file"):
        read_pairs(tmp_path / "missing.jsonl")


def test_a_bad_pair_file_fails_before_any_work(tmp_path, monkeypatch):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"prompt": "1+2=", "chosen": "3", "rejected": "3"}\n')
    monkeypatch.setattr(rm_training, "_fit", lambda *a, **k: pytest.fail("trained on bad input"))
    with pytest.raises(ConfigError, match=r"pairs.jsonl:1: chosen and rejected are identical"):
        train_reward_model(_spec(tmp_path), RewardModelRecipe(base="model", pairs=str(path)))
    assert not (tmp_path / "cache" / "reward_models").exists()


# ---------------------------------------------------------------------------------------------- cache


def _spec(tmp_path, **task):
    from harness.algorithms import resolve_algorithm
    from harness.engine.spec import TrialSpec

    return TrialSpec(
        arm="rm",
        algorithm=resolve_algorithm("grpo", {}),
        cache_dir=str(tmp_path / "cache"),
        model=SMALL,
        task=TaskConfig(n_train=300, n_eval=24, **task),
        warmstart={"steps": 20, "batch_size": 16, "lr": 3e-3},
        train={"steps": 2, "prompts_per_step": 4, "max_new_tokens": 4},
    )


FAST = {"lr": 3e-3, "batch_size": 32, "steps": 30}


def fast(pairs: Path) -> RewardModelRecipe:
    """A quick fit of a fresh tiny trunk on a pair file."""
    return RewardModelRecipe(**FAST, base="model", pairs=str(pairs))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A reward model trained on the parity preference from a pair file (a fresh tiny trunk)."""
    tmp = tmp_path_factory.mktemp("rm")
    pairs = write_pairs(tmp / "pairs.jsonl", parity_pairs(200))
    built = train_reward_model(_spec(tmp), fast(pairs))
    return tmp, pairs, built


def test_the_folder_holds_trunk_tokenizer_head_and_manifest(trained):
    _, _, built = trained
    names = {p.name for p in built.folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", HEAD_FILE, MANIFEST_FILE} <= names
    manifest = read_manifest(built.folder)
    assert manifest["id"] == built.id and built.id == f"rm-{built.folder.name}" and not built.cached
    assert set(manifest["sha256"]) == names - {MANIFEST_FILE}
    assert manifest["metrics"]["heldout/accuracy"] >= 0.85
    assert manifest["training"]["steps_run"] == 30 and manifest["base"] == "tiny"
    # the normalisation: the held-out completions' scores have mean 0 and sd 1 after it
    model = load_reward_model(built.folder, "cpu")
    held = split_pairs(read_pairs(trained[1]), fast(trained[1]).held_out, fast(trained[1]).seed)[1]
    rows = list(dict.fromkeys((p.prompt, t) for p in held for t in (p.chosen, p.rejected)))
    z = np.array(model.normalised(model.scores([r[0] for r in rows], [r[1] for r in rows])))
    assert abs(z.mean()) < 1e-5 and z.std() == pytest.approx(1, abs=1e-4)


def test_the_same_inputs_load_the_cached_model_without_training(trained, monkeypatch):
    tmp, pairs, built = trained
    monkeypatch.setattr(rm_training, "fit", lambda *a, **k: pytest.fail("trained again"))
    again = train_reward_model(_spec(tmp), fast(pairs))
    assert again.cached and again.folder == built.folder and again.manifest == built.manifest
    assert rm_key.recipe_id(_spec(tmp), fast(pairs)) == built.id  # known without training
    other = RewardModelRecipe(**{**FAST, "steps": 31}, base="model", pairs=str(pairs))  # any other input: another key
    assert rm_key.recipe_id(_spec(tmp), other) != built.id


def test_a_corrupted_cache_is_rebuilt_with_a_one_line_warning(trained, tmp_path):
    tmp, pairs, built = trained
    import shutil

    spec = _spec(tmp_path)
    folder = Path(spec.cache_dir) / "reward_models" / built.folder.name
    shutil.copytree(built.folder, folder)
    head = folder / HEAD_FILE
    data = bytearray(head.read_bytes())
    data[-1] ^= 0xFF
    head.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=f"{HEAD_FILE} does not match its sha256"):
        load_reward_model(folder, "cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = train_reward_model(spec, fast(pairs))
    lines = [str(w.message) for w in caught if issubclass(w.category, RewardModelCacheWarning)]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert re.search(rf"{HEAD_FILE} does not match its sha256 .*; rebuilding it", lines[0])
    assert not again.cached and again.folder == folder
    assert again.manifest["metrics"]["heldout/accuracy"] == built.manifest["metrics"]["heldout/accuracy"]
    assert head.read_bytes() == (built.folder / HEAD_FILE).read_bytes()  # the same seeded training


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda f: (f / MANIFEST_FILE).unlink(), "has no manifest.json"),
        (lambda f: (f / HEAD_FILE).unlink(), f"{HEAD_FILE} is missing"),
        (
            lambda f: (f / MANIFEST_FILE).write_text(
                json.dumps({"format": "something-else", FIELDS_SHA256: fields_sha256({"format": "something-else"})})
            ),
            "not a harness-reward-model manifest",
        ),
        (lambda f: (f / MANIFEST_FILE).write_text("{not json"), "manifest.json is unreadable"),
    ],
)
def test_a_folder_that_is_not_a_reward_model_is_one_line(trained, tmp_path, damage, problem):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(trained[2].folder, folder)
    damage(folder)
    for call in (
        lambda: load_reward_model(folder, "cpu"),
        lambda: build_task(TaskConfig(reward={"model": str(folder)})),
    ):
        with pytest.raises(ConfigError) as err:
            call()
        assert "not a scalar-head reward model folder" in str(err.value) and problem in str(err.value)
        assert "\n" not in str(err.value)


def test_a_missing_id_or_path_says_how_to_build_it(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"reward.model .rm-0123456789abcdef.: no such reward model .* build it with `harness reward-model train",
    ):
        build_task(TaskConfig(reward={"model": "rm-0123456789abcdef"}), cache_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="no such folder"):
        build_task(TaskConfig(reward={"model": str(tmp_path / "nowhere")}))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a scalar-head reward model folder .it is a file"):
        build_task(TaskConfig(reward={"model": str(tmp_path / "file")}))


def test_an_id_resolves_under_the_cache(trained):
    tmp, _, built = trained
    task = build_task(TaskConfig(reward={"model": built.id}), cache_dir=str(tmp / "cache"))
    assert task.scorer.folder == built.folder


# ---------------------------------------------------------------------------------------------- the scorer


def _items(n: int, seed: int = 9) -> tuple[list[Item], list[str]]:
    rng = random.Random(seed)
    items, texts = [], []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        items.append(Item(f"{a:02d}+{b:02d}=", f"{a + b:03d}"))
        texts.append(f"{a + b:03d}" if rng.random() < 0.5 else f"{rng.randrange(200):03d}")
    return items, texts


def test_the_scorer_is_batched_deterministic_and_without_gradients(trained, monkeypatch):
    folder = trained[2].folder
    items, texts = _items(40)
    task = build_task(TaskConfig(reward={"model": str(folder), "batch_size": 16}))
    scorer = task.scorer
    scorer.device = "cpu"
    seen = []
    forward = rm_model.RewardModel.forward

    def spy(self, prompts, completions):
        seen.append((len(prompts), torch.is_grad_enabled()))
        return forward(self, prompts, completions)

    monkeypatch.setattr(rm_model.RewardModel, "forward", spy)
    with torch.enable_grad():
        first = scorer(items, texts)
    assert seen == [(16, False), (16, False), (8, False)]
    assert scorer(items, texts) == first  # deterministic
    one_by_one = build_task(TaskConfig(reward={"model": str(folder), "batch_size": 1})).scorer
    assert one_by_one(items, texts) == pytest.approx(first, abs=1e-5)  # batching does not change a score
    assert all(not p.requires_grad for p in scorer.model.module.parameters())
    # the learned preference shows: even final digits score higher
    even = scorer([items[0]] * 2, ["042", "043"])
    assert even[0] > even[1]


def test_the_weights_combine_as_documented(trained):
    folder = trained[2].folder
    items, texts = _items(24)
    verifier = [float(t == i.answer) for i, t in zip(items, texts)]
    only_verifier = build_task(TaskConfig(reward={"model": str(folder), "weight": 0, "verifier_weight": 1}))
    assert only_verifier.scorer(items, texts) == verifier
    assert only_verifier.scorer._model is None  # the model was never loaded
    plain = build_task(TaskConfig(reward={"model": str(folder)})).scorer
    z = plain(items, texts)
    mixed = build_task(TaskConfig(reward={"model": str(folder), "weight": 0.5, "verifier_weight": 2})).scorer
    assert mixed(items, texts) == pytest.approx([0.5 * a + 2 * b for a, b in zip(z, verifier)])
    manifest = read_manifest(folder)
    raw = plain.model.scores([i.prompt for i in items], texts)
    assert z == pytest.approx([(r - manifest["score_mean"]) / manifest["score_std"] for r in raw])
    # the task's reward stays the verifier: the gold score evaluation uses
    task = build_task(TaskConfig(reward={"model": str(folder), "verifier": "partial_match"}))
    assert task.reward(Item("1+1=", "002"), "002") == 1.0 and task.scorer.verifier is task.reward
    with pytest.raises(ValueError, match="one item per completion"):
        plain(items[:2], texts)


def test_building_a_task_with_a_learned_reward_imports_no_torch(trained):
    script = (
        "import sys\nfrom harness.engine.task_config import TaskConfig\nfrom harness.engine.tasks import build_task\n"
        f"task = build_task(TaskConfig(reward={{'model': {str(trained[2].folder)!r}}}))\n"
        "assert task.scorer is not None\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------- from the verifier


def test_pairs_built_from_the_verifier_on_the_warm_start(tmp_path):
    """The warm start's samples, labelled by the verifier with label noise: every kept label
    agrees with the verifier unless it was flipped, and the metrics say how the model does on both."""
    spec = _spec(tmp_path, reward="partial_match")
    sampling = {"prompts": 60, "samples_per_prompt": 4, "pairs_per_prompt": 2, "label_noise": 0.25}
    built = train_reward_model(spec, RewardModelRecipe(steps=10, lr=3e-3, from_verifier=sampling))
    m = built.manifest["metrics"]
    assert m["pairs/total"] >= 20 and 0 < m["pairs/flipped_share"] < 0.5
    assert {"heldout/accuracy", "heldout/accuracy_gold", "heldout/ece_gold", "heldout/brier"} <= set(m)
    assert built.manifest["inputs"]["warmstart"] is not None  # keyed by the warm start it sampled
    assert (Path(spec.cache_dir) / "warmstart" / built.manifest["inputs"]["warmstart"] / "manifest.json").is_file()


def test_a_local_model_with_lora_and_a_chat_template_is_merged_before_saving(tmp_path, monkeypatch):
    import string

    source = tmp_path / "tiny-llama"
    tok = char_tokenizer(string.printable.strip() + " ")
    tok.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    build_tiny_model(SMALL, len(tok), tok, seed=0).save_pretrained(source)
    tok.save_pretrained(source)
    trainable = []
    real_fit = rm_training.fit

    def spy(rm, *args, **kwargs):
        trainable.append({"lora" if "lora_" in n else n for n, p in rm.module.named_parameters() if p.requires_grad})
        return real_fit(rm, *args, **kwargs)

    monkeypatch.setattr(rm_training, "fit", spy)
    lora = ModelConfig(**{**SMALL.model_dump(), "lora": {"r": 4, "alpha": 8}})
    spec = _spec(tmp_path).model_copy(update={"model": lora})
    pairs = write_pairs(tmp_path / "pairs.jsonl", parity_pairs(60))
    built = train_reward_model(spec, RewardModelRecipe(steps=3, lr=3e-3, base=str(source), pairs=str(pairs)))
    assert trainable == [{"lora", "head.weight"}]  # the adapter and the head, not the trunk
    names = {p.name for p in built.folder.iterdir()}
    assert "adapter_config.json" not in names and "model.safetensors" in names  # merged into the trunk
    assert built.manifest["prompt_format"] == "chat" and built.manifest["base"] == str(source)
    model = load_reward_model(built.folder, "cpu")
    assert model.lm.use_chat_template and len(model.scores(["01+02="], ["004"])) == 1


def test_an_edited_manifest_field_is_never_trusted(trained, tmp_path):
    """An edited score_mean would shift every reward the scorer gives: a cached entry so edited
    is warned and rebuilt; a folder a study names so edited is refused in one line."""
    import shutil

    _, pairs, built = trained
    spec = _spec(tmp_path)
    folder = Path(spec.cache_dir) / "reward_models" / built.folder.name
    shutil.copytree(built.folder, folder)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest["score_mean"] += 1.0
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    edited = "manifest.json was edited after it was written (its fields do not match its manifest_sha256)"
    for call in (
        lambda: load_reward_model(folder, "cpu"),
        lambda: build_task(TaskConfig(reward={"model": str(folder)})),
        lambda: build_task(TaskConfig(reward={"model": built.id}), cache_dir=spec.cache_dir),
    ):
        with pytest.raises(ConfigError) as err:
            call()
        assert edited in str(err.value) and "\n" not in str(err.value)
    with pytest.warns(RewardModelCacheWarning) as caught:
        again = train_reward_model(spec, fast(pairs))
    assert [str(w.message) for w in caught] == [f"reward-model cache {folder}: {edited}; rebuilding it"]
    assert not again.cached and again.manifest["score_mean"] == built.manifest["score_mean"]


# ---------------------------------------------------------------------------------------------- named by its recipe


def _one_line_error(task: dict) -> str:
    from pydantic import ValidationError

    from harness.study.field_errors import format_validation_error

    with pytest.raises(ValidationError) as err:
        TaskConfig(**task)
    return format_validation_error(err.value, TaskConfig)


@pytest.mark.parametrize(
    "reward, message",
    [
        (
            {"model": "rm-0123456789abcdef", "train": {"from_verifier": {}}},
            (
                "either as built (model: rm-<hash> or a "
                "folder) or by how it is trained (train: {from_verifier: {label_noise: 0.2}}), one of the two"
            ),
        ),
        ({"weight": 1.0}, "one of the two"),
        ({"train": {"steps": 5}}, "give the pairs either as a file (pairs: FILE.jsonl) or built from the verifier"),
        ({"train": {"pairs": "p.jsonl", "from_verifier": {}}}, "one of the two"),
        ({"train": {"from_verifier": {"label_noise": 0.7}}}, "reward.train.from_verifier.label_noise"),
        ({"train": {"from_verifier": {}, "lr": -1}}, "reward.train.lr"),
        ({"train": {"from_verifier": {}, "base": " "}}, "give warmstart, model, or a hub id / local folder"),
        ({"train": {"from_verifier": {"label_nose": 0.2}}}, "reward.train.from_verifier.label_nose"),
    ],
)
def test_a_bad_recipe_is_one_line_naming_the_field(reward, message):
    line = _one_line_error({"reward": reward})
    assert message in line and "\n" not in line


def test_a_recipe_is_checked_when_the_task_is_built_but_not_trained(tmp_path):
    """``harness validate`` builds the task: a recipe's pair file is read line by line, and
    nothing is trained (or imports torch) until a trial builds the model."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "1+2=", "chosen": "3"}\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:1: missing field rejected"):
        build_task(TaskConfig(reward={"train": {"pairs": str(bad)}}))
    with pytest.raises(ConfigError, match=r"task.reward.train.pairs '.*nowhere.jsonl': no such file"):
        build_task(TaskConfig(reward={"train": {"pairs": str(tmp_path / "nowhere.jsonl")}}))
    script = (
        "import sys\nfrom harness.engine.task_config import TaskConfig\nfrom harness.engine.tasks import build_task\n"
        "task = build_task(TaskConfig(reward={'train': {'from_verifier': {'label_noise': 0.2}}}))\n"
        "assert task.scorer.folder is None\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
        "try:\n    task.scorer.model\nexcept Exception as err:\n    print(type(err).__name__, err)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[]",
        (
            "HarnessError task.reward.train names a reward model that is not built yet: a trial builds it before "
            "its first step (harness.engine.reward_model.recipe.with_built_reward_model)"
        ),
    ]


def test_the_shipped_study_trains_the_model_the_documented_command_trains():
    """studies/rlhf_reward_model.yaml's recipe is ``--from-verifier --label-noise 0.2`` on the
    study: the same inputs, so the same id (the README's rm-b9bc4bca41398764, on a CPU)."""
    from harness.study.expand import condition_spec
    from harness.study.load import load_study

    study = load_study(Path(__file__).resolve().parents[2] / "studies" / "rlhf_reward_model.yaml")
    documented = RewardModelRecipe(from_verifier={"label_noise": 0.2})
    ids = {
        rm_key.recipe_id(condition_spec(study, arm.name, seed), documented)
        for arm in study.arms
        for seed in study.seeds
    }
    assert len(ids) == 1  # every arm and seed trains on one model
    spec = condition_spec(study, study.control, study.seeds[0])
    assert ids == {rm_key.recipe_id(spec, spec.task.reward.train)}


def _recipe_spec(cache_dir: str, arm: str = "grpo", seed: int = 0):
    from harness.algorithms import resolve_algorithm
    from harness.engine.spec import TrialSpec

    recipe = {"steps": 10, "lr": 3e-3, "from_verifier": {"prompts": 60, "samples_per_prompt": 4, "label_noise": 0.2}}
    return TrialSpec(
        arm=arm,
        seed=seed,
        algorithm=resolve_algorithm(arm, {}),
        cache_dir=cache_dir,
        model=SMALL,
        task=TaskConfig(n_train=300, n_eval=24, reward={"train": recipe, "verifier": "partial_match"}),
        warmstart={"steps": 20, "batch_size": 16, "lr": 3e-3},
        train={"steps": 2, "prompts_per_step": 4, "max_new_tokens": 4, "eval_every": 0, "eval_samples": 2},
    )


def _timeless(result) -> tuple:
    return (
        {k: v for k, v in result.final.items() if not k.startswith(("time/", "compute/wall_s"))},
        [{k: v for k, v in row.items() if not k.startswith(("time/", "compute/wall_s"))} for row in result.history],
    )


def test_a_trial_builds_the_recipes_model_once_and_later_trials_load_it(tmp_path, monkeypatch, capfd):
    """The first trial builds the model (and says so in its log), a trial of another arm and seed
    finds it cached, and a trial on the cached model gives exactly what the one that built it gave."""
    from harness.engine.trial import run_trial

    spec = _recipe_spec(str(tmp_path / "cache"))
    first = run_trial(spec)
    log = capfd.readouterr().err
    folder = Path(spec.cache_dir) / "reward_models" / rm_key.recipe_id(spec, spec.task.reward.train)[3:]
    assert f"reward model: building {folder}:" in log and "using the cached reward model" not in log
    assert (folder / MANIFEST_FILE).is_file() and first.status == "completed"
    assert "train/reward_proxy" in first.final and "train/reward_gold" in first.final

    monkeypatch.setattr(rm_training, "_fit", lambda *a, **k: pytest.fail("built again"))
    other = run_trial(_recipe_spec(spec.cache_dir, arm="ppo", seed=1))
    log = capfd.readouterr().err
    assert f"reward model: using the cached reward model {folder}" in log and "building" not in log
    assert other.status == "completed"
    assert _timeless(run_trial(spec)) == _timeless(first)  # built here or loaded: the same trial
    assert [p.name for p in (Path(spec.cache_dir) / "reward_models").iterdir() if p.is_dir()] == [folder.name]
