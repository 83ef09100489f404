"""ConViT's gates: how much each head of a gated positional self-attention block still weighs position.

A GPSA head mixes ``(1 − σ(λ)) · content attention + σ(λ) · positional attention`` (d'Ascoli et al. 2021, eq. 5).
Training starts every gate at σ(1) ≈ 0.73; a gate that falls means the head has turned from its convolution-like
positional prior to content. d'Ascoli et al. saw the gates of the early blocks stay high and the later ones fall,
and the fall grow with data. Here: the gates of every run, and, per block, the mean gate at the largest fraction
minus the smallest, paired by seed, Holm-adjusted across a model's blocks.
"""

from __future__ import annotations

import pandas as pd

from study.stats.intervals import holm_differences, t_interval

GATE_COLUMNS = ["model", "fraction", "seed", "block", "head", "gate"]
SUMMARY_COLUMNS = ["model", "fraction", "block", "seeds", "gate_mean", "ci_low", "ci_high"]
CONTRAST_COLUMNS = ["model", "block", "smallest_fraction", "largest_fraction", "seeds", "difference", "ci_low",
                    "ci_high", "confidence", "p_holm", "significant", "equivalence_bound"]


def gate_rows(models: dict) -> pd.DataFrame:
    """One row per run, GPSA block and head: σ(λ) of the trained model. ``models``: ``(name, fraction, seed) ->
    model``; models without ``gates()`` (no GPSA) are skipped."""
    rows = []
    for (name, fraction, seed), model in sorted(models.items(), key=lambda item: item[0]):
        if not hasattr(model, "gates"):
            continue
        gates = model.gates().float().cpu().numpy()  # (GPSA blocks, heads)
        for block, heads in enumerate(gates):
            rows += [{"model": name, "fraction": fraction, "seed": seed, "block": block, "head": head,
                      "gate": float(g)} for head, g in enumerate(heads)]
    return pd.DataFrame(rows, columns=GATE_COLUMNS)


def _block_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean gate over a block's heads, per run: ``(model, fraction, seed, block) -> gate``."""
    return rows.groupby(["model", "fraction", "seed", "block"], as_index=False)["gate"].mean()


def gate_summary(rows: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model, fraction and block: the head-mean gate, mean and t-interval over seeds."""
    out = []
    for (model, fraction, block), g in _block_means(rows).groupby(["model", "fraction", "block"], sort=True):
        mean, _, half = t_interval(g["gate"].to_numpy(), confidence)  # (mean, sd, half-width)
        out.append({"model": model, "fraction": fraction, "block": block, "seeds": len(g), "gate_mean": mean,
                    "ci_low": mean - half, "ci_high": mean + half})
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def gate_contrasts(rows: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model and block: head-mean gate at the largest fraction minus the smallest, paired by seed; one Holm
    family per model (its blocks). Negative = the gates open (less positional) with more data."""
    means = _block_means(rows)
    out, families = [], []
    for model, mine in means.groupby("model", sort=True):
        smallest, largest = mine["fraction"].min(), mine["fraction"].max()
        if smallest == largest:
            continue
        wide = mine.pivot_table(index=["block", "seed"], columns="fraction", values="gate")
        paired = (wide[largest] - wide[smallest]).dropna()  # seeds present at both fractions
        family = []
        for block, diff in paired.groupby(level="block", sort=True):
            family.append(diff.to_numpy())
            out.append({"model": model, "block": int(block), "smallest_fraction": smallest,
                        "largest_fraction": largest, "seeds": int(diff.size)})
        families.append(family)
    for row, statistics in zip(out, holm_differences(families, confidence)):
        row.update(statistics)
    return pd.DataFrame(out, columns=CONTRAST_COLUMNS).astype({"block": "int64"}) if out else \
        pd.DataFrame(columns=CONTRAST_COLUMNS)


__all__ = ["gate_contrasts", "gate_rows", "gate_summary"]
