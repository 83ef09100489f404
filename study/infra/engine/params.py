"""``engine``: what ``study run`` reserves for each stage (the schema and its reader)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from study.core.config import Params, section

_FROZEN = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_FROZEN)
class EngineParams:
    """What ``study run`` (study/infra/engine) reserves for each stage, and where it submits them. No stage depends on it in dvc.yaml:
    it decides where and how many stages run at once, not what they compute."""

    # CPUs reserved per training run, and its torch intra-op threads. None: train.threads, the threads
    # `dvc repro` trains with (0 = torch's default, all of a node's cores), so results stay identical;
    # fewer threads run more stages at once but change a CPU run's last bits (docs/pipeline.md, "Running stages
    # in parallel").
    cpus_per_run: StrictInt | None = Field(default=None, ge=1)
    # Share of one GPU reserved per stage on a cluster with GPUs (0.25: four runs per GPU); ignored without one.
    gpus_per_run: StrictFloat = Field(default=0.25, ge=0.0, le=1.0)
    # `study run --submitit slurm`: the partition its jobs go to (None: the cluster's default), and each job's time
    # limit in minutes (a stage that outlives it fails, and its training resumes on the rerun).
    slurm_partition: StrictStr | None = None
    job_minutes: StrictInt = Field(default=120, ge=1)


def engine_params(params: Params) -> EngineParams:
    return section(params, "engine", EngineParams)
