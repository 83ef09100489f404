"""A cell's resume state, kept as each seed's own share in that seed's ``resume.pt``.

Every seed of a cell is its own DVC stage with its own ``resume.pt``, so the cell's state is cut along the seed
dimension and each seed's file holds only its slice: its weights and buffers, its optimiser moments, its history
and loss sums, under the cell's fingerprint. A cell resumes only when every seed's file holds a state of the same
cell (same fingerprint, same step); otherwise it starts from scratch, as a run alone does with a stale state. A
seed's file is therefore no larger than a run alone's, and a seed later trained alone ignores it (the fingerprints
differ).
"""

from __future__ import annotations

from pathlib import Path

import torch

from study.train.artifacts import CorruptCheckpoint, read_checkpoint, save_atomic
from study.train.resume import run_fingerprint


def cell_fingerprint(fingerprints: list[str]) -> str:
    """The cell's: its seeds' own run fingerprints in order (a cell of other seeds, or in another order, differs)."""
    return run_fingerprint(cell=list(fingerprints))


# The optimiser's per-parameter state that all seeds share: the step count (the seeds step together). Every other
# entry (AdamW's moments, SGD's momentum buffer) is stacked like its parameter, (K, ...).
_SHARED_OPTIMISER_STATE = frozenset({"step"})


def seed_share(cell_state: dict, k: int) -> dict:
    """Seed ``k``'s share of :meth:`study.cell.step.CellStep.state_dict` (without its ``teacher_views``): the k-th
    slice of every stacked weight, buffer and optimiser moment."""
    stack, optimizer = cell_state["stack"], cell_state["optimizer"]
    return {
        "stack": {kind: {name: t[k].clone() for name, t in tensors.items()} for kind, tensors in stack.items()},
        "optimizer": {
            "state": {i: {key: (value if key in _SHARED_OPTIMISER_STATE else value[k].clone())
                          for key, value in entry.items()} for i, entry in optimizer["state"].items()},
            "param_groups": optimizer["param_groups"],
        },
    }


def stacked(shares: list[dict]) -> dict:
    """The inverse of :func:`seed_share`: the seeds' shares, in order, as one cell state."""
    first = shares[0]
    return {
        "stack": {kind: {name: torch.stack([share["stack"][kind][name] for share in shares]) for name in tensors}
                  for kind, tensors in first["stack"].items()},
        "optimizer": {
            "state": {i: {key: (value if key in _SHARED_OPTIMISER_STATE else
                                torch.stack([share["optimizer"]["state"][i][key] for share in shares]))
                          for key, value in entry.items()} for i, entry in first["optimizer"]["state"].items()},
            "param_groups": first["optimizer"]["param_groups"],
        },
    }


def save_cell(paths: list[Path], fingerprint: str, step: int, cell_state: dict, seeds: list[dict]) -> None:
    """Write each seed's share: ``cell_state`` is :meth:`study.cell.step.CellStep.state_dict` without the
    per-seed ``teacher_views`` list; ``seeds[k]`` holds seed k's loop scalars (history, loss sums, teacher views)."""
    for k, (path, own) in enumerate(zip(paths, seeds)):
        save_atomic({"fingerprint": fingerprint, "step": step, "seed_of_cell": k, "cell": seed_share(cell_state, k),
                     "torch_rng": torch.get_rng_state(), **own}, path)


def load_cell(paths: list[Path], fingerprint: str, device: torch.device) -> tuple[int, dict, list[dict]] | None:
    """``(step, the stacked cell state, each seed's loop scalars)`` when every seed's file holds this cell's state at
    one step; None otherwise (a message when a file is damaged), and the cell starts from scratch."""
    shares = []
    for k, path in enumerate(paths):
        if not path.is_file():
            return None
        try:
            state = read_checkpoint(path, device)
        except CorruptCheckpoint as exc:
            print(f"{path}: unreadable resume state ({exc}); the cell starts from scratch")
            return None
        if not isinstance(state, dict) or state.get("fingerprint") != fingerprint or state.get("seed_of_cell") != k:
            return None  # another run's or cell's state, or a finished one's
        shares.append(state)
    steps = {share["step"] for share in shares}
    if len(steps) != 1:  # killed while the shares were being written: some hold the last resume point, some not
        print(f"{paths[0].parent.parent}: the cell's resume states are at steps {sorted(steps)}; it starts from scratch")
        return None
    torch.set_rng_state(shares[0]["torch_rng"])
    loop = [{key: value for key, value in share.items() if key not in ("fingerprint", "seed_of_cell", "cell",
                                                                       "torch_rng", "step")} for share in shares]
    return steps.pop(), stacked([share["cell"] for share in shares]), loop
