"""``study check``: validate a parameters file and exit: the schema every stage reads, every model built for the
data's shape (architectures and their ``arch_args``, keys and values) and the probes the robustness stage runs,
without the work (run it after editing params.yaml).

A preset (a file of a project's ``configs/``) is an overlay of that project's params.yaml, not a parameters file of
its own: it is checked merged over params.yaml, as ``study preset NAME`` merges it (study/presets.py).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from study.attention.params import attention_params
from study.controls.params import controls_params
from study.core.config import INPUT_SHAPES, NUM_CLASSES, Params, load_params, parse_params
from study.core.errors import StudyError
from study.infra.engine.params import engine_params
from study.plan.params import plan_params
from study.cka.params import cka_params
from study.runs.inspected import inspected_seed
from study.stats.confidence import confidence
from study.models import check_archs, check_models
from study.presets import preset_params
from study.robustness.grids import check_robustness
from study.robustness.params import robustness_params

# The reader of every section that a question validates itself (study.core.config.section): each one raises the
# section's one-line error. A new section's reader is added here so that `study check` validates it.
SECTION_READERS = (inspected_seed, confidence, cka_params, attention_params, robustness_params, controls_params,
                   plan_params, engine_params)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Only ``--params``, which the CLI adds to every command."""


def main(args: argparse.Namespace) -> str:
    params, source = read(args.params)
    check_sections(params)
    check_archs({name: m.arch for name, m in params.models.items()}, source)
    size, chans = INPUT_SHAPES[params.data.dataset]
    check_models({name: (m.arch, m.arch_args) for name, m in params.models.items()},
                 NUM_CLASSES[params.data.dataset], size, chans, source)
    check_robustness(params, source)
    return (f"check: {source} is valid ({len(params.models)} models built for {size}x{size}x{chans} inputs, "
            f"{len(params.fractions)} fractions, {len(params.seeds)} seeds)")


def check_sections(params: Params) -> None:
    """Validate every section the core schema leaves to its question (a bad one raises its one-line error)."""
    for read_section in SECTION_READERS:
        read_section(params)


def read(path: Path) -> tuple[Params, str]:
    """The validated parameters at ``path`` and how to name them: a preset merged over its project's params.yaml
    first (named so), any other file as it is."""
    folder = path.resolve().parent
    if folder.name == "configs" and (folder.parent / "params.yaml").is_file():
        base = os.path.relpath(folder.parent / "params.yaml")
        source = f"{path} merged over {base} (a preset: an overlay of params.yaml)"
        return parse_params(preset_params(folder.parent, path.stem), source=source), source
    try:
        return load_params(path), str(path)
    except StudyError as error:
        if ": missing key " not in str(error):
            raise
        raise StudyError(f"{error}; if {path} is a preset (an overlay of params.yaml), put it in the project's "
                         "configs/ and check that file, which is merged over params.yaml first") from None
