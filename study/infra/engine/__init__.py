"""The engine behind ``study run``: the DVC pipeline with independent stages running at the same time.

Read it in this order: :mod:`~study.infra.engine.driver` (the loop), :mod:`~study.infra.engine.pipeline` (DVC: what to
run, and the record of what ran), :mod:`~study.infra.engine.schedule` (which stage may start, what a failure
stops), :mod:`~study.infra.engine.resources` (CPUs, GPU share and threads per stage),
:mod:`~study.infra.engine.executor` (where commands run: :mod:`~study.infra.engine.cluster` on Ray, or
:mod:`~study.infra.engine.local` in a pool of ``--jobs N`` without Ray), :mod:`~study.infra.engine.tasks` (what a
worker does), :mod:`~study.infra.engine.progress` and :mod:`~study.infra.engine.interrupts`. Nothing here is
imported by the stage commands themselves.
"""
