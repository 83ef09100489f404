"""The report's sentences about representations: what the CKA tables support saying about why models differ; the
CKA section and the caveats the tables warrant among the limitations.

Read from the ``cka`` stage's ``cka_to_full`` table and from the depth average of cross-model CKA
(:func:`study.cka.depth.across_depth_mean`, written by the report stage beside its setup tables); every
number is computed by the stage (:mod:`study.cka.similarity`). The rules:

- a difference is claimed only when its Holm-adjusted interval (computed by the stage, over the family it
  names) excludes zero; otherwise the sentence says "no detectable difference" and gives the interval;
- with fewer than ``min_seeds`` seeds nothing is inferred: the sentences give the means and say why;
- every similarity stands beside its noise level (CKA between two seeds of the same model) and its chance level
  (the same comparison between the models' initial weights, before any training): "CKA 0.82 (95% CI 0.79 to
  0.85) vs 0.93 between seeds and 0.35 at initialisation". CKA has no fixed zero: two random networks fed the
  same images already share much of the images' geometry, so only the chance level says how much of a value
  training put there;
- averages over depth leave out the input embedding (near 1 for any two models), and the sentences say so;
- a value is compared with the ceiling only where it lies above its chance level (its interval above the chance
  level's mean, :func:`above_chance`). Where it does not, CKA cannot tell the trained models apart from two random
  initialisations, so it cannot separate fractions either: the sentence gives the numbers, says so and claims
  nothing. This is the case of the ViTs on the default study, in every reading measured (the residual stream,
  block updates, pooled features; table ``cka_readings``, :mod:`study.cka.measures` says why).

A study whose stages wrote no ``cka_to_full`` has no CKA part in the report (:data:`FINDINGS`, :data:`SECTION`,
:data:`LIMITATIONS`).
"""

from __future__ import annotations

import math

import pandas as pd

from study import cka
from study.outputs.tables import markdown_table
from study.writing.format import interval, no_inference, percent, plural, reference_data, share
from study.writing.section import Part, Sources
from study.stats.intervals import MIN_SEEDS


def cka_findings(to_full: pd.DataFrame | None, across: pd.DataFrame | None, reference: float = 1.0,
                 min_seeds: int = MIN_SEEDS, readings: pd.DataFrame | None = None) -> list[str]:
    """Sentences on CKA to a model of another seed trained on the largest fraction (``reference``: full data
    when 1.0), against the cross-seed ceiling and the chance level (``to_full``: ``cka_to_full``), and on
    cross-model CKA at matched relative depth (``across``: its depth average per pair of models). ``readings``
    (``cka_readings``, where written) gives the other readings' numbers for a model whose stream values do not lie
    above their chance level."""
    ref = reference_data(reference)
    if to_full is None or to_full.empty:
        return [f"CKA to a model trained on {ref} is not measured: it compares against a model of another seed, "
                "and the study has one."]
    out = []
    for model, rows in to_full.groupby("model", sort=True):
        seeds = int(rows["seeds"].min())
        if seeds < min_seeds:
            out.append(_described(str(model), rows, seeds, min_seeds, ref))
        else:
            ordered = list(rows.sort_values("fraction").itertuples())
            out += [_inferred(str(model), r, ref) for r in ordered if above_chance(r.ci_low, r.chance_mean)]
            hidden = [r for r in ordered if not above_chance(r.ci_low, r.chance_mean)]
            out += [_at_chance(str(model), hidden, ref, readings)] if hidden else []
    return out + _across(across, min_seeds, ref)


def above_chance(low: float, chance: float) -> bool:
    """Whether a CKA value whose interval (or, without one, mean) starts at ``low`` lies above its chance level
    ``chance``; True where the chance level was not measured (the sentence then says so)."""
    return not math.isfinite(chance) or (math.isfinite(low) and low > chance)


def _at_chance(model: str, rows: list, ref: str, readings: pd.DataFrame | None) -> str:
    """The fractions of ``model`` whose CKA does not lie above its chance level: their numbers, and no claim."""
    first = rows[0]
    values = ", ".join(f"{r.mean_cka:.2f} ({interval(r.ci_low, r.ci_high, 2)}) at {percent(r.fraction)}" for r in rows)
    chance = _level(first.chance_mean, first.chance_ci_low, first.chance_ci_high)
    return (f"{model}: CKA to a model of another seed trained on {ref}, {_depth_phrase(first.embedding_layer)}, is "
            f"{values} of the data, vs {_level(first.ceiling_mean)} between seeds and {chance} between two random "
            f"initialisations: not above its chance level, so CKA does not tell these models from untrained ones and "
            f"cannot separate these fractions; no comparison with the ceiling is drawn.{_other_readings(model, readings)}")


