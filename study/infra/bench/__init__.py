"""The study's benchmarks and its GPU acceptance, one idea per module.

The training-step benchmark (``study bench``, :mod:`study.tools.bench`):

* :mod:`study.infra.bench.workload` — what is trained: models, input shape, loss, synthetic data.
* :mod:`study.infra.bench.study_path` — the study's own training step; :mod:`study.infra.bench.usual_path` — the usual
  PyTorch recipe (DataLoader, per-image transforms) it is compared with.
* :mod:`study.infra.bench.measure` — the device's matmul peak, step timing and peak memory.
* :mod:`study.infra.bench.table` — the results table: speed-ups, MFU, the printout and the CSV.
* :mod:`study.infra.bench.benchmark` — every model on both paths, into one table.
* :mod:`study.infra.bench.from_params` — a study's params as a workload (shared by both commands).

The GPU acceptance (``study gpu-acceptance``, :mod:`study.tools.gpu_acceptance`): its steps, targets and
report in :mod:`study.infra.bench.acceptance`, timed ``dvc repro`` in a scratch copy in :mod:`study.infra.bench.scratch_repro`.

Also: :mod:`study.infra.bench.cka` — minibatch CKA against a per-pair float64 reference (``python -m study.infra.bench.cka``);
:mod:`study.tools.models` — ``study models``, parameters and forward FLOPs of the study's models.

Nothing is imported here, so that each command loads only what it needs.
"""
