"""The GPU acceptance (``study gpu-acceptance``, :mod:`study.tools.gpu_acceptance`): the study's speed on a lent GPU,
measured step by step and rendered as one acceptance.md.

Steps (``--step``; default: all, in this order), each sized for one 10-minute device call
(:mod:`benchmarks.acceptance.sizes`, the one place their sizes live; first run on an H200 on 2026-11-26: docs/gpu/):

* ``bench`` — ResNet-18 (3×3 stem) and ViT-Tiny/4 (dim 192, depth 12, 3 heads) on 32×32×3, 10 classes: the
  study's training step beside the usual DataLoader recipe (:mod:`benchmarks.study_vs_usual`), with img/s, MFU
  against a matmul peak measured in the same run (bf16 on GPU, float32 on CPU) and peak memory.
* ``bench-presets`` — the same for the models of the GPU presets (their own input shapes and recipes).
* ``steps`` — the study's step beside plain, captured and compiled steps (:mod:`benchmarks.step_variants`).
* ``startup`` — how long a process takes to start (:mod:`benchmarks.startup`).
* ``profile`` — the headline models' study step under ``torch.profiler`` (:mod:`benchmarks.profile`): the GPU's
  busy time against the step's wall time, and the kernel kinds that take it, so that a missed MFU target has a
  reason.
* ``default-study``, ``cells``, ``gpu-preset`` and ``ladder-preset`` — ``dvc repro`` (or ``study run --jobs N
  [--warm]``) of the default study (the ``--params`` file), of its training stages with each cell's seeds in one
  vmapped float32 step (``study run``, which groups a cell's stages; with ``--smoke`` the first model's first
  cell), of the whole-range confirmatory preset (``--preset``, default ``configs/confirmatory_gpu.yaml``) and of the
  GPU ladder (``--ladder-preset``, default ``configs/ladder_gpu.yaml``), each in a scratch copy of the project
  (:mod:`benchmarks.acceptance.scratch_repro`), so that the checkout's params.yaml and dvc.lock are never touched,
  with each stage's wall time and an archive of what the copy wrote (reports, dvc.lock, every run's metrics). A run
  that reaches its time limit is stopped, and the table says so and how many stages it finished. How long a
  preset's training takes at measured rates is :mod:`benchmarks.acceptance.sizing`'s arithmetic.

Every step adds its rows to ``bench.csv``, ``variants.csv``, ``startup.csv``, ``profile.csv`` (with ``kernels.csv``)
or ``stages.csv`` in the output folder (replacing that step's rows from an earlier call) and renders
``acceptance.md`` from what the folder holds (:mod:`benchmarks.acceptance.steps`), so steps run in separate device
calls still give one report. ``--merge`` with ``--compare-runs`` adds the default study's GPU runs beside its CPU
runs (:mod:`benchmarks.acceptance.device_runs`). ``--smoke`` (CI, CPU) runs every step at toy size with
``configs/smoke.yaml``.

Nothing is imported here.
"""
