"""What a device does, measured: its matmul peak, the wall time of a training step, the memory it took.

Why measure instead of quote: a step's speed depends on the machine, the model's shape and on where the data
comes from, so the only honest number is one taken on the machine at hand, in the same process as the steps it
is compared with. Model FLOPs utilisation (MFU) is achieved training FLOP/s over the device's peak, where
training FLOPs per image are ``3 × forward`` (backward ≈ 2 × forward; :func:`study.models.cost.forward_flops`)
plus one teacher forward for a distilled student, and the peak is MEASURED here with a large matmul in the
training precision (bf16 when autocasting, else float32): an achievable peak, not the datasheet's.

Peak memory is ``torch.cuda.max_memory_allocated`` on GPU and the process's peak RSS on CPU (reset per
measurement through ``/proc/self/clear_refs``; DataLoader worker processes are not included).
"""

from __future__ import annotations

import contextlib
import gc
import math
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from study.models.cost import forward_flops
from study.train.step import resolved_precision

# Matmul side for the peak measurement: large enough to be compute-bound (an 8192² bf16 matmul is 1.1 TFLOP).
PEAK_SIZE = {"cuda": 8192, "cpu": 2048}


@dataclass(frozen=True)
class Timing:
    window_seconds: list[float]  # one entry per timed window of `steps` steps
    peak_memory_bytes: int


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so that the host's clock covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_peak_flops(device: torch.device, size: int | None = None, repeats: int = 5,
                       precision: str = "auto") -> tuple[float, str]:
    """Best FLOP/s of a ``size × size`` matmul on ``device`` and its dtype: bf16 where ``precision``
    autocasts there (by default on GPU), else float32."""
    dtype = torch.bfloat16 if resolved_precision(device, precision) == "bf16" else torch.float32
    size = size or PEAK_SIZE.get(device.type, PEAK_SIZE["cpu"])
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(size, size, device=device, dtype=dtype)
    # Enough matmuls per timed round that launch overhead and timer resolution do not matter (~25 ms on H100).
    per_round = 20 if device.type == "cuda" else 1
    torch.matmul(a, b, out=out)  # first call: library and kernel selection, not timed
    sync(device)
    best = math.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        for _ in range(per_round):
            torch.matmul(a, b, out=out)
        sync(device)
        best = min(best, time.perf_counter() - tic)
    return 2 * size**3 * per_round / best, str(dtype).removeprefix("torch.")


def train_flops_per_image(model: nn.Module, teacher: nn.Module | None, image_size: int, in_chans: int) -> int:
    """3 × the model's forward FLOPs, plus one forward of the ``teacher`` when distilling."""
    flops = 3 * forward_flops(model, image_size, in_chans)
    if teacher is not None:
        flops += forward_flops(teacher, image_size, in_chans)
    return flops


def _reset_peak_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return
    # Writing "5" resets the process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0, proc(5)).
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_memory(device: torch.device) -> int:
    """Bytes: CUDA's peak allocated tensor memory, or the process's peak RSS on CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # "VmHWM:  123456 kB"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB; never reset


def memory_kind(device: torch.device) -> str:
    return "cuda max allocated" if device.type == "cuda" else "process peak RSS"


def _time_steps(step: Callable[[], None], warmup_steps: int, steps: int, repeats: int,
                device: torch.device) -> list[float]:
    """Seconds of each of ``repeats`` windows of ``steps`` calls to ``step``, after ``warmup_steps`` calls."""
    for _ in range(warmup_steps):
        step()
    sync(device)
    windows = []
    for _ in range(repeats):
        tic = time.perf_counter()
        for _ in range(steps):
            step()
        sync(device)
        windows.append(time.perf_counter() - tic)
    return windows


def measure(step_factory: Callable[[], Callable[[], None]], warmup_steps: int, steps: int, repeats: int,
            device: torch.device) -> Timing:
    """Time the step that ``step_factory`` builds, its peak memory counted from before it is built."""
    _reset_peak_memory(device)
    windows = _time_steps(step_factory(), warmup_steps, steps, repeats, device)
    return Timing(windows, _peak_memory(device))
