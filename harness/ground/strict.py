"""The one strict pydantic base: unknown keys and non-finite numbers are errors that name the
field. A model that also needs to be frozen or checked on assignment adds that to its own
``model_config`` (pydantic merges it with this one)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are refused and NaN or infinity is not a number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
