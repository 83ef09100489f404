"""The one classification of an interval against the smallest effect of interest, the scope of a controlled claim
(the interaction and the control's own contrast), and their words."""

from __future__ import annotations

import math

import pytest

from study.stats import verdicts as V


def test_an_interval_against_the_smallest_effect_of_interest():
    v = V.classify
    supported = v(0.01, 0.09, 0.05, +1)
    assert supported.label == "supported" and math.isnan(supported.bound)  # CI excludes 0 on the claimed side
    assert v(-0.09, -0.01, 0.05, 0).label == "supported" and v(-0.09, -0.01, 0.05, -1).label == "supported"
    assert v(0.01, 0.09, 0.05, -1).label == "reversed"
    assert v(-0.02, 0.03, 0.05, +1) == V.Verdict("refuted", 0.03)  # inside ±5 points
    assert v(-0.02, 0.03, 0.05, 0) == V.Verdict("no effect", 0.03)
    assert v(-0.04, -0.01, 0.05, +1) == V.Verdict("refuted", 0.04)  # small and the wrong way: inside ±e
    assert v(-0.12, -0.06, 0.05, +1) == V.Verdict("reversed", 0.12)
    assert v(-0.02, 0.08, 0.05, +1) == V.Verdict("inconclusive", 0.08)  # beyond ±8 points excluded
    assert v(-0.09, 0.02, 0.05, -1) == V.Verdict("inconclusive", 0.09)
    assert v(math.nan, math.nan, 0.05).label == "undefined"
    with pytest.raises(ValueError):
        v(0.0, 0.1, 0.0)
    with pytest.raises(ValueError):
        v(0.0, 0.1, 0.05, 2)


def test_only_on_the_condition_needs_the_interaction_and_a_small_control():
    s = V.scope
    # interaction excludes 0, the control's contrast inside ±5: only on the condition
    assert s((2.0, 20.0), (-3.0, 4.0), 5.0, +1) == V.ONLY
    # interaction excludes 0 but the control's interval reaches past the smallest effect: larger, not only
    assert s((2.0, 20.0), (-3.0, 9.0), 5.0, +1) == V.LARGER
    # the condition's effect significant and the control's not, but no interaction shown: not separated
    assert s((-1.0, 20.0), (-3.0, 9.0), 5.0, +1) == V.UNSEPARATED
    # both sides ahead, no interaction: also under the control
    assert s((-1.0, 20.0), (1.0, 9.0), 5.0, +1) == V.BOTH
    assert s((-20.0, -2.0), (-3.0, 4.0), 5.0, +1) == V.OPPOSITE
    # a claim that the arm is behind: mirrored
    assert s((-20.0, -2.0), (-3.0, 4.0), 5.0, -1) == V.ONLY
    assert s((math.nan, 1.0), (0.0, 1.0), 5.0, +1) == V.UNDEFINED
    with pytest.raises(ValueError):
        s((1.0, 2.0), (1.0, 2.0), 5.0, 0)


def test_the_words_name_the_bound_and_the_control():
    assert V.words(V.Verdict("supported", math.nan)) == "supported"
    assert V.words(V.Verdict("refuted", 1.94)) == "refuted: no effect beyond ±1.9 points"
    assert V.words(V.Verdict("inconclusive", 7.06)) == "inconclusive: effects beyond ±7.1 points excluded"
    assert V.words(V.Verdict("undefined", math.nan)) == "not measured"
    assert "offset" in V.scope_words(V.ONLY, "the grid offset") and "interaction" in V.scope_words(V.ONLY, "x")
    assert "not shown to differ" in V.scope_words(V.UNSEPARATED, "the offset grid")


def test_fewer_than_three_seeds_are_described_never_judged():
    assert V.classify(0.01, 0.09, 0.05, +1, seeds=2).label == V.TOO_FEW
    assert V.classify(0.01, 0.09, 0.05, +1, seeds=3).label == V.SUPPORTED
    assert V.words(V.Verdict(V.TOO_FEW, math.nan)) == "not inferred: fewer than 3 seeds"


def test_an_effect_shown_but_inside_the_smallest_effect_is_its_own_verdict():
    """The interval excludes 0 and lies inside ±smallest effect: an effect exists and is smaller than any of
    interest. The old order checked "excludes 0" first and called it supported."""
    from study.stats.verdicts import SMALLER, SUPPORTED, classify, words

    found = classify(0.5, 1.5, 2.0, direction=1)
    assert found.label == SMALLER and found.bound == 1.5
    assert "smaller than the smallest effect of interest" in words(found)
    assert classify(0.5, 2.5, 2.0, direction=1).label == SUPPORTED  # reaches beyond the margin
    assert classify(-1.5, -0.5, 2.0, direction=0).label == SMALLER


def test_a_step_down_rejection_with_a_simultaneous_interval_through_zero_is_still_decided_by_holm():
    from study.stats.verdicts import INCONCLUSIVE, SUPPORTED, classify

    assert classify(-0.2, 9.0, 2.0, direction=1, rejected=True).label == SUPPORTED
    assert classify(-0.2, 9.0, 2.0, direction=1, rejected=False).label == INCONCLUSIVE
