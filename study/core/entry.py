"""What every stage's entry point shares: validated parameters with the runtime switches set, the paths of an
analysis, and the pairs of models it compares.

A stage's entry point is ``study/<question>/stage.py`` (or ``stage_<name>.py``): ``add_arguments`` declares the paths
``dvc.yaml`` passes, ``main`` validates the parameters (:func:`configured`), calls its question's library and
returns the one-line summary the CLI prints. Nothing in an entry point invents a path or computes a statistic.
"""

from __future__ import annotations

from pathlib import Path

from study.core.config import Params


def configured(params_path: Path) -> Params:
    """The validated parameters at ``params_path`` (nothing runs on a bad file), after setting the process-wide
    runtime switches from them: this is the one place a command sets threads and determinism."""
    from study.core import runtime
    from study.core.config import load_params

    params = load_params(params_path)
    runtime.configure(threads=params.train.threads, deterministic=params.train.deterministic)
    return params


def add_analysis_arguments(parser, prepared: bool = True) -> None:
    """The paths of an analysis of the runs: the runs, the prepared data (when it reads images), where its figures
    and tables go."""
    parser.add_argument("--runs", type=Path, required=True, help="folder holding the runs (runs)")
    if prepared:
        parser.add_argument("--prepared", type=Path, required=True)
    parser.add_argument("--figures", type=Path, required=True, help="output folder for figures")
    parser.add_argument("--tables", type=Path, required=True, help="output folder for tables")


def model_pairs(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every later model against every earlier one, e.g. vit − resnet, deit − resnet, deit − vit."""
    return [(names[j], names[i]) for j in range(len(names)) for i in range(j)]
