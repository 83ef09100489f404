"""``analysis.plan``: the analysis plan's schema (claims, their controls, the smallest effects, the seeds, a ladder)
and its reader, which checks the claims against the study and writes a ladder out as claims.

Read by the stages that score or judge the plan (robustness, plan, ladder, controls) and by the report."""

from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import ConfigDict, Field, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from study import robustness
from study.core.config import Params, listed_once, section
from study.core.errors import StudyError

_FROZEN = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_FROZEN)
class ClaimParams:
    """One primary claim of the analysis plan: ``arm − against`` in test top-1 under ``condition``, paired by seed
    and averaged over the fractions, in ``direction`` (+1: the arm ahead, −1: behind, 0: any difference).

    With a ``control`` (a condition whose damage matches ``condition``'s in amount, e.g. the same shuffle off the
    ViT's patch grid) the claim is also tested as an interaction: per seed, the contrast under ``condition`` minus
    the contrast under ``control``. "Only under ``condition``" needs that interaction to exclude 0 and the contrast
    under ``control`` to lie inside the smallest effect of interest (study.stats.verdicts)."""

    name: StrictStr  # a short identifier, as the tables name the claim
    claim: StrictStr  # the claim in words, as the findings table prints it
    arm: StrictStr
    against: StrictStr
    condition: tuple[StrictStr, StrictStr, float]  # (probe, variant, level), as the robustness tables key them
    direction: Literal[-1, 0, 1] = 0
    control: tuple[StrictStr, StrictStr, float] | None = None
    control_means: StrictStr = ""  # what the control varies, in words ("off the ViT's patch grid")
    # primary: its test (the interaction where there is a control, else the contrast) is in the primary family,
    # its other tests secondary; secondary: every test in the secondary family, tested once every primary test is
    # rejected (serial gatekeeping); exploratory: intervals only, no verdict.
    role: Literal["primary", "secondary", "exploratory"] = "primary"
    fractions: tuple[float, ...] = ()  # the fractions the claim is declared at; () for every fraction of the study

    def primary_test(self) -> str:
        """The test a claim's verdict is: the interaction where it has a control, else its contrast."""
        return "contrast" if self.control is None else "interaction"


@dataclass(frozen=True, config=_FROZEN)
class PlanEffects:
    """The smallest effects of interest (shares of top-1): what the plan is powered to detect, and the margin a
    "no effect" must lie within."""

    clean: StrictFloat = Field(default=0.02, gt=0.0, lt=1.0)  # a contrast on the clean test images
    robustness: StrictFloat = Field(default=0.05, gt=0.0, lt=1.0)  # a contrast, or an interaction, under a probe


@dataclass(frozen=True, config=_FROZEN)
class LadderCondition:
    """A condition every step of a ladder is tested under, with its matched control (as a claim's)."""

    name: StrictStr  # a short tag for the claims' names ("clean", "shuffle_7")
    words: StrictStr  # the condition in words, as a claim prints it ("on clean images")
    condition: tuple[StrictStr, StrictStr, float]
    control: tuple[StrictStr, StrictStr, float] | None = None
    control_means: StrictStr = ""


@dataclass(frozen=True, config=_FROZEN)
class LadderParams:
    """A ladder (study.models.ladder; ConvNeXt's design, Liu et al. 2022, run backwards): models each one change from
    the one before. Every adjacent step (``rungs[k+1] − rungs[k]``) and every ``side`` pair ([arm, against]) is a
    claim of the plan under each of ``conditions``, testing any difference (direction 0): the plan's claims are
    the ones it lists and these (:meth:`claims`), one Holm family."""

    rungs: tuple[StrictStr, ...] = Field(min_length=2)
    conditions: tuple[LadderCondition, ...] = Field(min_length=1)
    side: tuple[tuple[StrictStr, StrictStr], ...] = ()

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """``(arm, against)``: each step up the ladder, then the side pairs."""
        return tuple(zip(self.rungs[1:], self.rungs[:-1])) + tuple(tuple(pair) for pair in self.side)

    def claims(self) -> tuple[ClaimParams, ...]:
        return tuple(ClaimParams(name=f"{arm}_vs_{against}_{c.name}", claim=f"{arm} differs from {against} {c.words}",
                                 arm=arm, against=against, condition=c.condition, direction=0, control=c.control,
                                 control_means=c.control_means)
                     for arm, against in self.pairs() for c in self.conditions)


