"""The CKA benchmark (benchmarks/cka.py) at toy size: its reference agrees with the study's minibatch CKA."""

from __future__ import annotations

from benchmarks.cka import run


def test_the_cka_benchmark_times_every_implementation_and_agrees_with_its_reference():
    """Every implementation timed; float64 minibatch CKA within 1e-6 of the per-pair reference, float32 Grams within
    1e-4 of float64."""
    report = run(images=24, batch=12, naive=True)
    assert set(report["seconds"]) == {"minibatch_f32_vit_vs_resnet", "minibatch_f64_vit_vs_resnet",
                                      "minibatch_f32_within_vit", "naive_f64_vit_vs_resnet"}
    assert all(seconds > 0 for seconds in report["seconds"].values())
    assert report["max_abs_diff_minibatch_f64_vs_naive"] < 1e-6
    assert report["max_abs_diff_f32_vs_f64_reference"] < 1e-4
