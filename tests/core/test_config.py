"""Every class of bad parameter is rejected at the edge with one clear line, before any work."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from study.core.config import parse_params
from study.core.errors import StudyError
from study.presets import preset_params
from tests.conftest import load_study, study_files

ROOT = Path(__file__).resolve().parents[2]
SMOKE = preset_params(ROOT, "smoke")  # configs/smoke.yaml merged over params.yaml


def with_change(path: str, value):
    """The smoke params with ``path`` (dotted) set to ``value``; value ``...`` deletes the key."""
    raw = copy.deepcopy(SMOKE)
    *parents, leaf = path.split(".")
    node = raw
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[leaf]
    else:
        node[leaf] = value
    return raw


# The study's presets; configs/pretrained.yaml parameterises the pretrained analysis (its own schema and tests).
STUDY_PRESETS = study_files()[1:]
# Studies that stop below full data (their analyses compare with the largest fraction): the default study, the pilot, the
# distillation, priors, small-data, controls and ladder presets, where 30 (60) epochs of full data do not fit the CPU's time
# budget.
BELOW_FULL_DATA = {"params.yaml", "pilot.yaml", "distillation.yaml", "distillation_soft.yaml", "priors.yaml", "priors_10pct.yaml",
                   "small_data.yaml", "check_4pct.yaml", "controls.yaml", "ladder.yaml"}
# Studies without a distilled student: the priors', the controls' and the ladder's arms are deltas of the ViT or of the recipes.
NO_STUDENT = ("priors", "controls", "ladder")


def test_presets_and_default_params_are_valid():
    for name in study_files():
        params = load_study(name)
        assert (1.0 in params.fractions) != (name in BELOW_FULL_DATA), name
        assert (params.distill is None) == name.startswith(NO_STUDENT), name
        if params.distill:
            assert params.trained_models[-1] == params.distill.student


@pytest.mark.parametrize("name", STUDY_PRESETS)
def test_preset_models_build_and_student_matches_vit(name):
    # Validation does not build models, so an arch_args key a builder rejects, or a patch size that does not
    # divide the image, would otherwise surface only in the training stage (on a GPU, for the GPU presets).
    from study.core.config import INPUT_SHAPES, NUM_CLASSES
    from study.models import build_model

    params = load_study(name)
    side, channels = INPUT_SHAPES[params.data.dataset]
    for model in params.models.values():
        build_model(model.arch, NUM_CLASSES[params.data.dataset], side, channels, **model.arch_args)
    if params.distill is None:
        return
    # The distilled student differs from the plain ViT by its distillation token only.
    student, vit = params.models[params.distill.student], params.models["vit"]
    assert student.arch_args == vit.arch_args
    assert (student.lr, student.weight_decay, student.augment) == (vit.lr, vit.weight_decay, vit.augment)


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ("data.colour", "red", "unknown key 'data.colour'"),
        ("budget.epochs", "three", "budget.epochs = 'three'"),
        ("budget.batch_size", 32.5, "budget.batch_size = 32.5"),
        ("train.compile", 1, "train.compile = 1"),
        ("fractions", [0.1, 1.5, 1.0], "fractions[1] = 1.5: fractions must lie in (0, 1]"),
        ("fractions", [0.0, 1.0], "fractions[0] = 0.0"),
        ("fractions", [0.1, 0.1, 1.0], "duplicate value(s) [0.1]"),
        ("fractions", [], "fractions = []"),
        ("fractions", [0.1, 1], "write fractions as decimals"),
        ("seeds", [0, 0], "seeds = [0, 0]: duplicate"),
        ("seeds", [], "seeds = []"),
        ("seeds", [-1], "non-negative"),
        ("data.dataset", "mnist", "data.dataset = 'mnist'"),
        ("budget.epochs", -1.0, "budget.epochs = -1.0"),
        ("budget.min_steps", -5, "budget.min_steps = -5"),
        ("models.vit.lr", 0.0, "models.vit.lr = 0.0"),
        ("baselines", ["resnet", "convnext"], "baselines: 'convnext' has no entry under models"),
        ("distill.0.teacher", "deit", "distill.teacher = 'deit' must be one of baselines"),
        ("distill", {"student": "deit", "teacher": "resnet"}, "must be a list of distillations"),
        ("distill", ..., "missing key 'distill'"),
        ("data.val_fraction", 1.0, "data.val_fraction = 1.0"),
        ("data", ..., "missing key 'data'"),
        ("analysis.seed", 7, "analysis.seed = 7"),
        ("analysis.robustnes", {}, "unknown key 'analysis.robustnes'"),
        ("analysis.robustness.images", 0, "analysis.robustness.images = 0"),
        ("analysis.cka.kernel", "cosine", "analysis.cka.kernel = 'cosine'"),
        ("analysis.curves.confidence", 1.5, "analysis.curves.confidence = 1.5"),
        ("engine", {"cpus": 2}, "unknown key 'engine.cpus'"),
        ("analysis.controls.pairs", [["swin", "vit"]], "analysis.controls.pairs[0] names 'swin', not a model"),
        ("analysis.controls.pairs", [["vit", "vit"]], "compares 'vit' with itself"),
        ("analysis.controls.pairs", [["vit"]], "analysis.controls.pairs"),
    ],
)
def test_bad_params_give_one_line_errors(path, value, expected):
    """Each section's error, whether the core schema or the section's own question raises it (``study check``
    runs both: :func:`study.tools.check.check_sections`)."""
    from study.tools.check import check_sections

    with pytest.raises(StudyError) as err:
        check_sections(parse_params(with_change(path, value), source="params.yaml"))
    message = str(err.value)
    assert expected in message
    assert "\n" not in message and message.startswith("params.yaml: ")


@pytest.mark.parametrize("arch, expected", [("vitt", "models.vit.arch = 'vitt': unknown model"),
                                            ("timm:not_a_model", "timm has no such model")])
def test_an_unknown_architecture_is_refused_before_any_training(arch, expected):
    """The schema takes any name; the stages that build models (and ``study check``) refuse one nothing builds."""
    from study.models import check_archs

    params = parse_params(with_change("models.vit.arch", arch), source="params.yaml")
    with pytest.raises(StudyError) as err:
        check_archs({name: m.arch for name, m in params.models.items()}, "params.yaml")
    assert expected in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("params.yaml: ")


def test_params_are_frozen():
    params = parse_params(SMOKE)
    with pytest.raises(Exception):
        params.budget.epochs = 9.0


def test_cli_rejects_bad_params_without_traceback_or_output(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(with_change("fractions", [0.1, 2.0, 1.0])))
    out = tmp_path / "prepared"
    result = subprocess.run(
        [sys.executable, "-m", "study", "prepare", "--params", str(bad), "--out", str(out)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: params.yaml: fractions[1] = 2.0: fractions must lie in (0, 1]".replace(
        "params.yaml", str(bad)
    )
    assert "Traceback" not in result.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_cli_reports_yaml_syntax_and_missing_file(tmp_path):
    broken = tmp_path / "p.yaml"
    broken.write_text("data: [unclosed\n")
    for path, expected in [(broken, "not valid YAML"),
                           (tmp_path / "nope.yaml", "no such file; run from the project root")]:
        result = subprocess.run([sys.executable, "-m", "study", "check", "--params", str(path)],
                                capture_output=True, text=True)
        assert result.returncode == 2 and expected in result.stderr and "Traceback" not in result.stderr


def test_config_knows_every_registered_dataset():
    from typing import get_args, get_type_hints

    from study.core.config import INPUT_SHAPES, NUM_CLASSES, DataParams
    from study.data.datasets import DATASETS

    allowed = get_args(get_type_hints(DataParams)["dataset"])
    assert set(allowed) == set(INPUT_SHAPES) == set(NUM_CLASSES) == set(DATASETS)
