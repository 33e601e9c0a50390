"""Repeated-measures statistics: the trial is the subject; the budget and every further factor of
the design (``levels_<factor>`` columns) are within-subject factors. Every test runs on the measure's
declared scale (``tokenwatt.common.measures``): log values for ratio-scale measures, raw values for additive ones.

The ANOVA is computed here from orthonormal contrasts, for any number of within factors: per effect
its sums of squares, F, generalized η² (Olejnik & Algina 2003: every subject and error term in the
denominator of an all-within design) and partial η², Greenhouse–Geisser ε with the corrected p and
Mauchly's W where it is defined. For one factor this is pingouin's and statsmodels' ANOVA (tests hold
it to both); statsmodels' AnovaRM has no sphericity correction, so it is the F check for more.
pingouin does the post-hoc and rank tests. Every guard case gives a message instead of a number
that means nothing.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
from scipy import linalg
from scipy import stats as sps

from ..common.measures import FLAT_BY_METER, TESTED, scale_of
from ..plan.design import factor_name, within_factors
from .apa import anova_text, friedman_text
from .frame import MIN_SUBJECTS, frame, sensitivity_set, subjects
from .headline import headline
from .products import Result
from .scale import transformed
from .tables import series_blocks


def _levels(trials: pl.DataFrame, factor: str) -> list[Any]:
    """A factor's levels: budgets in numeric order, the others as the design ordered them (the table's order)."""
    values = trials[factor].to_list()
    return sorted(set(values)) if factor == "budget" else list(dict.fromkeys(values))


def complete_block(
    trials: pl.DataFrame, dv: str, factors: list[str] | None = None
) -> tuple[np.ndarray, list[str], list[list[Any]], list[int], list[int]]:
    """Array trials × levels of each factor (factors with one level left out) of ``dv`` on its scale (log values
    for a log-scale measure), the factors and their levels, the complete trials and the trials dropped as
    incomplete (a missing or non-finite cell, or a value ≤ 0 on the log scale)."""
    if trials.height == 0 or dv not in trials.columns:
        return np.empty((0,)), [], [], [], []
    factors = [f for f in (factors or within_factors(trials.columns)) if trials[f].n_unique() > 1]
    levels = [_levels(trials, f) for f in factors]
    values: dict[int, dict[tuple, float]] = {}
    scaled = transformed(dv, trials[dv].cast(pl.Float64).fill_null(float("nan")).to_numpy())
    for row, value in zip(trials.select("trial", *factors).iter_rows(), scaled):
        values.setdefault(row[0], {})[tuple(row[1:])] = value
    cells = list(itertools.product(*levels))
    kept, dropped, rows = [], [], []
    for trial in sorted(values):
        got = [values[trial].get(c) for c in cells]
        if all(v is not None and np.isfinite(v) for v in got):
            kept.append(trial)
            rows.append(got)
        else:
            dropped.append(trial)
    y = np.array(rows, dtype=float).reshape(len(kept), *[len(lv) for lv in levels])
    return y, factors, levels, kept, dropped


def _contrasts(levels: int) -> np.ndarray:
    """Orthonormal contrasts of one factor (levels × levels-1), orthogonal to the grand mean."""
    return linalg.null_space(np.ones((1, levels)))


def _sphericity(z: np.ndarray) -> dict[str, Any]:
    """Greenhouse–Geisser ε and Mauchly's test from one effect's orthonormal contrast scores (subjects × df)."""
    n, d = z.shape
    cov = np.cov(z, rowvar=False, ddof=1) if d >= 2 else None
    if cov is None or np.trace(cov) <= 0:  # one contrast (sphericity holds trivially), or no variance at all
        return {}
    eps = float(np.trace(cov) ** 2 / (d * np.trace(cov @ cov)))
    out: dict[str, Any] = {"eps_gg": min(eps, 1.0)}
    if n - 1 >= d:  # Mauchly's W needs a full-rank covariance
        w = float(np.linalg.det(cov) / (np.trace(cov) / d) ** d)
        f = (2 * d**2 + d + 2) / (6 * d * (n - 1))
        chi2 = -(1 - f) * (n - 1) * np.log(max(w, 1e-300))
        out.update(mauchly_w=w, mauchly_p=float(sps.chi2.sf(chi2, d * (d + 1) / 2 - 1)))
    return out


def effect_name(factors: list[str]) -> str:
    return " × ".join(factor_name(f) for f in factors)


def anova_effects(y: np.ndarray, factors: list[str]) -> list[dict[str, Any]]:
    """Every main effect and interaction of a complete within-subject block ``y`` (subjects × levels…).

    Each effect's contrast scores per subject are the subject's cell values projected on the Kronecker
    product of orthonormal contrasts (the effect's factors) and normalised means (the others); its SS
    is n·|mean score|², its error SS the scores' spread around that mean, and GG ε and Mauchly's W
    come from their covariance.
    """
    n, shape = y.shape[0], y.shape[1:]
    flat = y.reshape(n, -1)
    grand = flat.mean()
    ss_subject = flat.shape[1] * float(((flat.mean(axis=1) - grand) ** 2).sum())
    effects = []
    for size in range(1, len(shape) + 1):
        for members in itertools.combinations(range(len(shape)), size):
            basis = np.ones((1, 1))
            for i, levels in enumerate(shape):
                part = _contrasts(levels) if i in members else np.full((levels, 1), levels**-0.5)
                basis = np.kron(basis, part)
            z = flat @ basis
            mean = z.mean(axis=0)
            df1, df2 = z.shape[1], z.shape[1] * (n - 1)
            effects.append(
                {
                    "effect": effect_name([factors[i] for i in members]),
                    "factors": [factors[i] for i in members],
                    "df1": df1,
                    "df2": df2,
                    "ss_effect": float(n * mean @ mean),
                    "ss_error": float(((z - mean) ** 2).sum()),
                    **_sphericity(z),
                }
            )
    error_total = sum(e["ss_error"] for e in effects)
    for e in effects:
        e["eta2_g"] = e["ss_effect"] / (e["ss_effect"] + ss_subject + error_total)
        e["eta2_p"] = e["ss_effect"] / (e["ss_effect"] + e["ss_error"]) if e["ss_effect"] + e["ss_error"] else 0.0
        if e["ss_error"] <= 1e-12 * max(e["ss_effect"] + e["ss_error"], 1e-300):
            e.update(status="not tested", message=f"{e['effect']}: no error variance across trials, so F is undefined")
            continue
        e["F"] = (e["ss_effect"] / e["df1"]) / (e["ss_error"] / e["df2"])
        e["p"] = float(sps.f.sf(e["F"], e["df1"], e["df2"]))
        e["status"] = "ok"
        if "eps_gg" in e:
            eps = e["eps_gg"]
            e.update(
                df1_gg=e["df1"] * eps,
                df2_gg=e["df2"] * eps,
                p_gg=float(sps.f.sf(e["F"], e["df1"] * eps, e["df2"] * eps)),
            )
            if "mauchly_p" in e:
                e["sphericity_ok"] = e["mauchly_p"] > 0.05
        e["apa"] = anova_text(e)
    return effects


def rm_anova(trials: pl.DataFrame, dv: str) -> dict[str, Any]:
    """RM-ANOVA of ``dv`` over every within factor with two or more levels: each effect (``effects``), the
    budget's main effect also at the top level (the study's question), or a message saying why not."""
    y, factors, levels, kept, dropped = complete_block(trials, dv)
    budgets = sorted(set(trials["budget"].to_list())) if trials.height else []
    out: dict[str, Any] = {
        "dv": dv,
        "scale": scale_of(dv),
        "factors": [factor_name(f) for f in factors],
        "budgets": budgets,
        "n_trials": len(kept),
        "dropped_trials": dropped,
    }
    if trials.height == 0 or dv not in trials.columns:
        return {**out, "status": "not tested", "message": f"{dv}: no trials to test"}
    if len(kept) < MIN_SUBJECTS:
        return {
            **out,
            "status": "not tested",
            "message": f"{dv}: only {len(kept)} complete trials; the analysis needs at least {MIN_SUBJECTS}",
        }
    effects = anova_effects(y, factors) if factors else []
    if "budget" not in factors:  # one budget: the other factors' effects are still tested
        return {
            **out,
            "effects": effects,
            "status": "not tested",
            "message": f"{dv}: only {len(budgets)} budget; an ANOVA needs at least 2 budgets to test one",
        }
    budget = effects[factors.index("budget")]
    if budget["status"] != "ok":
        return {
            **out,
            "effects": effects,
            "status": "not tested",
            "message": f"{dv}: no error variance across trials (every trial "
            "changes identically or all values are equal), so F is undefined",
        }
    flat = y.reshape(len(kept), -1)
    residuals = flat - flat.mean(axis=1, keepdims=True) - flat.mean(axis=0, keepdims=True) + flat.mean()
    sw = sps.shapiro(residuals.ravel())
    top = {k: v for k, v in budget.items() if k not in ("effect", "factors", "ss_effect", "ss_error")}
    return {
        **out,
        **top,
        "ss": {"effect": budget["ss_effect"], "error": budget["ss_error"]},
        "effects": effects,
        "residual_shapiro_w": float(sw.statistic),
        "residual_shapiro_p": float(sw.pvalue),
    }


def _long(y: np.ndarray, budgets: list[int], trials: list[int], dv: str) -> pd.DataFrame:
    """A one-factor block in long form for pingouin, budgets as integers (never strings)."""
    return pd.DataFrame(
        {"trial": np.repeat(trials, len(budgets)), "budget": np.tile(budgets, len(trials)), dv: y.ravel()}
    )


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p values, in the given order."""
    order = np.argsort(p)
    adjusted, running = np.empty(len(p)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def posthoc(trials: pl.DataFrame, dv: str) -> list[dict[str, Any]]:
    """Paired t-tests between every pair of budgets within each series, on the measure's scale, Holm-corrected
    within the series (one pair needs no correction), with Hedges' g; on the log scale with the geometric
    mean ratio B / A beside it."""
    import pingouin as pg

    rows = []
    for series, block in series_blocks(trials):
        y, factors, levels, kept, _ = complete_block(block, dv, ["budget"])
        if factors != ["budget"] or len(kept) < MIN_SUBJECTS:
            continue
        table = pg.pairwise_tests(
            data=_long(y, levels[0], kept, dv),
            dv=dv,
            within="budget",
            subject="trial",
            padjust="holm",
            effsize="hedges",
        )
        column = {b: i for i, b in enumerate(levels[0])}
        for _, r in table.iterrows():
            a, b = int(r["A"]), int(r["B"])
            diff = float((y[:, column[b]] - y[:, column[a]]).mean())
            rows.append(
                {
                    "dv": dv,
                    "scale": scale_of(dv),
                    "series": series,
                    "budget_a": a,
                    "budget_b": b,
                    "t": float(r["T"]),
                    "df": int(r["dof"]),
                    "p_unc": float(r["p_unc"]),
                    "p_holm": float(r.get("p_corr", r["p_unc"])),
                    "hedges_g": float(r["hedges"]),
                    "ratio": float(np.exp(diff)) if scale_of(dv) == "log" else None,
                    "difference": diff if scale_of(dv) == "raw" else None,
                }
            )
    return rows


def simple_effects(trials: pl.DataFrame, dv: str) -> list[dict[str, Any]]:
    """The budget's effect within each series (each level, or combination of levels, of the other factors):
    a one-way RM-ANOVA per series, its p values (GG-corrected where sphericity applies) Holm-corrected
    across the series. Empty in a one-factor study, where it is the main effect."""
    blocks = series_blocks(trials)
    if len(blocks) < 2:
        return []
    rows = []
    for series, block in blocks:
        a = rm_anova(block, dv)  # the other factors are constant within a series, so only the budget varies
        rows.append(
            {
                "dv": dv,
                "series": series,
                "status": a["status"],
                "n_trials": a["n_trials"],
                **(
                    {k: a.get(k) for k in ("F", "df1", "df2", "p", "p_gg", "eta2_g", "apa")}
                    if a["status"] == "ok"
                    else {"message": a["message"]}
                ),
            }
        )
    tested = [r for r in rows if r["status"] == "ok"]
    for r, p in zip(tested, holm([r["p_gg"] if r.get("p_gg") is not None else r["p"] for r in tested])):
        r["p_holm"] = p
    return rows


def interaction_contrasts(trials: pl.DataFrame, dv: str) -> list[dict[str, Any]]:
    """Does the budget's effect differ between two series? For every pair of series, a paired t-test of the
    per-trial change from the smallest to the largest budget in one series against the other, on the measure's
    scale (log ratios for a log-scale measure: "does PE fall by a different factor?"), Holm-corrected.

    A pair whose per-trial differences are all equal (relative to their size) has no t; it is kept, with a
    message, never dropped.
    """
    from scipy.stats import ttest_rel

    changes = {}
    for series, block in series_blocks(trials):
        y, factors, levels, kept, _ = complete_block(block, dv, ["budget"])
        if factors == ["budget"]:
            changes[series] = dict(zip(kept, y[:, -1] - y[:, 0]))
    log = scale_of(dv) == "log"
    shown = (lambda v: 100.0 * float(np.expm1(v))) if log else float  # a log change as a % change
    rows = []
    for a, b in itertools.combinations(changes, 2):
        common = sorted(set(changes[a]) & set(changes[b]))
        if len(common) < MIN_SUBJECTS:
            continue
        da, db = np.array([changes[a][t] for t in common]), np.array([changes[b][t] for t in common])
        row = {
            "dv": dv,
            "scale": scale_of(dv),
            "series_a": a,
            "series_b": b,
            "change_a": shown(da.mean()),
            "change_b": shown(db.mean()),
            "change_unit": "%" if log else "",
            "df": len(common) - 1,
            "ratio_of_changes": float(np.exp((da - db).mean())) if log else None,
        }
        d = da - db
        if d.std(ddof=1) <= 1e-12 * max(float(np.abs(np.concatenate([da, db])).max()), 1e-300):
            rows.append(
                {
                    **row,
                    "status": "not tested",
                    "message": "every trial's changes differ by the same amount, so t is undefined",
                }
            )
            continue
        t = ttest_rel(da, db)
        rows.append({**row, "status": "ok", "t": float(t.statistic), "p_unc": float(t.pvalue)})
    tested = [r for r in rows if r["status"] == "ok"]
    for r, p in zip(tested, holm([r["p_unc"] for r in tested])):
        r["p_holm"] = p
    return rows


def friedman(trials: pl.DataFrame, dv: str) -> dict[str, Any]:
    """Friedman test and Kendall's W of the budget: the rank-based check on the ANOVA (with further factors,
    on each trial's mean over them, the budget's main effect)."""
    import pingouin as pg

    y, factors, levels, kept, _ = complete_block(trials, dv)
    if "budget" not in factors or len(kept) < MIN_SUBJECTS:
        return {"dv": dv, "status": "not tested"}
    axis = factors.index("budget") + 1
    y = y.mean(axis=tuple(i for i in range(1, y.ndim) if i != axis)) if y.ndim > 2 else y
    long = _long(y, levels[factors.index("budget")], kept, dv)
    r = pg.friedman(data=long, dv=dv, within="budget", subject="trial").iloc[0]
    q, dof, p, w = float(r["Q"]), int(r["ddof1"]), float(r["p_unc"]), float(r["W"])
    return {"dv": dv, "status": "ok", "Q": q, "df": dof, "p": p, "kendall_w": w, "apa": friedman_text(q, dof, p, w)}


def analyse(trials: pl.DataFrame, measures: list[str]) -> dict[str, Any]:
    """Every test for every measure present; machine-readable."""
    present = [m for m in measures if m in trials.columns and trials[m].drop_nulls().len() > 0]
    absent = [m for m in measures if m not in present]
    return {
        "anova": {m: rm_anova(trials, m) for m in present},
        "posthoc": [row for m in present for row in posthoc(trials, m)],
        "simple_effects": [row for m in present for row in simple_effects(trials, m)],
        "interaction_contrasts": [row for m in present for row in interaction_contrasts(trials, m)],
        "friedman": {m: friedman(trials, m) for m in present},
        "not_measured": {m: f"{m}: no values (e.g. meter none records no energy)" for m in absent},
        # no trial finished (each diverged or failed): the report says so once, not once per measure
        "no_trials": trials.height == 0,
    }


def analyse_study(trials: pl.DataFrame, measures: list[str], exclude_flagged: bool) -> dict[str, Any]:
    """The primary analysis on the study's frame (``analysis.frame``) and, where a trial was flagged, the same
    ANOVAs on the other set of subjects (the sensitivity analysis), or a sentence saying why it cannot run:
    a subject leaves every cell or none, so too few remaining subjects mean no test, never a smaller design."""
    primary = frame(trials)
    flagged = (
        trials.filter(pl.col("quality") == "flagged").select("cell", "trial").rows()
        if "quality" in trials.columns
        else []
    )
    result = analyse(primary, measures)
    result["primary_trials"] = (
        "complete subjects without a flagged trial (quality.exclude_flagged)"
        if exclude_flagged
        else "every complete subject"
    )
    result["subjects"] = subjects(primary)
    result["flagged"] = [list(r) for r in flagged]
    name, other = sensitivity_set(trials, exclude_flagged)
    sensitivity: dict[str, Any] = {"trials": name, "subjects": subjects(other), "anova": {}}
    if flagged and subjects(other) < MIN_SUBJECTS:
        sensitivity["message"] = (
            f"No sensitivity analysis is possible: only {subjects(other)} subject(s) are {name}, and a "
            f"repeated-measures test needs at least {MIN_SUBJECTS}; a subject enters every cell or none."
        )
    elif flagged:
        sensitivity["anova"] = {m: rm_anova(other, m) for m in measures if m in result["anova"]}
    result["sensitivity"] = sensitivity
    return result


POSTHOC_COLUMNS = [
    "dv",
    "scale",
    "series",
    "budget_a",
    "budget_b",
    "t",
    "df",
    "p_unc",
    "p_holm",
    "hedges_g",
    "ratio",
    "difference",
]


def tested_measures(trials: pl.DataFrame) -> tuple[list[str], dict[str, str]]:
    """The measures to test (``TESTED``) and, apart, those that every trial's meter makes flat by construction
    (``FLAT_BY_METER``), each with why it is not tested. A study whose trials were metered by different kinds tests
    them all: its meters are in the tables for a reader to weigh."""
    # every trial's meter known and the same: a trial of unknown meter may have measured what the others could not
    meters = set(trials["meter"].to_list()) if "meter" in trials.columns else set()
    flat, why = FLAT_BY_METER.get(next(iter(meters)), ((), "")) if len(meters) == 1 else ((), "")
    return [m for m in TESTED if m not in flat], {m: why for m in TESTED if m in flat}


def stats_product(trials: pl.DataFrame, settings: bool) -> Result:
    """The statistics product (``settings``: quality.exclude_flagged): every tested measure's analysis as JSON, with the
    report's headline change (``headline``) and the measures left untested with why (``not_tested``), and as tables one
    row per measure and effect (anova) and one per post-hoc comparison (posthoc)."""
    tested, not_tested = tested_measures(trials)
    result = {**analyse_study(trials, tested, settings), "not_tested": not_tested, "headline": headline(trials)}
    # One row per measure and effect (the budget's main effect, the other factors', their interactions).
    flat = [
        {"dv": dv, **{k: v for k, v in e.items() if not isinstance(v, (dict, list))}}
        for dv, a in result["anova"].items()
        for e in a.get("effects", [])
    ]
    flat += [
        {k: v for k, v in a.items() if not isinstance(v, (dict, list))}
        for a in result["anova"].values()
        if "effects" not in a
    ]
    posthoc_rows = [[r[c] for c in POSTHOC_COLUMNS] for r in result["posthoc"]]
    return Result(
        data=result,
        tables={
            "anova": pl.DataFrame(flat, infer_schema_length=None),
            "posthoc": pl.DataFrame(posthoc_rows, schema=POSTHOC_COLUMNS, orient="row"),
        },
        summary="\n".join(f"{dv}: {a.get('apa', a.get('message'))}" for dv, a in result["anova"].items()),
    )
