"""A cell: the seeds of one model, fraction and recipe trained as one program (``step.py``)."""
