"""The robustness analysis: parameters rejected with one line, statistics on synthetic tables whose
answers are known by construction, scoring that does not depend on batching, and the stage end to end (on
untrained models here, fast; on the smoke study's trained runs, slow)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from study.robustness import contrasts as R
from study.robustness.scoring import CLEAN, conditions, predict, probe_set, score_runs
from study.core.config import INPUT_SHAPES, load_params, parse_params
from study.robustness.grids import (check_robustness, occlusion_grid, plan_scoring, planned_claims, probe_settings,
                                    rearrangement_grids, scored_conditions)
from study.core.errors import StudyError

from study.presets import preset_params
from tests.conftest import dvc, load_study, study_files, study_raw
from study.plan.params import plan_params
from study.robustness.params import robustness_params

ROOT = Path(__file__).resolve().parents[2]
SMOKE = preset_params(ROOT, "smoke")  # the presets, merged over params.yaml
QUICK = preset_params(ROOT, "quick")  # a patch-7 ViT: a 4x4 grid on 28 px


def validated(raw, source: str = "params"):
    """``raw`` parsed and its probes checked, as the robustness stage and ``study check`` do."""
    params = parse_params(raw, source=source)
    check_robustness(params, source)
    return params


# --- parameters ------------------------------------------------------------------------------------------------

def robustness(raw: dict, **sections) -> dict:
    """``raw`` with ``analysis.robustness``'s sections replaced (``section=value``; ``None`` deletes it)."""
    raw = copy.deepcopy(raw)
    node = raw["analysis"]["robustness"]
    for key, value in sections.items():
        if value is None:
            node.pop(key)
        else:
            node[key] = value
    return raw


@pytest.mark.parametrize("sections, expected", [
    ({"occlusion": {"grid": 5}}, "analysis.robustness.occlusion: a 5x5 grid does not divide the 28x28 image; "
                                 "choose a grid that divides 28: 1, 2, 4, 7, 14, 28"),
    ({"rearrangement": {"grids": [2, 3, 4]}}, "analysis.robustness.rearrangement: a 3x3 grid does not divide"),
    ({"occlusion": {"grid": 4, "shares": [0.5, 1.5]}}, "analysis.robustness.occlusion: share 1.5 is outside [0, 1]"),
    ({"occlusion": {"grid": 4, "shares": [-0.1]}}, "share -0.1 is outside [0, 1]"),
    ({"occlusion": {"grid": 4, "shares": [0.5, 0.5]}}, "analysis.robustness.occlusion.shares = [0.5, 0.5]: duplicate"),
    ({"corruptions": {"names": ["fogg"]}}, "analysis.robustness.corruptions: unknown corruption 'fogg'; choose from"),
    ({"corruptions": {"names": ["fog"], "severities": [0, 6]}}, "corruption severity 6 is out of range"),
    ({"translation": {"shifts": [1, 28]}}, "analysis.robustness.translation: shift 28 must be a whole number of pixels"),
    ({"occlusion": {"grid": 7}}, "analysis.robustness.occlusion.grid = 7: model 'vit' cuts the 28-px images into a "
                                 "4x4 grid of 7-px patches; set 4"),
    ({"rearrangement": {"grids": [2, 7, 14]}}, "analysis.robustness.rearrangement.grids = [2, 7, 14]: add 4"),
    ({"rearrangement": {"grids": [2, 4], "offset_grids": [7]}},
     "analysis.robustness.rearrangement.offset_grids = [7]: 7 is not one of the shuffle grids [2, 4]; add it to "
     "analysis.robustness.rearrangement.grids or drop it here"),
    ({"rearrangement": {"grids": [2, 4, 14], "offset_grids": [4, 4]}},
     "analysis.robustness.rearrangement.offset_grids = [4, 4]: duplicate"),
    ({"images": 0}, "analysis.robustness.images = 0"),
    ({"colour": True}, "unknown key 'analysis.robustness.colour'"),
])
def test_bad_robustness_params_give_one_line_errors(sections, expected):
    with pytest.raises(StudyError) as err:
        validated(robustness(QUICK, **sections), source="params.yaml")
    message = str(err.value)
    assert expected in message and "\n" not in message and message.startswith("params.yaml: ")


def test_an_offset_grid_needs_cells_of_two_px():
    raw = robustness(SMOKE, rearrangement={"grids": [2, 4, 8], "offset_grids": [4, 8]})  # 8 px: 8x8 cells of 1 px
    with pytest.raises(StudyError, match=r"^smoke: analysis.robustness.rearrangement.offset_grids = \[4, 8\]: the "
                                         r"8x8 grid's cells are 1 px, too small to move by half a cell; drop 8"):
        validated(raw, source="smoke")


def plan_claim(raw: dict, index: int, **fields) -> dict:
    """``raw`` with fields of ``analysis.plan.claims[index]`` replaced."""
    raw = copy.deepcopy(raw)
    raw["analysis"]["plan"]["claims"][index].update(fields)
    return raw


DEFAULT = load_study("params.yaml")  # the default study, as parsed


@pytest.mark.parametrize("change, expected", [
    (lambda raw: robustness(raw, rearrangement={"grids": [2, 4, 7]}),
     "analysis.plan.claims[1].control = [rearrangement, offset, 7]: the robustness stage does not score it; add 7 "
     "to analysis.robustness.rearrangement.offset_grids (and to its grids), or change the claim"),
    (lambda raw: robustness(raw, translation={"shifts": [1, 2, 4]}),
     "analysis.plan.claims[5].control = [translation, x, 8]: the robustness stage does not score it; add 8 to "
     "analysis.robustness.translation.shifts, or change the claim"),
    (lambda raw: plan_claim(raw, 2, condition=["occlusion", "aligned", 0.6]),
     "analysis.plan.claims[2].condition = [occlusion, aligned, 0.6]: the robustness stage does not score it; add "
     "0.6 to analysis.robustness.occlusion.shares"),
    (lambda raw: plan_claim(raw, 2, control=["occlusion", "shifted", 0.5]),
     "analysis.plan.claims[2].control = [occlusion, shifted, 0.5]: the robustness stage does not score it; the "
     "variants of occlusion are aligned, offset, or change the claim"),
    (lambda raw: plan_claim(raw, 0, condition=["corruption", "fog", 2]),
     "analysis.plan.claims[0].condition = [corruption, fog, 2]: the robustness stage does not score it; add fog to "
     "analysis.robustness.corruptions.names and 2 to its severities"),
    (lambda raw: plan_claim(raw, 0, arm="resnet@uniform", against="vit"),
     "analysis.plan.claims[0].arm = 'resnet@uniform': model 'resnet' (arch resnet8) has no uniform-attention "
     "variant"),
])
def test_a_claim_the_stage_does_not_score_gives_a_one_line_error(change, expected):
    raw = change(study_raw("pilot.yaml"))  # the pilot's 7 claims, which the cases index
    with pytest.raises(StudyError) as err:
        validated(raw, source="params.yaml")
    message = str(err.value)
    assert message.startswith("params.yaml: ") and expected in message and "\n" not in message


