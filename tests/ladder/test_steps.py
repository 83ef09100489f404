"""study.ladder.steps on a synthetic runs table whose steps are known: per fraction, the step means, that a real
step's adjusted interval excludes 0 and a null step's does not, and each rung's accuracy for the figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from study.ladder.steps import rung_accuracy, step_table
from study.controls.params import controls_params
from study.plan.params import plan_params

CLEAN, SHUFFLE = ("clean", "clean", 0.0), ("rearrangement", "shuffle", 7.0)
# rung -> clean top-1 (a share): a -> b a step of +10 points, b -> c none
LEVELS = {"a": 0.60, "b": 0.70, "c": 0.70}


def _runs(seeds: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for fraction, images in ((0.01, 100), (0.1, 1000)):
        for seed in range(seeds):
            shared = rng.normal(0, 0.05)  # a seed's luck, shared by its rungs: the pairing removes it
            for model, level in LEVELS.items():
                for (probe, variant, lvl), drop in ((CLEAN, 0.0), (SHUFFLE, 0.2)):
                    rows.append({"model": model, "fraction": fraction, "seed": seed, "train_images": images,
                                 "probe": probe, "variant": variant, "level": lvl, "images": 1000,
                                 "top1": level - drop + shared + rng.normal(0, 0.005),
                                 "under_trained": False, "step_bound": seed == 0})
    return pd.DataFrame(rows)


def test_each_step_per_fraction_finds_the_real_step_and_not_the_null_one():
    steps = step_table([_runs()], [("b", "a"), ("c", "b")], [CLEAN, SHUFFLE], 0.95)
    assert len(steps) == 2 * 2 * 2  # steps x conditions x fractions
    real, null = steps[steps["step"] == "b - a"], steps[steps["step"] == "c - b"]
    assert real["mean"].to_numpy() == pytest.approx(10.0, abs=1.0)
    assert (real["adj_low"] > 0).all()
    assert ((null["adj_low"] < 0) & (null["adj_high"] > 0)).all()
    assert (steps["seeds"] == 5).all() and (steps["flagged_pairs"] == 1).all()  # seed 0 on the step floor
    # two steps per family (one condition at one fraction): Holm tests the first-ranked at 0.05 / 2
    assert steps.groupby(["condition", "fraction"])["adj_confidence"].max().tolist() == pytest.approx([0.975] * 4)


def test_a_step_without_runs_has_no_rows_and_the_rungs_accuracy_is_in_points():
    runs = _runs()
    steps = step_table([runs], [("b", "a"), ("d", "c")], [CLEAN], 0.95)
    assert set(steps["step"]) == {"b - a"}
    acc = rung_accuracy([runs], ["a", "b", "c"], [CLEAN, SHUFFLE])
    assert len(acc) == 3 * 2 * 2 and list(acc["position"].unique()) == [0, 1, 2]
    clean_b = acc[(acc["rung"] == "b") & (acc["condition"] == acc["condition"].iloc[0])]
    assert clean_b["top1"].to_numpy() == pytest.approx(70.0, abs=5.0)


def test_the_ladders_figures_draw_every_rung_and_every_step(tmp_path):
    from study.ladder.figures import rungs_figure, steps_figure
    from study.outputs.figure_style import save_figure

    runs = _runs()
    acc = rung_accuracy([runs], ["a", "b", "c"], [CLEAN, SHUFFLE])
    steps = step_table([runs], [("b", "a"), ("c", "b")], [CLEAN, SHUFFLE], 0.95)
    rungs = rungs_figure(acc)
    assert len(rungs.axes) == 2 and len(rungs.axes[0].lines) == 3  # a line per rung in each condition's panel
    forest = steps_figure(steps, {c: 2.0 for c in steps["condition"]})
    labels = [t.get_text() for t in forest.axes[0].get_yticklabels()]
    assert labels == ["b - a", "c - b"]
    written = save_figure(forest, tmp_path / "steps", steps)
    assert {p.suffix for p in written} >= {".png", ".pdf"}


def test_the_stage_writes_the_steps_the_rungs_and_both_figures(tmp_path):
    from pathlib import Path

    from study.core.config import parse_params
    from study.ladder.stage import run
    from study.presets import preset_params

    raw = preset_params(Path(__file__).resolve().parents[2], "ladder")
    raw["analysis"]["plan"]["ladder"].update({"rungs": ["vit", "lad_avg", "lad_nopos"], "side": []})
    params = parse_params(raw, "configs/ladder.yaml")
    runs = _runs().replace({"model": {"a": "vit", "b": "lad_avg", "c": "lad_nopos"}})
    offset = runs[runs["probe"] == "rearrangement"].assign(variant="offset")
    folder = tmp_path / "robustness"
    folder.mkdir()
    pd.concat([runs, offset]).to_csv(folder / "robustness_runs.csv", index=False)
    line = run(params, folder, tmp_path / "figures", tmp_path / "tables")
    assert line.startswith("ladder: 3 rungs, 2 steps x 3 conditions")
    steps = pd.read_csv(tmp_path / "tables" / "steps.csv")
    assert len(steps) == 2 * 3 * 2 and list(steps["step"].unique()) == ["lad_avg - vit", "lad_nopos - lad_avg"]
    assert set(steps["kind"]) == {"rung"}
    assert {p.name for p in (tmp_path / "figures").iterdir()} >= {"steps.png", "steps.pdf", "rungs.png", "rungs.pdf"}
    assert steps.drop_duplicates("step")["change"].tolist() == ["class_token: - -> False; global_pool: - -> avg",
                                                               "pos_embed: - -> none"]


def test_each_step_of_the_preset_changes_what_its_header_says():
    """The change column is read from the parameters: every rung of the ladder preset differs from the one below in
    the entries its comment names and no others (the ViT -> ladder architecture swap is no change: with no keyword
    the ladder is the ViT)."""
    from study.core.config import load_params
    from study.ladder.steps import step_changes
    from study.presets import preset_params
    from study.core.config import parse_params
    from tests.conftest import ROOT

    params = parse_params(preset_params(ROOT, "ladder"), "configs/ladder.yaml")
    ladder = plan_params(params).ladder
    changes = step_changes(list(ladder.pairs()), params.models)
    assert changes[("lad_nopos", "lad_avg")] == "pos_embed: - -> none"
    assert changes[("lad_mean", "lad_nopos")] == "token_mixer: - -> mean"
    assert changes[("lad_mean_wide", "lad_mean")] == "mlp_ratio: 2 -> 4"
    assert changes[("lad_pool", "lad_mean_wide")] == "token_mixer: mean -> pool"
    assert changes[("lad_dwconv", "lad_pool")] == "token_mixer: pool -> dwconv"
    assert changes[("lad_bn", "lad_dwconv")] == "norm: - -> batchnorm"
    assert changes[("lad_stem", "lad_bn")] == "stem: - -> conv"
    assert changes[("resnet", "resnet_adamw")].startswith("optimizer: adamw -> sgd")
    assert changes[("convmixer", "lad_bn")] == "arch: ladder -> convmixer"  # not the two architectures' arguments
    assert changes[("mlp", "vit")] == "arch: vit -> mlp"
    assert plan_params(load_params(ROOT / "params.yaml")).ladder is None


def test_without_a_ladder_the_stage_writes_an_empty_table(tmp_path):
    from study.core.config import load_params
    from study.ladder.stage import run

    from tests.conftest import ROOT

    line = run(load_params(ROOT / "params.yaml"), tmp_path / "none", tmp_path / "figures", tmp_path / "tables")
    assert "none declared" in line and pd.read_csv(tmp_path / "tables" / "steps.csv").empty


def test_every_step_that_moves_its_cost_has_a_twin_matched_in_what_it_moved():
    """The preset's rule (its header): a step moving parameters or forward FLOPs by more than 25% of the rung below
    has a twin (an analysis.controls pair against the same rung) within 25% in what the step moved, measured here from
    the built models; steps into a twin restore the cost on purpose. The one exception is the header's: the MLP,
    whose FLOPs are twice its parameters, is matched on parameters."""
    from study.core.config import parse_params
    from study.ladder.report import COST_LIMIT_PCT
    from study.models import build_model
    from study.models.cost import count_parameters, forward_flops
    from study.presets import preset_params
    from tests.conftest import ROOT

    params = parse_params(preset_params(ROOT, "ladder"), "configs/ladder.yaml")
    ladder, twins = plan_params(params).ladder, [tuple(p) for p in controls_params(params).pairs]

    def cost(name: str) -> tuple[float, float]:
        model = build_model(params.models[name].arch, 10, 28, 1, **params.models[name].arch_args)
        return count_parameters(model), forward_flops(model, 28, 1)

    costs = {name: cost(name) for name in dict.fromkeys([m for pair in [*ladder.pairs(), *twins] for m in pair])}

    def moved(arm: str, against: str) -> list[int]:
        return [i for i in (0, 1) if abs(100 * (costs[arm][i] / costs[against][i] - 1)) > COST_LIMIT_PCT]

    checked = []
    for arm, against in ladder.pairs():
        if not moved(arm, against) or arm in {t for t, _ in twins} or (arm, against) == ("mlp", "vit"):
            continue
        matched = [t for t, rung in twins if rung == against and not set(moved(t, against)) & set(moved(arm, against))]
        assert matched, f"{arm} - {against} moves its cost by more than {COST_LIMIT_PCT:g}% and has no twin"
        checked.append((arm, against))
    assert checked == [("lad_mean", "lad_nopos"), ("resnet_adamw", "lad_stem")]
    assert moved("mlp", "vit") == [1]  # the exception moves FLOPs only, not parameters
