"""Include-only fragments (``fragment: true``): shared settings that studies include.

A fragment is checked as far as it can be alone: every top-level key is a study field, and every
value it sets is what that field takes (types, ranges, names, the field's own checks). What only
a whole study can say (its name, arms and seeds, the control among the arms, presets resolving
with the arms' overrides) is checked in each study that includes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from harness.errors import ConfigError
from harness.study.field_errors import error_line
from harness.study.load import FRAGMENT_KEY
from harness.study.schema import Study


def check_fragment(data: Mapping[str, Any]) -> list[str]:
    """The fields a fragment's data (``read_study_data``, its own includes merged) sets, after
    the checks above; a one-line ``ConfigError`` naming the first bad field (and how many more)."""
    fields = {key: value for key, value in data.items() if key != FRAGMENT_KEY}
    try:
        Study.model_validate(fields)
    except ValidationError as err:
        # a study's required fields are the including study's business; the rest is the fragment's
        errors = [e for e in err.errors() if not (e["type"] == "missing" and len(e["loc"]) == 1)]
        if errors:
            more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
            raise ConfigError(error_line(errors[0], Study) + more) from None
    return sorted(fields)
