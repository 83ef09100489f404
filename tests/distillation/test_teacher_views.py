"""The teacher's labels of the student's training views, which tell where hard distillation can only repeat the
true labels: counted by the distillation loss with known answers, written to a distilled run's metrics and
history, carried through a kill and resume, and tabulated."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import yaml

from study.distillation.teacher_views import teacher_view_runs, teacher_view_table
from study.core.cli import main
from study.train.artifacts import read_checkpoint
from study.train.losses import DistillationLoss, LabelLoss
from study.train.resume import load_resume, save_resume
from tests.faults.test_faults import assert_same_run, ctrl_c_during_step, train_args, write_params

CLASSES = 4


class LabelsTeacher(torch.nn.Module):
    """A teacher whose argmax is whatever ``answer`` returns for the batch (the inputs are class indices here)."""

    def __init__(self, answer):
        super().__init__()
        self.answer = answer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.one_hot(self.answer(x), CLASSES).float()  # (B, classes)


def _loss(answer, kind: str = "hard") -> DistillationLoss:
    return DistillationLoss(LabelLoss(0.1), LabelsTeacher(answer), kind, alpha=0.1, tau=3.0)


def _score(loss_fn: DistillationLoss, labels: torch.Tensor, targets: torch.Tensor | None = None) -> None:
    """One batch whose inputs are its true labels; ``targets`` (soft, under mixing) default to the labels."""
    outputs = (torch.zeros(len(labels), CLASSES), torch.zeros(len(labels), CLASSES))
    loss_fn(labels, outputs, labels if targets is None else targets)


@pytest.mark.parametrize("kind", ["hard", "soft"])
def test_a_teacher_that_returns_the_true_label_never_disagrees(kind):
    loss_fn = _loss(lambda x: x, kind)
    for labels in (torch.tensor([0, 1, 2, 3, 3]), torch.tensor([2, 2, 0])):
        _score(loss_fn, labels)
    assert loss_fn.teacher_views() == (8, 0)


def test_a_constant_teacher_disagrees_on_exactly_the_other_classes():
    loss_fn = _loss(lambda x: torch.full_like(x, 2))
    _score(loss_fn, torch.tensor([0, 1, 2, 2, 3]))  # 3 labels are not 2
    _score(loss_fn, torch.tensor([2, 2, 2]))  # none
    _score(loss_fn, torch.tensor([1, 1]))  # 2
    assert loss_fn.teacher_views() == (10, 5)


def test_a_mixed_views_true_label_is_its_dominant_class():
    """Soft targets, as BatchAugment mixes them: ``(1 − w)·onehot(label) + w·onehot(partner)``; the larger weight
    names the class. A teacher that answers the image's own class disagrees exactly where the partner dominates."""
    own, partner = torch.tensor([0, 1, 2, 3]), torch.tensor([1, 1, 0, 0])
    weight = torch.tensor([0.3, 0.8, 0.6, 0.1])[:, None]  # the partner's share
    targets = (1 - weight) * F.one_hot(own, CLASSES) + weight * F.one_hot(partner, CLASSES)
    loss_fn = _loss(lambda x: x)
    _score(loss_fn, own, targets)  # rows 0 and 3: own class dominates; row 1: same class; row 2: partner's 0
    assert loss_fn.teacher_views() == (4, 1)


def test_counts_restore_and_move_with_the_loss():
    loss_fn = _loss(lambda x: torch.zeros_like(x))
    loss_fn.restore_teacher_views(100, 7)
    _score(loss_fn, torch.tensor([0, 1]))
    assert loss_fn.teacher_views() == (102, 8)
    assert "_views" not in loss_fn.state_dict()  # the resume state holds the counts, not the loss's state
    assert loss_fn.to(torch.float64).teacher_views() == (102, 8)  # an integer buffer keeps its dtype


# --- the resume state -----------------------------------------------------------------------------------


def _state(tmp_path, teacher_views):
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "resume.pt"
    save_resume(path, "fp", model, optimizer, 10, [], torch.tensor(1.0), 2, 3.0, teacher_views)
    return path, model, optimizer


def test_only_a_distilled_runs_resume_state_holds_the_counts(tmp_path):
    path, model, optimizer = _state(tmp_path, None)
    assert "teacher_views" not in read_checkpoint(path)  # every other run's state is as it was
    path, model, optimizer = _state(tmp_path, (640, 12))
    assert load_resume(path, "fp", model, optimizer, "cpu", teacher_views=True)["teacher_views"] == [640, 12]
    fresh = load_resume(tmp_path / "none.pt", "fp", model, optimizer, "cpu", teacher_views=True)
    assert fresh["teacher_views"] == [0, 0]


def test_a_distilled_resume_state_without_counts_is_discarded(tmp_path, capsys):
    """A distilled run's state without counts cannot be resumed: the counts would cover only the views after it."""
    path, model, optimizer = _state(tmp_path, None)
    state = load_resume(path, "fp", model, optimizer, "cpu", teacher_views=True)
    assert state["step"] == 0 and state["teacher_views"] == [0, 0]
    assert "missing or mistyped teacher_views" in capsys.readouterr().out


