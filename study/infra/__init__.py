"""Infrastructure, apart from the research: the engine that runs DVC's stages side by side (``engine``, behind
``study run``) and the speed benchmarks and GPU acceptance (``bench``, behind ``study bench`` and
``study gpu-acceptance``). Nothing here decides a number in a report."""
