"""``analysis.seed``: the training seed whose runs the CKA and attention stages inspect one by one."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictInt

from study.core.config import Params, section
from study.core.errors import StudyError


def inspected_seed(params: Params) -> int:
    """``analysis.seed`` (default 0), which must be one of the study's seeds."""
    seed = section(params, "analysis.seed", Annotated[StrictInt, Field(ge=0)], default=0)
    if seed not in params.seeds:
        raise StudyError(f"{params.source}: analysis.seed = {seed}: must be one of seeds {list(params.seeds)}")
    return seed
