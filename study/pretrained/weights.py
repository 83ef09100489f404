"""Reading weight files without running code from them, and fingerprinting them.

A checkpoint from elsewhere is untrusted input: safetensors files hold only tensors, and other state dicts are
read with ``torch.load(weights_only=True)``, which refuses any import the pickle asks for.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from torch import Tensor

from study.core.errors import StudyError

SAFETENSORS_SUFFIX = ".safetensors"


def read_state_dict(path: str | Path) -> dict[str, Tensor]:
    """Tensors of a ``.safetensors`` file, a sharded safetensors index (``*.safetensors.index.json``) or a
    torch state dict (``.bin``, ``.pt``, ``.pth``), on the CPU, in float32 where they are floating point."""
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"{path}: no such weights file; check the path in the preset")
    if path.name.endswith(".index.json"):
        return _read_sharded(path)
    if path.suffix == SAFETENSORS_SUFFIX:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            tensors = load_file(path, device="cpu")
        except (SafetensorError, OSError, ValueError) as error:
            raise StudyError(f"{path}: not a readable safetensors file ({_one_line(error)})") from None
    else:
        tensors = _read_torch(path)
    return {key: value.float() if value.is_floating_point() else value for key, value in tensors.items()}


def _read_torch(path: Path) -> dict[str, Tensor]:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # weights_only refusing an import, a damaged or foreign file: one line each
        raise StudyError(f"{path}: not a plain state dict that loads with weights_only=True "
                         f"({_one_line(error)}); save the weights as safetensors") from None
    for wrapper in ("state_dict", "model", "module"):  # common training-checkpoint wrappers
        if isinstance(payload, dict) and isinstance(payload.get(wrapper), dict):
            payload = payload[wrapper]
            break
    if not isinstance(payload, dict) or not all(isinstance(v, Tensor) for v in payload.values()):
        raise StudyError(f"{path}: holds no state dict (a mapping of names to tensors); save model.state_dict()")
    return payload


def _read_sharded(index: Path) -> dict[str, Tensor]:
    """A sharded checkpoint: ``weight_map`` names the shard of every tensor."""
    try:
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    except (ValueError, KeyError, TypeError):
        raise StudyError(f"{index}: not a sharded-checkpoint index (no weight_map)") from None
    tensors: dict[str, Tensor] = {}
    for shard in shards:
        tensors.update(read_state_dict(index.parent / shard))
    return tensors


def sha256(path: str | Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks (checkpoints are hundreds of MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200] or type(error).__name__
