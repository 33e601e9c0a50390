"""Repeated-measures statistics: trial is the subject, budget the within factor.

pingouin does the tests; generalized and partial η² are computed here from the sums of
squares (the reference study reported partial η² as generalized), and every guard case
gives a message instead of a number that means nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
from scipy import stats as sps


def complete_block(trials: pl.DataFrame, dv: str) -> tuple[np.ndarray, list[int], list[int], list[int]]:
    """Matrix trials × budgets of ``dv`` (budgets in numeric order) and the trials dropped as incomplete."""
    if trials.height == 0 or dv not in trials.columns:
        return np.empty((0, 0)), [], [], []
    budgets = sorted(int(b) for b in trials["budget"].unique())
    wide = trials.select("trial", "budget", dv).pivot(on="budget", index="trial", values=dv).sort("trial")
    cols = [str(b) for b in budgets]
    for c in cols:
        if c not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(c))
    complete = wide.drop_nulls(subset=cols).filter(pl.all_horizontal([pl.col(c).cast(pl.Float64).is_finite() for c in cols]))
    dropped = sorted(set(wide["trial"].to_list()) - set(complete["trial"].to_list()))
    return complete.select(cols).cast(pl.Float64).to_numpy(), budgets, complete["trial"].to_list(), dropped


def _long(y: np.ndarray, budgets: list[int], trials: list[int], dv: str) -> pd.DataFrame:
    """The complete block in long form for pingouin, budgets as integers (never strings)."""
    return pd.DataFrame({"trial": np.repeat(trials, len(budgets)), "budget": np.tile(budgets, len(trials)), dv: y.ravel()})


def sums_of_squares(y: np.ndarray) -> dict[str, float]:
    """One-way within design: SS for effect, subjects and error (effect × subject)."""
    n, k = y.shape
    grand = y.mean()
    ss_effect = n * ((y.mean(axis=0) - grand) ** 2).sum()
    ss_subject = k * ((y.mean(axis=1) - grand) ** 2).sum()
    ss_total = ((y - grand) ** 2).sum()
    return {"effect": float(ss_effect), "subject": float(ss_subject), "error": float(ss_total - ss_effect - ss_subject), "total": float(ss_total)}


def p_value(p: float) -> str:
    """A p value in APA style, for a table cell: ".042", "< .001" (no leading zero, three decimals)."""
    return "< .001" if p < 0.001 else f"{p:.3f}".removeprefix("0")


def bounded(x: float) -> str:
    """A statistic that cannot exceed 1 (η², ε, W) in APA style: three decimals, no leading zero."""
    return f"{x:.3f}".removeprefix("0")


def fmt_p(p: float) -> str:
    """A p value in APA style, in a sentence: "p = .042", "p < .001"."""
    shown = p_value(p)
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


def _num(x: float) -> str:
    return f"{x:.2f}" if abs(x) >= 0.01 or x == 0 else f"{x:.3g}"


def _apa(r: dict[str, Any]) -> str:
    s = f"F({r['df1']:g}, {r['df2']:g}) = {_num(r['F'])}, {fmt_p(r['p'])}, η²G = {bounded(r['eta2_g'])}, η²p = {bounded(r['eta2_p'])}"
    if r.get("eps_gg") is not None:
        s += (f"; GG ε = {bounded(r['eps_gg'])}, corrected F({r['df1_gg']:.2f}, {r['df2_gg']:.2f}), {fmt_p(r['p_gg'])}"
              f"; Mauchly W = {bounded(r['mauchly_w'])}, {fmt_p(r['mauchly_p'])}")
    return s


def rm_anova(trials: pl.DataFrame, dv: str) -> dict[str, Any]:
    """RM-ANOVA of ``dv`` with sphericity, GG correction, η²G and η²p, or a message saying why not."""
    import pingouin as pg

    y, budgets, kept, dropped = complete_block(trials, dv)
    out: dict[str, Any] = {"dv": dv, "budgets": budgets, "n_trials": len(kept), "dropped_trials": dropped}
    if not budgets:
        return {**out, "status": "not tested", "message": f"{dv}: no trials to test"}
    if len(budgets) < 2:
        return {**out, "status": "not tested", "message": f"{dv}: only {len(budgets)} budget; an ANOVA needs at least 2"}
    if len(kept) < 3:
        return {**out, "status": "not tested", "message": f"{dv}: only {len(kept)} complete trials; the analysis needs at least 3"}
    ss = sums_of_squares(y)
    if ss["error"] <= 1e-12 * max(ss["total"], 1e-300) or ss["total"] == 0:
        return {**out, "status": "not tested", "message": f"{dv}: no error variance across trials (every trial changes identically or all values are equal), so F is undefined"}
    long = _long(y, budgets, kept, dv)
    aov = pg.rm_anova(data=long, dv=dv, within="budget", subject="trial", detailed=True, correction=True).iloc[0]
    df1, df2 = len(budgets) - 1, (len(budgets) - 1) * (len(kept) - 1)
    res = {
        **out, "status": "ok", "F": float(aov["F"]), "df1": df1, "df2": df2, "p": float(aov["p_unc"]),
        "eta2_g": ss["effect"] / (ss["effect"] + ss["subject"] + ss["error"]),
        "eta2_p": ss["effect"] / (ss["effect"] + ss["error"]),
        "ss": ss,
    }
    if len(budgets) > 2:  # sphericity is trivially met with two levels
        eps = float(aov["eps"])
        res.update(eps_gg=eps, df1_gg=df1 * eps, df2_gg=df2 * eps, p_gg=float(aov["p_GG_corr"]),
                   mauchly_w=float(aov["W_spher"]), mauchly_p=float(aov["p_spher"]), sphericity_ok=bool(aov["sphericity"]))
    residuals = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    sw = sps.shapiro(residuals.ravel())
    res.update(residual_shapiro_w=float(sw.statistic), residual_shapiro_p=float(sw.pvalue))
    res["apa"] = _apa(res)
    return res


def posthoc(trials: pl.DataFrame, dv: str) -> list[dict[str, Any]]:
    """Paired t-tests between every pair of budgets, Holm-corrected (one pair needs no correction), with Hedges' g."""
    import pingouin as pg

    y, budgets, kept, _ = complete_block(trials, dv)
    if len(budgets) < 2 or len(kept) < 3:
        return []
    long = _long(y, budgets, kept, dv)
    table = pg.pairwise_tests(data=long, dv=dv, within="budget", subject="trial", padjust="holm", effsize="hedges")
    return [{"dv": dv, "budget_a": int(r["A"]), "budget_b": int(r["B"]), "t": float(r["T"]), "df": float(r["dof"]),
             "p_unc": float(r["p_unc"]), "p_holm": float(r.get("p_corr", r["p_unc"])), "hedges_g": float(r["hedges"])} for _, r in table.iterrows()]


