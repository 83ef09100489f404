"""Distillation: what the teacher knew and whether its students agree with it (stage ``distillation``), and its
part of the report.

The names the stage writes and the report reads, defined here once: ``FOLDER``, the stage's folder under the
tables (where dvc.yaml's ``distillation`` stage writes), then each table's stem.
"""

FOLDER = "distillation"
TEACHER = "teacher"
AGREEMENT_RUNS = "agreement_runs"
AGREEMENT = "agreement"
AGREEMENT_GAPS = "agreement_gaps"
TEACHER_VIEWS = "teacher_views"
NONE_NOTE = "NONE.md"  # written instead of the tables by a study without distillation
