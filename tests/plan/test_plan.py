"""The plan's statistics, verdicts, figure and report rows on a synthetic per-run table whose effects are known:
a primary family (each primary claim's own test) and a gatekept secondary one, Holm deciding beside
Bonferroni-simultaneous intervals, one value per seed, the interaction behind "only on its condition", the pilot's
power, and a value fixed by construction stated as a fact."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.core.config import parse_params
from study.plan import CONTRAST, CONTROL, INTERACTION
from study.plan.claims import claims_table, declared_table, fractions_table, judge_tests
from study.plan.figures import plan_figure
from study.stats import verdicts as V
from study.plan.params import plan_params as validated_plan

FRACTIONS = {0.005: 285, 0.01: 570, 0.02: 1140}
# (probe, variant, level) -> the ViT's lead over the ResNet in top-1 (a share): it trails on clean images, leads by
# 20 points on its own shuffle and not at all on the offset one, and leads by 10 under both shifts
LEAD = {("clean", "clean", 0.0): -0.10, ("rearrangement", "shuffle", 7.0): 0.20,
        ("rearrangement", "offset", 7.0): 0.0, ("translation", "x", 4.0): 0.10, ("translation", "x", 8.0): 0.10}
CLAIMS = [
    {"name": "clean", "claim": "The ResNet beats the ViT", "arm": "vit", "against": "resnet",
     "condition": ["clean", "clean", 0], "direction": -1},
    {"name": "shuffle", "claim": "The ViT keeps more under its shuffle", "arm": "vit", "against": "resnet",
     "condition": ["rearrangement", "shuffle", 7], "direction": 1, "control": ["rearrangement", "offset", 7],
     "control_means": "the shuffle offset by half a cell"},
    {"name": "shift", "claim": "The ViT keeps more under a one-patch shift", "arm": "vit", "against": "resnet",
     "condition": ["translation", "x", 4], "direction": 1, "control": ["translation", "x", 8],
     "control_means": "an 8-px shift", "role": "secondary"},
    {"name": "absent", "claim": "A condition never scored", "arm": "vit", "against": "resnet",
     "condition": ["occlusion", "aligned", 0.5], "direction": 1},
]


def plan_params(seeds: int = 6):
    from tests.budget_check.test_budget_check import SMOKE

    raw = {**SMOKE, "seeds": list(range(seeds)),
           "analysis": {**SMOKE.get("analysis", {}), "plan": {
               "declared": "before_runs", "history": "Written before any run.", "seeds": 3, "images": 1000,
               "effects": {"clean": 0.02, "robustness": 0.05}, "claims": CLAIMS}}}
    return validated_plan(parse_params(raw))


def per_run(seeds: int = 6, noise: float = 0.01, seed_sd: float = 0.01) -> pd.DataFrame:
    """Per-run top-1: each seed shifts both of its runs' contrasts at every fraction by a common amount (a seed
    effect), plus independent noise."""
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(seeds):
        shared = rng.normal(0, seed_sd)
        for fraction, images in FRACTIONS.items():
            for condition, lead in LEAD.items():
                base = 0.7
                for model, top1 in (("resnet", base), ("vit", base + lead + shared + rng.normal(0, noise))):
                    rows.append({"model": model, "fraction": fraction, "seed": seed, "probe": condition[0],
                                 "variant": condition[1], "level": condition[2], "top1": top1,
                                 "train_images": images, "under_trained": False, "step_bound": False,
                                 "images": 10000})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def judged():
    plan = plan_params()
    tests = judge_tests([per_run()], plan)
    return plan, tests, claims_table(tests, plan)


def test_a_primary_and_a_secondary_family_each_one_value_per_seed(judged):
    plan, tests, _ = judged
    measured = tests[tests["p"].notna()]
    assert list(tests.groupby("claim", sort=False)["test"].apply(list)) == [
        [CONTRAST], [CONTRAST, CONTROL, INTERACTION], [CONTRAST, CONTROL, INTERACTION], [CONTRAST]]
    assert (measured["df"] == measured["seeds"] - 1).all()
    by = tests.set_index(["claim", "test"])["family"]
    # a primary claim's own test is primary (the interaction where it has a control), its other tests secondary
    assert by[("clean", CONTRAST)] == by[("shuffle", INTERACTION)] == by[("absent", CONTRAST)] == "primary"
    assert by[("shuffle", CONTRAST)] == by[("shuffle", CONTROL)] == by[("shift", INTERACTION)] == "secondary"
    # the intervals shown are simultaneous: Bonferroni at each family's size, one level for all its members
    primary, secondary = (measured[measured["family"] == f] for f in ("primary", "secondary"))
    assert len(primary) == 2 and len(secondary) == 5
    assert np.allclose(primary["adj_confidence"], 1 - 0.05 / 2)
    assert np.allclose(secondary["adj_confidence"], 1 - 0.05 / 5)
    assert ((measured["adj_high"] - measured["adj_low"]) >= (measured["ci_high"] - measured["ci_low"])).all()
    absent = tests[tests["claim"] == "absent"].iloc[0]
    assert absent["verdict"] == V.UNDEFINED and math.isnan(absent["mean"]) and absent["images"] == 0
    assert set(measured["images"]) == {10000}


def test_holm_decides_and_the_intervals_are_no_longer_holms_step_levels(judged):
    """The old table gave each test Holm's step-down level (α/K, α/(K-1), ...), so the intervals shown did not hold
    together; now every member of a family has α/size, and Holm's adjusted p-value decides."""
    _, tests, _ = judged
    primary = tests[(tests["family"] == "primary") & tests["p"].notna()]
    assert primary["adj_confidence"].nunique() == 1
    assert (primary["p_holm"] >= primary["p"]).all() and (primary["p_holm"] < 0.05).all()


