"""Was a run still learning when its budget ran out? Read off its validation-loss history.

A run is *still improving* when its validation loss fell by more than ``TOLERANCE`` (relative) over the last
quarter of its steps. Such a run is under-trained: its accuracy measures the budget as much as the model or
the data, so the report flags comparisons that involve it instead of comparing it silently with converged
runs. Validation loss, not accuracy, because it moves smoothly while top-1 on a few thousand images jitters.
"""

from __future__ import annotations

# A threshold, not a test: the validation split is fixed, so the loss is not resampled between points, and a
# fall of more than 1% of it in the last quarter of a cosine schedule (learning rate below 15% of its peak)
# means the run was still descending when it stopped.
TOLERANCE = 0.01


def convergence(history: list[dict]) -> dict:
    """``{"val_loss_change_last_quarter": relative change (negative = falling), "still_improving": bool}``.

    The trainer scores the validation split at four evenly spaced steps (the last at the final step), so the
    last two points span the last quarter. With a single point the change is NaN and the run counts as
    still improving: nothing shows it had settled.
    """
    if len(history) < 2 or not history[-2]["val_loss"] > 0:
        return {"val_loss_change_last_quarter": float("nan"), "still_improving": True}
    before, last = history[-2]["val_loss"], history[-1]["val_loss"]
    change = (last - before) / before
    return {"val_loss_change_last_quarter": round(change, 6), "still_improving": bool(change < -TOLERANCE)}
