"""What a training stage's process costs at start: how long the command takes to start, and what it imports.

Every DVC training stage is a new ``study train`` process, so what it imports and reads at start is paid once per
run: 27 times in the smoke preset. The budgets, on a 2-core CPU like CI's:

* ``study train --help`` (the command's whole start: the CLI, the stage module and what it imports) within
  1.5 × ``python -c "import torch"``, measured as a ratio in one run so that a slower or busier machine cancels;
* neither imports what it does not use: torchvision (whose import alone brought in ``torch._dynamo``, over a
  second), timm, kornia, triton, the plotting and statistics libraries.

A training stage's whole overhead (its process's wall time minus its steps' ``train_seconds``, target 3 s) is a
measurement, not a property: ``python -m benchmarks.stage_overhead`` reports it.

Timings are the CPU time of each process (user + system, so a neighbour holding a core does not count) and
medians of interleaved repeats after one untimed warm-up each (the first start reads every file from disk): what
is left of a neighbour's load slows both sides of a ratio alike, and one unlucky repeat moves no median.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Modules the train stage's start must not import: the stage uses none of them (timm only for `timm:` models,
# kornia only when augmenting, during training; the rest belongs to the analyses and reports).
UNUSED_AT_START = ("torchvision", "timm", "kornia", "triton", "sympy", "torch._dynamo", "torch._inductor",
                   "scipy", "sklearn", "matplotlib", "seaborn")
HELP_BUDGET = 1.5  # × `import torch`
REPEATS = 3


def _seconds(command: list[str], cwd: Path = ROOT) -> float:
    """CPU time (user + system) of ``command``, which must succeed: unlike wall time, it does not grow when
    another process (a second pytest worker) holds a core."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stderr[-2000:]
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


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


@pytest.mark.slow  # eight process starts, each importing torch: 56 s on a 2-core EPYC of family 23
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
