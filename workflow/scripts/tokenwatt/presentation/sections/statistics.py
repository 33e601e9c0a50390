"""Statistics: each tested measure's RM-ANOVA with its Friedman test and residual normality, the simple effects and
interaction contrasts of a factorial study, and the post-hoc paired t-tests (the statistics product)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ...analysis.apa import bounded, df, fmt_p, p_value, stat
from ...common.measures import MEASURES, TESTED, budget_label, fixed, label
from ...plan.design import condition_name, series_label
from ..html import Footnote, table
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    stats = inputs.product("stats")
    return render_template(
        "sections/statistics.html.j2",
        no_trials=stats.get("no_trials", False),
        tests=[t for dv in TESTED if (t := _test(stats, dv)) is not None],
        # said once, in words, in place of the tests: why the analysis left a measure untested
        not_tested=[(MEASURES[dv].label, why) for dv, why in (stats.get("not_tested") or {}).items()],
        simple=_simple_effects(stats),
        contrasts=_contrasts(stats),
        posthoc=_posthoc(stats),
    )


def _test(stats: dict[str, Any], dv: str) -> dict[str, Any] | None:
    """One measure's omnibus tests, or why it was not measured; None when it was neither."""
    a = stats["anova"].get(dv)
    if a is None:
        missing = stats.get("not_measured", {}).get(dv)
        return {"label": label(dv), "not_measured": missing} if missing is not None else None
    effects = [{"effect": e["effect"], "apa": e.get("apa", e.get("message"))} for e in a.get("effects", [])]
    return {
        "label": label(dv),
        "not_measured": None,
        "anova": a,
        "on": "on log values" if a.get("scale") == "log" else "on raw values",
        "dropped": ", ".join(map(str, a["dropped_trials"])),
        # one effect reads as the test; several (a factorial study) one line each
        "effects": effects if a["status"] != "ok" or len(effects) > 1 else [],
        "friedman": stats["friedman"].get(dv, {}).get("apa", "not tested"),
        "normality": (
            f"W = {bounded(a['residual_shapiro_w'])}, {fmt_p(a['residual_shapiro_p'])}" if a["status"] == "ok" else ""
        ),
    }


def _simple_effects(stats: dict[str, Any]) -> Markup | None:
    rows = [
        [
            label(r["dv"]),
            series_label(r["series"]),
            r["apa"] if "apa" in r else Footnote("not tested", r.get("message", "")),
            p_value(r["p_holm"]) if "p_holm" in r else "—",
        ]
        for r in stats.get("simple_effects", [])
    ]
    return table(["measure", "within", "RM-ANOVA", "p (Holm)"], rows, left=3) if rows else None


def _contrasts(stats: dict[str, Any]) -> Markup | None:
    rows = []
    for r in stats.get("interaction_contrasts", []):
        unit = r.get("change_unit", "")
        change = lambda v: f"{v:+.1f} %" if unit == "%" else fixed(v)  # noqa: E731
        tested = r.get("status", "ok") == "ok"
        rows.append(
            [
                label(r["dv"]),
                f"{series_label(r['series_a'])} vs {series_label(r['series_b'])}",
                r.get("scale", "raw"),
                change(r["change_a"]),
                change(r["change_b"]),
                stat(r["t"]) if tested else Footnote("not tested", r.get("message", "")),
                df(r["df"]),
                p_value(r["p_unc"]) if tested else "—",
                p_value(r["p_holm"]) if tested else "—",
            ]
        )
    header = ["measure", "levels", "scale", "change A", "change B", "t", "df", "p (uncorrected)", "p (Holm)"]
    return table(header, rows, left=3) if rows else None


def _posthoc(stats: dict[str, Any]) -> Markup | None:
    rows = [
        [
            label(r["dv"]),
            f"{condition_name(r.get('series', ''), r['budget_a'])} vs {budget_label(r['budget_b'])}",
            r.get("scale", "raw"),
            f"×{r['ratio']:.3f}" if r.get("ratio") is not None else fixed(r.get("difference")),
            r["t"],
            df(r["df"]),
            p_value(r["p_unc"]),
            p_value(r["p_holm"]),
            r["hedges_g"],
        ]
        for r in stats["posthoc"]
    ]
    header = ["measure", "pair", "scale", "effect", "t", "df", "p (uncorrected)", "p (Holm)", "Hedges' g"]
    return table(header, rows, left=3) if rows else None


def effect_sentence(e: dict[str, Any], measure: str, scale: str = "raw") -> str:
    """One effect of the ANOVA in plain words: the verdict in one sentence, its size in the next, with the scale
    the test used and the (sphericity-corrected where it applies) p."""
    on = f"log {measure}" if scale == "log" else measure
    if e.get("status") != "ok":
        return f"The {e['effect']} effect on {on} was not tested: {e.get('message', '')}."
    p = e.get("p_gg", e["p"])
    corrected = ", sphericity-corrected" if "p_gg" in e else ""
    if len(e["factors"]) == 1:
        what = f"The {e['effect']} effect on {on}"
    else:
        what = f"The {e['effect']} interaction on {on} (does the effect of one depend on the level of the other?)"
    verdict = "is statistically significant" if p < 0.05 else "is not statistically significant"
    return (
        f"{what} {verdict} ({fmt_p(p)}{corrected}). Its size is {_size_word(e['eta2_g'])} "
        f"(η²G = {bounded(e['eta2_g'])})."
    )


def _size_word(eta2_g: float) -> str:
    """Bakeman (2005)'s benchmarks for generalized η²: .02 small, .13 medium, .26 large."""
    return "large" if eta2_g >= 0.26 else "medium" if eta2_g >= 0.13 else "small" if eta2_g >= 0.02 else "negligible"
