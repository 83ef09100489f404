"""What every analysis writes through: tables as CSV and LaTeX (``tables``) and figures in one style, as PNG and PDF
(``figure_style``)."""
