"""Infrastructure, apart from the research: the engine that runs DVC's stages side by side (``engine``, behind
``study run``). Nothing here decides a number in a report; the speed benchmarks and the GPU acceptance live outside
the package, in the checkout's ``benchmarks/``."""
