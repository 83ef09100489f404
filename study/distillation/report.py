"""The report's sentences about distillation: what the teacher knew and whether the student agrees with it; and
its section, the tables they word.

Read from the ``distillation`` stage's tables: the teacher's top-1 on its own training images and on the
test set (where it fits its training images, its hard labels are the true labels and add little signal),
the test-set agreement of each student with it (DeiT, Touvron et al. 2021, Table 4), the paired
differences in agreement, worded by the same rules as accuracy gaps (:func:`study.curves.report.gap_sentences`),
and how often the teacher's label of a student's training view differed from the true one
(:func:`teacher_view_sentences`): measured, where the teacher's train top-1 only suggests it.

A study without distillation has none of these tables (the stage writes a note instead), and the report no such
part (:data:`FINDINGS`, :data:`SECTION`). The committed quick study has no ``teacher_views`` table: its parts
leave the views out.
"""

from __future__ import annotations

import pandas as pd

from study import distillation
from study.curves.report import gap_sentences
from study.outputs.tables import markdown_table
from study.writing.format import images, interval, percent, reference_data, share
from study.writing.section import Part, Rows, Sources


def distillation_sentences(teacher: pd.DataFrame, agreement: pd.DataFrame, gaps: pd.DataFrame,
                           hard: bool = True) -> list[str]:
    """The teacher's train/test accuracy and whether the distilled student agrees with it more. The caveat on a
    teacher that fits its training images holds for ``hard`` distillation only: a soft student learns the
    teacher's softened distribution, not its labels."""
    out = []
    if not teacher.empty:
        ends = teacher.iloc[[0, -1]]
        parts = "; ".join(f"{images(r.train_images)}: train {share(r.train_top1_mean)}, test {share(r.test_top1_mean)}"
                          for r in ends.itertuples())
        caveat = (" Where train top-1 is near 100%, its hard labels are the true labels and hard distillation adds "
                  "little signal." if hard else "")
        out.append(f"Teacher ({ends['model'].iloc[0]}) top-1 on its own training images and on the test set — {parts}."
                   + caveat)
    if not agreement.empty:
        whole = agreement[agreement["head"] == "model"]
        full = whole[whole["fraction"] == whole["fraction"].max()]
        listed = ", ".join(f"{r.model} {share(r.agreement_mean)}" for r in full.itertuples())
        out.append(f"Test-set agreement with the teacher at {reference_data(whole['fraction'].max())}: {listed}.")
    for sentence in gap_sentences(gaps):
        out.append("Agreement with the teacher, " + sentence[0].lower() + sentence[1:])
    return out


def teacher_view_sentences(views: pd.DataFrame | None, hard: bool) -> list[str]:
    """Per student, the share of its training views (as augmented) whose teacher label differed from the true
    label, mean and interval over seeds at each fraction (the stage's ``teacher_views`` table; ``None`` where the
    study has none, or empty: none). With ``hard`` distillation, the fractions where no
    view of any seed differed get a sentence of their own: there the teacher's labels were the true labels, so the
    student learned nothing from the teacher beyond them. Soft distillation passes on the teacher's whole
    distribution, so a zero share says less there and gets no such sentence."""
    if views is None or views.empty:
        return []
    out = []
    for model, g in views.sort_values(["model", "fraction"]).groupby("model", sort=False):
        parts = ", ".join(f"{share(r.disagreement_mean, 2)} at {percent(r.fraction)} of the data "
                          f"({interval(r.ci_low, r.ci_high, 2, scale=100.0, unit='%')})" for r in g.itertuples())
        out.append(f"Teacher's labels of {model}'s training views (as augmented) that differ from the true labels, "
                   f"mean share over seeds: {parts}.")
        zero = g[g["disagreement_mean"] == 0]  # a mean share of 0: no view of any seed differed
        if hard and not zero.empty:
            where = " and ".join(percent(f) for f in zero["fraction"])
            out.append(f"At {where} of the data the teacher gave every one of {model}'s training views its true "
                       f"label (none of {int(zero['views'].sum()):,} views differed, all seeds): there its hard labels "
                       "are the true labels, so hard distillation cannot differ from training on the labels by "
                       f"construction, and a difference between {model} and a model trained on labels alone there "
                       "is not the teacher's doing.")
    return out


def _table(sources: Sources, name: str) -> pd.DataFrame:
    return sources.table(distillation.FOLDER, name)


def _views(sources: Sources) -> pd.DataFrame | None:
    return sources.table_if_written(distillation.FOLDER, distillation.TEACHER_VIEWS)


def _hard(sources: Sources) -> bool:
    return sources.setup["distill"]["kind"] == "hard"


def labels_twice(views: pd.DataFrame | None, hard: bool) -> list[str]:
    """Where hard distillation's teacher gave every training view of every fraction and seed its true label, the
    sentence that opens the distillation findings and section: the student trained on the labels twice, so the
    study measured no distillation there (DeiT's gain comes from views whose teacher label differs, Touvron et al.
    2021, Table 3). Empty where any view differed, for soft distillation, or without the table."""
    if not hard or views is None or views.empty or (views["disagreement_mean"] > 0).any():
        return []
    students = " and ".join(dict.fromkeys(views["model"]))
    return [f"This study's distillation trains {students} on the labels twice: the teacher gave every one of "
            f"{int(views['views'].sum()):,} training views its true label, at every fraction and seed, so the "
            "distillation token learned the labels again and nothing from the teacher. What follows measures a "
            "second class head, not distillation; configs/distillation.yaml trains with augmentation, where the "
            "teacher can disagree with a label."]


def _findings(sources: Sources) -> list[str]:
    return (labels_twice(_views(sources), _hard(sources))
            + distillation_sentences(_table(sources, distillation.TEACHER), _table(sources, distillation.AGREEMENT),
                                     _table(sources, distillation.AGREEMENT_GAPS), _hard(sources))
            + teacher_view_sentences(_views(sources), hard=_hard(sources)))


def _section(sources: Sources) -> list[str]:
    opening = labels_twice(_views(sources), _hard(sources))
    lines = ["## Distillation", "", *(f"**{s}**" for s in opening), *([""] if opening else []),
             "The teacher's accuracy on its own training images and on the test set:", "",
             markdown_table(_table(sources, distillation.TEACHER)), "",
             "Test-set agreement with the teacher (DeiT Table 4):", "",
             markdown_table(_table(sources, distillation.AGREEMENT)), ""]
    views = _views(sources)
    if views is not None and not views.empty:
        lines += ["The student's training views (as augmented) whose teacher label differs from the true label: "
                  "mean share and t-interval over seeds; views counted over all seeds:", "",
                  markdown_table(views), ""]
    return lines


_NEEDS = tuple((distillation.FOLDER, name)
               for name in (distillation.TEACHER, distillation.AGREEMENT, distillation.AGREEMENT_GAPS))
def _rows(sources: Sources) -> list[dict]:
    """The findings table's row where hard distillation cannot be tested: the teacher's label equals the true label
    on every training view, so the student learns from the labels twice."""
    views = _views(sources)
    if views is None or views.empty or not _hard(sources) or float(views["disagreement_mean"].max()) > 0:
        return []
    return [{"claim": "Hard distillation from the CNN raises the ViT",
             "evidence": f"the teacher's label equals the true label on every training view "
                         f"({int(views['views'].sum()):,} views)",
             "control": "teacher labels against true labels",
             "verdict": "not testable in this design: the student trains on the labels twice"}]


FINDINGS = Part(_findings, needs=_NEEDS)
ROWS = Rows(_rows, needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