def _other_readings(model: str, readings: pd.DataFrame | None) -> str:
    """" In the other readings ..." sentence: each reading's chance level beside its range of values."""
    if readings is None or readings.empty:
        return ""
    mine = readings[(readings["model"] == model) & (readings["reading"] != "stream")]
    parts = [f"{name}, {g['chance_mean'].iloc[0]:.2f} at initialisation vs {g['mean_cka'].min():.2f}–"
             f"{g['mean_cka'].max():.2f} trained" for name, g in mine.groupby("reading", sort=True)]
    if not parts:
        return ""
    separated = [name for name, g in mine.groupby("reading", sort=True)
                 if all(above_chance(r.ci_low, r.chance_mean) for r in g.itertuples())]
    verdict = (f"{' and '.join(separated)} lies above its chance level" if separated
               else "neither lies above its chance level")
    return (f" Block updates and pooled features (table cka_readings; {'; '.join(parts)}): {verdict}.")


def _level(mean: float, low: float = math.nan, high: float = math.nan) -> str:
    """A noise or chance level: "0.93 (CI 0.90 to 0.96)", or "0.93" where it has no interval."""
    spread = f" ({interval(low, high, 2)})" if math.isfinite(low) and math.isfinite(high) else ""
    return f"{mean:.2f}{spread}"


def _versus(noise: str, chance: float, chance_text: str) -> str:
    """A similarity's two reference points: "vs 0.93 between seeds and 0.35 at initialisation"."""
    if not math.isfinite(chance):
        return f"vs {noise} between seeds (its chance level, the same comparison at initialisation, was not measured)"
    return f"vs {noise} between seeds and {chance_text} at initialisation"


def _depth_phrase(embedding: str) -> str:
    return f"averaged over relative depth after the input embedding ({embedding}, left out)"


def _described(model: str, rows: pd.DataFrame, seeds: int, min_seeds: int, ref: str) -> str:
    first = rows.iloc[0]
    values = ", ".join(f"{r.mean_cka:.2f} at {percent(r.fraction)}" for r in rows.sort_values("fraction").itertuples())
    levels = _versus(f"{first['ceiling_mean']:.2f}", first["chance_mean"], f"{first['chance_mean']:.2f}")
    return (f"{model}: CKA to a model of another seed trained on {ref}, {_depth_phrase(first['embedding_layer'])}, is "
            f"{values} of the data, {levels}. Mean of "
            f"{plural(seeds, 'seed')}; {no_inference(seeds, min_seeds)}.")


def _inferred(model: str, r, ref: str) -> str:
    cka = f"{r.mean_cka:.2f} ({percent(r.confidence)} {interval(r.ci_low, r.ci_high, 2)})"
    levels = _versus(_level(r.ceiling_mean, r.ceiling_ci_low, r.ceiling_ci_high), r.chance_mean,
                     _level(r.chance_mean, r.chance_ci_low, r.chance_ci_high))
    gap = (f"Holm-adjusted {share(r.gap_confidence)} "
           f"{interval(r.gap_ci_low, r.gap_ci_high, 2, signed=True)}, {int(r.seeds)} seeds")
    start = (f"At {percent(r.fraction)} of the data, {model}'s CKA to a model of another seed trained on {ref}, "
             f"{_depth_phrase(r.embedding_layer)}, is {cka} {levels}")
    if r.gap_significant and r.gap_to_ceiling_mean > 0:
        return f"{start}: below the cross-seed ceiling by {r.gap_to_ceiling_mean:.2f} ({gap})."
    if r.gap_significant:
        return f"{start}: above the cross-seed ceiling by {-r.gap_to_ceiling_mean:.2f} ({gap})."
    return (f"{start}: no detectable difference from the cross-seed ceiling (gap {r.gap_to_ceiling_mean:+.2f}, "
            f"{gap}).")


def _across(across: pd.DataFrame | None, min_seeds: int, ref: str) -> list[str]:
    """Cross-model CKA at matched depth, described beside both models' ceilings and the pair's chance level
    (no claim is tested)."""
    if across is None:
        return []
    out = []
    for r in across.itertuples():
        spread = (f" ({percent(r.confidence)} {interval(r.ci_low, r.ci_high, 2)} over {r.seeds} seeds)"
                  if r.seeds >= min_seeds else f" (mean of {plural(r.seeds, 'seed')})")
        ceilings = [f"{c:.2f} ({m})" for m, c in ((r.model_a, r.ceiling_a), (r.model_b, r.ceiling_b))
                    if math.isfinite(c)]
        noise = " and ".join(ceilings) if ceilings else "no value"
        low = r.ci_low if r.seeds >= min_seeds else r.cka_mean
        verdict = ("" if above_chance(low, r.chance_mean) else
                   ": not above the chance level, so CKA does not separate what training made the two models share "
                   "from what two random initialisations share, and nothing is claimed")
        out.append(f"At matched relative depth, {r.model_a} and {r.model_b} trained on {ref} have CKA {r.cka_mean:.2f}"
                   f"{spread} averaged over relative depth {r.depth_from:.2f}–1 (past both input embeddings), from "
                   f"{r.depth_min:.2f} to {r.depth_max:.2f} along it, "
                   f"{_versus(noise, r.chance_mean, f'{r.chance_mean:.2f}')}, on the same depth average{verdict}.")
    return out


