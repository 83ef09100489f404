"""``analysis.cka``: what the CKA stage compares representations on (the schema and its reader)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from study.core.config import Params, section

_FROZEN = ConfigDict(extra="forbid")

from study.core.errors import StudyError

@dataclass(frozen=True, config=_FROZEN)
class CkaParams:
    images: StrictInt = Field(default=2000, ge=4)  # test images the representations are taken on
    batch_size: StrictInt = Field(default=250, ge=4)  # unbiased HSIC needs n >= 4 per batch
    kernel: Literal["linear", "rbf"] = "linear"
    rbf_threshold: StrictFloat = Field(default=1.0, gt=0.0)


def cka_params(params: Params) -> CkaParams:
    """``analysis.cka``, validated (a batch is never larger than the images it is taken from)."""
    cka = section(params, "analysis.cka", CkaParams)
    if cka.batch_size > cka.images:
        raise StudyError(f"{params.source}: analysis.cka.batch_size must not exceed analysis.cka.images")
    return cka
