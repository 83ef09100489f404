"""``study run``: what ``dvc repro`` does, with independent stages running at the same time, on Ray or with
``--jobs N`` in a local pool (:func:`study.infra.engine.driver.run_study`)."""

from __future__ import annotations

import argparse

from study.infra.engine.driver import run_study
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="*", metavar="TARGET", help="stages to bring up to date, with what they "
                        "depend on, as for `dvc repro` (default: the whole pipeline)")
    parser.add_argument("--jobs", "-j", type=int, metavar="N", help="run at most N stage commands at once as "
                        "subprocesses of this machine, without Ray (default: on Ray, which `study run` then needs); "
                        "their threads stay within --cpus, and on a GPU at most 1/engine.gpus_per_run stages share it")
    parser.add_argument("--address", help="join this Ray cluster (e.g. 10.0.0.1:6379, from `ray start --head`) "
                        "instead of starting a local Ray instance")
    parser.add_argument("--submitit", choices=["slurm", "local"], help="submit each stage as a SLURM job through "
                        "submitit (partition and time limit: engine.slurm_partition, engine.job_minutes), or with "
                        "`local` run the same jobs on this machine (docs/pipeline.md)")
    parser.add_argument("--cpus", type=int, help="CPUs of the local Ray instance, or with --jobs (or --submitit "
                        "local) the CPU threads its stages may hold in all (default: this machine's cores; more "
                        "oversubscribes them)")
    parser.add_argument("--gpus", type=int, help="GPUs of the local Ray instance or --jobs pool (default: those "
                        "detected); on a machine without, logical ones: stages are scheduled by engine.gpus_per_run "
                        "all the same")
    parser.add_argument("--cpus-per-run", type=int, help="CPUs, and torch threads, per training run for this run "
                        "only (default: engine.cpus_per_run, else train.threads); another thread count changes CPU "
                        "results")
    parser.add_argument("--warm", action="store_true", help="run each stage's `study` command in a fork of a "
                        "long-lived worker that has imported torch once, instead of a new process (same outputs, "
                        "seconds less per stage: docs/performance.md)")


def main(args: argparse.Namespace) -> str:
    params = configured(args.params)
    return run_study(params, args.targets, address=args.address, cpus=args.cpus, cpus_per_run=args.cpus_per_run,
                     gpus=args.gpus, jobs=args.jobs, warm=args.warm, submitit=args.submitit)