def test_verdicts_and_the_scope_of_controlled_claims(judged):
    _, tests, claims = judged
    by = claims.set_index("claim")
    assert by.loc["clean", "verdict"] == V.SUPPORTED and by.loc["clean", "mean"] == pytest.approx(-10, abs=1.5)
    # on its own grid only: the interaction excludes 0 and the offset contrast lies inside ±5 points
    assert by.loc["shuffle", "verdict"] == V.SUPPORTED and by.loc["shuffle", "scope"] == V.ONLY
    assert by.loc["shuffle", "interaction_mean"] == pytest.approx(20, abs=1.5)
    # the shift's lead is the same at 8 px: no interaction, the control's contrast supported too
    assert by.loc["shift", "scope"] == V.BOTH
    assert by.loc["absent", "verdict"] == V.UNDEFINED and by.loc["absent", "verdict_words"] == "not measured"
    assert "only on its condition" in by.loc["shuffle", "scope_words"]


def test_an_effect_significant_on_the_grid_only_is_not_called_grid_only_without_the_interaction():
    """The ViT leads by 20 points on its shuffle with little noise, but the offset shuffle is so noisy that the
    interaction's interval includes 0: the claim (decided by its interaction) is not supported and "only on the
    grid" is not said (absence of evidence off the grid is not evidence of absence); the primary not rejected, the
    secondary family stays closed."""
    plan = plan_params(seeds=4)
    table = per_run(seeds=4)
    rng = np.random.default_rng(5)
    offset = (table["variant"] == "offset") & (table["model"] == "vit")
    table.loc[offset, "top1"] += rng.normal(0, 0.25, offset.sum())
    tests = judge_tests([table], plan)
    by = claims_table(tests, plan).set_index("claim")
    assert by.loc["shuffle", "decided_by"] == INTERACTION and by.loc["shuffle", "verdict"] == V.INCONCLUSIVE
    assert by.loc["shuffle", "interaction_adj_low"] < 0 < by.loc["shuffle", "interaction_adj_high"]
    assert by.loc["shuffle", "scope"] == V.NOT_TESTED and by.loc["shift", "verdict"] == V.NOT_TESTED
    assert set(tests.loc[tests["family"] == "secondary", "verdict"]) == {V.NOT_TESTED}


