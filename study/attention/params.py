"""``analysis.attention``: how many images the attention stage measures and draws (the schema and its reader)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from study.core.config import Params, section

_FROZEN = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_FROZEN)
class AttentionParams:
    images: StrictInt = Field(default=128, gt=0)  # images averaged for mean attention distance
    show: StrictInt = Field(default=4, gt=0)  # images drawn in the attention-map figures


def attention_params(params: Params) -> AttentionParams:
    return section(params, "analysis.attention", AttentionParams)
