"""Finished runs as the analyses see them: the table of their metrics (``table``, no model code) and their models
with the images they were trained on, normalised the same way (``load``)."""
