"""The report's sentences about priors: how much of the ViT's gap to the CNN each prior closes, whether ConViT's
gates open with data, and what each prior costs on scrambled images, where its assumption is false; and the
section on ConViT's gates.

Read from tables other stages wrote: the paired gaps of ``curves`` (every model against every other, paired by
seed, Holm-adjusted across fractions), ConViT's gates from ``attention`` (named by :mod:`study.priors`; a study
without ConViT has none, and no gates section). ``arms`` names the roles, from the params (:func:`arms_of`): the
plain ViT, the CNN, the priors (the other natural ViT-family models) and each scrambled model's natural twin; a
study with neither priors nor scrambled images has no priors findings. Nothing is computed here but a descriptive
ratio, said to be one.
"""

from __future__ import annotations

import pandas as pd

from study import attention, curves, priors
from study.curves.report import gap_sentences
from study.outputs.tables import markdown_table
from study.writing.format import images, interval, no_detectable, plural
from study.writing.section import Part, Sources


def arms_of(models: dict, trained: list[str], vit_family: tuple[str, ...]) -> dict:
    """The study's roles: ``vit`` (the first natural model of arch ``vit``), ``cnn`` (the first natural non-ViT
    model), ``priors`` (the other natural ViT-family models, in study order; none in a study without an
    architectural prior or scrambled images) and ``twins`` (scrambled model -> the natural model with the same entry
    but for the scramble). ``models``: name -> plain dict of its params."""
    natural = [n for n in trained if models[n].get("scramble") is None]
    vit = next((n for n in natural if models[n]["arch"] == "vit"), None)
    cnn = next((n for n in natural if models[n]["arch"] not in vit_family), None)
    priors = [n for n in natural if n != vit and models[n]["arch"] in vit_family]
    twins = {}
    for name in trained:
        if models[name].get("scramble") is None:
            continue
        bare = {k: v for k, v in models[name].items() if k != "scramble"}
        twin = next((n for n in natural if {k: v for k, v in models[n].items() if k != "scramble"} == bare), None)
        twins[name] = twin
    # A study of priors has an architectural prior or a scrambled model; the distilled ViT alone is the distillation
    # study's question (its own report section), not counted as a prior there.
    if not twins and all(models[n]["arch"] in ("vit", "deit") for n in priors):
        priors = []
    return {"vit": vit, "cnn": cnn, "priors": priors, "twins": twins}


def priors_title(arms: dict) -> str:
    """What a title adds for a study of priors: "; priors: convit, vit_convstem; scrambled images" (else "")."""
    if not arms or not (arms.get("priors") or arms.get("twins")):
        return ""
    return "; priors: " + ", ".join(arms["priors"]) + ("; scrambled images" if arms["twins"] else "")


