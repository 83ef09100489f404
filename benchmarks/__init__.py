"""The study's benchmarks and its GPU acceptance, one idea per module: they measure and report, and decide no
number of a report (no DVC stage imports them).

Runnable, each with ``--help``:

* ``python -m benchmarks.study_vs_usual`` (also ``study bench``) — the study's training step against the usual
  PyTorch recipe (DataLoader, per-image transforms), every model of ``--params``, with img/s, MFU and peak memory.
* ``python -m benchmarks.seed_batching`` — the seeds of a cell as one vmapped step against one model per step.
* ``python -m benchmarks.cka`` — minibatch CKA against a per-pair float64 reference.
* ``python -m benchmarks.robustness_throughput`` — how fast the robustness stage scores on this CPU, and how long
  the stage will take for a study.
* ``python -m benchmarks.stage_overhead`` — what a training stage's process costs beyond its optimiser steps.
* ``study gpu-acceptance`` (:mod:`study.tools.gpu_acceptance`) — the GPU acceptance (:mod:`benchmarks.acceptance`).

The training-step benchmark's parts:

* :mod:`benchmarks.workload` — what is trained: models, input shape, loss, synthetic data.
* :mod:`benchmarks.study_path` — the study's own training step; :mod:`benchmarks.usual_path` — the usual
  PyTorch recipe it is compared with.
* :mod:`benchmarks.measure` — the device's matmul peak, step timing and peak memory.
* :mod:`benchmarks.table` — the results table: speed-ups, MFU, the printout and the CSV.
* :mod:`benchmarks.study_vs_usual` — every model on both paths, into one table.
* :mod:`benchmarks.from_params` — a study's params as a workload (shared with the acceptance).

Parts that the acceptance runs: :mod:`benchmarks.step_variants` (the study's step beside plain, captured and
compiled steps), :mod:`benchmarks.profile` (the step under ``torch.profiler``), :mod:`benchmarks.startup`
(process start).

Nothing is imported here, so that each benchmark loads only what it needs.
"""