def friedman(trials: pl.DataFrame, dv: str) -> dict[str, Any]:
    """Friedman test and Kendall's W: the rank-based check on the ANOVA."""
    import pingouin as pg

    y, budgets, kept, _ = complete_block(trials, dv)
    if len(budgets) < 2 or len(kept) < 3:
        return {"dv": dv, "status": "not tested"}
    long = _long(y, budgets, kept, dv)
    r = pg.friedman(data=long, dv=dv, within="budget", subject="trial").iloc[0]
    q, df, p, w = float(r["Q"]), int(r["ddof1"]), float(r["p_unc"]), float(r["W"])
    return {"dv": dv, "status": "ok", "Q": q, "df": df, "p": p, "kendall_w": w,
            "apa": f"χ²F({df}) = {_num(q)}, {fmt_p(p)}, Kendall's W = {bounded(w)}"}


def analyse(trials: pl.DataFrame, measures: list[str]) -> dict[str, Any]:
    """Every test for every measure present; machine-readable."""
    present = [m for m in measures if m in trials.columns and trials[m].drop_nulls().len() > 0]
    absent = [m for m in measures if m not in present]
    return {
        "anova": {m: rm_anova(trials, m) for m in present},
        "posthoc": [row for m in present for row in posthoc(trials, m)],
        "friedman": {m: friedman(trials, m) for m in present},
        "not_measured": {m: f"{m}: no values (e.g. meter none records no energy)" for m in absent},
    }


def without_flagged(trials: pl.DataFrame) -> pl.DataFrame:
    """The trials whose measurement was not flagged (a flagged subject then drops out of every condition)."""
    return trials.filter(pl.col("quality") == "ok") if "quality" in trials.columns else trials


def analyse_study(trials: pl.DataFrame, measures: list[str], exclude_flagged: bool) -> dict[str, Any]:
    """The primary analysis and, beside it, the same tests on the other trial set: every trial, or only
    unflagged ones, whichever the primary did not use (the sensitivity analysis)."""
    clean = without_flagged(trials)
    primary, other = (clean, trials) if exclude_flagged else (trials, clean)
    flagged = trials.filter(pl.col("quality") == "flagged").select("budget", "trial").rows() if "quality" in trials.columns else []
    result = analyse(primary, measures)
    result["primary_trials"] = "unflagged trials only" if exclude_flagged else "every trial"
    result["flagged"] = [list(r) for r in flagged]
    result["sensitivity"] = {
        "trials": "every trial" if exclude_flagged else "unflagged trials only",
        "anova": {m: rm_anova(other, m) for m in measures if m in result["anova"]} if flagged else {},
    }
    return result