def test_the_plan_scores_its_claims_conditions_for_the_models_the_study_trains():
    models, uniform, keys = plan_scoring(load_study("pilot.yaml"))  # the pilot's plan: 7 claims of vit - resnet
    assert models == ("vit", "resnet") and uniform == ()
    # clean, the 7x7 shuffle and its offset, occlusion at 50/75/90% aligned and offset, 4 and 8 px along x and y
    assert len(keys) == 13 and keys[0] == ("clean", "clean", 0.0)
    assert ("rearrangement", "offset", 7.0) in keys and ("translation", "y", 8.0) in keys
    # A claim whose model is defined but not trained is skipped (as analysis.controls.pairs), even with a
    # condition the stage does not score; one naming a variant adds that variant for its model's runs only.
    raw = study_raw("pilot.yaml")
    raw["models"]["mlp"] = {"arch": "mlp"}
    raw["analysis"]["plan"]["claims"] += [
        {"name": "mlp", "claim": "x", "arm": "mlp", "against": "vit", "condition": ["occlusion", "aligned", 0.6]},
        {"name": "attention", "claim": "y", "arm": "deit@uniform", "against": "deit",
         "condition": ["rearrangement", "shuffle", 4]}]
    params = validated(raw)
    assert [i for i, _ in planned_claims(params)] == [0, 1, 2, 3, 4, 5, 6, 8]
    models, uniform, keys = plan_scoring(params)
    assert models == ("vit", "resnet", "deit") and uniform == ("deit",) and len(keys) == 14
    raw["analysis"]["plan"] = None
    assert plan_scoring(validated(raw)) == ((), (), ())


@pytest.mark.parametrize("name", study_files())
def test_the_conditions_a_claim_may_name_are_those_the_stage_scores(name):
    params = load_study(name)
    assert scored_conditions(params) == {c.key for c in conditions(**probe_settings(params))}


def test_the_default_study_shifts_by_8_px_and_shuffles_7x7_off_the_grid_too():
    check_robustness(DEFAULT, "params.yaml")
    keys = {c.key for c in conditions(**probe_settings(DEFAULT))}
    assert {("translation", d, 8.0) for d in ("x", "y", "diagonal")} <= keys
    assert ("rearrangement", "offset", 7.0) in keys and ("rearrangement", "offset", 4.0) not in keys


def test_the_uniform_variant_archs_are_those_the_switch_accepts():
    from study.models import MODEL_NAMES, build_model
    from study.models.ablations import has_uniform_variant
    from study.robustness.grids import UNIFORM_ARCHS

    assert set(UNIFORM_ARCHS) <= set(MODEL_NAMES)
    for arch in ("vit", "deit", "convit", "vit_convstem", "resnet8", "swin", "mlp"):
        assert has_uniform_variant(build_model(arch, 10, 28, 1)) == (arch in UNIFORM_ARCHS), arch


def test_a_corruption_the_image_is_too_small_for_is_rejected_up_front():
    with pytest.raises(StudyError, match="corruption spatter needs images of at least 13x13 px, got 8x8"):
        validated(robustness(SMOKE, corruptions={"names": ["spatter"], "severities": [1]}), source="smoke")
    raw = robustness(QUICK, corruptions={"names": ["spatter"], "severities": [1, 5]})
    assert robustness_params(validated(raw)).corruptions.names == ("spatter",)  # 28 px: fine


def test_the_settings_checks_know_the_librarys_corruptions_and_limits():
    # The parameters layer validates with study.robustness.settings, which does not import the library
    # (every stage runs it); its names and limits must be the library's.
    import math

    from study.robustness.settings import CORRUPTION_NAMES, MIN_IMAGE_SIZE
    from study.robustness.probes import CORRUPTIONS, corrupt
    from study.robustness.probes.corrupt_pixels import SPATTER

    assert CORRUPTION_NAMES == tuple(CORRUPTIONS)
    assert MIN_IMAGE_SIZE == {"spatter": math.ceil(3 * max(row[2] for row in SPATTER)) + 1}
    for side in (MIN_IMAGE_SIZE["spatter"], 28):
        corrupt(torch.zeros((1, side, side, 1), dtype=torch.uint8), "spatter", 1, seed=0)
    with pytest.raises(StudyError, match="needs images of at least 13x13 px, got 12x12"):
        corrupt(torch.zeros((1, 12, 12, 1), dtype=torch.uint8), "spatter", 1, seed=0)


def test_every_preset_probes_the_vits_patch_grid():
    for name in study_files():
        params = load_study(name)
        r, side = robustness_params(params), INPUT_SHAPES[params.data.dataset][0]
        patch = params.models["vit"].arch_args["patch_size"]
        assert occlusion_grid(params) == side // patch and side // patch in rearrangement_grids(params), name
        assert len(rearrangement_grids(params)) >= 3 and max(r.translation.shifts) >= 4 and len(r.corruptions.severities) >= 3
        # At least 1,000 probe images where a study has no analysis plan (the CPU studies' number, for time): the
        # binomial standard error of a top-1 near 70% is then 1.4 points, below the spread over seeds that the
        # intervals carry. The priors and controls presets probe 500 (8 and 9 arms in their hour; 2.0 points), as
        # their headers say; a study whose plan scores its claims' conditions again on its own images keeps at
        # least 300 for the exploratory ones (2.6 points).
        planned = plan_params(params) is not None and plan_params(params).images > 300
        least = 300 if planned else 500 if name.startswith(("priors", "controls")) else 1000
        assert r.images >= least and r.occlusion.offset, name
        # Occlusion up to 90% draws the whole curve; the controls preset scores only the shares its report and the
        # plan read: Naseer et al.'s 50%, the contrasts' 75% and the plan's 90%, each on the grid and off it.
        if name.startswith("controls"):
            assert {0.5, 0.75, 0.9} <= set(r.occlusion.shares), name
        else:
            assert max(r.occlusion.shares) >= 0.9, name


def test_every_preset_scores_the_conditions_its_plan_names():
    """check_robustness on every preset as merged: each plan claim's condition and control is one the stage scores
    (a preset that inherits the default's plan on other images or grids must declare its own), and every
    controlled claim's control differs from its condition in the way its words say (same probe)."""
    from study.robustness.grids import check_robustness

    planned = 0
    for name in study_files():
        params = load_study(name)
        check_robustness(params, name)
        plan = plan_params(params)
        for claim in plan.claims if plan else ():
            planned += 1
            if claim.control is not None:
                assert claim.control[0] == claim.condition[0] and claim.control_means, (name, claim.name)
    assert planned > 0


