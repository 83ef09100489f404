"""The ladder's part of the report on synthetic stage tables: each step joined to the plan's verdict for it, the
findings rows the ladder decides (the supported step named; none shown where none is supported; the attention
step's own wording replacing the plan's generic row), and the section's tables."""

from __future__ import annotations

import pandas as pd

from study import controls as C
from study import ladder as L
from study import plan as P
from study.ladder.report import ROWS, SECTION, judged_steps
from study.ladder.steps import STEP_COLUMNS
from study.writing import MODELS
from study.writing.section import Sources

CLEAN, SHUFFLE = "clean", "7x7 shuffle"
STEPS = [("lad_nopos", "lad_avg", "pos_embed: - -> none"), ("lad_mean", "lad_nopos", "token_mixer: - -> mean")]
# (step, condition) -> (mean, verdict, scope): only the clean attention step is supported; under the shuffle the
# position step's interaction excludes 0 (scope "larger") though its contrast is not supported
JUDGED = {("lad_nopos - lad_avg", CLEAN): (1.0, "inconclusive", ""),
          ("lad_mean - lad_nopos", CLEAN): (-8.0, "supported", ""),
          ("lad_nopos - lad_avg", SHUFFLE): (20.0, "inconclusive", "larger"),
          ("lad_mean - lad_nopos", SHUFFLE): (0.5, "no detectable difference", "unseparated")}


def _sources(tmp_path, twin: bool = False) -> Sources:
    """The stage tables; with ``twin``, the controls stage's contrast of lad_mean's twin matched in parameters."""
    tables, setup = tmp_path / "tables", tmp_path / "setup"
    for folder in (tables / L.FOLDER, tables / P.FOLDER, setup):
        folder.mkdir(parents=True)
    steps = [{"step": f"{a} - {b}", "kind": "rung", "arm": a, "against": b, "change": change, "condition": c, "fraction": f,
              "train_images": n, "seeds": 5, "images": 2000, "mean": 1.0, "adj_low": -1.0, "adj_high": 3.0,
              "adj_confidence": 0.975, "p_holm": 0.3, "flagged_pairs": 0}
             for c in (CLEAN, SHUFFLE) for a, b, change in STEPS for f, n in ((0.0025, 140), (0.02, 1140))]
    pd.DataFrame(steps, columns=STEP_COLUMNS).to_csv(tables / L.FOLDER / f"{L.STEPS}.csv", index=False)
    rungs = [{"rung": r, "position": i, "condition": CLEAN, "fraction": 0.02, "train_images": 1140, "seeds": 5,
              "top1": 70.0, "top1_sd": 1.0} for i, r in enumerate(["lad_avg", "lad_nopos", "lad_mean"])]
    pd.DataFrame(rungs).to_csv(tables / L.FOLDER / f"{L.RUNGS}.csv", index=False)
    claims, tests = [], []
    for (step, condition), (mean, verdict, scope) in JUDGED.items():
        name = f"{step.replace(' - ', '_vs_')}_{condition}"
        control = "7x7 shuffle (offset)" if scope else ""
        claims.append({"claim": name, "text": f"{step} differs {condition}", "comparison": step,
                       "condition": condition, "control": control, "mean": mean, "adj_low": mean - 2,
                       "adj_high": mean + 2, "verdict": verdict, "verdict_words": verdict, "scope": scope,
                       "scope_words": scope, "interaction_mean": mean / 2, "interaction_adj_low": mean / 2 - 1,
                       "interaction_adj_high": mean / 2 + 1, "control_mean": 0.0, "control_adj_low": -1.0,
                       "control_adj_high": 1.0, "seeds": 5, "seeds_needed": 9})
        tests.append({"claim": name, "test": P.CONTRAST, "power": 0.6, "seeds_needed": 9})
    claims.append({"claim": "other", "text": "not a step", "comparison": "vit - resnet", "condition": CLEAN,
                   "control": "", "scope": "", "mean": 0.0, "adj_low": -1.0, "adj_high": 1.0, "verdict": "inconclusive",
                   "verdict_words": "inconclusive", "scope_words": "", "seeds": 5, "seeds_needed": 9})
    tests.append({"claim": "other", "test": P.CONTRAST, "power": 0.6, "seeds_needed": 9})
    pd.DataFrame(claims).to_csv(tables / P.FOLDER / f"{P.CLAIMS}.csv", index=False)
    pd.DataFrame(tests).to_csv(tables / P.FOLDER / f"{P.TESTS}.csv", index=False)
    pd.DataFrame(claims)[["claim", "text", "comparison", "condition"]].to_csv(tables / P.FOLDER / f"{P.DECLARED}.csv",
                                                                             index=False)
    pd.DataFrame({"model": ["lad_avg", "lad_nopos", "lad_mean", "lad_mean_wide"], "arch": ["ladder"] * 4,
                  "params": [138890, 135754, 69194, 135242], "train_GFLOPs_full": [10.0, 10.0, 4.0, 8.4],
                  "throughput_img_s": [1.0] * 4}).to_csv(setup / f"{MODELS}.csv", index=False)
    if twin:
        (tables / C.FOLDER).mkdir()
        pd.DataFrame([{"comparison": comparison, "condition": condition, "images": 300, "mean": mean,
                       "mean_adj_low": mean - 3, "mean_adj_high": mean + 3}
                      for comparison, mean in (("vit - resnet", -11.0), ("lad_mean_wide - lad_nopos", -4.5))
                      for condition in (CLEAN, SHUFFLE)]).to_csv(tables / C.FOLDER / f"{C.POOLED}.csv", index=False)
    return Sources(tables, setup, tmp_path / "figures", tmp_path, {})


