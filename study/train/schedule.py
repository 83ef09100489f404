"""Learning rate as a pure function of the step: linear warmup, then cosine decay to zero.

Being a function of the step alone, a resumed run needs no scheduler state to land on the same values.
"""

from __future__ import annotations

import math


def lr_at(step: int, total_steps: int, base_lr: float, warmup_steps: int) -> float:
    """Learning rate for optimiser step ``step`` (0-based) of ``total_steps``."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