def test_without_a_robustness_section_the_grid_is_the_vits_patch_grid():
    # The section is optional: without it every probe takes its default, the grids following the ViT's patches.
    raw = copy.deepcopy(QUICK)
    del raw["analysis"]["robustness"]
    raw["analysis"].pop("plan", None)  # its claims name conditions of params.yaml's section (tested below)
    assert occlusion_grid(validated(raw)) == 4
    assert rearrangement_grids(validated(raw)) == (2, 4, 7, 14)  # cells of 14, 7, 4 and 2 px
    raw["models"]["vit"]["arch_args"]["patch_size"] = raw["models"]["deit"]["arch_args"]["patch_size"] = 4
    assert occlusion_grid(validated(raw)) == 7  # the default study's patch-4 ViT
    digits = copy.deepcopy(SMOKE)  # 8-px images, patch 2: grids of 4 and 2 px cells
    del digits["analysis"]["robustness"]
    digits["analysis"].pop("plan", None)
    assert occlusion_grid(validated(digits)) == 4 and rearrangement_grids(validated(digits)) == (2, 4)
    digits["models"]["vit"]["arch_args"]["patch_size"] = digits["models"]["deit"]["arch_args"]["patch_size"] = 1
    assert rearrangement_grids(validated(digits)) == (2, 4, 8)  # with the 1-px patches' 8x8 grid
    no_vit = copy.deepcopy(raw)
    no_vit.update(baselines=["resnet"], distill=[])
    no_vit["models"] = {"resnet": no_vit["models"]["resnet"]}
    no_vit["analysis"].pop("controls", None)  # its pairs name the ViT
    with pytest.raises(StudyError, match="occlusion.grid: no ViT-family model"):
        validated(no_vit)
    no_vit["analysis"]["robustness"] = {"occlusion": {"grid": 4}}
    assert occlusion_grid(validated(no_vit)) == 4