def test_each_step_is_joined_to_its_claim_and_no_other(tmp_path):
    sources = _sources(tmp_path)
    judged = judged_steps(sources.table(L.FOLDER, L.STEPS), sources.table(P.FOLDER, P.CLAIMS),
                          sources.table(P.FOLDER, P.TESTS))
    assert len(judged) == 4 and "vit - resnet" not in set(judged["comparison"])
    assert judged["step"].tolist() == ["lad_nopos - lad_avg", "lad_mean - lad_nopos"] * 2  # ladder order
    assert (judged["power"] == 0.6).all() and (judged["seeds_needed"] == 9).all()


def test_the_rows_name_the_supported_step_and_say_when_none_is_shown(tmp_path):
    rows = ROWS.rows(_sources(tmp_path))
    clean, shuffle, mixing = rows[0], rows[1], rows[2:]
    assert clean["claim"] == "Which steps of the ladder move clean accuracy (clean)"
    assert clean["verdict"] == "supported for lad_mean - lad_nopos; the other 1 steps not"
    assert clean["evidence"].startswith("lad_mean - lad_nopos (token_mixer: - -> mean): -8.0 (-10.0 to -6.0)")
    # the shuffle row asks for the interaction, not the contrast: the position step, though inconclusive there
    assert shuffle["verdict"] == "shown for lad_nopos - lad_avg (the interaction excludes 0); the other 1 steps not"
    assert shuffle["evidence"] == ("lad_nopos - lad_avg (pos_embed: - -> none): +20.0 (+18.0 to +22.0), interaction "
                                   "+10.0 (+9.0 to +11.0)")
    assert [(r["comparison"], r["condition"], r["verdict"]) for r in mixing] == [
        ("lad_mean - lad_nopos", CLEAN, "supported"), ("lad_mean - lad_nopos", SHUFFLE, "no detectable difference; unseparated")]


def test_without_a_supported_step_the_row_names_the_largest_and_counts_the_verdicts(tmp_path):
    from study.ladder.report import clean_gap_row

    sources = _sources(tmp_path)
    judged = judged_steps(sources.table(L.FOLDER, L.STEPS), sources.table(P.FOLDER, P.CLAIMS),
                          sources.table(P.FOLDER, P.TESTS))
    judged.loc[judged["verdict"] == "supported", "verdict"] = "inconclusive"
    row = clean_gap_row(judged, CLEAN)
    assert row["verdict"] == "no single step shown: 2 inconclusive"
    assert row["evidence"].startswith("largest step lad_mean - lad_nopos (token_mixer: - -> mean): -8.0")
    side = judged.assign(kind="side")
    assert clean_gap_row(side, CLEAN) is None  # side pairs are not steps of the ladder


def test_the_attention_rows_replace_the_plans_generic_rows_in_the_findings_table(tmp_path):
    from study.plan.report import ROWS as PLAN_ROWS
    from study.report import glance

    sources = _sources(tmp_path)
    table = glance.findings_table(sources)
    plan_claims = [r["claim"] for r in PLAN_ROWS.rows(sources)]
    assert "lad_mean - lad_nopos differs clean" in plan_claims
    assert "lad_mean - lad_nopos differs clean" not in set(table["claim"])  # replaced by the ladder's wording
    assert sum(table["claim"].str.startswith("Learned attention differs")) == 2
    assert "lad_nopos - lad_avg differs clean" in set(table["claim"])  # the other steps keep the plan's rows


def test_the_section_has_the_judged_steps_the_per_fraction_steps_and_the_costs(tmp_path):
    text = "\n".join(SECTION.lines(_sources(tmp_path)))
    assert text.startswith("## The ladder: from the ViT to the ResNet, one change at a time")
    assert "| lad_mean - lad_nopos | clean | token_mixer: - -> mean | -8.0 (-10.0 to -6.0) | supported | 60 | 9 |" in text
    assert "| lad_mean - lad_nopos | rung | 69194 | 4.0 | -49.0 | -60.0 |" in text  # half the parameters below
    # the step moves its cost by more than the limit and the study has no twin for it: said, not hidden
    assert "| lad_mean - lad_nopos | -49.0 | -60.0 | none |" in text
    assert "Each step per fraction" in text and "| lad_mean - lad_nopos | 7x7 shuffle | 1140 | 5 | +1.0 (-1.0 to +3.0) | 0 |" in text


def test_a_step_that_moves_its_cost_is_read_beside_its_twin(tmp_path):
    """The step that halves the parameters is shown beside the controls' contrast of its twin matched in cost (the
    same rung below), in the section and in the attention row's control; a step within the limit has no twin row."""
    sources = _sources(tmp_path, twin=True)
    text = "\n".join(SECTION.lines(sources))
    assert "| lad_mean - lad_nopos | -49.0 | -60.0 | lad_mean_wide - lad_nopos | -0.4 | -16.0 |" in text
    assert "| lad_mean - lad_nopos | lad_mean_wide - lad_nopos | clean | 300 | -4.5 (-7.5 to -1.5) |" in text
    assert "| lad_nopos - lad_avg | -2.3 |" not in text  # within 25%: no twin needed
    row = next(r for r in ROWS.rows(sources) if r["claim"].startswith("Learned attention") and CLEAN in r["claim"])
    assert row["control"].endswith("its twin matched in cost, lad_mean_wide - lad_nopos (exploratory): "
                                   "-4.5 (-7.5 to -1.5)")
