"""The pretrained-analysis preset (``configs/pretrained.yaml``), typed and frozen, validated once at the edge.

Paths in it are relative to the folders ``dvc.yaml`` passes (``--checkpoints``, ``--images``), so the
pipeline file owns every location and the preset only names what lies inside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, StrictInt, StrictStr, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from study.core.errors import StudyError

_FROZEN = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_FROZEN)
class CheckpointParams:
    # hf:<folder>, timm:<model name> (with weights), or study:<model.pt>; paths under --checkpoints
    source: StrictStr
    weights: StrictStr | None = None  # the weights file of a timm: source, under --checkpoints


@dataclass(frozen=True, config=_FROZEN)
class ImageParams:
    count: StrictInt = Field(default=1000, ge=4)  # the first `count` images of the folder, in sorted path order


@dataclass(frozen=True, config=_FROZEN)
class PretrainedAnalysisParams:
    batch_size: StrictInt = Field(default=64, ge=4)  # minibatch CKA's batch (unbiased HSIC needs n >= 4)
    kernel: Literal["linear", "rbf"] = "linear"
    rbf_threshold: float = Field(default=1.0, gt=0.0)
    show: StrictInt = Field(default=4, ge=1)  # images drawn in the attention-map figures
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: StrictInt = Field(default=0, ge=0)  # torch intra-op threads; 0 = torch's default


@dataclass(frozen=True, config=_FROZEN)
class PretrainedParams:
    models: dict[StrictStr, CheckpointParams] = Field(min_length=2)
    images: ImageParams = ImageParams()
    analysis: PretrainedAnalysisParams = PretrainedAnalysisParams()


def load_pretrained_params(path: str | Path) -> PretrainedParams:
    """Read and validate the preset at ``path``; a one-line StudyError on the first problem."""
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"{path}: no such parameters file; pass --params (pretrained/dvc.yaml reads configs/pretrained.yaml)")
    try:
        raw: Any = yaml.safe_load(path.read_text())
        params = TypeAdapter(PretrainedParams).validate_python(raw)
    except yaml.YAMLError:
        raise StudyError(f"{path}: not valid YAML; fix the syntax") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        raise StudyError(f"{path}: {where}: {first['msg']} (got {first.get('input')!r})") from None
    for name, model in params.models.items():
        if model.source.startswith("timm:") != (model.weights is not None):
            raise StudyError(f"{path}: models.{name}: give weights exactly when the source is timm:<name>")
        if "/" in name or not name:
            raise StudyError(f"{path}: models.{name!r}: a model's key must be a plain name (no '/')")
    return params