# --- whole runs: the smoke preset's digits (crop 1 px), 20 steps, checkpoints every 5 ---------------------


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("views")
    params = write_params(folder)
    assert main(["prepare", "--params", str(params), "--out", str(folder / "prepared")]) == 0
    assert main(["subsets", "--params", str(params), "--prepared", str(folder / "prepared"),
                 "--out", str(folder / "subsets")]) == 0
    teacher = folder / "resnet"
    assert main([str(arg) for arg in train_args(folder, teacher)]) == 0
    return folder


def _train(digits, out) -> int:
    return main([str(arg) for arg in train_args(digits, out, "deit", digits / "resnet" / "model.pt")])


@pytest.mark.slow
def test_a_distilled_run_reports_the_teacher_views_and_a_resumed_one_the_same(digits, tmp_path):
    reference = tmp_path / "reference"
    assert _train(digits, reference) == 0
    metrics = json.loads((reference / "metrics.json").read_text())
    assert metrics["teacher_views_seen"] == metrics["budget"]["images_seen"]  # every view, counted once
    assert metrics["teacher_view_disagreement"] == round(
        metrics["teacher_views_disagreeing"] / metrics["teacher_views_seen"], 6)
    history = pd.read_csv(reference / "history.csv")
    assert list(history.columns[-2:]) == ["teacher_view_disagreement", "train_seconds"]
    assert history["teacher_view_disagreement"].iloc[-1] == metrics["teacher_view_disagreement"]
    assert read_checkpoint(reference / "resume.pt")["teacher_views"] == [
        metrics["teacher_views_seen"], metrics["teacher_views_disagreeing"]]
    # The teacher's own run is not distilled: its files hold no counts.
    assert "teacher_view_disagreement" not in pd.read_csv(digits / "resnet" / "history.csv").columns
    assert not any(k.startswith("teacher_view") for k in json.loads((digits / "resnet" / "metrics.json").read_text()))

    # Stopped by Ctrl-C during step 13: the resume state is the one after step 10, counts included.
    killed = tmp_path / "killed"
    with ctrl_c_during_step(13):
        assert _train(digits, killed) == 130
    state = read_checkpoint(killed / "resume.pt")
    assert state["step"] == 10 and state["teacher_views"][0] == 10 * metrics["budget"]["batch_size"]
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(killed / "resume.pt", resumed / "resume.pt")
    assert _train(digits, resumed) == 0
    assert_same_run(resumed, reference)  # metrics (counts and share included), history and weights


# --- the table --------------------------------------------------------------------------------------------


def test_table_gives_mean_and_t_interval_over_seeds_per_model_and_fraction(tmp_path):
    rows = []
    shares = {("deit", 0.01): [0.1, 0.2, 0.3], ("deit", 0.05): [0.05], ("vit", 0.01): [None] * 3}
    for (model, fraction), values in shares.items():
        for seed, share in enumerate(values):
            folder = tmp_path / f"{model}_{fraction}_{seed}"
            folder.mkdir()
            metrics = {} if share is None else {"distill": DISTILL, "teacher_views_seen": 1000,
                                                "teacher_view_disagreement": share,
                                                "teacher_views_disagreeing": round(1000 * share)}
            (folder / "metrics.json").write_text(json.dumps(metrics))
            rows.append({"model": model, "fraction": fraction, "seed": seed, "train_images": 570, "folder": folder})
    per_run = teacher_view_runs(pd.DataFrame(rows))
    assert list(per_run["model"].unique()) == ["deit"] and len(per_run) == 4  # the plain ViT has no teacher
    table = teacher_view_table(per_run, 0.95).set_index(["model", "fraction"])
    row = table.loc[("deit", 0.01)]
    half = 4.302652729749462 * 0.1 / 3**0.5  # t(0.975, df 2) · sd 0.1 / sqrt(3)
    assert row["seeds"] == 3 and row["views"] == 3000 and row["disagreement_mean"] == pytest.approx(0.2)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((0.2 - half, 0.2 + half))
    single = table.loc[("deit", 0.05)]
    assert single["disagreement_mean"] == pytest.approx(0.05) and pd.isna(single["ci_low"])  # one seed: no interval
    assert teacher_view_table(teacher_view_runs(pd.DataFrame(rows[-3:])), 0.95).empty


# --- the distillation stage and the report's sentences -------------------------------------------------------

VIEWS_SEEN = 6400  # views each distilled run labelled
DISTILL = {"kind": "hard", "teacher": "resnet", "alpha": 0.5, "tau": 1.0, "kl_reduction": "batchmean"}
DISAGREEING = {0.5: [0, 0, 0], 1.0: [64, 128, 192]}  # per fraction, per seed: shares 0 and 0.01, 0.02, 0.03


