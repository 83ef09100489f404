"""Reports: the generated ``report.md``, its setup tables, headline metrics and provenance: the assembler above the
questions (the writing kit below them is :mod:`study.writing`).

One idea per module: :mod:`~study.writing.format` writes numbers and recurring phrases; each question words its
own parts of the report in ``study/<question>/report.py`` (:mod:`~study.curves.report`,
:mod:`~study.budget_check.report`, :mod:`~study.distillation.report`, :mod:`~study.priors.report`,
:mod:`~study.cka.report`, :mod:`~study.attention.report`, :mod:`~study.robustness.report`), reading
its stage's tables through :mod:`~study.writing.section`; :mod:`~study.report.contents` orders those parts and
:mod:`~study.report.render` lays them out in the report's frame, with the design's limitations
(:mod:`~study.report.limitations`) and the setup tables (:mod:`~study.report.setup`); :mod:`~study.report.stage`
runs it all and :mod:`~study.report.provenance` records what the report came from. Nothing here computes a
statistic: the sentences word the tables the analysis stages wrote.
"""