def test_power_comes_from_the_seed_level_sd(judged):
    from study.stats.power import paired_power

    plan, tests, _ = judged
    row = tests[(tests["claim"] == "clean")].iloc[0]
    # no pilot: the power at the plan's seeds by the SD these runs found, at the primary family's α / 2
    assert row["power"] == pytest.approx(paired_power(plan.seeds, 2.0, row["seed_sd"], 0.05, 2))
    assert row["observed_power"] == pytest.approx(row["power"])
    assert row["seed_sd"] > 0.5  # the simulated seed effect (1 point) is in the seed-level SD


def test_power_is_prospective_from_the_pilot_at_the_same_fractions():
    from study.stats.power import paired_power, seeds_for_power

    plan = plan_params()
    pilot = per_run(seeds=3, seed_sd=0.03)  # a noisier pilot, other seeds
    tests = judge_tests([per_run()], plan, [pilot])
    row = tests[tests["claim"] == "clean"].iloc[0]
    sd = pilot[pilot["variant"] == "clean"].pivot_table(index="seed", columns="model", values="top1")
    sd = (100 * (sd["vit"] - sd["resnet"])).groupby(level=0).mean().std()
    assert row["pilot_seeds"] == 3 and row["pilot_sd"] == pytest.approx(sd)
    assert row["power"] == pytest.approx(paired_power(plan.seeds, 2.0, sd, 0.05, 2))
    assert row["seeds_needed"] == seeds_for_power(2.0, sd, 0.8, 0.05, 2)
    assert row["observed_power"] != pytest.approx(row["power"])


def test_a_claim_is_tested_at_its_declared_fractions_only():
    import dataclasses

    plan = plan_params()
    at = dataclasses.replace(plan, claims=(dataclasses.replace(plan.claims[0], fractions=(0.02,)),))
    row = judge_tests([per_run()], at).iloc[0]
    assert row["fractions"] == 1 and row["fractions_declared"] == "0.02"


def test_a_value_fixed_by_construction_is_a_fact_outside_every_family():
    """Both models score the same under a probe in every seed (as a model exactly invariant to it would): the test
    is a fact, not a member of the family, and does not shrink the others' intervals."""
    import dataclasses

    plan = plan_params()
    table = per_run()
    same = table["variant"] == "offset"
    table.loc[same & (table["model"] == "vit"), "top1"] = table.loc[same & (table["model"] == "resnet"), "top1"].to_numpy()
    fixed = dataclasses.replace(plan.claims[1], name="fixed", condition=("rearrangement", "offset", 7.0),
                                control=None, role="primary")
    with_fact = dataclasses.replace(plan, claims=plan.claims[:2] + (fixed,))
    tests = judge_tests([table], with_fact)
    row = tests[tests["claim"] == "fixed"].iloc[0]
    assert row["family"] == "fact" and row["verdict"] == V.FACT and math.isnan(row["p_holm"])
    assert row["mean"] == 0 and row["seed_sd"] == 0
    primary = tests[(tests["family"] == "primary") & tests["p"].notna()]
    assert len(primary) == 2 and np.allclose(primary["adj_confidence"], 1 - 0.05 / 2)


def test_the_plan_fractions_declared_table_and_figure(judged):
    plan, tests, _ = judged
    per_fraction = fractions_table([per_run()], plan, 0.95)
    assert set(per_fraction["fraction"]) == set(FRACTIONS) and (per_fraction["seeds"] == 6).all()
    declared = declared_table(plan)
    assert list(declared["claim"]) == ["clean", "shuffle", "shift", "absent"]
    assert list(declared["role"]) == ["primary", "primary", "secondary", "primary"]
    assert declared.set_index("claim").loc["clean", "smallest_effect"] == pytest.approx(2.0)
    assert declared.set_index("claim").loc["shuffle", "control"] == "7x7 shuffle (offset)"
    fig = plan_figure(tests)
    assert len(fig.axes) == 1 and len(fig.axes[0].get_yticklabels()) == 4