@dataclass(frozen=True, config=_FROZEN)
class PlanParams:
    """The analysis plan (stage ``plan``): the primary claims, judged together as one Holm family; every other
    interval the study reports is exploratory (no verdict). params.yaml says why each value was chosen."""

    # Whether the plan was written before the runs it judges ("before_runs") or after some of them ("after_runs");
    # `history` says when, and what had been seen. The report prints both.
    declared: Literal["before_runs", "after_runs"]
    history: StrictStr
    seeds: StrictInt = Field(ge=3)  # the seeds the verdicts rest on (at least; a study may run more)
    images: StrictInt = Field(default=10000, ge=1)  # test images each planned condition is scored on (all, if fewer)
    effects: PlanEffects = PlanEffects()
    alpha: StrictFloat = Field(default=0.05, gt=0.0, lt=1.0)  # two-sided level of the family, before Holm
    power: StrictFloat = Field(default=0.8, gt=0.0, lt=1.0)  # the power the seeds needed are computed for
    claims: tuple[ClaimParams, ...] = ()  # with a ladder, followed by its claims (parse_params adds them)
    ladder: LadderParams | None = None
    # The pilot's per-run robustness tables (a folder of the project) whose per-seed values sized the plan: each
    # test's power at the plan's seeds is computed from the pilot's SD there (stage plan's power table).
    pilot: StrictStr | None = None

    def conditions(self) -> tuple[tuple[str, str, float], ...]:
        """Every condition a claim names (its own and its control), each once, in the plan's order."""
        keys = [key for c in self.claims for key in (c.condition, c.control) if key is not None]
        return tuple(dict.fromkeys((probe, variant, float(level)) for probe, variant, level in keys))

    def models(self) -> tuple[str, ...]:
        """Every model a claim names, each once (``<model>@uniform`` included as named)."""
        return tuple(dict.fromkeys(name for c in self.claims for name in (c.arm, c.against)))




def plan_params(params: Params) -> PlanParams | None:
    """``analysis.plan`` validated against the study, or None when it declares none (every interval exploratory);
    a ladder's steps are written out as claims after the listed ones, so every reader sees one list of claims."""
    plan = section(params, "analysis.plan", PlanParams | None, default=None)
    if plan is None:
        return None
    if plan.ladder is not None:
        listed = tuple(c for c in plan.claims if c not in plan.ladder.claims())  # each claim once
        plan = dataclasses.replace(plan, claims=listed + plan.ladder.claims())
    _check_plan(plan, params, params.source)
    return plan


def _check_plan(plan: PlanParams, p: Params, source: str) -> None:
    """The plan's claims name models the study defines (or their uniform-attention variants), known probes and
    distinct claim names; it rests on no more seeds than the study runs. Whether each condition is one the
    robustness stage scores is checked with the probes (study.robustness.grids.check_robustness)."""
    key = "analysis.plan"
    if len(p.seeds) < plan.seeds:
        raise StudyError(f"{source}: {key}.seeds = {plan.seeds} but seeds lists {len(p.seeds)}; run at least "
                         f"{plan.seeds} seeds or lower {key}.seeds")
    if plan.ladder is not None:
        listed_once(plan.ladder.rungs, f"{source}: {key}.ladder.rungs")
        listed_once([c.name for c in plan.ladder.conditions], f"{source}: {key}.ladder.conditions names")
    listed_once([c.name for c in plan.claims], f"{source}: {key}.claims names")
    for i, c in enumerate(plan.claims):
        for role, name in (("arm", c.arm), ("against", c.against)):
            if name.removesuffix(robustness.UNIFORM) not in p.models:
                raise StudyError(f"{source}: {key}.claims[{i}].{role} = '{name}' is not a model of the study "
                                 f"({sorted(p.models)}, or <model>{robustness.UNIFORM}); define it under models")
        if c.arm == c.against:
            raise StudyError(f"{source}: {key}.claims[{i}] compares '{c.arm}' with itself; name two models")
        for role, condition in (("condition", c.condition), ("control", c.control)):
            if condition is not None and condition[0] not in robustness.PROBES:
                raise StudyError(f"{source}: {key}.claims[{i}].{role} = {list(condition)}: unknown probe "
                                 f"'{condition[0]}'; choose from {', '.join(robustness.PROBES)}")
        unknown = [f for f in c.fractions if not any(abs(f - g) < 1e-12 for g in p.fractions)]
        if unknown:
            raise StudyError(f"{source}: {key}.claims[{i}].fractions = {list(c.fractions)}: {unknown} not among the "
                             f"study's fractions {list(p.fractions)}; declare the claim where the study trains")
        if c.control is not None and tuple(c.control) == tuple(c.condition):
            raise StudyError(f"{source}: {key}.claims[{i}].control is its condition; give the matched condition "
                             "that differs in the one way the claim is about")


