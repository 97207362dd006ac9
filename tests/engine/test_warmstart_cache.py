"""A damaged warm-start cache is noticed, reported in one line and rebuilt (issue: garbled tensor
data was used silently, trials finishing at accuracy 0.0 while the record still said 0.445; a
garbled safetensors header failed every trial with a bare ``SafetensorError``).

Each test copies the session's shared cache into its own folder, damages the copy, and runs a
trial on it: the trial must warn, rebuild, and give exactly what a trial on the healthy cache
gives (the rebuild is the same seeded SFT, so even the weights' bytes come out the same).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

from harness.engine.trial import run_trial
from harness.engine.warmstart_key import WarmStartInputs, cache_key

REBUILT = r"warm-start cache .*; rebuilding it"


def _folder(spec) -> Path:
    return Path(spec.cache_dir) / "warmstart" / cache_key(WarmStartInputs.of(spec))


def _timeless(result):
    final = {k: v for k, v in result.final.items() if not k.startswith(("time/", "compute/wall_s"))}
    history = [
        {k: v for k, v in row.items() if not k.startswith(("time/", "compute/wall_s"))} for row in result.history
    ]
    return final, history


@pytest.fixture
def healthy(make_spec):
    """A trial on the session's shared (healthy) cache, and that cache's folder."""
    spec = make_spec("grpo")
    return spec, run_trial(spec), _folder(spec)


@pytest.fixture
def copy(healthy, tmp_path):
    """A spec whose cache is a private copy of the healthy one, and the copy's folder."""
    spec, _, source = healthy
    local = spec.model_copy(update={"cache_dir": str(tmp_path / "cache")})
    shutil.copytree(source, _folder(local))
    return local, _folder(local)


def _data_start(path: Path) -> int:
    (header_len,) = struct.unpack("<Q", path.read_bytes()[:8])
    return 8 + header_len


def flip_tensor_data(folder: Path) -> None:
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    start = _data_start(path)
    assert (len(raw) - start) % 4 == 0  # float32 tensors
    for i in range(start + 2, len(raw), 4):  # one byte of every float: the values stay finite
        raw[i] ^= 0x5A
    path.write_bytes(bytes(raw))


def randomize_tensor_data(folder: Path) -> None:
    """Finite garbage in every tensor (the issue's case: trials finished at accuracy 0.0)."""
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    start = _data_start(path)
    values = np.random.default_rng(0).uniform(-0.5, 0.5, (len(raw) - start) // 4).astype("<f4")
    raw[start:] = values.tobytes()
    path.write_bytes(bytes(raw))


def garble_header(folder: Path) -> None:
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    raw[9:41] = b"#" * 32  # inside the JSON header; its length prefix is left as it was
    path.write_bytes(bytes(raw))


def truncate(name: str):
    def damage(folder: Path) -> None:
        text = (folder / name).read_text()
        (folder / name).write_text(text[: len(text) // 2])

    damage.__name__ = f"truncate_{name}"
    return damage


def remove(name: str):
    def damage(folder: Path) -> None:
        (folder / name).unlink()

    damage.__name__ = f"remove_{name}"
    return damage


def edit_recorded_accuracy(folder: Path) -> None:
    """Parseable but not what was saved: the checksum of warmstart.json catches it."""
    info = json.loads((folder / "warmstart.json").read_text())
    info["warmstart/val_accuracy"] = 0.999
    (folder / "warmstart.json").write_text(json.dumps(info, indent=2))


DAMAGES = {
    "tensor data": (flip_tensor_data, r"model\.safetensors"),
    "header": (garble_header, r"model\.safetensors"),
    "truncated warmstart.json": (truncate("warmstart.json"), r"warmstart\.json"),
    "missing warmstart.json": (remove("warmstart.json"), r"warmstart\.json"),
    "truncated manifest": (truncate("manifest.json"), r"manifest\.json"),
    "missing tokenizer file": (remove("tokenizer.json"), r"tokenizer\.json"),
    "missing weights": (remove("model.safetensors"), r"model\.safetensors"),
    "edited warmstart.json": (edit_recorded_accuracy, r"warmstart\.json"),
}


def _rebuilt_like_fresh(healthy, folder: Path, run, match: str) -> None:
    _, baseline, source = healthy
    with pytest.warns(UserWarning, match=REBUILT) as caught:
        result = run()
    ours = [w for w in caught if "warm-start cache" in str(w.message)]
    assert len(ours) == 1 and "\n" not in str(ours[0].message), [str(w.message) for w in ours]
    assert re.search(match, str(ours[0].message)), str(ours[0].message)
    assert result.status == "completed"
    assert result.final["warmstart/val_accuracy"] == baseline.final["warmstart/val_accuracy"]
    assert result.final["eval/accuracy_start"] == baseline.final["eval/accuracy_start"]
    assert _timeless(result) == _timeless(baseline)
    # rebuilt, not patched: the same seeded SFT wrote the same bytes, and the manifest is whole
    assert (folder / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()
    assert json.loads((folder / "manifest.json").read_text())["sha256"].keys() >= {
        "model.safetensors",
        "warmstart.json",
    }


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_cache_warns_and_is_rebuilt_like_a_fresh_one(healthy, copy, damage):
    spec, folder = copy
    damage_fn, match = DAMAGES[damage]
    damage_fn(folder)
    _rebuilt_like_fresh(healthy, folder, lambda: run_trial(spec), match)
    with warnings.catch_warnings():  # and once rebuilt it is healthy again
        warnings.simplefilter("error", UserWarning)
        assert _timeless(run_trial(spec)) == _timeless(healthy[1])


def _stamps(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_a_healthy_cache_is_used_as_it_is(healthy, copy):
    spec, folder = copy
    before = _stamps(folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_trial(spec)
    assert not [str(w.message) for w in caught if "warm-start cache" in str(w.message)]
    assert _stamps(folder) == before
    assert _timeless(result) == _timeless(healthy[1])


def test_a_cache_without_checksums_is_rechecked_by_its_accuracy_and_kept(healthy, copy):
    """A cache from before checksums (no manifest): its greedy val accuracy is re-measured, and
    when it agrees with the record the cache is kept (weights untouched) and gets its manifest."""
    spec, folder = copy
    (folder / "manifest.json").unlink(missing_ok=True)
    before = _stamps(folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_trial(spec)
    assert not [str(w.message) for w in caught if "warm-start cache" in str(w.message)]
    after = _stamps(folder)
    assert after.pop("manifest.json") and after == before
    assert _timeless(result) == _timeless(healthy[1])
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["val_accuracy"] == healthy[1].final["warmstart/val_accuracy"]


@pytest.mark.parametrize("damage", [randomize_tensor_data, garble_header], ids=["tensor data", "header"])
def test_a_damaged_cache_without_checksums_is_caught_and_rebuilt(healthy, copy, damage):
    spec, folder = copy
    (folder / "manifest.json").unlink(missing_ok=True)
    damage(folder)
    match = r"accuracy re-measured" if damage is randomize_tensor_data else r"cannot load .*SafetensorError"
    _rebuilt_like_fresh(healthy, folder, lambda: run_trial(spec), match)


def test_a_half_written_cache_is_rebuilt(healthy, copy):
    """Weights written but the build stopped before warmstart.json and the manifest."""
    spec, folder = copy
    (folder / "manifest.json").unlink(missing_ok=True)
    (folder / "warmstart.json").unlink()
    _rebuilt_like_fresh(healthy, folder, lambda: run_trial(spec), r"warmstart\.json")