def test_study_check_prints_the_one_line_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(robustness(QUICK, occlusion={"grid": 3})))
    result = subprocess.run([sys.executable, "-m", "study", "check", "--params", str(path)], capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "analysis.robustness.occlusion: a 3x3 grid does not divide the 28x28 image" in result.stderr


def test_the_statistics_and_the_probe_names_import_no_torch():
    # The controls stage reads the robustness tables through study.robustness.contrasts: the names of the probes
    # and the corruption errors are plain data and arithmetic, so importing them must not start torch (seconds).
    code = ("import sys, study.robustness.contrasts, study.robustness.figures; print(sorted(m for m in ('torch', "
            "'study.models', 'study.robustness.probes', 'study.robustness.scoring') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr
    import study.robustness as names
    from study.robustness import scoring

    for name in ("CLEAN", "OCCLUSION", "REARRANGEMENT", "TRANSLATION", "CORRUPTION", "ALIGNED", "OFFSET", "SHUFFLE",
                 "DIRECTIONS", "LEVEL_NAMES", "PROBES"):
        assert getattr(scoring, name) is getattr(names, name), name  # the old imports keep working


# --- statistics on synthetic tables ------------------------------------------------------------------------------

def synthetic(gaps: dict[tuple[str, float], list[float]], fractions=(0.1, 1.0), seeds=(0, 1, 2),
              clean=0.9, step_bound=()) -> pd.DataFrame:
    """A per-run table for models resnet and vit: resnet scores ``clean`` clean and 0.5 under ("occlusion", share)
    for every level named in ``gaps``; vit scores the same plus ``gaps[(probe level key)][seed]``, where the key
    ``("clean", 0.0)`` sets vit's clean top-1 offset. 100 training images at 0.1, 1,000 at 1.0."""
    rows = []
    for fraction in fractions:
        for seed in seeds:
            for model in ("resnet", "vit"):
                offset = gaps.get((CLEAN, 0.0), [0.0] * len(seeds))[seeds.index(seed)] if model == "vit" else 0.0
                rows.append({"model": model, "fraction": fraction, "seed": seed, "probe": CLEAN, "variant": CLEAN,
                             "level": 0.0, "top1": clean + offset})
                for (probe, level), values in gaps.items():
                    if probe == CLEAN:
                        continue
                    value = 0.5 + (values[seeds.index(seed)] if model == "vit" else 0.0)
                    rows.append({"model": model, "fraction": fraction, "seed": seed, "probe": probe,
                                 "variant": "aligned", "level": level, "top1": value})
    scores = pd.DataFrame(rows).assign(detail="", images=100, correct=0)
    runs = pd.DataFrame([{"model": m, "fraction": f, "seed": s, "train_images": int(1000 * f),
                          "under_trained": False, "step_bound": (f, s) in step_bound}
                         for f in fractions for s in seeds for m in ("resnet", "vit")])
    return R.per_run(scores, runs)


def test_retained_accuracy_is_probe_over_clean_of_the_same_run():
    table = synthetic({("occlusion", 0.5): [0.1, 0.1, 0.1]})
    vit = table[(table["model"] == "vit") & (table["probe"] == "occlusion")]
    assert np.allclose(vit["retained"], 0.6 / 0.9)
    zeros = R.with_level_zero(table)
    level0 = zeros[(zeros["probe"] == "occlusion") & (zeros["level"] == 0)]
    assert len(level0) == 12 and np.allclose(level0["retained"], 1.0)


def test_summary_mean_and_t_interval_over_seeds():
    table = synthetic({("occlusion", 0.5): [0.0, 0.1, 0.2]})
    summary = R.summarise(table, 0.95)
    row = summary[(summary["model"] == "vit") & (summary["probe"] == "occlusion") & (summary["fraction"] == 1.0)].iloc[0]
    half = 4.302652729911275 * 0.1 / np.sqrt(3)  # t(0.975, 2) * sd / sqrt(n)
    assert row["top1_mean"] == pytest.approx(0.6) and row["seeds"] == 3
    assert row["top1_ci_low"] == pytest.approx(0.6 - half) and row["top1_ci_high"] == pytest.approx(0.6 + half)


def test_a_clear_win_is_significant_and_a_null_gets_an_equivalence_bound():
    table = synthetic({("occlusion", 0.5): [0.20, 0.21, 0.22], ("occlusion", 0.9): [0.01, -0.01, 0.0]})
    c = R.contrasts(table, [("vit", "resnet")], "accuracy", 0.95)
    win = c[(c["level"] == 0.5)]
    assert win["significant"].all() and win["inference"].all() and win["equivalence_bound"].isna().all()
    assert np.allclose(win["diff_mean"], 0.21)
    null = c[(c["level"] == 0.9)]
    assert not null["significant"].any()
    # Holm across the 2 fractions: both have p = 1 (mean 0), nothing is rejected, so both keep Holm's first level
    # alpha/2: the 97.5% interval, symmetric about 0, and the bound is its half-width, t(0.9875, 2)·sd/√3.
    t = 6.205346816289217  # t(1 - 0.025/2, 2)
    assert null["adj_confidence"].iloc[0] == pytest.approx(0.975)
    assert null["equivalence_bound"].iloc[0] == pytest.approx(t * 0.01 / np.sqrt(3))


def test_holm_adjusts_within_a_family_of_fractions_only():
    # The same clear gap at three fractions: Holm rejects all three, at alpha/3, alpha/2 and alpha (step-down).
    table = synthetic({("occlusion", 0.5): [0.3, 0.31, 0.29]}, fractions=(0.01, 0.1, 1.0))
    c = R.contrasts(table, [("vit", "resnet")], "accuracy", 0.95)
    occluded = c[c["probe"] == "occlusion"]
    assert sorted(occluded["adj_confidence"].round(4)) == [0.95, 0.975, round(1 - 0.05 / 3, 4)]
    assert occluded["significant"].all()
    # Identical clean scores: p = 1 everywhere, nothing rejected, every interval at Holm's first level, alpha/3.
    clean = c[c["probe"] == CLEAN]
    assert len(clean) == 3 and not clean["significant"].any()
    assert np.allclose(clean["adj_confidence"], 1 - 0.05 / 3) and np.allclose(clean["equivalence_bound"], 0.0)


def test_retained_contrast_separates_robustness_from_accuracy():
    # vit is 10 points worse clean and equal under occlusion: it loses on clean accuracy and keeps more.
    table = synthetic({(CLEAN, 0.0): [-0.10, -0.11, -0.09], ("occlusion", 0.5): [0.0, 0.001, -0.001]})
    kept = R.contrasts(table, [("vit", "resnet")], "retained", 0.95)
    assert set(kept["probe"]) == {"occlusion"}  # clean retains 1 by definition: no contrast
    assert kept["significant"].all() and (kept["diff_mean"] > 0).all()
    assert kept["diff_mean"].iloc[0] == pytest.approx(0.5 / 0.8 - 0.5 / 0.9, abs=2e-3)


def test_a_flip_is_claimed_only_where_both_sides_are_significant():
    gaps = {(CLEAN, 0.0): [-0.10, -0.11, -0.09], ("occlusion", 0.3): [-0.02, 0.03, 0.0],
            ("occlusion", 0.7): [0.20, 0.21, 0.19]}
    c = R.contrasts(synthetic(gaps), [("vit", "resnet")], "accuracy", 0.95)
    flips = R.winner_flips(c)
    assert flips["flip_claimed"].all() and len(flips) == 2  # one per fraction
    row = flips.iloc[0]
    assert row["direction"] == "vit overtakes resnet"
    assert (row["significant_from_level"], row["significant_to_level"]) == (0.0, 0.7)
    # Without the significant clean deficit there is a sign change of the mean but no claim.
    noisy = {(CLEAN, 0.0): [-0.10, 0.05, 0.01], ("occlusion", 0.7): [0.20, 0.21, 0.19]}
    flips = R.winner_flips(R.contrasts(synthetic(noisy), [("vit", "resnet")], "accuracy", 0.95))
    assert not flips["flip_claimed"].any() and (flips["sign_changes"] == 1).all()


def test_trend_slope_per_decade_of_training_images():
    # vit's advantage grows by 5 points per tenfold data: 0.10 at 100 images, 0.15 at 1,000, 0.20 at 10,000.
    fractions = (0.1, 1.0, 10.0)  # 100, 1,000, 10,000 training images in the synthetic run table
    rows = []
    for level_gap, fraction in zip((0.10, 0.15, 0.20), fractions):
        t = synthetic({("occlusion", 0.5): [level_gap + e for e in (-0.01, 0.0, 0.01)]}, fractions=(fraction,))
        rows.append(t)
    table = pd.concat(rows, ignore_index=True)
    trends = R.contrast_trends(table, [("vit", "resnet")], "accuracy", 0.95)
    row = trends[trends["probe"] == "occlusion"].iloc[0]
    assert row["slope_per_decade"] == pytest.approx(5.0) and row["fractions_used"] == 3 and row["significant"]
    # A step-bound run leaves its fraction out, as for the clean gaps.
    flagged = table.copy()
    flagged.loc[(flagged["fraction"] == 0.1) & (flagged["seed"] == 0), "step_bound"] = True
    row = R.contrast_trends(flagged, [("vit", "resnet")], "accuracy", 0.95).iloc[-1]
    assert row["fractions_used"] == 2 and row["slope_per_decade"] == pytest.approx(5.0)
    # The Holm family is the comparisons at one condition: alone, its adjusted interval is the raw one; beside a
    # second comparison with the same slopes (a copy of vit named deit) Holm tests the first at 97.5% (wider), then
    # the second at 95%.
    alone = trends[trends["probe"] == "occlusion"].iloc[0]
    assert (alone["adj_ci_low"], alone["adj_ci_high"]) == pytest.approx((alone["ci_low"], alone["ci_high"]))
    twin = pd.concat([table, table[table["model"] == "vit"].assign(model="deit")], ignore_index=True)
    both = R.contrast_trends(twin, [("vit", "resnet"), ("deit", "resnet")], "accuracy", 0.95)
    both = both[both["probe"] == "occlusion"]
    assert sorted(both["adj_confidence"]) == pytest.approx([0.95, 0.975]) and both["significant"].all()
    first = both[both["adj_confidence"] > 0.96].iloc[0]
    assert first["adj_ci_high"] - first["adj_ci_low"] > alone["ci_high"] - alone["ci_low"]


def test_fewer_than_three_seeds_infer_nothing():
    table = synthetic({("occlusion", 0.5): [0.2, 0.3]}, seeds=(0, 1))
    c = R.contrasts(table, [("vit", "resnet")], "accuracy", 0.95)
    assert not c["inference"].any() and c["equivalence_bound"].isna().all()
    assert not R.winner_flips(c)["flip_claimed"].any()


def test_mce_against_the_resnet_of_the_same_run():
    rows = []
    for seed in (0, 1, 2):
        for model, errors in (("resnet", (0.2, 0.4)), ("vit", (0.1, 0.2))):
            rows.append({"model": model, "fraction": 1.0, "seed": seed, "probe": CLEAN, "variant": CLEAN,
                         "level": 0.0, "top1": 0.9})
            for severity, error in zip((1, 3), errors):
                rows.append({"model": model, "fraction": 1.0, "seed": seed, "probe": "corruption",
                             "variant": "fog", "level": float(severity), "top1": 1.0 - error})
    scores = pd.DataFrame(rows).assign(detail="", images=10, correct=0)
    runs = pd.DataFrame([{"model": m, "fraction": 1.0, "seed": s, "train_images": 100, "under_trained": False,
                          "step_bound": False} for s in (0, 1, 2) for m in ("resnet", "vit")])
    mce, ce = R.mce_tables(R.per_run(scores, runs), "resnet", 0.95)
    plain = mce[mce["measure"] == "mce"].iloc[0]
    assert plain["model"] == "vit" and plain["mean"] == pytest.approx(0.5)  # (0.1 + 0.2) / (0.2 + 0.4)
    assert plain["significant"]  # zero spread over seeds and a non-zero difference from 1: p = 0
    relative = mce[mce["measure"] == "relative_mce"].iloc[0]
    assert relative["mean"] == pytest.approx((0.0 + 0.1) / (0.1 + 0.3))  # minus each model's clean error 0.1
    assert ce.set_index("model").loc["vit", "ce_mean"] == pytest.approx(0.5)
    assert ce.set_index("model").loc["resnet", "ce_mean"] == pytest.approx(1.0)  # the baseline against itself


def test_headline_picks_half_occlusion_the_patch_grid_shuffle_and_a_2px_shift():
    summary = pd.DataFrame({"probe": ["clean", "occlusion", "occlusion", "rearrangement", "rearrangement",
                                      "translation", "translation", "translation"],
                            "variant": ["clean", "aligned", "aligned", "shuffle", "shuffle", "x", "x", "y"],
                            "level": [0.0, 0.3, 0.5, 2.0, 4.0, 1.0, 2.0, 2.0]})
    picked = R.headline_conditions(summary, patch_grid=4)
    assert [p[1:] for p in picked] == [("clean", "clean", 0.0), ("occlusion", "aligned", 0.5),
                                       ("rearrangement", "shuffle", 4.0), ("translation", "x", 2.0)]
    assert [p[0] for p in picked] == ["clean", "50% occluded", "4x4 shuffle", "2-px shift"]


# --- scoring -------------------------------------------------------------------------------------------------------

def tiny_models(side=8, seeds=(0, 1, 2)):
    from study.models import build_model
    from study.train.spec import RunSpec

    out = {}
    for name, arch, args in (("resnet", "resnet8", {"width": 8}),
                             ("vit", "vit", {"patch_size": 2, "embed_dim": 16, "depth": 1, "num_heads": 2}),
                             ("deit", "deit", {"patch_size": 2, "embed_dim": 16, "depth": 1, "num_heads": 2})):
        for seed in seeds:
            torch.manual_seed(seed)
            model = build_model(arch, 10, side, 1, **args).eval()
            spec = RunSpec(name, arch, args, 10, side, 1, 1.0, seed, 0, 0, mean=(0.3,), std=(0.2,))
            out[name, 1.0, seed] = (model, spec)
    return out


def test_scores_do_not_depend_on_the_batch_size_and_clean_equals_a_direct_forward():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (37, 8, 8, 1), dtype=np.uint8)
    labels = rng.integers(0, 10, 37)
    probes = conditions(8, 0, 4, [0.5], True, [2, 4], [1, 2], ["shot_noise", "rotate"], [1, 5])
    models = tiny_models(seeds=(0,))
    a, ca, _ = score_runs(models, images, labels, probes, 37, torch.device("cpu"))
    b, cb, cost = score_runs(models, images, labels, probes, 5, torch.device("cpu"))
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(ca, cb)
    assert len(a) == 3 * len(probes) and set(ca["direction"]) == {"x", "y", "diagonal"}
    model, spec = models["vit", 1.0, 0]
    direct = predict(model, torch.from_numpy(images), torch.tensor(spec.mean), torch.tensor(spec.std), False,
                     torch.autocast("cpu", enabled=False))
    clean = a[(a["model"] == "vit") & (a["probe"] == CLEAN)].iloc[0]
    assert clean["correct"] == int((direct.numpy() == labels).sum())
    assert {"making occlusion images", "scoring with vit"} <= set(cost["part"])


def test_uniform_attention_variants_are_scored_for_vits_only_and_leave_the_runs_rows_alone():
    from study.models.ablations import uniform_attention

    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (23, 8, 8, 1), dtype=np.uint8)
    labels = rng.integers(0, 10, 23)
    probes = conditions(8, 0, 4, [0.5], False, [4], [1], [], [])
    models = tiny_models(seeds=(0,))
    plain, _, _ = score_runs(models, images, labels, probes, 10, torch.device("cpu"))
    both, shifts, cost = score_runs(models, images, labels, probes, 10, torch.device("cpu"), uniform=True)
    assert set(both["model"]) == {"resnet", "vit", "deit", "vit@uniform", "deit@uniform"}  # no CNN variant
    ran = both[~both["model"].str.contains("@")].reset_index(drop=True)
    pd.testing.assert_frame_equal(ran, plain)  # the switch is off again for the run's own rows
    assert {"vit@uniform", "deit@uniform"} <= set(shifts["model"]) and "scoring with vit@uniform" in set(cost["part"])
    model, spec = models["vit", 1.0, 0]
    with uniform_attention(model):
        direct = predict(model, torch.from_numpy(images), torch.tensor(spec.mean), torch.tensor(spec.std), False,
                         torch.autocast("cpu", enabled=False))
    clean = both[(both["model"] == "vit@uniform") & (both["probe"] == CLEAN)].iloc[0]
    assert clean["correct"] == int((direct.numpy() == labels).sum())
    named, _, _ = score_runs(models, images, labels, probes, 10, torch.device("cpu"), uniform={"vit"})
    assert set(named["model"]) == {"resnet", "vit", "deit", "vit@uniform"}  # the named model's variant only
    pd.testing.assert_frame_equal(named[named["model"] != "vit@uniform"].reset_index(drop=True), plain)


