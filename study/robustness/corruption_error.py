"""Mean corruption error (Hendrycks & Dietterich, ICLR 2019), against a baseline model.

For model ``f``, corruption ``c`` and severities ``s`` (1–5), with ``E`` the top-1 error:

* corruption error ``CE_c^f = Σ_s E_{s,c}^f / Σ_s E_{s,c}^base``: errors summed over severities before
  dividing, so a corruption's hardest severities weigh most, and divided by the baseline's so that
  corruptions of different difficulty count alike;
* mean corruption error ``mCE^f`` = the mean of ``CE_c^f`` over corruptions;
* relative (``relative=True``): ``Σ_s (E_{s,c}^f − E_clean^f) / Σ_s (E_{s,c}^base − E_clean^base)``, the
  degradation beyond each model's clean error, which separates robustness from accuracy.

H&D's baseline is AlexNet and they print CE × 100; this study's baseline is the ResNet, and values stay
ratios: 1 is as robust as the baseline, below 1 more robust. The baseline scores exactly 1.

Arithmetic on a table of errors, no probe or model code: outside :mod:`study.robustness.probes` (which re-exports
it) so that :mod:`study.robustness.contrasts`, and the controls stage that reads it, import no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from study.core.errors import StudyError

KEYS = ("model", "corruption", "severity", "error")


def _label(row: pd.Series, by: Sequence[str]) -> str:
    where = ", ".join(f"{column} {row[column]}" for column in by)
    return f"model {row['model']}" + (f" ({where})" if where else "")


def corruption_errors(errors: pd.DataFrame, baseline: str, by: Sequence[str] = (), relative: bool = False
                      ) -> pd.DataFrame:
    """CE per model and corruption: columns ``[*by, model, corruption, ce]``.

    ``errors`` has one row per ``(*by, model, corruption, severity)`` with the top-1 ``error`` in [0, 1];
    severity 0 rows are the clean error (needed with ``relative=True``, ignored otherwise). ``by`` are
    columns within which the baseline is matched (e.g. ``("fraction", "seed")`` pairs each model with the
    ResNet of its fraction and seed). Every model must have the same corruptions and severities as the
    baseline in its group.
    """
    by = list(by)
    missing = [column for column in [*by, *KEYS] if column not in errors.columns]
    if missing:
        raise StudyError(f"mce: the error table lacks columns {missing}; give {[*by, *KEYS]}")
    if errors.duplicated([*by, "model", "corruption", "severity"]).any():
        raise StudyError(f"mce: several rows per {[*by, 'model', 'corruption', 'severity']}; "
                         "add the distinguishing column (e.g. seed) to `by`")
    if not (errors["model"] == baseline).any():
        raise StudyError(f"mce: baseline {baseline!r} is not in the table; choose one of "
                         f"{', '.join(map(str, sorted(errors['model'].unique())))}")
    corrupted = errors[errors["severity"] >= 1]
    base = corrupted[corrupted["model"] == baseline][[*by, "corruption", "severity", "error"]]
    merged = corrupted.merge(base.rename(columns={"error": "base_error"}), on=[*by, "corruption", "severity"],
                             how="outer", indicator=True)
    # Models without a baseline row, and groups where a model lacks a level the baseline has.
    for _, row in merged[merged["_merge"] == "left_only"].head(1).iterrows():
        raise StudyError(f"mce: the baseline {baseline!r} has no {row['corruption']} severity {row['severity']} "
                         f"for {_label(row, by)}; score the baseline on the same corruptions and severities")
    expected = merged[[*by, "corruption", "severity"]].drop_duplicates()
    models = corrupted[[*by, "model"]].drop_duplicates()
    grid = models.merge(expected, on=by, how="left") if by else models.merge(expected, how="cross")
    gaps = grid.merge(corrupted[[*by, "model", "corruption", "severity"]], how="left", indicator=True)
    for _, row in gaps[gaps["_merge"] == "left_only"].head(1).iterrows():
        raise StudyError(f"mce: {_label(row, by)} has no {row['corruption']} severity {row['severity']}, which "
                         "the baseline has; score every model on the same corruptions and severities")
    merged = merged[merged["_merge"] == "both"].drop(columns="_merge")
    if relative:
        clean = errors[errors["severity"] == 0][[*by, "model", "error"]].rename(columns={"error": "clean"})
        merged = merged.merge(clean, on=[*by, "model"], how="left")
        base_clean = clean[clean["model"] == baseline].drop(columns="model")
        merged = merged.merge(base_clean.rename(columns={"clean": "base_clean"}), on=by, how="left") if by \
            else merged.assign(base_clean=base_clean["clean"].iloc[0] if len(base_clean) else np.nan)
        if merged[["clean", "base_clean"]].isna().any().any():
            row = merged[merged[["clean", "base_clean"]].isna().any(axis=1)].iloc[0]
            raise StudyError(f"mce: relative mCE needs the clean error (severity 0) of {_label(row, by)} and "
                             f"of the baseline {baseline!r}; add their severity-0 rows")
        merged["error"] = merged["error"] - merged["clean"]
        merged["base_error"] = merged["base_error"] - merged["base_clean"]
    sums = merged.groupby([*by, "model", "corruption"], as_index=False)[["error", "base_error"]].sum()
    # Σ_s E^f / Σ_s E^base; a baseline with no error (or no degradation) leaves the ratio undefined: NaN.
    denominator = sums["base_error"].where(sums["base_error"] != 0)
    sums["ce"] = sums["error"] / denominator
    return sums[[*by, "model", "corruption", "ce"]]


def mce(errors: pd.DataFrame, baseline: str, by: Sequence[str] = (), relative: bool = False) -> pd.DataFrame:
    """Mean corruption error per model: columns ``[*by, model, mce]`` (``relative_mce`` when relative).

    The mean over corruptions of :func:`corruption_errors`; see the module docstring for the formula.
    """
    per_corruption = corruption_errors(errors, baseline, by, relative)
    column = "relative_mce" if relative else "mce"
    summary = per_corruption.groupby([*by, "model"], as_index=False)["ce"].mean()
    return summary.rename(columns={"ce": column})
