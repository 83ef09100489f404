"""The report's sentences about distillation: what the teacher knew and whether the student agrees with it.

Read from the ``distillation`` stage's tables: the teacher's top-1 on its own training images and on the
test set (where it fits its training images, its hard labels are the true labels and add little signal),
the test-set agreement of each student with it (DeiT, Touvron et al. 2021, Table 4), and the paired
differences in agreement, worded by the same rules as accuracy gaps (:func:`study.report.accuracy.gap_sentences`).
"""

from __future__ import annotations

import pandas as pd

from study.report.accuracy import gap_sentences
from study.report.format import images, reference_data, share


def distillation_sentences(teacher: pd.DataFrame, agreement: pd.DataFrame, gaps: pd.DataFrame) -> list[str]:
    """The teacher's train/test accuracy and whether the distilled student agrees with it more."""
    out = []
    if not teacher.empty:
        ends = teacher.iloc[[0, -1]]
        parts = "; ".join(f"{images(r.train_images)}: train {share(r.train_top1_mean)}, test {share(r.test_top1_mean)}"
                          for r in ends.itertuples())
        out.append(f"Teacher ({ends['model'].iloc[0]}) top-1 on its own training images and on the test set — {parts}. "
                   "Where train top-1 is near 100%, its hard labels are the true labels and hard distillation adds "
                   "little signal.")
    if not agreement.empty:
        whole = agreement[agreement["head"] == "model"]
        full = whole[whole["fraction"] == whole["fraction"].max()]
        listed = ", ".join(f"{r.model} {share(r.agreement_mean)}" for r in full.itertuples())
        out.append(f"Test-set agreement with the teacher at {reference_data(whole['fraction'].max())}: {listed}.")
    for sentence in gap_sentences(gaps):
        out.append("Agreement with the teacher, " + sentence[0].lower() + sentence[1:])
    return out