def test_variants_carry_their_runs_facts_and_are_contrasted_with_their_run_only():
    runs = pd.DataFrame({"model": ["vit", "resnet"], "fraction": 1.0, "seed": 0, "train_images": 100,
                         "under_trained": [1, 0], "step_bound": 0})
    scores = pd.DataFrame({"model": ["vit", "resnet", "vit@uniform"], "fraction": 1.0, "seed": 0})
    extended = R.with_variant_runs(runs, scores)
    assert extended.set_index("model").loc["vit@uniform", "under_trained"] == 1
    assert R.variant_pairs(extended) == [("vit@uniform", "vit")]
    assert list(R.trained_only(extended)["model"]) == ["vit", "resnet"]


def test_conditions_list_each_level_once_and_leave_level_zero_to_the_clean_images():
    probes = conditions(28, 0, 4, [0.0, 0.5], True, [1, 2, 4, 7], [0, 1, 4], ["fog"], [0, 1, 3])
    keys = [c.key for c in probes]
    assert len(keys) == len(set(keys)) and keys[0] == (CLEAN, CLEAN, 0.0)
    assert sum(k[0] == "occlusion" for k in keys) == 2 and sum(k[0] == "rearrangement" for k in keys) == 3
    assert sum(k[0] == "translation" for k in keys) == 6 and sum(k[0] == "corruption" for k in keys) == 2
    assert "moved 3 px" in next(c.detail for c in probes if c.variant == "offset")


