"""The pretrained preset end to end, on tiny random-init checkpoints of every kind, and its bad input.

``pretrained/`` is a DVC project of its own; the test fills a copy of it with a Hugging Face ViT, a Hugging
Face DeiT with teacher, a timm ResNet as safetensors, a study run's model.pt and an ImageFolder of PNG/JPEG
images, then runs ``dvc repro`` there.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from PIL import Image

from tests.conftest import copy_project, dvc
from study.core.cli import main


def _image_folder(folder: Path, count: int) -> None:
    """ImageFolder layout, two classes, mixed sizes and formats (and one grey image)."""
    rng = np.random.default_rng(0)
    for i in range(count):
        side = (int(rng.integers(24, 64)), int(rng.integers(24, 64)))
        pixels = rng.integers(0, 256, (*side, 3), dtype=np.uint8)
        path = folder / f"class_{i % 2}" / f"img_{i:03d}.{'png' if i % 3 else 'jpg'}"
        path.parent.mkdir(parents=True, exist_ok=True)
        image = Image.fromarray(pixels).convert("L") if i == 5 else Image.fromarray(pixels)
        image.save(path)


def _checkpoints(folder: Path, transformers) -> dict:
    import timm
    from safetensors.torch import save_file

    from study.models import build_model
    from study.train.artifacts import save_trained
    from study.train.spec import RunSpec

    torch.manual_seed(0)
    common = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64, image_size=32,
                  patch_size=8, num_labels=5)
    transformers.ViTForImageClassification(transformers.ViTConfig(**common)).save_pretrained(folder / "vit")
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder / "vit")
    deit = transformers.DeiTForImageClassificationWithTeacher(transformers.DeiTConfig(**{**common, "patch_size": 4}))
    deit.save_pretrained(folder / "deit")
    transformers.DeiTImageProcessor(size={"height": 40, "width": 40},
                                    crop_size={"height": 32, "width": 32}).save_pretrained(folder / "deit")
    resnet = timm.create_model("test_resnet", pretrained=False)
    save_file({k: v.contiguous() for k, v in resnet.state_dict().items()}, folder / "resnet.safetensors")
    arch_args = {"patch_size": 4, "embed_dim": 24, "depth": 2, "num_heads": 2}
    run = build_model("vit", 10, 16, 3, **arch_args)
    save_trained(folder / "run" / "model.pt", run, RunSpec(
        model_name="vit", arch="vit", arch_args=arch_args, num_classes=10, image_size=16, in_chans=3, fraction=1.0,
        seed=0, params=0, forward_flops=0, mean=(0.5,) * 3, std=(0.25,) * 3))
    return {"vit": {"source": "hf:vit"}, "deit": {"source": "hf:deit"},
            "resnet": {"source": "timm:test_resnet", "weights": "resnet.safetensors"},
            "run": {"source": "study:run/model.pt"}}


@pytest.mark.slow
def test_pretrained_preset_end_to_end(tmp_path):
    transformers = pytest.importorskip("transformers")
    project = copy_project(tmp_path / "project")
    work = project / "pretrained"
    preset_path = project / "configs" / "pretrained.yaml"  # the stages read it in place (pretrained/dvc.yaml)
    preset = yaml.safe_load(preset_path.read_text())
    preset["models"] = _checkpoints(work / "checkpoints", transformers)
    preset["images"]["count"] = 30
    preset["analysis"].update(batch_size=12, show=2, device="cpu")  # 2 whole batches: 24 images
    preset_path.write_text(yaml.safe_dump(preset, sort_keys=False))
    _image_folder(work / "images", 31)

    dvc("repro", cwd=work)

    tables, figures = work / "reports" / "tables", work / "reports" / "figures"
    models = pd.read_csv(tables / "models.csv").set_index("model")
    assert list(models.index) == ["vit", "deit", "resnet", "run"]
    assert models.loc["resnet", "weights_sha256"] == hashlib.sha256(
        (work / "checkpoints" / "resnet.safetensors").read_bytes()).hexdigest()
    assert models["attention_maps"].tolist() == [True, True, False, True]
    assert len(pd.read_csv(tables / "images.csv")) == 24
    cka = pd.read_csv(tables / "cka.csv")
    self_similarity = cka[(cka["row_model"] == cka["col_model"]) & (cka["row_index"] == cka["col_index"])]
    assert np.allclose(self_similarity["cka"], 1.0, atol=1e-6)  # every layer with itself
    assert set(cka["panel"]) >= {"vit (within)", "vit vs resnet", "deit vs run"}
    heads = pd.read_csv(tables / "attention_heads.csv")
    assert heads.groupby("model").size().to_dict() == {"vit": 3 * 4, "deit": 3 * 4, "run": 2 * 2}
    assert ((heads["distance"] > 0) & (heads["distance"] < 32 * np.sqrt(2))).all()
    for name in ("cka_within", "cka_vit_vs_resnet", "cka_deit_vs_run", "attention_distance", "attention_maps_vit", "attention_maps_deit_last"):
        assert (figures / f"{name}.png").stat().st_size > 0 and (figures / f"{name}.csv").is_file()
    report = (work / "reports" / "report.md").read_text()
    assert "## CKA between every pair of layers" in report and "vit vs resnet: mean" in report
    assert models.loc["vit", "weights_sha256"] in report
    provenance = yaml.safe_load((work / "reports" / "provenance.json").read_text())
    assert provenance["images"]["count"] == 24
    assert "up to date" in dvc("status", cwd=work).stdout
    assert "pretrained" not in dvc("status", cwd=project, check=False).stdout  # the default study never sees it


def test_the_streaming_pass_does_not_depend_on_the_batch_size(tmp_path):
    """Attention statistics are running sums over images: batches of 4 and one batch of 8 give the same numbers;
    and a model's CKA with itself is 1 on the diagonal whatever the batching."""
    from study.models import build_model
    from study.pretrained.analysis import analyse
    from study.pretrained.images import Preprocessing, list_images
    from study.pretrained.load import Checkpoint

    _image_folder(tmp_path / "images", 8)
    torch.manual_seed(0)
    model = build_model("vit", 3, 16, 3, patch_size=4, embed_dim=16, depth=2, num_heads=2).eval()
    checkpoint = Checkpoint(model, Preprocessing(20, (16, 16), "bicubic", (0.5,) * 3, (0.25,) * 3, "test"),
                            "study", "study:vit", tmp_path / "model.pt")
    paths = list_images(tmp_path / "images", 8)
    runs = [analyse({"a": checkpoint, "b": checkpoint}, paths, size, "linear", 1.0, 2, torch.device("cpu"))
            for size in (4, 8)]
    assert runs[0].images == runs[1].images == 8
    pd.testing.assert_frame_equal(runs[0].heads, runs[1].heads, rtol=1e-10, atol=0)
    for run in runs:
        assert np.allclose(np.diag(run.block("a", "b")), 1.0, atol=1e-6)


def test_pretrained_commands_refuse_bad_input_in_one_line(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"models": {"a": {"source": "timm:resnet18"}, "b": {"source": "hf:b"}}}))
    args = ["--params", str(params), "--checkpoints", str(tmp_path), "--images", str(tmp_path / "images"),
            "--figures", str(tmp_path / "f"), "--tables", str(tmp_path / "t")]
    assert main(["pretrained-analysis", *args]) == 2
    assert "models.a: give weights exactly when the source is timm:<name>" in capsys.readouterr().err
    params.write_text(yaml.safe_dump({"models": {"a": {"source": "hf:a"}, "b": {"source": "hf:b"}}}))
    assert main(["pretrained-analysis", *args]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "no such image folder" in error and error.count("\n") == 1
    assert main(["pretrained-check", str(tmp_path / "nothing")]) == 2
    assert "not a Hugging Face save_pretrained folder" in capsys.readouterr().err
    assert not (tmp_path / "f").exists() and not (tmp_path / "t").exists()
