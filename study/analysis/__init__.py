"""Analysis mathematics: representation similarity (CKA), attention rollout and distance, figures.

Every function here takes tensors, arrays or data frames, never models or config objects, so the maths
can be tested against independent computations and the figures re-plotted from their saved data.
"""