@pytest.mark.slow  # scoring worker processes, three times: 74 s on a 2-core EPYC of family 23
def test_worker_processes_give_the_same_tables_as_one(tmp_path):
    from study.robustness.scoring import score_run_files, scoring_workers
    from study.data.prepared import read_prepared

    _, runs_dir, prepared = fabricated_study(tmp_path)
    runs = {(p.parent.parent.name, float(p.parent.name[1:].split("_")[0]), int(p.parent.name.split("_s")[1])): p
            for p in sorted(runs_dir.rglob("model.pt")) if p.parent.name.startswith("f1.0")}
    data = read_prepared(prepared)
    settings = dict(image_size=8, seed=0, occlusion_grid=4, shares=[0.5], offset=True, grids=[2, 4], shifts=[1],
                    corruptions=["fog"], severities=[3])
    images, labels = data.test_images[:100], data.test_labels[:100]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # what each worker uses
    try:
        one = score_run_files(runs, images, labels, settings, 32, torch.device("cpu"), processes=1)
    finally:
        torch.set_num_threads(threads)
    two = score_run_files(runs, images, labels, settings, 32, torch.device("cpu"), processes=2)
    assert torch.get_num_threads() == threads  # this process scored its share with one thread, then restored them
    with scoring_workers(2, torch.device("cpu")) as workers:  # one worker started for two calls, as the stage does
        shared = [score_run_files(runs, images, labels, settings, 32, torch.device("cpu"), processes=2,
                                  workers=workers) for _ in range(2)]
    for a, b, c, d in zip(one[:2], two[:2], *(s[:2] for s in shared)):
        pd.testing.assert_frame_equal(a, b)
        pd.testing.assert_frame_equal(a, c)
        pd.testing.assert_frame_equal(a, d)
    assert len(one[0]) == 9 * len(conditions(**settings)) and list(one[0]["probe"].iloc[:9]) == [CLEAN] * 9
    assert two[2].set_index("part").loc["scoring with vit", "runs"] == 3


def test_the_probe_set_is_a_fixed_seeded_subset():
    first, again, other = probe_set(10000, 2000, 0), probe_set(10000, 2000, 0), probe_set(10000, 2000, 1)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    assert len(np.unique(first)) == 2000 and np.all(np.diff(first) > 0)
    assert np.array_equal(probe_set(360, 2000, 0), np.arange(360))


# --- the stage ------------------------------------------------------------------------------------------------------

def fabricated_study(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The smoke preset's data (prepared) with untrained runs of its three models in its 2 fractions x 3 seeds: the
    stage's plumbing, in seconds."""
    import study.data.stage_prepare as prepare
    from study.train.artifacts import save_trained

    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(SMOKE))
    params = load_params(params_path)
    prepared = tmp_path / "prepared"
    prepare.run(params, prepared)
    runs_dir = tmp_path / "runs"
    for (name, _, seed), (model, spec) in tiny_models().items():
        for fraction in params.fractions:
            folder = runs_dir / name / f"f{fraction}_s{seed}"
            folder.mkdir(parents=True)
            save_trained(folder / "model.pt", model, spec)
            (folder / "metrics.json").write_text(json.dumps({
                "model": name, "arch": spec.arch, "fraction": fraction, "seed": seed,
                "budget": {"train_images": int(1300 * fraction), "steps": 40, "images_seen": 2560, "epochs": 1.0,
                           "convention": "epochs", "source": "floor"},
                "convergence": {"still_improving": seed == 0}, "test_top1": 0.1, "test_loss": 2.3,
                "val_top1": 0.1, "train_top1": 0.1, "params": 1, "train_flops": 1, "train_seconds": 1.0,
                "throughput_images_per_s": 1.0, "device": "cpu"}))
    return params_path, runs_dir, prepared


@pytest.fixture(scope="module")
def robustness_outputs(tmp_path_factory) -> tuple[Path, str]:
    """The stage run once on :func:`fabricated_study` for the tests that read what it wrote: (its folder, with
    ``tables`` and ``figures``; its summary line)."""
    import study.robustness.stage as stage

    folder = tmp_path_factory.mktemp("robustness")
    params_path, runs_dir, prepared = fabricated_study(folder)
    summary = stage.run(load_params(params_path), runs_dir, prepared, folder / "figures", folder / "tables")
    return folder, summary


def test_the_stage_writes_its_tables_and_figures(robustness_outputs):
    folder, summary = robustness_outputs
    assert summary.startswith("robustness: 18 runs (+12 with uniform attention) x 48 conditions x 360 images; "
                              "plan: 12 runs x 7 conditions x 360 images (")
    tables, figures = folder / "tables", folder / "figures"
    for name in ("probe_set", "probe_images", "robustness_runs", "robustness", "contrasts_accuracy",
                 "contrasts_retained", "consistency", "contrasts_consistency", "contrast_trends", "winner_flips",
                 "mce", "corruption_errors", "headline", "headline_contrasts", "cost"):
        assert (tables / f"{name}.csv").is_file() and "\\toprule" in (tables / f"{name}.tex").read_text(), name
    for name in ("occlusion", "rearrangement", "translation", "corruption_errors", "contrasts"):
        for suffix in (".png", ".pdf", ".csv"):
            assert (figures / f"{name}{suffix}").stat().st_size > 0, (name, suffix)
    recorded = pd.read_csv(tables / "probe_set.csv").iloc[0]
    assert (recorded["images"], recorded["image_seed"], recorded["test_images"]) == (360, 0, 360)
    # The smoke plan: its 7 conditions (clean, then its claims' and controls') for vit's and resnet's runs only, on
    # analysis.plan.images (2,000: the whole 360), in robustness_runs' layout and with its numbers where they meet.
    planned = pd.read_csv(tables / "probe_set.csv").set_index("scoring").loc["plan"]
    assert (planned["images"], planned["runs"], planned["conditions"], planned["uniform_attention"]) == \
        (360, 12, 7, "none")
    plan = pd.read_csv(tables / "plan_runs.csv")
    runs = pd.read_csv(tables / "robustness_runs.csv")
    assert list(plan.columns) == list(runs.columns) and set(plan["images"]) == {360}
    assert set(plan["model"]) == {"vit", "resnet"} and len(plan) == 12 * 7
    assert ("rearrangement", "offset", 4.0) in set(zip(plan["probe"], plan["variant"], plan["level"]))
    keys = ["model", "fraction", "seed", "probe", "variant", "level"]
    both = plan.merge(runs, on=keys, suffixes=("", "_all"))
    assert len(both) == len(plan) and (both["correct"] == both["correct_all"]).all()  # same images, same scores
    assert "plan: scoring with vit" in set(pd.read_csv(tables / "cost.csv")["part"])
    assert set(runs["images"]) == {360} and set(runs["image_seed"]) == {0}
    contrasts = pd.read_csv(tables / "contrasts_accuracy.csv")
    assert set(contrasts["comparison"]) == {"vit - resnet", "deit - resnet", "vit@uniform - vit",
                                            "deit@uniform - deit"}
    assert set(runs["model"]) == {"resnet", "vit", "deit", "vit@uniform", "deit@uniform"}
    assert "vit@uniform - vit" in set(pd.read_csv(tables / "contrasts_retained.csv")["comparison"])
    assert recorded["uniform_attention"] == "deit@uniform, vit@uniform"
    # The variants' trends are their own Holm family: the model comparisons' are as without them.
    trends = pd.read_csv(tables / "contrast_trends.csv")
    assert {"vit@uniform - vit", "vit - resnet"} <= set(trends["comparison"])
    assert "resnet" in set(pd.read_csv(tables / "mce.csv")["baseline"])
    assert not pd.read_csv(tables / "mce.csv")["model"].str.contains("@").any()  # no variant against the CNN
    assert not pd.read_csv(figures / "occlusion.csv")["model"].str.contains("@").any()
    assert not pd.read_csv(figures / "contrasts.csv")["comparison"].str.contains("@").any()
    # 18 runs of untrained models: the untrained resnet of each seed is the same at both fractions.
    headline = pd.read_csv(tables / "headline.csv")
    assert list(dict.fromkeys(headline["condition"])) == ["clean", "50% occluded", "4x4 shuffle", "2-px shift"]


