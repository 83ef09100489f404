"""The run spec: what training writes beside a run's weights and every analysis reads to rebuild and feed them.

It is the contract between ``study train`` and the analyses, so it is typed here once. ``model.pt`` stores it as
plain data (``{"spec": RunSpec.as_dict(), "state_dict": ...}``), never as a pickled class, so a checkpoint loads
with ``torch.load(weights_only=True)`` and stays readable without this package; the dict's key order is the one
runs have always written, so equal weights still give byte-identical files. Entries added later are left out at
their default (``budget_factor`` 1: a run of the study's own budget), so such a run's file is the one it always was.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Mapping

from study.core.errors import StudyError


@dataclass(frozen=True)
class DistillSpec:
    """How a distilled student learned from its teacher (DeiT, Touvron et al. 2021)."""

    kind: str  # "hard" or "soft"
    teacher: str  # the teacher's model name in params
    alpha: float
    tau: float
    kl_reduction: str = "batchmean"


@dataclass(frozen=True)
class RunSpec:
    """One trained model: what builds it, what it was trained on, and how its inputs were normalised."""

    model_name: str  # its key in params' models
    arch: str  # registry name (study.models.build_model)
    arch_args: Mapping[str, Any]
    num_classes: int
    image_size: int
    in_chans: int
    fraction: float
    seed: int
    params: int  # trainable parameters
    forward_flops: int  # per image
    distill: DistillSpec | None = None
    teacher_forward_flops: int | None = None
    mean: tuple[float, ...] = field(default=())  # per-channel training-set statistics on the 0-1 scale
    std: tuple[float, ...] = field(default=())
    # The study's budget (budget.epochs and budget.min_steps) times this; > 1 for the budget check's longer runs.
    budget_factor: float = 1.0
    # The scrambled data condition it was trained on ({"cell": .., "seed": ..}: study.data.scramble redraws the
    # permutations from them); None = natural images. Every analysis feeds the run its images scrambled the same way.
    scramble: Mapping[str, int] | None = None

    def with_normalisation(self, mean: list[float], std: list[float]) -> RunSpec:
        return replace(self, mean=tuple(mean), std=tuple(std))

    def as_dict(self) -> dict[str, Any]:
        """Plain data in the written order; unset optional entries left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("distill", "teacher_forward_flops", "scramble") and value is None:
                continue
            if f.name in ("mean", "std") and not value:
                continue
            if f.name == "budget_factor" and value == 1.0:
                continue
            if isinstance(value, DistillSpec):
                value = {g.name: getattr(value, g.name) for g in fields(value)}
            elif isinstance(value, tuple):
                value = list(value)
            elif f.name in ("arch_args", "scramble"):
                value = dict(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RunSpec:
        """The spec a checkpoint stored; :class:`StudyError` naming what is missing or unknown."""
        names = {f.name for f in fields(cls)}
        missing = sorted(f.name for f in fields(cls) if f.default is MISSING and f.name not in raw)
        unknown = sorted(set(raw) - names)
        if missing or unknown:
            raise StudyError(f"run spec: missing {missing}, unknown {unknown}; rerun the training stage (`dvc repro`)")
        values = dict(raw)
        if values.get("distill") is not None:
            values["distill"] = DistillSpec(**values["distill"])
        for key in ("mean", "std"):
            values[key] = tuple(values.get(key, ()))
        values["arch_args"] = dict(values["arch_args"])
        if values.get("scramble") is not None:
            values["scramble"] = dict(values["scramble"])
        return cls(**values)