def test_a_plan_naming_an_unknown_model_or_probe_fails_in_one_line():
    from study.core.errors import StudyError
    from tests.budget_check.test_budget_check import SMOKE

    def plan_with(**change):
        claim = {**CLAIMS[0], **change}
        return {**SMOKE, "analysis": {"plan": {"declared": "after_runs", "history": "h", "seeds": 3,
                                               "claims": [claim]}}}
    with pytest.raises(StudyError, match=r"claims\[0\]\.arm = 'vitt'.*define it under models"):
        validated_plan(parse_params(plan_with(arm="vitt")))
    with pytest.raises(StudyError, match="unknown probe 'blur'"):
        validated_plan(parse_params(plan_with(condition=["blur", "x", 1])))
    with pytest.raises(StudyError, match="seeds lists"):
        validated_plan(parse_params({**plan_with(), "seeds": [0, 1]}))
    assert validated_plan(parse_params(plan_with(arm="vit@uniform", against="vit"))).models() == ("vit@uniform", "vit")


def test_two_seeds_give_no_verdict_and_leave_the_family():
    plan = plan_params(seeds=3)
    table = per_run(seeds=3)
    tests = judge_tests([table[table["seed"] < 2]], plan)
    measured = tests[tests["seeds"].notna()]
    assert (measured["seeds"] == 2).all() and measured["p"].isna().all()
    assert set(measured["verdict"]) == {V.TOO_FEW}
    by = claims_table(tests, plan).set_index("claim")
    assert by.loc["clean", "verdict_words"] == "not inferred: fewer than 3 seeds"


def test_the_tex_tables_are_the_columns_a_paper_cites(judged, tmp_path):
    from study.outputs.tables import write_table
    from study.plan.compact import compact_claims, compact_tests

    plan, tests, claims = judged
    shown = compact_tests(tests)
    clean = shown.iloc[0]
    row = tests.iloc[0]
    assert clean["simultaneous CI"] == (f"{row['adj_low']:+.1f} to {row['adj_high']:+.1f} "
                                        f"({100 * row['adj_confidence']:.2f}%)")
    assert clean["family"] == "primary" and clean["Holm p"] == f"{row['p_holm']:.4f}"
    assert shown.loc[tests["claim"] == "absent", "mean"].item() == "–"
    write_table(claims, tmp_path / "claims", "claims", paper=compact_claims(claims))
    tex, csv = (tmp_path / "claims.tex").read_text(), pd.read_csv(tmp_path / "claims.csv")
    assert "verdict_words" in csv and "verdict\\_words" not in tex  # the CSV whole, the .tex as cited
    assert "only on its condition" in tex and "$\\pm$" not in tex.split("\\midrule")[0]


def test_a_two_sided_claim_takes_the_scope_in_the_direction_its_contrast_came_out():
    """A ladder step claims any difference (direction 0); "only on its condition" is then asked in the direction
    the contrast came out: the shuffle claim's +20 points, only on the grid, judged two-sided, is still ONLY."""
    import dataclasses

    plan = plan_params()
    two_sided = dataclasses.replace(plan, claims=tuple(dataclasses.replace(c, direction=0) for c in plan.claims))
    tests = judge_tests([per_run()], two_sided)
    by = claims_table(tests, two_sided).set_index("claim")
    assert by.loc["shuffle", "direction"] == 0 and by.loc["shuffle", "scope"] == V.ONLY
    assert by.loc["shift", "scope"] == V.BOTH
    flipped = per_run()  # the ViT behind by 20 on its shuffle: the scope is asked toward -1 and found there
    flipped.loc[(flipped["model"] == "vit") & (flipped["variant"] == "shuffle"), "top1"] -= 0.40
    by = claims_table(judge_tests([flipped], two_sided), two_sided).set_index("claim")
    assert by.loc["shuffle", "mean"] < 0 and by.loc["shuffle", "scope"] == V.ONLY