@pytest.mark.slow  # the whole stage on a fabricated study: 72 s on a 2-core EPYC of family 23
def test_without_a_plan_the_stage_scores_nothing_more(tmp_path):
    import study.robustness.stage as stage

    params_path, runs_dir, prepared = fabricated_study(tmp_path)
    raw = yaml.safe_load(params_path.read_text())
    raw["analysis"]["plan"] = None
    raw["analysis"]["robustness"].update(images=40, corruptions={"names": [], "severities": []})  # quick
    params_path.write_text(yaml.safe_dump(raw))
    summary = stage.run(load_params(params_path), runs_dir, prepared, tmp_path / "figures", tmp_path / "tables")
    assert "; plan:" not in summary and not (tmp_path / "tables" / "plan_runs.csv").exists()
    assert list(pd.read_csv(tmp_path / "tables" / "probe_set.csv")["scoring"]) == ["exploratory"]


def test_a_categorical_axis_places_each_variants_level_where_the_other_variant_has_it():
    from study.robustness.figures import probe_figure

    rows = [{"model": "vit", "fraction": 1.0, "train_images": 100, "probe": "rearrangement", "variant": variant,
             "level": level, "top1_mean": 0.5, "top1_ci_low": 0.4, "top1_ci_high": 0.6}
            for variant, levels in (("shuffle", (0.0, 2.0, 4.0, 7.0)), ("offset", (0.0, 7.0))) for level in levels]
    figure = probe_figure(pd.DataFrame(rows), "rearrangement", "cells per side", 0.95, categorical=True)
    lines = {line.get_label(): (list(line.get_xdata()), line.get_linestyle()) for line in figure.axes[0].get_lines()}
    # 7x7 at the fourth place for both; the grid's own shuffle solid, its offset control dashed (the caption's words)
    assert lines == {"vit, shuffle": ([0, 1, 2, 3], "-"), "vit, offset": ([0, 3], "--")}


# --- the report's sentences ----------------------------------------------------------------------------------------

def contrast_row(fraction, images, mean, low, high, significant, seeds=3, **extra):
    bound = np.nan if significant or seeds < 3 else max(abs(low), abs(high))
    return {"comparison": "vit - resnet", "metric": "accuracy", "probe": "occlusion", "variant": "aligned",
            "level": 0.5, "fraction": fraction, "train_images": images, "seeds": seeds, "diff_mean": mean,
            "adj_ci_low": low, "adj_ci_high": high, "significant": significant, "inference": seeds >= 3,
            "equivalence_bound": bound, **extra}


def test_report_words_a_win_only_where_the_adjusted_interval_excludes_zero():
    from study.robustness.report import headline_contrast_sentences, win_sentences

    trend = {"order": 1, "condition": "50% occluded", "slope_per_decade": -3.0, "slope_ci_low": -5.0,
             "slope_ci_high": -1.0, "fractions_used": 2, "slope_significant": True}
    rows = pd.DataFrame([contrast_row(0.01, 570, 0.12, 0.05, 0.19, True, **trend),
                         contrast_row(1.0, 57000, 0.01, -0.03, 0.05, False, **trend)])
    sentence, = headline_contrast_sentences(rows)
    assert sentence == ("vit − resnet, 50% occluded: at 570 images +12.0 points, vit ahead (Holm-adjusted CI +5.0 to "
                        "+19.0); at 57,000 images no detectable difference (+1.0 points, Holm-adjusted CI -3.0 to +5.0; "
                        "differences beyond ±5.0 points excluded); the contrast changes by -3.0 points per tenfold "
                        "data (Holm-adjusted CI -5.0 to -1.0, 2 fractions without step-bound runs).")
    behind = contrast_row(1.0, 57000, -0.2, -0.3, -0.1, True) | {"probe": "translation", "variant": "x", "level": 2.0}
    sentence, = win_sentences(pd.DataFrame([*rows.to_dict("records"), behind]), "top-1")
    assert "vit is detectably ahead in 1 of 3 probed cells (condition × fraction), resnet in 1, and 1 show no " \
           "detectable difference (equivalence bounds 5.0 to 5.0 points)" in sentence
    assert "vit is ahead under occlusion (patch grid): 50% at 570 images" in sentence
    assert sentence.endswith("resnet is ahead in shift 1 of 1.")


def test_report_infers_nothing_from_fewer_than_three_seeds():
    from study.robustness.report import headline_contrast_sentences, headline_sentences, win_sentences

    trend = {"order": 1, "condition": "50% occluded", "slope_per_decade": 1.0, "slope_ci_low": np.nan,
             "slope_ci_high": np.nan, "fractions_used": 2, "slope_significant": False}
    rows = pd.DataFrame([contrast_row(1.0, 57000, 0.12, 0.11, 0.13, True, seeds=2, **trend)])
    sentence, = headline_contrast_sentences(rows)
    assert "+12.0 points (descriptive, 2 seeds)" in sentence and "ahead" not in sentence
    assert "trend +1.0 points per tenfold data (descriptive" in sentence
    sentence, = win_sentences(rows, "top-1")
    assert "2 seeds, so no difference is inferred (at least 3 are needed)" in sentence
    values = pd.DataFrame([{"order": 0, "condition": "clean", "model": "vit", "fraction": 1.0, "train_images": 57000,
                            "seeds": 2, "top1_mean": 0.86, "top1_ci_low": 0.5, "top1_ci_high": 1.2}])
    sentence, = headline_sentences(values)
    assert sentence == ("vit, top-1 at 57,000 images (100%): clean 86.0%; means of 2 seeds, with 2 seeds no "
                        "difference is inferred (at least 3 are needed).")


