"""How often the teacher's label of a student's training view differs from the true label.

Hard distillation (DeiT, Touvron et al. 2021, §4) trains the distillation token on the teacher's argmax of the
student's (augmented) batch. When that label equals the true one on every view (no augmentation, and a teacher
that fits its training images), the distillation token learns the true labels a second time, so hard
distillation cannot help by construction. DeiT's gain comes with augmentation, where a view's teacher label can
differ from its true label. The trainer counts these views from the teacher logits it computes anyway
(:class:`study.train.losses.DistillationLoss`) and writes the counts to every distilled run's metrics.json:

- :func:`teacher_view_runs` — one row per distilled run: views labelled, views labelled differently, share;
- :func:`teacher_view_table` — per model and fraction, the mean share and its t-interval over seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from study.core.errors import StudyError
from study.stats.intervals import t_interval

_VIEW_KEYS = {"teacher_views_seen", "teacher_views_disagreeing", "teacher_view_disagreement"}
_RUN_COLUMNS = ["model", "fraction", "seed", "train_images", "views", "disagreeing", "disagreement"]
_TABLE_COLUMNS = ["model", "fraction", "train_images", "seeds", "views", "disagreement_mean", "ci_low", "ci_high"]


def teacher_view_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Per distilled run of ``runs`` (:func:`study.runs.table.collect_runs`), the teacher's view counts read
    from its metrics.json. A distilled run is one whose metrics.json records its ``distill`` settings; the
    trainer writes the counts beside them, so a distilled run without them is refused. Other runs have no
    teacher and are left out."""
    rows = []
    for run in runs.itertuples():
        path = Path(run.folder) / "metrics.json"
        metrics = json.loads(path.read_text())
        if "distill" not in metrics:
            continue
        if missing := sorted(_VIEW_KEYS - metrics.keys()):
            raise StudyError(f"{path}: a distilled run without the teacher's view counts ({', '.join(missing)}), "
                             "which the trainer writes for every distilled run; train the run again (`dvc repro`)")
        rows.append({"model": run.model, "fraction": run.fraction, "seed": run.seed,
                     "train_images": run.train_images, "views": metrics["teacher_views_seen"],
                     "disagreeing": metrics["teacher_views_disagreeing"],
                     "disagreement": metrics["teacher_view_disagreement"]})
    return pd.DataFrame(rows, columns=_RUN_COLUMNS)


def teacher_view_table(per_run: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model and fraction: the mean over seeds of the share of views the teacher labelled differently from the
    truth, with its t-interval (NaN bounds for one seed), and the views counted over all seeds."""
    rows = []
    for (model, fraction), g in per_run.groupby(["model", "fraction"], sort=True):
        mean, _, half = t_interval(g["disagreement"].to_numpy(dtype=float), confidence)
        rows.append({"model": model, "fraction": fraction, "train_images": int(g["train_images"].median()),
                     "seeds": len(g), "views": int(g["views"].sum()), "disagreement_mean": mean,
                     "ci_low": mean - half, "ci_high": mean + half})
    return pd.DataFrame(rows, columns=_TABLE_COLUMNS)
