"""What each stage reserves on the cluster, and how many threads it may use, from ``engine`` in params.

Ray starts a task once a node has the CPUs and GPU share it asks for; the engine then tells the stage to use
exactly as many intra-op threads as it reserved, so stages running side by side do not oversubscribe the
cores. The default is what ``dvc repro`` does: every stage keeps ``train.threads`` (on this study's CPUs,
another thread count changes a run's last bits, see docs/pipeline.md), so the results match a sequential run.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass

from study.core.config import Params
from study.infra.engine.params import EngineParams


@dataclass(frozen=True)
class Reservation:
    cpus: int
    gpus: float
    threads: int | None  # threads the engine imposes ($STUDY_THREADS); None: the stage's own, train.threads


def is_training(command: str) -> bool:
    """A training run is a stage whose command is ``study train``: what runs, not what the stage is called."""
    words = shlex.split(command) if command else []
    return words[:2] == ["study", "train"]


def reservation(training: bool, engine: EngineParams, train_threads: int, node_cpus: int,
                gpus_available: bool) -> Reservation:
    """The CPUs and GPU share one stage reserves.

    ``train_threads``: ``train.threads`` (0: torch's default, every core of the node); ``node_cpus``: the
    CPUs of the largest node, so a reservation never exceeds what one node has; ``gpus_available``: the
    cluster has GPUs and params allow training on one. On GPUs every stage takes ``gpus_per_run``, so that
    Ray names in CUDA_VISIBLE_DEVICES the GPU the stage may use (CKA and attention use one too).
    """
    gpus = engine.gpus_per_run if gpus_available else 0.0
    if training and engine.cpus_per_run is not None:
        cpus = min(engine.cpus_per_run, node_cpus)
        return Reservation(cpus=cpus, gpus=gpus, threads=cpus)
    own = train_threads if train_threads > 0 else node_cpus
    return Reservation(cpus=min(own, node_cpus), gpus=gpus, threads=None)


def concurrency_warning(jobs: int, node_cpus: int, training: Reservation) -> str | None:
    """A line for the user where training stages' CPU reservations let fewer than ``jobs`` of them run at once
    (``train.threads: 0`` reserves every core, so a pool of 8 runs one training at a time); else None."""
    fit = max(1, node_cpus // max(1, training.cpus))
    if fit >= jobs:
        return None
    return (f"warning: each training stage reserves {training.cpus} of {node_cpus} CPU(s), so at most {fit} of the "
            f"{jobs} jobs train at once; train.threads (or --cpus-per-run) {max(1, node_cpus // jobs)} would run "
            f"{jobs}, their results differing in the last bits")


def with_cpus_per_run(params: Params, cpus_per_run: int | None) -> Params:
    """``params`` with ``engine.cpus_per_run`` replaced (``study run --cpus-per-run``); unchanged for None."""
    if cpus_per_run is None:
        return params
    return dataclasses.replace(params, engine={**params.engine, "cpus_per_run": cpus_per_run})
