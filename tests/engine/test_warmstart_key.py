"""The warm-start cache key covers everything the warm start reads (issue: a key that left out
``train.max_new_tokens`` shared one cache between warm starts that stop at different steps)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from harness.algorithms.presets import resolve_algorithm
from harness.engine.spec import TrialSpec
from harness.engine.warmstart_key import WarmStartInputs, cache_key


def other(value: Any) -> Any:
    """Some value different from ``value`` (the key hashes the dump; no validation needed)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_other"
    if isinstance(value, list):
        return [*value, "other"]
    return "other"  # None


def leaves(model: BaseModel, prefix: tuple[str, ...] = ()):
    """(path, changed copy of the root) for every leaf field below ``model``."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            for path, changed in leaves(value, (*prefix, name)):
                yield path, model.model_copy(update={name: changed})
        else:
            yield (*prefix, name), model.model_copy(update={name: other(value)})


def test_every_input_of_the_warm_start_changes_the_key():
    base = WarmStartInputs.of(TrialSpec(arm="grpo", algorithm=resolve_algorithm("grpo")))
    keys = {}
    for path, changed in leaves(base):
        keys[".".join(path)] = cache_key(changed)
    assert "max_new_tokens" in keys and "task.n_train" in keys and "warmstart.target_accuracy" in keys
    assert all(key != cache_key(base) for key in keys.values()), [p for p, k in keys.items() if k == cache_key(base)]
    assert len(set(keys.values())) == len(keys)


def test_what_the_warm_start_does_not_read_shares_the_key():
    def key(**changes) -> str:
        spec = TrialSpec(arm="grpo", algorithm=resolve_algorithm("grpo")).model_copy(update=changes)
        return cache_key(WarmStartInputs.of(spec))

    train = TrialSpec(arm="grpo", algorithm=resolve_algorithm("grpo")).train
    assert key() == key(seed=3) == key(arm="x", algorithm=resolve_algorithm("rloo"))
    assert key() == key(train=train.model_copy(update={"steps": 5, "temperature": 0.7}))
    assert key() != key(train=train.model_copy(update={"max_new_tokens": 6}))
