"""Commands around the pipeline that are not stages of it, one module each (``study <name>``, found by
:mod:`study.core.cli`): validating a parameters file, benchmarks and the GPU acceptance, the model listing, the lever
sweep, the Ray engine, checking a pretrained checkpoint. Their libraries live elsewhere (:mod:`benchmarks`, outside
the package, :mod:`study.levers`, :mod:`study.infra.engine`, :mod:`study.pretrained`); no DVC stage imports anything
here.
"""
