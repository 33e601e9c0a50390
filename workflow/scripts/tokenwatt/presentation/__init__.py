"""Figures, the HTML report and the terminal's trial lines."""
