"""The study's benchmarks, in one place.

* :mod:`study.bench.train_step` — ``study bench``: the study's training step beside the usual DataLoader
  recipe (img/s, MFU against a measured matmul peak, peak memory).
* :mod:`study.bench.cka` — minibatch CKA against a per-pair float64 reference (``python -m study.bench.cka``).
* :mod:`study.bench.acceptance` — ``study gpu-acceptance``: the benchmark at GPU size plus timed ``dvc repro``
  runs of the default study and a GPU preset, written as the tables ``docs/performance.md`` takes.

Nothing is imported here, so that each benchmark loads only what it needs.
"""
