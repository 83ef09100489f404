"""Pretrained checkpoints in the study's analyses: load them, preprocess images for them, analyse them.

Raghu et al. (2021) compared pretrained ImageNet models (ViT-B/16 against ResNet-50); this package lets the
study's analyses (minibatch CKA, per-head mean attention distance, attention rollout) run on such weights.

* :func:`load_pretrained` — a Hugging Face ``save_pretrained`` folder of a ViT or DeiT classifier, a timm
  model name with a local weights file, or a checkpoint of the study's own runs -> a module in eval mode
  mapping normalised images ``(B, C, H, W)`` to logits. Hugging Face ViT/DeiT weights are converted into the
  study's :class:`~study.models.vit.VisionTransformer` (:mod:`study.pretrained.huggingface`), so attention
  maps work. Weights are read without running code from the file (safetensors, or ``weights_only``).
* :mod:`study.pretrained.images` — the image folder and each model's own preprocessing.
* :mod:`study.pretrained.analysis` — one streaming pass over the images for every analysis.

The package sits outside ``study/models`` on purpose: that folder is a DVC dependency of every training
stage of the default study, and adding a loader there would mark all of them out of date.
"""

from study.pretrained.load import Checkpoint, load_pretrained, open_checkpoint

__all__ = ["Checkpoint", "load_pretrained", "open_checkpoint"]
