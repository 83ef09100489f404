"""What each model costs: parameters and forward FLOPs per image, measured rather than derived by hand.

Why measured: hand formulas drift from the code (a forgotten head, a changed MLP ratio). FLOPs come
from PyTorch's ``FlopCounterMode``, which counts matrix multiplies and convolutions (``2·m·n·k``: a
multiply-add is 2 FLOPs) and ignores cheap element-wise ops (norms, GELU, softmax).

A trap fixed here: on CPU, ``scaled_dot_product_attention`` dispatches to
``aten._scaled_dot_product_flash_attention_for_cpu``, which PyTorch's counter has no formula for, so
a ViT's attention matmuls (``q kᵀ`` and ``attn · v``) silently count as zero. We register that op with
PyTorch's own SDPA formula; ``tests/models/test_models.py`` checks the total against a closed form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from study.models import build_model

if TYPE_CHECKING:
    import pandas as pd

# torch.utils.flop_counter (it imports triton, about 0.1 s) and pandas (about 0.2 s) are imported where they are
# used: every process that imports this module, `study train --help` among them, would pay for them otherwise.


def _cpu_flash_attention_flops(query_shape: torch.Size, key_shape: torch.Size, value_shape: torch.Size,
                               *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """FLOPs of the CPU fused-attention kernel: the same two batched matmuls as the CUDA kernels."""
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _missing_flop_formulas() -> dict:
    """The formulas ``FlopCounterMode`` lacks, by op (built on use, like the counter's import)."""
    return {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_attention_flops}


def count_parameters(model: nn.Module) -> int:
    """Number of parameters (trainable or not; shared tensors counted once)."""
    return sum(parameter.numel() for parameter in model.parameters())


def forward_flops(model: nn.Module, image_size: int, in_chans: int) -> int:
    """FLOPs of one eval-mode forward pass on one ``in_chans × image_size × image_size`` image."""
    from torch.utils.flop_counter import FlopCounterMode

    parameter = next(model.parameters())
    image = torch.zeros(1, in_chans, image_size, image_size, device=parameter.device, dtype=parameter.dtype)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=_missing_flop_formulas()) as counter:
            model(image)
    finally:
        model.train(was_training)
    return int(counter.get_total_flops())


def cost_table(names: list[str], num_classes: int, image_size: int, in_chans: int,
               overrides_by_name: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per model name: ``model``, ``params``, ``forward_mflops`` (per image, 1 MFLOP = 1e6 FLOPs)."""
    import pandas as pd

    overrides_by_name = overrides_by_name or {}
    rows = []
    for name in names:
        model = build_model(name, num_classes, image_size, in_chans, **overrides_by_name.get(name, {}))
        rows.append({"model": name, "params": count_parameters(model),
                     "forward_mflops": forward_flops(model, image_size, in_chans) / 1e6})
    return pd.DataFrame(rows, columns=["model", "params", "forward_mflops"])
