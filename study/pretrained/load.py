"""``load_pretrained``: one function for every kind of checkpoint the study can analyse.

Sources (a string, as a preset names them):

* ``hf:<folder>`` or a folder holding ``config.json`` — a Hugging Face ``save_pretrained`` folder of
  ``ViTForImageClassification``, ``DeiTForImageClassification`` or ``DeiTForImageClassificationWithTeacher``,
  converted into the study's ViT/DeiT (:mod:`study.pretrained.huggingface`);
* ``timm:<model name>`` with ``weights`` — a timm architecture and a local safetensors file or state dict
  (:mod:`study.pretrained.timm_source`);
* ``study:<model.pt>`` or a path ending in ``.pt`` — a checkpoint of the study's own runs.

Every source gives a :class:`Checkpoint`: the module in eval mode (normalised ``(B, C, H, W)`` images ->
logits), the preprocessing its images need, and the files its weights came from (for their SHA-256).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from study.core.errors import StudyError
from study.pretrained.images import Preprocessing

HF_PREFIX, TIMM_PREFIX, STUDY_PREFIX = "hf:", "timm:", "study:"


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: ``model`` (eval mode), its ``preprocessing``, what it is, and where it came from."""

    model: nn.Module
    preprocessing: Preprocessing
    kind: str  # "huggingface", "timm" or "study"
    architecture: str  # e.g. "ViTForImageClassification", "timm:resnet50", "study:vit"
    weights: Path  # the file the weights were read from

    @property
    def attention_maps(self) -> bool:
        """Whether the analyses can read per-head attention from this model (the study's ViT/DeiT)."""
        from study.models.vit import VisionTransformer

        return isinstance(self.model, VisionTransformer)


def load_pretrained(source: str, weights: str | Path | None = None) -> nn.Module:
    """The model of ``source`` in eval mode; see the module docstring for the sources."""
    return open_checkpoint(source, weights).model


def open_checkpoint(source: str, weights: str | Path | None = None) -> Checkpoint:
    """``source`` (and, for timm, its ``weights`` file) -> :class:`Checkpoint`."""
    if source.startswith(TIMM_PREFIX):
        from study.pretrained.timm_source import load_timm

        if weights is None:
            raise StudyError(f"{source}: a timm model needs a local weights file (weights: path/to/file.safetensors); "
                             "the study never downloads")
        path = Path(weights)
        model, preprocessing = load_timm(source[len(TIMM_PREFIX):], path)
        return Checkpoint(model, preprocessing, "timm", source, path)
    if weights is not None:
        raise StudyError(f"{source}: weights are given only with a timm: source; the others hold their own")
    if source.startswith(STUDY_PREFIX) or (source.endswith(".pt") and not source.startswith(HF_PREFIX)):
        return _study_checkpoint(Path(source.removeprefix(STUDY_PREFIX)))
    return _huggingface(Path(source.removeprefix(HF_PREFIX)), source)


def _huggingface(folder: Path, source: str) -> Checkpoint:
    from study.pretrained import huggingface as hf

    if not hf.is_huggingface_folder(folder):
        raise StudyError(f"{source}: not a Hugging Face save_pretrained folder (no {folder}/config.json); name a "
                         "folder, timm:<name> with weights, or study:<model.pt>")
    model, arch, path = hf.load_folder(folder)
    preprocessing = hf.preprocessing(folder, hf.read_config(folder))
    if preprocessing.crop != model.patch_embed.img_size:
        raise StudyError(f"{source}: the image processor makes {preprocessing.crop[0]}x{preprocessing.crop[1]} inputs "
                         f"but the model takes {model.patch_embed.img_size[0]}x{model.patch_embed.img_size[1]}; fix "
                         "size/crop_size in preprocessor_config.json")
    return Checkpoint(model, preprocessing, "huggingface", arch, path)


def _study_checkpoint(path: Path) -> Checkpoint:
    """A run's ``model.pt``: its spec rebuilds the model and says how its images were normalised."""
    from study.train.artifacts import load_trained

    model, spec = load_trained(path)
    size = (spec.image_size, spec.image_size)
    preprocessing = Preprocessing(size, size, "bilinear", spec.mean, spec.std,
                                  f"{path}: the run's spec (its training normalisation)")
    return Checkpoint(model, preprocessing, "study", f"study:{spec.arch}", path)


def resolve(source: str, weights: str | None, root: Path) -> tuple[str, Path | None]:
    """A preset's ``source`` and ``weights``, their paths taken under ``root`` (the checkpoints folder)."""
    if source.startswith(TIMM_PREFIX):
        return source, root / weights if weights is not None else None
    for prefix in (HF_PREFIX, STUDY_PREFIX):
        if source.startswith(prefix):
            return prefix + str(root / source[len(prefix):]), None
    return str(root / source), None
