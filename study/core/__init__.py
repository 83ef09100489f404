"""The core every stage runs: the command line (``cli``), the typed parameters (``config``), what entry points share
(``entry``), errors, atomic file writes (``io``) and the process-wide switches (``runtime``)."""