def cka_limitations(to_full: pd.DataFrame, across: pd.DataFrame | None) -> list[str]:
    """The caveats of the CKA analysis: the noise ceiling that ``to_full`` (``cka_to_full``) lacks or rests on one
    seed pair, and the matching by relative depth behind ``across`` (``None`` where it was not derived)."""
    out = []
    if to_full.empty:
        out.append("With one training seed, CKA to the largest fraction has no model of another seed to compare with, "
                   "and so no noise ceiling; it is not reported.")
    elif (to_full["ceiling_pairs"] < 2).any():
        out.append("The CKA noise ceiling comes from a single pair of seeds (compared both ways), so its own "
                   "spread across seed pairs is unknown.")
    rows = [r for r in to_full.itertuples() if r.seeds >= 2 and not above_chance(r.ci_low, r.chance_mean)]
    above = sorted({str(r.model) for r in rows if r.chance_mean >= to_full.loc[to_full["model"] == r.model,
                                                                              "mean_cka"].max()})
    overlapping = sorted({str(r.model) for r in rows} - set(above))
    if above:
        out.append(f"For {', '.join(above)}, CKA between two random initialisations lies above every trained value: "
                   "an untrained network of small weights is close to a linear map of the pixels, and linear CKA of "
                   "two random linear maps of the same images is near 1, so CKA there cannot separate fractions "
                   "(block updates and pooled features: table cka_readings).")
    if overlapping:
        out.append(f"For {', '.join(overlapping)}, CKA at some fractions does not lie above its chance level (two "
                   "random initialisations, whose spread over seed pairs is wide), so those fractions are not "
                   "compared with the ceiling.")
    if across is not None:
        out.append("Layers of different models are matched by relative depth, each model's recorded layers "
                   "taken as evenly spaced from input (0) to output (1): a convention, not a measured "
                   "correspondence.")
    return out


def _to_full(sources: Sources) -> pd.DataFrame:
    return sources.table(cka.FOLDER, cka.TO_FULL)


def _depth_means(sources: Sources) -> pd.DataFrame | None:
    return sources.setup_table_if_written(cka.ACROSS_DEPTH_MEAN)


def _section(sources: Sources) -> list[str]:
    lines = ["## Representations (CKA)", ""]
    for stem, caption in _CAPTIONS:  # the figures the stage drew (one seed, or one model, draws fewer)
        shown = sources.figure(cka.FOLDER, stem, caption)
        lines += [shown, ""] if shown else []
    to_full = _to_full(sources)
    if not to_full.empty:
        lines += ["CKA to the reference-fraction model of another seed, mean over relative depth past the input "
                  "embedding, beside the cross-seed ceiling and the chance level (initial weights); gap = ceiling − "
                  "CKA, paired by seed, Holm-adjusted:", "",
                  markdown_table(to_full[["model", "fraction", "seeds", "mean_cka", "ci_low", "ci_high", "ceiling_mean",
                                          "chance_mean", "gap_to_ceiling_mean", "gap_ci_low", "gap_ci_high",
                                          "gap_significant"]], 3), ""]
    return lines


_CAPTIONS = (
    (cka.WITHIN_FIGURE, "Linear CKA between layers within each model (full data, analysis seed); colours "
                                    "span the data's range."),
    (cka.ACROSS_FIGURE, "Linear CKA between layers of different models (full data, analysis seed); "
                                    "colours span the data's range."),
    (cka.TO_FULL_FIGURE, "Per-layer CKA to the reference-fraction model of another seed; dashed: the "
                                     "cross-seed ceiling (reference fraction vs reference fraction, another seed); "
                                     "dotted: the same comparison between two random initialisations (chance)."),
    (cka.ACROSS_DEPTH_FIGURE, "CKA between models at matched relative depth; dashed: each model's "
                                          "cross-seed ceiling; dotted: the two models at initialisation (chance); "
                                          "hatched: input embeddings, left out of depth means."))
_NEEDS = ((cka.FOLDER, cka.TO_FULL),)
FINDINGS = Part(lambda sources: cka_findings(_to_full(sources), _depth_means(sources), max(sources.setup["fractions"]),
                                             readings=sources.table_if_written(cka.FOLDER,
                                                                               cka.READINGS)),
                needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
LIMITATIONS = Part(lambda sources: cka_limitations(_to_full(sources), _depth_means(sources)), needs=_NEEDS)
