"""The resume state of a run: written every ``checkpoint_every`` steps, read back only by a run with the same
fingerprint, so a killed run resumes exactly and a stale or damaged state is ignored, never trusted."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import torch

from study.train.artifacts import CorruptCheckpoint, read_checkpoint, save_atomic


def run_fingerprint(**parts) -> str:
    """A digest of everything that determines a run; a resume state from other settings is ignored."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def save_resume(path, fingerprint, model, optimizer, step, history, loss_sum, loss_steps, train_seconds,
                teacher_views: tuple[int, int] | None = None) -> None:
    """Write the state after ``step``; ``teacher_views``, a distilled run's ``(views labelled, views the teacher
    labels differently from the truth)`` (study.train.losses.DistillationLoss), is stored only when given, so
    every other run's state holds what it always held."""
    state = {
        "fingerprint": fingerprint,
        "step": step,
        "history": history,
        "loss_sum": float(loss_sum),
        "loss_steps": loss_steps,
        "train_seconds": train_seconds,
        "torch_rng": torch.get_rng_state(),
    }
    if teacher_views is not None:
        state["teacher_views"] = [int(n) for n in teacher_views]
    if model is not None:
        state["model"] = model.state_dict()
        state["optimizer"] = optimizer.state_dict()
    save_atomic(state, path)


# The resume state's scalars and their types, as save_resume writes them.
_RESUME_FIELDS = {"step": int, "history": list, "loss_sum": float, "loss_steps": int, "train_seconds": float}


def load_resume(path: Path, fingerprint: str, model, optimizer, device, teacher_views: bool = False) -> dict:
    """The state saved at ``path`` by a run with the same ``fingerprint``, restored into ``model``,
    ``optimizer`` and torch's RNG; otherwise a fresh start. A damaged or malformed file is discarded with a
    message, never trusted: it is read with ``weights_only`` (no code runs) after a CRC check, and a state
    that does not fit the model leaves the model and optimizer as they were.

    ``teacher_views``: the run is distilled, so its state must hold the teacher's view counts (a state written
    before they were kept is discarded: resuming from it would count only the views after the resume)."""
    fresh = {"step": 0, "history": [], "loss_sum": 0.0, "loss_steps": 0, "train_seconds": 0.0}
    if teacher_views:
        fresh["teacher_views"] = [0, 0]
    if not path.is_file():
        return fresh
    try:
        state = read_checkpoint(path, device)
    except CorruptCheckpoint as exc:
        return _discard_resume(path, str(exc), fresh)
    if not isinstance(state, dict) or state.get("fingerprint") != fingerprint or "model" not in state:
        return fresh  # another run's state, or a finished one's: nothing to resume
    wrong = [k for k, kind in _RESUME_FIELDS.items() if not isinstance(state.get(k), kind)]
    counts = state.get("teacher_views")
    if teacher_views and not (isinstance(counts, list) and len(counts) == 2 and all(type(n) is int for n in counts)):
        wrong.append("teacher_views")
    if wrong:
        return _discard_resume(path, f"missing or mistyped {', '.join(wrong)}", fresh)
    model_before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer_before = copy.deepcopy(optimizer.state_dict())
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        model.load_state_dict(model_before)  # a failed load may have copied some tensors already
        optimizer.load_state_dict(optimizer_before)
        return _discard_resume(path, f"it does not fit this model: {' '.join(str(exc).split())[:160]}", fresh)
    return state


def _discard_resume(path: Path, reason: str, fresh: dict) -> dict:
    print(f"{path}: unreadable resume state ({reason}); discarding it and starting from scratch")
    return fresh