def _rows(gaps: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    return gaps[gaps["comparison"] == f"{a} - {b}"]


def prior_sentences(gaps: pd.DataFrame, arms: dict) -> list[str]:
    """Per prior: its gain over the plain ViT (the gap it closes), and, descriptively, that gain as a share of the
    ViT − CNN gap at each fraction."""
    vit, cnn = arms["vit"], arms["cnn"]
    if vit is None or cnn is None or not arms["priors"]:
        return []
    base = _rows(gaps, vit, cnn).set_index("train_images")["gap_mean"]
    out = []
    for prior in arms["priors"]:
        gain = _rows(gaps, prior, vit)
        if gain.empty:
            continue
        out += [f"Gain of {prior} over the plain ViT (the part of the {vit} − {cnn} gap it closes): " + s
                for s in gap_sentences(gain)]
        shares = [f"{100 * r.gap_mean / -base[r.train_images]:.0f}% at {images(r.train_images)}"
                  for r in gain.sort_values("train_images").itertuples()
                  if r.train_images in base.index and base[r.train_images] < 0]
        if shares:
            out.append(f"As a share of the mean {vit} − {cnn} gap (descriptive: a ratio of means, no interval), "
                       f"{prior} closes {', '.join(shares)}.")
    return out


def scramble_sentences(gaps: pd.DataFrame, arms: dict) -> list[str]:
    """Per scrambled model: what scrambling costs it (scrambled − natural twin), and where it stands against the
    plain ViT on natural images, whose function scrambling cannot change (tests/data/test_scramble.py)."""
    if not arms["twins"]:
        return []
    out = ["Scrambled models see every image through one fixed scramble: training, validation and test images, and "
           "every probe of the robustness stage, which acts on the natural image before it is scrambled. Their "
           "attention distances and maps are measured on the token grid they see, the scrambled one."]
    for scrambled, twin in arms["twins"].items():
        if twin is not None and not _rows(gaps, scrambled, twin).empty:
            out += [f"Cost of scrambled images to {twin}: " + s for s in gap_sentences(_rows(gaps, scrambled, twin))]
        vit = arms["vit"]
        if vit is not None and not _rows(gaps, scrambled, vit).empty:
            out += ["On scrambled images against the plain ViT on natural ones (its scrambled curve up to "
                    "optimisation noise): " + s for s in gap_sentences(_rows(gaps, scrambled, vit))]
    return out


def gate_sentences(summary: pd.DataFrame | None, contrasts: pd.DataFrame | None) -> list[str]:
    """ConViT's head-mean gate per GPSA block at the smallest and the largest fraction, and the paired change
    (Holm-adjusted across the blocks of a model). Falling gates: heads turned from position to content."""
    if summary is None or summary.empty or contrasts is None or contrasts.empty:
        return []
    out = []
    for model, g in contrasts.groupby("model", sort=False):
        at = summary[summary["model"] == model].set_index(["block", "fraction"])
        parts = []
        for r in g.sort_values("block").itertuples():
            small = at.loc[(r.block, r.smallest_fraction)]
            large = at.loc[(r.block, r.largest_fraction)]
            change = f"{r.difference:+.3f}"
            ci = interval(r.ci_low, r.ci_high, 3, signed=True, label="adjusted CI")
            moved = (f"{'falls' if r.difference < 0 else 'rises'} by {change} ({ci})" if r.significant else
                     no_detectable("change", change, ci, r.equivalence_bound, 3))
            parts.append(f"block {r.block}: {small.gate_mean:.3f} at {images(small.train_images)}, "
                         f"{large.gate_mean:.3f} at {images(large.train_images)}, {moved}")
        blocks = plural(len(g), "block")
        out.append(f"{model}'s gates σ(λ), the weight of positional attention averaged over heads (0.731 at "
                   f"initialisation): " + "; ".join(parts) + f". Intervals are Holm-adjusted across the {blocks}; a "
                   "fall means heads turned from position to content as the data grew.")
    return out


def _gates(sources: Sources) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """ConViT's gates and their changes with data, ``None`` each in a study without ConViT."""
    return (sources.table_if_written(attention.FOLDER, priors.GATES),
            sources.table_if_written(attention.FOLDER, priors.GATE_CONTRASTS))


def _findings(sources: Sources) -> list[str]:
    gaps, arms = sources.table(curves.FOLDER, curves.GAPS), sources.setup["arms"]
    return [*prior_sentences(gaps, arms), *gate_sentences(*_gates(sources)), *scramble_sentences(gaps, arms)]


def _gates_section(sources: Sources) -> list[str]:
    gates, contrasts = _gates(sources)
    if gates.empty:
        return []
    return ["### ConViT's gates", "",
            sources.figure(attention.FOLDER, priors.GATES,
                           "Head-mean gate σ(λ) per GPSA block against training images; bars: t-interval over seeds; "
                           "dashed: σ(1), every gate's value at initialisation."), "",
            markdown_table(gates), "", "Largest fraction minus smallest, paired by seed:", "",
            markdown_table(contrasts), ""]


FINDINGS = Part(_findings, needs=((curves.FOLDER, curves.GAPS),))
SECTION = Part(_gates_section, needs=((attention.FOLDER, priors.GATES), (attention.FOLDER, priors.GATE_CONTRASTS)))
