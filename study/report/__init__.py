"""Reports: tables (CSV + LaTeX), the generated ``report.md``, headline metrics and provenance.

One idea per module: :mod:`~study.report.format` writes numbers and recurring phrases; :mod:`~study.outputs.tables`
writes and reads tables; one module of sentences per topic (:mod:`~study.efficiency.report`,
:mod:`~study.distillation.report`, :mod:`~study.representations.report`, :mod:`~study.attention.report`,
:mod:`~study.report.limitations`); :mod:`~study.report.render` lays them out as ``report.md``;
:mod:`~study.report.provenance` records what the report came from. Nothing here computes a statistic: the
sentences word the tables :mod:`study.analysis` wrote.
"""
