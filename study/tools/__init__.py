"""Commands around the pipeline that are not stages of it: validating a parameters file, sweeping recipe levers.

(Benchmarks and the GPU acceptance are in :mod:`study.bench`, the engine's ``study run`` in :mod:`study.engine`,
the pretrained checkpoints' commands in :mod:`study.pretrained`.)
"""
