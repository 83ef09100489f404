"""Training: one loop (``loop.py``) for every model, fed by ``batches.py``, under ``budget.py``."""
