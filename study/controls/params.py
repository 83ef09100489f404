"""``analysis.controls``: the one-change pairs the controls stage compares (the schema and its reader)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from study.core.config import Params, section

_FROZEN = ConfigDict(extra="forbid")

from study.core.errors import StudyError

@dataclass(frozen=True, config=_FROZEN)
class ControlsParams:
    """Stage ``controls``: each listed arm against the model it changes one thing of (``[arm, against]``), on the
    clean test images and under every robustness probe, paired by seed, one model over the fractions."""

    pairs: tuple[tuple[StrictStr, StrictStr], ...] = ()
    # A ViT without position embedding and the ViT it is a twin of, [twin, vit]: whether the twin keeps more of its
    # accuracy under the patch-grid shuffle, per fraction (the position hypothesis); none: not asked.
    position: tuple[StrictStr, StrictStr] | None = None


def controls_params(params: Params) -> ControlsParams:
    """``analysis.controls``, validated: a pair names models defined under ``models`` (a typo fails here); one
    whose models the study does not train (a preset that drops the student) is skipped by the stage, so presets
    need not repeat the list."""
    controls, source = section(params, "analysis.controls", ControlsParams), params.source
    for i, pair in enumerate(controls.pairs):
        for name in pair:
            if name not in params.models:
                raise StudyError(f"{source}: analysis.controls.pairs[{i}] names '{name}', not a model of the study "
                                 f"({sorted(params.models)}); define it under models or drop the pair from "
                                 "analysis.controls.pairs")
        if pair[0] == pair[1]:
            raise StudyError(f"{source}: analysis.controls.pairs[{i}] compares '{pair[0]}' with itself; name two "
                             "different models")
    for name in controls.position or ():
        if name not in params.models:
            raise StudyError(f"{source}: analysis.controls.position names '{name}', not a model of the study "
                             f"({sorted(params.models)}); name the ViT without position embedding and its ViT")
    return controls
