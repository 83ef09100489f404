"""How big each run of the GPU acceptance is, on a GPU and in the CPU smoke check: the one place its sizes live.

Why here and nowhere else: each step must fit one 10-minute device call (the device tool's limit per command), and
the smoke check must fit CI's CPU; a size set in the command or in a step's code could drift past either unseen. On
a GPU the sizes are those the H200 and H100 calls ran (docs/gpu/); ``--smoke`` (CI, CPU) runs every step at toy size
with ``configs/smoke.yaml``, so that the acceptance cannot rot before a GPU comes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchSize:
    batch_size: int
    steps: int  # per timed window
    warmup_steps: int  # untimed first: compilation, allocator and DataLoader start-up
    repeats: int  # timed windows; the median is reported
    workers: tuple[int, ...]  # DataLoader workers of the usual recipe
    images: int  # synthetic training images
    compile_model: bool
    peak_size: int | None  # matmul side for the peak; None: the device's default (benchmarks.measure.PEAK_SIZE)


@dataclass(frozen=True)
class AcceptanceSizes:
    """Every size of one acceptance run."""

    bench: BenchSize  # the bench and bench-presets steps; the profile step's batch, warm-up and compilation
    variants: BenchSize  # the steps step (the headline models at its batch)
    variants_default_batch: int | None  # the steps step's batch for the default study's models; None: budget.batch_size
    profile_steps: int  # steps under the profiler, after the benchmark's warm-up
    startup_repeats: int  # interleaved rounds of the startup step
    bench_presets: tuple[str, ...]  # the presets whose models bench-presets benches
    whole_default_study: bool  # default-study: every stage; else the first training stage and what it needs
    preset_seconds: float | None  # gpu-preset: stopped after at most this many seconds; None: --time-limit alone


# --time-limit's default: a study's `dvc repro` stopped within one 10-minute device call, a minute left for the rest.
TIME_LIMIT_SECONDS = 540.0

GPU = AcceptanceSizes(
    # The batch of the published CIFAR recipes' large-batch variants, 8 of the device's 16 cores loading.
    bench=BenchSize(batch_size=512, steps=50, warmup_steps=15, repeats=3, workers=(8,), images=16384,
                    compile_model=True, peak_size=None),
    # Fewer steps than the benchmark's, since the compiled variants' warm-up dominates the call.
    variants=BenchSize(batch_size=512, steps=30, warmup_steps=8, repeats=3, workers=(), images=16384,
                       compile_model=True, peak_size=None),
    variants_default_batch=None,
    profile_steps=20,  # enough for a steady picture, few enough for a small trace
    startup_repeats=3,
    # cifar100_gpu's models are cifar10_gpu's with a 100-class head.
    bench_presets=("fashionmnist_gpu", "cifar10_gpu"),
    whole_default_study=True,
    preset_seconds=None,
)

# CI on CPU: a toy batch; the peak still at the CPU's default size (a smaller matmul understates it, MFU > 1).
_SMOKE_BENCH = BenchSize(batch_size=2, steps=2, warmup_steps=1, repeats=1, workers=(0,), images=4,
                         compile_model=False, peak_size=None)
SMOKE = AcceptanceSizes(
    bench=_SMOKE_BENCH,
    variants=_SMOKE_BENCH,
    variants_default_batch=_SMOKE_BENCH.batch_size,
    profile_steps=2,
    startup_repeats=1,
    bench_presets=("smoke",),
    whole_default_study=False,
    preset_seconds=12.0,  # the smoke preset's 18 runs do not fit: the stop at the time limit is exercised
)


def acceptance_sizes(smoke: bool) -> AcceptanceSizes:
    """The sizes of a GPU run, or of the CPU smoke check."""
    return SMOKE if smoke else GPU
