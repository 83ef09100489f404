"""How few seeds a resampling interval may rest on.

A bootstrap over seeds draws ``n`` seeds with replacement from ``n``: there are C(2n − 1, n) distinct resamples
(3 seeds give 10, 4 give 35, 8 give 6,435), so below a handful of seeds the percentile "interval" is a few repeated
values, not an interval (Efron & Tibshirani 1993, ch. 13, on the small-sample bootstrap). The study draws none
from fewer than :data:`MIN_BOOTSTRAP_SEEDS`.
"""

MIN_BOOTSTRAP_SEEDS = 8
