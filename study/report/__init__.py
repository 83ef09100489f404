"""Reports: tables (CSV + LaTeX), the generated ``report.md``, headline metrics and provenance."""
