"""Statistics written the APA way: no leading zero where a value cannot exceed 1, three decimals for p,
whole degrees of freedom as integers, one verdict per sentence."""

from __future__ import annotations

from typing import Any


def p_value(p: float) -> str:
    """A p value for a table cell: ".042", "< .001"."""
    return "< .001" if p < 0.001 else f"{p:.3f}".removeprefix("0")


def bounded(x: float) -> str:
    """A statistic that cannot exceed 1 (η², ε, W): three decimals, no leading zero."""
    return f"{x:.3f}".removeprefix("0").replace("-0.", "-.")


def fmt_p(p: float) -> str:
    """A p value in a sentence: "p = .042", "p < .001"."""
    shown = p_value(p)
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


def df(x: float) -> str:
    """Degrees of freedom: "4" for a whole number, "3.27" for a corrected one."""
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.2f}"


def stat(x: float) -> str:
    """A test statistic (F, t, χ²): two decimals, three significant digits when smaller than .01."""
    return f"{x:.2f}" if abs(x) >= 0.01 or x == 0 else f"{x:.3g}"


def anova_text(r: dict[str, Any]) -> str:
    """One effect of an RM-ANOVA: F(df1, df2) = …, p, η²G, η²p, and the sphericity correction where it applies."""
    s = f"F({df(r['df1'])}, {df(r['df2'])}) = {stat(r['F'])}, {fmt_p(r['p'])}, η²G = {bounded(r['eta2_g'])}, η²p = {bounded(r['eta2_p'])}"
    if r.get("eps_gg") is not None:
        s += f"; GG ε = {bounded(r['eps_gg'])}, corrected F({df(r['df1_gg'])}, {df(r['df2_gg'])}), {fmt_p(r['p_gg'])}"
    if r.get("mauchly_w") is not None:
        s += f"; Mauchly W = {bounded(r['mauchly_w'])}, {fmt_p(r['mauchly_p'])}"
    return s


def friedman_text(q: float, dof: int, p: float, w: float) -> str:
    return f"χ²F({dof}) = {stat(q)}, {fmt_p(p)}, Kendall's W = {bounded(w)}"
