"""What a training stage's process costs before and after its optimiser steps.

Every DVC training stage is a new ``study train`` process, so what it imports and reads at start is paid once per
run: 27 times in the smoke preset. The budgets, on a 2-core CPU like CI's:

* ``study train --help`` (the command's whole start: the CLI, the stage module and what it imports) within
  1.5 × ``python -c "import torch"``, measured as a ratio in one run so that a slower or busier machine cancels;
* a training stage's overhead, the process's wall time minus its training steps' time (``train_seconds`` in
  metrics.json), at most 3 s;
* neither imports what it does not use: torchvision (whose import alone brought in ``torch._dynamo``, over a
  second), timm, kornia, triton, the plotting and statistics libraries.

Timings are medians of interleaved repeats after one untimed warm-up each (the first start reads every file
from disk): a neighbour's load slows both sides of a ratio alike, and one unlucky repeat moves no median.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

# Modules the train stage's start must not import: the stage uses none of them (timm only for `timm:` models,
# kornia only when augmenting, during training; the rest belongs to the analyses and reports).
UNUSED_AT_START = ("torchvision", "timm", "kornia", "triton", "sympy", "torch._dynamo", "torch._inductor",
                   "scipy", "sklearn", "matplotlib", "seaborn")
HELP_BUDGET = 1.5  # × `import torch`
OVERHEAD_BUDGET_S = 3.0
REPEATS = 3


def _seconds(command: list[str], cwd: Path = ROOT) -> float:
    """Wall time of ``command``, which must succeed."""
    tic = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - tic
    assert result.returncode == 0, result.stderr[-2000:]
    return elapsed


def _loaded(code: str) -> list[str]:
    """Which of ``UNUSED_AT_START`` a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {UNUSED_AT_START!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.split()


def test_train_stage_module_imports_nothing_it_does_not_use():
    assert _loaded("import study.train.stage") == []


def test_train_command_parser_imports_nothing_it_does_not_use():
    """What `study train ...` loads before it starts (the parser imports the command's module to add its options)."""
    assert _loaded("from study.core.cli import build_parser\nbuild_parser('train')") == []


def test_models_import_without_torchvision():
    assert _loaded("import study.models, study.models.cost") == []


def test_train_help_starts_within_one_and_a_half_torch_imports():
    help_command = [sys.executable, "-m", "study", "train", "--help"]
    torch_command = [sys.executable, "-c", "import torch"]
    _seconds(help_command), _seconds(torch_command)  # warm-up: files into the page cache, bytecode written
    help_s, torch_s = [], []
    for _ in range(REPEATS):  # interleaved, so a load that comes and goes hits both
        help_s.append(_seconds(help_command))
        torch_s.append(_seconds(torch_command))
    ratio = statistics.median(help_s) / statistics.median(torch_s)
    assert ratio <= HELP_BUDGET, (f"`study train --help` took {ratio:.2f} x `import torch` (median of {REPEATS}: "
                                  f"{statistics.median(help_s):.2f} s against {statistics.median(torch_s):.2f} s); "
                                  f"see what it imports with `python -X importtime -m study train --help`")


@pytest.fixture(scope="module")
def smoke_data(tmp_path_factory) -> tuple[Path, Path]:
    """The smoke preset's parameters file, and its prepared digits and subsets, written by the real stages."""
    from study.core.config import parse_params
    from study.data import stage_prepare, stage_subsets
    from study.presets import preset_params

    folder = tmp_path_factory.mktemp("smoke_data")
    raw = preset_params(ROOT, "smoke")
    params = parse_params(raw)
    stage_prepare.run(params, folder / "prepared")
    stage_subsets.run(params, folder / "prepared", folder / "subsets")
    (folder / "params.yaml").write_text(yaml.safe_dump(raw))
    return folder / "params.yaml", folder


# Not met yet: after torchvision went, a stage still imports torch._dynamo (about 1.1 s of the 3) because torch 2.14's
# optimisers import it at their first step (torch/optim/optimizer.py, `_use_grad_for_differentiable`), and pandas
# (0.25 s) through study.data.subsets and study.train.loop; measured on the 2-core EPYC the overhead is about 4 s.
@pytest.mark.xfail(strict=False, reason="torch.optim imports torch._dynamo at the first step (~1.1 s); pandas at start")
@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet", "vit"])
def test_training_stage_overhead_is_at_most_three_seconds(smoke_data, tmp_path, model):
    """Wall time of a smoke training stage's whole process minus the time of its optimiser steps (measured as in
    the pipeline: `study train` through `python -m study`, its own process)."""
    params, data = smoke_data
    overheads = []
    for repeat in range(REPEATS + 1):  # the first is the warm-up
        run = tmp_path / f"run{repeat}"
        wall = _seconds([sys.executable, "-m", "study", "train", "--params", str(params), "--model", model,
                         "--fraction", "0.5", "--seed", "0", "--prepared", str(data / "prepared"),
                         "--subset", str(data / "subsets/s0/f0.5.npy"),
                         "--validation", str(data / "subsets/validation.npy"), "--run", str(run)])
        overheads.append(wall - json.loads((run / "metrics.json").read_text())["train_seconds"])
    overhead = statistics.median(overheads[1:])
    assert overhead <= OVERHEAD_BUDGET_S, (f"a {model} training stage spent {overhead:.2f} s outside its optimiser "
                                           f"steps (median of {REPEATS}: {[round(o, 2) for o in overheads[1:]]})")
