"""Statistics over training seeds, the one home of the rules that decide what a report may claim: t-intervals,
Holm-adjusted families, equivalence bounds and slopes over fractions (``intervals``)."""
