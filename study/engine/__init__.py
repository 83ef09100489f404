"""The Ray engine behind ``study run``: the DVC pipeline with independent stages running at the same time.

Read it in this order: :mod:`~study.engine.driver` (the loop), :mod:`~study.engine.pipeline` (DVC: what to
run, and the record of what ran), :mod:`~study.engine.schedule` (which stage may start, what a failure
stops), :mod:`~study.engine.resources` (CPUs, GPU share and threads per stage), :mod:`~study.engine.cluster`
(Ray), :mod:`~study.engine.tasks` (what a worker does), :mod:`~study.engine.progress` and
:mod:`~study.engine.interrupts`. Nothing here is imported by the stage commands themselves.
"""
