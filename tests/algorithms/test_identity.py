"""A trial's identity survives the parts added after it ran: the later fields at their defaults
are left out of the config hash, so a stored trial is neither renamed nor taken for an earlier
design; set to anything else they count."""

from __future__ import annotations

from pathlib import Path

from harness.algorithms.config import LATER_FIELDS, RLConfig, identity
from harness.study.expand import expand
from harness.study.load import load_study

QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.yaml"
#: the quickstart's trial ids as the harness named them before the later fields existed (29a0c03)
IDS_BEFORE = {"grpo-s0-873258b2", "dr_grpo-s1-e8a766cf", "rloo-s2-16feb6fb"}


def test_trials_stored_before_the_later_parts_keep_their_ids():
    ids = {spec.trial_id for spec in expand(load_study(QUICKSTART))}
    assert ids >= IDS_BEFORE


def test_a_later_field_set_away_from_its_default_changes_the_identity():
    base = RLConfig(name="grpo")
    assert LATER_FIELDS.isdisjoint(identity(base))
    changed = base.model_copy(update={"mismatch": "token_truncate"})
    assert identity(changed)["mismatch"] == "token_truncate"
    assert identity(changed) != identity(base)


def test_every_later_field_is_a_field():
    assert RLConfig.model_fields.keys() >= LATER_FIELDS
