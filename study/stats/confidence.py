"""``analysis.curves``: the confidence level of every seed interval the analyses report (the schema and its reader).

Every stage that computes an interval reads it, so it is a section of its own: editing another analysis's schema
leaves those stages as they are."""

from __future__ import annotations

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from study.core.config import Params, section

_FROZEN = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_FROZEN)
class CurvesParams:
    confidence: StrictFloat = Field(default=0.95, gt=0.0, lt=1.0)


def confidence(params: Params) -> float:
    """The level of the study's seed intervals (``analysis.curves.confidence``)."""
    return section(params, "analysis.curves", CurvesParams).confidence
