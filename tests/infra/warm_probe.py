"""A stand-in for the `study` CLI that a warm worker's child runs in tests/infra/test_warm.py: it reports the
process state a stage could inherit, spoils that state, fails, or sleeps, as its first argument says."""

from __future__ import annotations

import json
import os
import sys
import time

TOUCHED = False  # set by "spoil": a module global a later stage must not see


def _state() -> dict:
    import torch

    return {"threads": torch.get_num_threads(), "deterministic": torch.are_deterministic_algorithms_enabled(),
            "torch_seed": torch.initial_seed(), "touched": TOUCHED, "spoiled_variable": os.environ.get("SPOILED"),
            "study_train_imported": "study.train.stage" in sys.modules, "cwd": os.getcwd(),
            "omp": os.environ.get("OMP_NUM_THREADS"), "stage": os.environ.get("DVC_STAGE"), "pid": os.getpid(),
            "group": os.getpgid(0)}


def main(argv: list[str]) -> int:
    action, *rest = argv
    if action == "spoil":  # everything a stage might leave behind in a process that ran it
        import torch

        import study.train.stage  # noqa: F401 - a study module imported
        global TOUCHED
        TOUCHED = True
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        torch.manual_seed(5)
        os.environ["SPOILED"] = "yes"
        action = "observe"
    if action == "observe":
        print(json.dumps(_state()))
        return 0
    if action == "fail":
        raise RuntimeError("the probe's injected failure")
    if action == "exit":
        return int(rest[0])
    if action == "sleep":
        print(os.getpid(), flush=True)
        time.sleep(float(rest[0]))
        return 0
    raise SystemExit(f"unknown probe action {action}")