def _study_runs(folder, counts: bool = True):
    """The smoke study's runs (resnet, vit and deit at 0.5 and 1.0, 3 seeds) with predictions; the distilled runs
    (deit) with the teacher's view counts of :data:`DISAGREEING`, or without them unless ``counts``."""
    from tests.budget_check.test_budget_check import _write_run

    rng = np.random.default_rng(0)
    for model in ("resnet", "vit", "deit"):
        for fraction, disagreeing in DISAGREEING.items():
            for seed, n in enumerate(disagreeing):
                run = folder / model / f"f{fraction}_s{seed}"
                _write_run(run, model, fraction, seed, 0.8, 101)
                np.save(run / "predictions.npy", rng.integers(0, 10, (3 if model == "deit" else 1, 40)))
                if model == "deit":
                    metrics = json.loads((run / "metrics.json").read_text()) | {"distill": DISTILL}
                    if counts:
                        metrics |= {"teacher_views_seen": VIEWS_SEEN, "teacher_views_disagreeing": n,
                                    "teacher_view_disagreement": round(n / VIEWS_SEEN, 6)}
                    (run / "metrics.json").write_text(json.dumps(metrics))
    return folder


def test_the_distillation_stage_tabulates_the_views(tmp_path):
    from study.core.config import parse_params
    import study.distillation.stage as stage
    from tests.budget_check.test_budget_check import SMOKE

    new = tmp_path / "tables"
    stage.run(parse_params(SMOKE), _study_runs(tmp_path / "runs"), new)
    table = pd.read_csv(new / "teacher_views.csv").set_index("fraction")
    assert list(table["model"]) == ["deit", "deit"] and (table["seeds"] == 3).all()
    assert (table["views"] == 3 * VIEWS_SEEN).all()
    half = 4.302652729749462 * 0.01 / 3**0.5  # t(0.975, df 2) · sd 0.01 / sqrt(3)
    assert table.loc[0.5, ["disagreement_mean", "ci_low", "ci_high"]].tolist() == [0.0, 0.0, 0.0]
    assert table.loc[1.0, ["disagreement_mean", "ci_low", "ci_high"]].tolist() == \
        pytest.approx([0.02, 0.02 - half, 0.02 + half])
    assert "\\toprule" in (new / "teacher_views.tex").read_text()


def test_a_distilled_run_without_the_view_counts_is_one_line(tmp_path, capsys):
    """The trainer writes the counts for every distilled run, so a distilled run without them was not trained by
    it: refused with one line naming the run, rather than tabulated as if it had no teacher."""
    from tests.budget_check.test_budget_check import SMOKE

    runs = _study_runs(tmp_path / "runs", counts=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(SMOKE))
    assert main(["distillation", "--params", str(tmp_path / "params.yaml"), "--runs", str(runs),
                 "--tables", str(tmp_path / "tables")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1
    assert "deit/f0.5_s0/metrics.json: a distilled run without the teacher's view counts" in error
    assert not (tmp_path / "tables").exists()


def test_the_report_words_the_views_and_where_hard_distillation_only_repeats_the_labels(tmp_path):
    from study.core.config import parse_params
    from study.distillation.report import teacher_view_sentences
    from study.outputs.tables import read_table
    import study.distillation.stage as stage
    from tests.budget_check.test_budget_check import SMOKE

    stage.run(parse_params(SMOKE), _study_runs(tmp_path / "runs", True), tmp_path / "tables")
    views = read_table(tmp_path / "tables" / "teacher_views.csv")
    shares, zero = teacher_view_sentences(views, hard=True)
    assert shares == ("Teacher's labels of deit's training views (as augmented) that differ from the true labels, "
                      "mean share over seeds: 0.00% at 50% of the data (CI 0.00 to 0.00%), 2.00% at 100% of the "
                      "data (CI -0.48 to 4.48%).")
    assert zero == ("At 50% of the data the teacher gave every one of deit's training views its true label (none of "
                    "19,200 views differed, all seeds): there its hard labels are the true labels, so hard "
                    "distillation cannot differ from training on the labels by construction, and a difference "
                    "between deit and a model trained on labels alone there is not the teacher's doing.")
    assert teacher_view_sentences(views, hard=False) == [shares]  # soft targets carry more than the argmax
    assert teacher_view_sentences(views.iloc[:0], hard=True) == [] and teacher_view_sentences(None, hard=True) == []


def test_where_every_view_kept_its_label_the_distillation_parts_open_by_saying_so():
    import pandas as pd
    from study.distillation.report import labels_twice

    views = pd.DataFrame({"model": ["deit", "deit"], "fraction": [0.01, 0.02], "views": [1000, 2000],
                          "disagreement_mean": [0.0, 0.0]})
    [sentence] = labels_twice(views, hard=True)
    assert sentence.startswith("This study's distillation trains deit on the labels twice") and "3,000" in sentence
    assert labels_twice(views.assign(disagreement_mean=[0.0, 0.01]), hard=True) == []  # the teacher disagreed once
    assert labels_twice(views, hard=False) == [] and labels_twice(None, hard=True) == []