def test_report_names_a_flip_only_where_the_stage_claimed_one():
    from study.robustness.report import flip_sentences

    base = {"comparison": "vit - resnet", "probe": "occlusion", "variant": "aligned", "fraction": 0.01,
            "train_images": 570, "levels": 5, "clean_diff": -0.07, "clean_significant": True, "sign_changes": 1,
            "first_sign_change_level": 0.5}
    none = pd.DataFrame([base | {"flip_claimed": False, "direction": "", "significant_from_level": np.nan,
                                 "significant_to_level": np.nan}])
    assert flip_sentences(none) == ["No flip of the winner along a probe's levels is supported by the adjusted "
                                    "intervals; the mean contrast changes sign along 1 of 1 probe curves "
                                    "(comparison × probe × fraction)."]
    claimed = pd.DataFrame([base | {"flip_claimed": True, "direction": "vit overtakes resnet",
                                    "significant_from_level": 0.0, "significant_to_level": 0.7}])
    sentence, = flip_sentences(claimed)
    assert ("vit overtakes resnet at 570 images under occlusion (patch grid): behind on the clean images, ahead at "
            "70%") in sentence


def test_the_report_renders_the_section_from_the_stage_tables(robustness_outputs):
    from study.robustness.report import headline_table, read_robustness, robustness_findings

    tables = read_robustness(robustness_outputs[0] / "tables")
    findings = robustness_findings(tables)
    assert findings[0].startswith("All 18 runs are probed on the same 360 test images (the whole test set), drawn "
                                  "with seed 0, under 48 conditions: the clean images, occlusion (patch grid, offset "
                                  "grid: 10%, 30%, 50%, 70%, 90%); patch shuffle (2x2, 4x4, 8x8; offset grid: 4x4); "
                                  "shift (along x, along y, diagonally: 1 px, 2 px, 3 px, 4 px); corruption (brightness, "
                                  "canny edges, fog, motion blur, rotate, shot noise, zigzag: severity 1, severity 3, "
                                  "severity 5)")
    # The smoke plan's 7 conditions (4 claims' conditions and controls, and clean) for vit's and resnet's 12 runs.
    assert findings[0].endswith("The analysis plan's 7 conditions are scored again for its models' 12 runs on 360 test "
                                "images (the whole test set), drawn with the same seed (plan_runs); the intervals below "
                                "are those of the 360 images, exploratory.")
    contrasts = pd.read_csv(robustness_outputs[0] / "tables" / "contrasts_accuracy.csv")
    # two comparisons with the CNN and two variants' with their runs, 2 fractions, 48 conditions
    assert len(contrasts) == 4 * 2 * 48 and (contrasts["level"] > 0).sum() == 4 * 2 * 47  # no level-0 duplicates
    assert any("top-1 (Holm-adjusted): vit is detectably ahead in " in s and " of 94 probed cells" in s
               for s in findings)
    assert any(s.startswith("vit − resnet, 50% occluded: at 650 images ") for s in findings)
    assert any(s.startswith("deit's mean corruption error against resnet") for s in findings)
    assert not any(s.startswith("vit@uniform") or "@uniform −" in s for s in findings)  # no comparison sentences
    assert any(s.startswith("Uniform attention at test time: deit, vit are scored a second time") and
               "resnet has no such variant" in s for s in findings)
    assert any(s.startswith("Uniform attention in vit at 650 images: clean, ") and "; under the 4x4 shuffle, " in s
               for s in findings)
    assert headline_table(tables["headline"]).splitlines()[0] == \
        "| model | fraction | train_images | seeds | clean | 50% occluded | 4x4 shuffle | 2-px shift |"


@pytest.mark.slow
def test_the_stage_end_to_end_on_the_smoke_study(smoke_study, smoke_scratch):
    tables, figures = smoke_study / "reports" / "tables" / "robustness", smoke_study / "reports" / "figures" / "robustness"
    for name in ("occlusion", "rearrangement", "translation", "corruption_errors", "contrasts"):
        assert (figures / f"{name}.png").stat().st_size > 0
    runs = pd.read_csv(smoke_study / "reports" / "tables" / "curves" / "runs.csv")
    scores = pd.read_csv(tables / "robustness_runs.csv")
    trained = scores[~scores["model"].str.contains("@")]  # the runs' own rows; "<model>@uniform": their variants
    assert set(scores["images"]) == {360}
    assert len(trained.drop_duplicates(["model", "fraction", "seed"])) == len(runs)
    # The smoke study's 360 test images are all probed: clean top-1 is each run's own test top-1 (up to an argmax tie
    # that another batch size can break).
    clean = trained[trained["probe"] == CLEAN].merge(runs[["model", "fraction", "seed", "test_top1"]])
    assert len(clean) == len(runs) and np.allclose(clean["top1"], clean["test_top1"], atol=2 / 360)
    report = (smoke_study / "reports" / "report.md").read_text()
    findings = report.split("## Setup")[0]
    assert "### Where the ViT wins" in findings and "](figures/robustness/occlusion.png)" in report
    for r in pd.read_csv(tables / "headline_contrasts.csv").itertuples():
        a, b = r.comparison.split(" - ")
        if "@" in a:  # a variant against its run: worded as a cost, in its own sentences
            assert f"Uniform attention in {b} at {r.train_images:,} images: clean, " in findings
            continue
        if r.significant and r.inference:
            assert f"at {r.train_images:,} images {100 * r.diff_mean:+.1f} points, " \
                   f"{a if r.diff_mean > 0 else b} ahead" in findings
        else:
            assert f"at {r.train_images:,} images no detectable difference ({100 * r.diff_mean:+.1f} points" in findings
    # No training or scoring stage but robustness runs the probe library (the parameters layer imports none of it,
    # and the controls and plan stages read the probes' names from the light study.robustness package): editing a
    # probe stales the robustness stage only.
    module = smoke_scratch / "study" / "robustness" / "probes" / "corrupt_pixels.py"
    original = module.read_bytes()
    try:
        module.write_bytes(original + b"# an edit\n")
        stale = {line.rstrip(":").strip() for line in dvc("status", cwd=smoke_scratch).stdout.splitlines()
                 if line and not line.startswith(("\t", " "))}
        assert stale == {"robustness"}, stale
    finally:
        module.write_bytes(original)
