"""The self-contained HTML report. Every string from config or data passes through ``esc``."""

from __future__ import annotations

import base64
import json
from typing import Any

import polars as pl

from ..analysis.apa import bounded, df, fmt_p, p_value, stat
from ..analysis.frame import energy_is_estimated, frame, frame_note
from ..analysis.quality import device_load
from ..analysis.scale import paired_change
from ..analysis.tables import series_blocks
from ..common.measures import (
    FAMILIES,
    SCALING_FIGURES,
    TESTED,
    budget_label,
    display_exponent,
    duration,
    fixed,
    label,
    power_of_ten,
    scale_of,
    si,
)
from ..common.provenance import utc
from ..plan.design import condition_name, series_label
from .html import Raw as _Raw
from .html import esc, num, table
from .meter_notes import meter_provenance, meter_warnings
from .scaling_section import scaling_html
from .selection_section import selection_html

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45;overflow-wrap:break-word}
h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
.wide{overflow-x:auto;max-width:100%} table{border-collapse:collapse;margin:.8em 0;font-size:.9em} th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}
.ci{color:#666;font-size:.9em} .chg{color:#555;font-size:.85em}
th{background:#f3f3f3} td.l,th.l{text-align:left;white-space:normal}
.warn{background:#fff3cd;border:1px solid #e0b100;padding:.7em 1em;border-radius:4px;margin:1em 0}
.bad{background:#f8d7da;border:1px solid #c0392b;padding:.7em 1em;border-radius:4px;margin:1em 0}
figure{margin:1.2em 0} figure img{max-width:100%;border:1px solid #eee} figcaption{font-size:.9em;color:#555}
code,pre{background:#f6f6f6;padding:.1em .3em;border-radius:3px} pre{padding:.8em;overflow-x:auto;font-size:.85em}
.apa{font-family:Georgia,serif} .summary{font-size:1.05em;background:#f4f8fb;border-left:4px solid #4a7fb0;padding:.7em 1em}
"""


def _change_text(r: dict[str, Any], unit: str, scale: int) -> str:
    """The paired change from the previous budget: a % change of the geometric mean on the log scale,
    a difference in the measure's unit on the raw scale."""
    if r["scale"] == "log":
        return f"{r['change']:+.1f} %"
    return f"{'+' if r['change'] >= 0 else '−'}{fixed(abs(r['change']), scale)}{(' ' + unit) if unit else ''}"


def _conditions_row(
    conditions: pl.DataFrame, measure: str, budgets: list[int], n_of: dict[int, Any], currency: str
) -> list[Any] | None:
    """One measure of one series: its label (with the row's power of ten) and a cell per budget; None if unmeasured."""
    got = {r["budget"]: r for r in conditions.filter(pl.col("measure") == measure).iter_rows(named=True)}
    if not got or all(r["mean"] is None for r in got.values()):
        return None
    scale = display_exponent([v for r in got.values() for v in (r["center"], r["ci95_low"], r["ci95_high"])])
    kind = "geometric mean" if scale_of(measure) == "log" else "mean"
    name = esc(label(measure, currency) + power_of_ten(scale)) + f'<br><span class="ci">{kind}</span>'
    unit = label(measure, currency).rpartition("(")[2].rstrip(")") if "(" in label(measure, currency) else ""
    cells = []
    for b in budgets:
        r = got.get(b)
        if r is None or r["center"] is None:
            why = f"{r['nonpositive']} value(s) ≤ 0: no geometric mean" if r is not None and r["nonpositive"] else ""
            cells.append(_Raw(f"—{f' <span class=ci>({esc(why)})</span>' if why else ''}"))
            continue
        cell = f'{fixed(r["center"], scale)} <span class="ci">[{fixed(r["ci95_low"], scale)}, {fixed(r["ci95_high"], scale)}]</span>'
        if r["n"] != n_of[b]:
            cell += f' <span class="ci">(n = {r["n"]})</span>'
        if r["change"] is not None:
            cell += (
                f'<br><span class="chg">{esc(_change_text(r, unit, scale))} from '
                f"{esc(budget_label(budgets[budgets.index(b) - 1]))}</span>"
            )
        cells.append(_Raw(cell))
    return [_Raw(name), *cells]


def _conditions_html(conditions: pl.DataFrame, currency: str = "") -> str:
    """Compact tables per family of measures: a row per measure, a column per budget, each cell the centre on the
    measure's scale (geometric mean, or mean) with its 95 % CI and the change from the previous budget, paired by
    trial; a row's power of ten in its label. With further factors, one set of tables per level of them (a series),
    so that a table is as wide as the budgets, whatever the design."""
    if conditions.height == 0:
        return "<p>No finished trials, so no conditions to summarise.</p>"
    budgets = sorted(conditions["budget"].unique().to_list())
    all_series = list(dict.fromkeys(conditions["series"].to_list()))
    parts = []
    for series in all_series:
        mine = conditions.filter(pl.col("series") == series)
        n_of = {b: mine.filter(pl.col("budget") == b)["n"].max() for b in budgets}
        header = ["measure", *[f"{budget_label(b)} (n = {n_of[b]})" for b in budgets]]
        if len(all_series) > 1:
            parts.append(f"<h3>{esc(series_label(series))}</h3>")
        for family, measures in FAMILIES.items():
            rows = [row for m in measures if (row := _conditions_row(mine, m, budgets, n_of, currency)) is not None]
            if rows:
                tag = "h4" if len(all_series) > 1 else "h3"
                parts.append(f"<{tag}>{esc(family)}</{tag}>" + table(header, rows))
    return (
        "<p>Each cell: the centre over trials [95 % t-interval], then the change from the previous budget, paired by "
        "trial. Ratio-scale measures (PE, its layers, power, energy, time, cost) are summarised on the log scale: the "
        "geometric mean, its interval back-transformed, and the change as the geometric mean of the per-trial ratios in "
        "%. Eval loss (and energy above idle, which can be ≤ 0) are summarised as means and mean differences. "
        "Where a row's label ends in ×10ⁿ, its numbers are in that unit.</p>" + "".join(parts)
    )


def _size_word(eta2_g: float) -> str:
    """Bakeman (2005)'s benchmarks for generalized η²: .02 small, .13 medium, .26 large."""
    return "large" if eta2_g >= 0.26 else "medium" if eta2_g >= 0.13 else "small" if eta2_g >= 0.02 else "negligible"


def _paired_change(trials: pl.DataFrame, measure: str, first: int, last: int) -> dict[str, Any] | None:
    """The per-trial change of ``measure`` from budget ``first`` to ``last`` on its scale (the same computation as
    the conditions table's changes), or None without two pairs."""
    if measure not in trials.columns:
        return None
    wide = trials.filter(pl.col("budget").is_in([first, last])).pivot(on="budget", index="trial", values=measure)
    if str(first) not in wide.columns or str(last) not in wide.columns:
        return None
    pairs = wide.drop_nulls([str(first), str(last)])
    got = paired_change(pairs[str(first)].to_numpy(), pairs[str(last)].to_numpy(), scale_of(measure))
    return got if got["change_n"] >= 2 and got["change_ci95_low"] is not None else None


def _cost_sentences(cost: dict[str, Any]) -> list[str]:
    """The study's CO2 and money in words; estimated energy keeps its label through to both."""
    label = " (ESTIMATED, from estimated energy)" if cost.get("is_estimate") else ""
    out = []
    if cost.get("total_kg_co2e") is not None:
        out.append(
            f"At {cost['carbon_intensity_g_per_kwh']:.0f} gCO2e/kWh ({cost['carbon_intensity_source']}) and PUE "
            f"{cost['pue']:g}, that is {si(cost['total_kg_co2e'] * 1000, 'g')} CO2e{label}."
        )
    if cost.get("total_total_cost") is not None:
        money = lambda x: si(x, cost["currency"]) if x is not None else "not priced"  # noqa: E731
        out.append(
            f"It cost {money(cost['total_total_cost'])} (electricity {money(cost['total_electricity_cost'])}, "
            f"device-hours {money(cost['total_device_cost'])}){label}."
        )
    elif cost.get("total_device_cost") is not None:
        out.append(
            f"Its device-hours cost {si(cost['total_device_cost'], cost['currency'])}; with its energy unmeasured, the "
            "electricity is not priced, so there is no total."
        )
    totals = ("total_kg_co2e", "total_total_cost", "total_device_cost")
    if cost and all(cost.get(k) is None for k in totals):
        out.append("No CO2 or money figures: set cost.carbon_intensity and the prices in the config.")
    if cost.get("eval_energy_j") is not None:
        beside = [f"{si(cost['eval_energy_j'], 'J')}"]
        if cost.get("eval_kg_co2e") is not None:
            beside.append(f"{si(cost['eval_kg_co2e'] * 1000, 'g')} CO2e")
        if cost.get("eval_electricity_cost") is not None:
            beside.append(si(cost["eval_electricity_cost"], cost["currency"]))
        out.append(
            f"The evaluations used {', '.join(beside)} more{label}, metered in their own windows and left out of "
            "every figure above."
        )

    return out


def _summary_html(
    trials: pl.DataFrame,
    stats: dict[str, Any],
    missing: list[str],
    estimated: bool,
    n_flagged: int,
    profile_check: list[dict[str, Any]],
    cost: dict[str, Any],
    in_joules: str = "",
) -> str:
    """The answer in plain words: what changed with the budget (on the analysis frame), how sure we are, what the
    whole study cost (every trial), what to beware of."""
    if trials.height == 0:
        diverged = [m for m in missing if "diverged" in m]
        if missing and len(diverged) == len(missing):
            return (
                "<p><b>Summary.</b> Every trial diverged (its training loss became non-finite), so there is no result to "
                "summarise; the measurements are not at fault. Lower <code>train.lr</code> (or use <code>train.precision: "
                "fp32</code>) and run the study again.</p>"
            )
        return "<p><b>Summary.</b> No trial has finished, so there is nothing to summarise yet.</p>"
    analysed = frame(trials)
    budgets = sorted(trials["budget"].unique().to_list())
    said = []
    if not analysed.height:
        said.append(
            "No subject finished every cell of the design (see Conditions), so no change between budgets is computed."
        )
    elif len(budgets) >= 2:
        first, last = budgets[0], budgets[-1]
        for series, block in series_blocks(analysed):
            where = f" ({series_label(series)})" if series else ""
            for measure, name in (("pe", "PE"), ("perplexity", "Perplexity")):
                got = _paired_change(block, measure, first, last)
                if got:
                    said.append(
                        f"{name}{where} changed by {got['change']:+.1f} % from {budget_label(first)} to "
                        f"{budget_label(last)} tokens (geometric mean ratio over {got['change_n']} trials, 95 % CI "
                        f"{got['change_ci95_low']:+.1f} to {got['change_ci95_high']:+.1f} %)."
                    )
    else:
        said.append(
            f"With one budget ({budget_label(budgets[0])}) the study describes it but cannot test a budget effect."
        )
    if in_joules:
        said.append(in_joules)
    a = stats["anova"].get("pe", {})
    if a.get("effects"):
        said.extend(effect_sentence(e, "PE", a.get("scale", "raw")) for e in a["effects"])
    elif a and len(budgets) >= 2:
        said.append(f"PE was not tested: {a.get('message', 'no values')}.")
    if "energy_j" in trials.columns and trials.height and trials["energy_j"].null_count() == 0:
        energy = float(trials["energy_j"].sum())  # every trial's, or no total (as in cost.json)
        said.append(
            f"Training used {si(energy / 3600, 'Wh')} ({si(energy, 'J')}{', ESTIMATED' if estimated else ''}) "
            f"over {duration(float(trials['train_s'].sum()))} of training in {trials.height} trials."
        )
        said.extend(_cost_sentences(cost))
    elif "energy_j" in trials.columns and trials["energy_j"].drop_nulls().len():
        said.append(
            f"Energy was measured for {trials['energy_j'].drop_nulls().len()} of {trials.height} trials, so there is "
            "no study total."
        )
    else:
        said.append("Energy was not measured.")
    caveats = []
    if estimated:
        caveats.append("energy and power are estimated from CPU utilisation, not measured")
    if n_flagged:
        caveats.append(f"{n_flagged} trial(s) were flagged as possibly disturbed measurements")
    if missing:
        caveats.append(f"{len(missing)} trial(s) are missing or failed")
    if any(v.get("status") == "disturbed" for v in profile_check):
        caveats.append("a device profile looks disturbed, so PE's level (not its changes) is uncertain")
    said.append(
        "Caveats: " + "; ".join(caveats) + "." if caveats else "No caveats: every trial finished, none was flagged."
    )
    return f'<p class="summary"><b>Summary.</b> {esc(" ".join(said))}</p>'


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


def _stats_html(stats: dict[str, Any]) -> str:
    parts = []
    for dv in TESTED:
        a = stats["anova"].get(dv)
        if a is None:
            if dv in stats.get("not_measured", {}):
                parts.append(f"<p><b>{esc(label(dv))}</b>: {esc(stats['not_measured'][dv])}</p>")
            continue
        on = "on log values" if a.get("scale") == "log" else "on raw values"
        head = f"<p><b>{esc(label(dv))}</b> — RM-ANOVA {on} (n = {esc(a['n_trials'])} trials"
        if a["dropped_trials"]:
            head += f"; dropped as incomplete: trials {esc(', '.join(map(str, a['dropped_trials'])))}"
        head += "): "
        if a["status"] != "ok":
            others = "".join(
                f'<br>{esc(e["effect"])}: <span class="apa">{esc(e.get("apa", e.get("message")))}</span>'
                for e in a.get("effects", [])
            )
            parts.append(head + f'<span class="bad">{esc(a["message"])}</span>{others}</p>')
            continue
        fr = stats["friedman"].get(dv, {})
        effects = a.get("effects", [])
        shown = (
            f'<span class="apa">{esc(a["apa"])}</span>'
            if len(effects) <= 1
            else "".join(
                f'<br>{esc(e["effect"])}: <span class="apa">{esc(e.get("apa", e.get("message")))}</span>'
                for e in effects
            )
        )
        parts.append(
            head + f'{shown}. Friedman (budget): <span class="apa">{esc(fr.get("apa", "not tested"))}</span>. '
            f"Residual normality (Shapiro–Wilk): W = {bounded(a['residual_shapiro_w'])}, {fmt_p(a['residual_shapiro_p'])}.</p>"
        )
    simple = [
        [
            _Raw(esc(label(r["dv"]))),
            _Raw(esc(series_label(r["series"]))),
            _Raw(esc(r.get("apa", r.get("message")))),
            _Raw(p_value(r["p_holm"]) if "p_holm" in r else "—"),
        ]
        for r in stats.get("simple_effects", [])
    ]
    if simple:
        parts.append(
            "<h3>Simple effects of the budget within each level of the other factors</h3>"
            "<p>A one-way RM-ANOVA of the budget per level; p (GG-corrected where it applies) Holm-corrected across levels.</p>"
            + table(["measure", "within", "RM-ANOVA", "p (Holm)"], simple, left=3)
        )
    contrasts = []
    for r in stats.get("interaction_contrasts", []):
        unit = r.get("change_unit", "")
        change = lambda v: _Raw(f"{v:+.1f} %" if unit == "%" else esc(fixed(v)))  # noqa: E731
        tested = r.get("status", "ok") == "ok"
        contrasts.append(
            [
                _Raw(esc(label(r["dv"]))),
                _Raw(f"{esc(series_label(r['series_a']))} vs {esc(series_label(r['series_b']))}"),
                _Raw(esc(r.get("scale", "raw"))),
                change(r["change_a"]),
                change(r["change_b"]),
                _Raw(stat(r["t"])) if tested else _Raw(esc(r.get("message", ""))),
                _Raw(df(r["df"])),
                _Raw(p_value(r["p_unc"]) if tested else "—"),
                _Raw(p_value(r["p_holm"]) if tested else "—"),
            ]
        )
    if contrasts:
        parts.append(
            "<h3>Interaction contrasts</h3><p>Does the change from the smallest to the largest budget differ between two "
            "levels? A paired t-test of the per-trial changes on the measure's scale (log ratios for a ratio-scale "
            "measure, so the question is whether it changed by a different factor, shown as % changes of the geometric "
            "mean), Holm-corrected.</p>"
            + table(
                ["measure", "levels", "scale", "change A", "change B", "t", "df", "p (uncorrected)", "p (Holm)"],
                contrasts,
                left=3,
            )
        )
    post = [
        [
            _Raw(esc(label(r["dv"]))),
            _Raw(esc(condition_name(r.get("series", ""), r["budget_a"])) + " vs " + esc(budget_label(r["budget_b"]))),
            _Raw(esc(r.get("scale", "raw"))),
            _Raw(f"×{r['ratio']:.3f}" if r.get("ratio") is not None else esc(fixed(r.get("difference")))),
            r["t"],
            _Raw(df(r["df"])),
            _Raw(p_value(r["p_unc"])),
            _Raw(p_value(r["p_holm"])),
            r["hedges_g"],
        ]
        for r in stats["posthoc"]
    ]
    if post:
        parts.append(
            "<h3>Post-hoc paired t-tests (Holm-corrected)</h3><p>On the measure's scale: for a log-scale measure the "
            "effect is the geometric mean ratio B / A; for a raw one the mean difference B − A.</p>"
            + table(
                ["measure", "pair", "scale", "effect", "t", "df", "p (uncorrected)", "p (Holm)", "Hedges' g"],
                post,
                left=3,
            )
        )
    return "\n".join(parts)


def _reference_html(
    reference: dict[str, Any], conditions: pl.DataFrame, changes: pl.DataFrame, stats: dict[str, Any]
) -> str:
    """Published figures beside ours, matched by budget rank (1st, 2nd, 3rd budget); the reference study is
    one-way, so a factorial study is compared in words only."""
    if conditions.height and conditions["series"].n_unique() > 1:
        return (
            "<p>The reference study varied the budget alone; this study crosses it with further factors, so its "
            "conditions are not matched to the reference's one by one. The reference's figures are in "
            "<code>resources/reference_study.json</code>; run <code>config/paper.yaml</code> to reproduce them.</p>"
        )
    ours = {m: conditions.filter(pl.col("measure") == m).sort("budget") for m in ("pe", "power_rms_w", "train_s")}
    budgets = ours["pe"]["budget"].to_list()
    pe_exp = display_exponent(ours["pe"]["mean"].drop_nulls().to_list() if ours["pe"].height else [])
    rows = []
    for i, ref in enumerate(reference["conditions"]):
        got = lambda m, col="mean": ours[m][col][i] if i < len(budgets) and ours[m].height > i else None  # noqa: E731
        ob = budget_label(budgets[i]) if i < len(budgets) else "—"
        rows.append(
            [
                _Raw(f"{esc(budget_label(ref['budget']))} / {esc(ob)}"),
                _Raw(f"{ref['pe_mean']} ({ref['pe_sd']})"),
                _Raw(f"{fixed(got('pe'), pe_exp)} ({fixed(got('pe', 'sd'), pe_exp)})"),
                ref["power_rms_w"],
                got("power_rms_w"),
                ref["train_min"],
                None if got("train_s") is None else got("train_s") / 60,
            ]
        )
    cond = table(
        [
            "budget (reference / ours)",
            "PE mean (sd), reference",
            f"PE mean (sd), ours{power_of_ten(pe_exp)}",
            "RMS power W, reference",
            "RMS power W, ours",
            "time min, reference",
            "time min, ours",
        ],
        rows,
    )
    ch_rows = []
    ours_ch = changes.sort("from_budget").to_dicts()
    for i, ref in enumerate(reference["changes"]):
        o = ours_ch[i] if i < len(ours_ch) else {}
        ch_rows.append(
            [
                _Raw(
                    f"{esc(budget_label(ref['from_budget']))}→{esc(budget_label(ref['to_budget']))}"
                    + (f" / {esc(budget_label(o['from_budget']))}→{esc(budget_label(o['to_budget']))}" if o else "")
                ),
                ref["perplexity_reduction_pct"],
                o.get("perplexity_reduction_pct"),
                ref["pe_drop_pct"],
                o.get("pe_drop_pct"),
                ref["power_change_pct"],
                o.get("power_change_pct"),
            ]
        )
    ch = table(
        [
            "step (reference / ours)",
            "perplexity reduction %, ref. (of the means)",
            "ours (paired, geometric)",
            "PE drop %, ref.",
            "ours",
            "power change %, ref.",
            "ours",
        ],
        ch_rows,
    )
    a, ra = stats["anova"].get("pe", {}), reference["anova"]
    ours_aov = esc(a.get("apa", a.get("message", "not tested")))
    return (
        f"<p>Reference hardware: {esc(reference['hardware'])}; power: {esc(reference['power_sampling'])}. "
        "Our budgets are matched to the reference's by rank; they are equal only when running <code>config/paper.yaml</code>. "
        "PE depends on K and TT_scale (unstated in the reference), so compare its changes between budgets, not its level.</p>"
        + cond
        + ch
        + f"<p>RM-ANOVA on PE — reference: F({ra['df1']}, {ra['df2']}) = {ra['F']}, p {esc(ra['p'])}, η²G reported {ra['eta2_g_reported']} "
        f'({esc(ra["note"].rstrip("."))}). Ours: <span class="apa">{ours_aov}</span>.</p>'
    )


def _centre_ci(r: dict[str, Any], prefix: str, unit: str = "J", factor: float = 1.0, suffix: str = "") -> str:
    """A geometric mean and its interval (``{prefix}_geomean{suffix}``, ``_ci95_low``, ``_ci95_high``) with an SI
    prefix, e.g. energies (``energy``, suffix ``_j``) and the CO2e and money to a target."""
    got = r.get(f"{prefix}_geomean{suffix}")
    if got is None:
        return "—"
    low, high = r.get(f"{prefix}_ci95_low{suffix}"), r.get(f"{prefix}_ci95_high{suffix}")
    return si(got * factor, unit) + (
        f' <span class="ci">[{si(low * factor, unit)}, {si(high * factor, unit)}]</span>' if low is not None else ""
    )


def _reached_text(r: dict[str, Any]) -> str:
    """How many runs reached the target, and how many of them only at or before their first eval point."""
    bound = r.get("n_at_first_point") or 0
    return f"{r['n_reached']} of {r['n']} trials reached it" + (
        f", {bound} of them at or before their first eval point, so the mean is an upper bound" if bound else ""
    )


def target_sentence(curves: dict[str, Any]) -> str:
    """The study's question answered in joules: what each budget needed to reach the first target."""
    rows = curves.get("energy_to_target") or []
    if not rows:
        return ""
    first = rows[0]["target"]
    mine = [r for r in rows if r["target"] == first]
    if not any(r["n_reached"] for r in mine):
        return f"No trial reached {first}."
    parts = []
    for r in mine:
        name = condition_name(r["series"], r["budget"])
        if not r["n_reached"]:
            continue
        if r["energy_geomean_j"] is None:
            parts.append(f"{name}: {_reached_text(r)}, its energy not measured")
        elif r["energy_ci95_low_j"] is not None:
            parts.append(
                f"{name} needed {si(r['energy_geomean_j'], 'J')} (geometric mean, 95 % CI "
                f"{si(r['energy_ci95_low_j'], 'J')} to {si(r['energy_ci95_high_j'], 'J')}; {_reached_text(r)})"
            )
        else:
            parts.append(f"{name} needed {si(r['energy_geomean_j'], 'J')} ({_reached_text(r)})")
    never = [condition_name(r["series"], r["budget"]) for r in mine if not r["n_reached"]]
    text = f"To reach {first} (training energy, evaluation excluded), " + "; ".join(parts) + "."
    return text + (f" No trial of {', '.join(never)} reached it." if never else "")


def _curves_html(curves: dict[str, Any]) -> str:
    """Energy to quality: energy to each target with its test, quality at equal energy, where the marginal gain
    falls, the trajectories, and each stopping rule against the full runs."""
    if curves.get("status") != "ok":
        return f"<p>{esc(curves.get('message', 'No eval curves.'))}</p>"
    parts = [
        f"<p>Every trial was evaluated at {curves['points_per_trial']} point(s) along its tokens, each evaluation in its "
        "own metered window (its energy is beside the training energy, never in it). Targets: "
        f"{esc(curves['targets_source'])}. A trial that never reached a target is <i>censored</i>: counted, never dropped "
        "or imputed. A trial already below a target at its first eval point reached it at or before that point: it "
        "enters the summaries with that point's energy, an upper bound, counted as such, and stays out of the tests "
        "between budgets.</p>"
    ]
    if curves.get("message"):
        parts.append(f"<p>{esc(curves['message'])}</p>")
    reach = curves["energy_to_target"]
    currency = curves.get("currency", "")
    extra = [
        (c, name, unit, factor)
        for c, name, unit, factor in (
            ("kg_co2e", "CO2e", "g", 1000.0),
            ("total_cost", f"cost ({currency})" if currency else "cost", currency, 1.0),
        )
        if any(r.get(f"{c}_geomean") is not None for r in reach)
    ]
    rows = [
        [
            _Raw(esc(r["target"])),
            _Raw(esc(condition_name(r["series"], r["budget"]))),
            _Raw(
                f"{r['n_reached']} of {r['n']}"
                + (
                    f' <span class="ci">({r["n_at_first_point"]} at the first point)</span>'
                    if r.get("n_at_first_point")
                    else ""
                )
            ),
            _Raw(si(r["energy_median_j"], "J")),
            _Raw(_centre_ci(r, "energy", suffix="_j")),
            *[_Raw(_centre_ci(r, c, unit, factor)) for c, _, unit, factor in extra],
            r["n_censored"],
        ]
        for r in reach
    ]
    estimate = (
        " CO2e and money are ESTIMATED, from estimated energy." if extra and curves.get("cost_is_estimate") else ""
    )
    parts.append(
        "<h3>Training energy to reach each target</h3>"
        + (
            f"<p>Beside the joules, what they emitted and cost (geometric means [95 % CI]; cost.*: the energy × PUE "
            f"at the configured carbon intensity and prices, plus the device-hours of the training time to the target).{estimate}</p>"
            if extra
            else ""
        )
        + table(
            [
                "target",
                "condition",
                "reached",
                "median",
                "geometric mean [95 % CI]",
                *[e[1] for e in extra],
                "censored",
            ],
            rows,
            left=2,
        )
    )
    for t in curves["energy_to_target_tests"]:
        a = t.get("anova") or {}
        parts.append(
            f"<p>{esc(t['target'])}{' (' + esc(series_label(t['series'])) + ')' if t['series'] else ''}: "
            f'{esc(t["message"])} RM-ANOVA on log energy: <span class="apa">{esc(a.get("apa", a.get("message", "not tested")))}'
            "</span>.</p>"
        )
    equal = curves.get("quality_at_energy") or []
    if equal:
        cells = list(dict.fromkeys((r["series"], r["budget"]) for r in equal))
        energies = list(dict.fromkeys(r["energy_j"] for r in equal))
        got = {(r["series"], r["budget"], r["energy_j"]): r for r in equal}
        body = [
            [
                _Raw(si(e, "J")),
                *[
                    _Raw(
                        f"{fixed(got[(s_, b, e)]['loss_mean'])}"
                        if got.get((s_, b, e), {}).get("loss_mean") is not None
                        else "—"
                    )
                    for s_, b in cells
                ],
            ]
            for e in energies
        ]
        parts.append(
            "<h3>Quality at equal energy</h3><p>Each condition's mean eval loss (nats) at the same cumulative training "
            "energy, interpolated on log energy within each trial's own range (never extrapolated): at equal cost, "
            "does a smaller budget seen for more epochs or a larger one seen fewer times learn more?</p>"
            + table(["training energy", *[condition_name(s_, b) for s_, b in cells]], body)
        )
    pairs = [r for r in curves.get("quality_at_energy_comparison") or [] if r.get("ppl_change_pct") is not None]
    if pairs:
        body = [
            [
                _Raw(si(r["energy_j"], "J")),
                _Raw(
                    esc(f"{condition_name(r['series'], r['budget_b'])} vs {condition_name(r['series'], r['budget_a'])}")
                ),
                r["n"],
                _Raw(
                    f"{r['ppl_change_pct']:+.1f} %"
                    + (
                        f' <span class="ci">[{r["ppl_change_ci95_low"]:+.1f}, {r["ppl_change_ci95_high"]:+.1f}]</span>'
                        if r.get("ppl_change_ci95_low") is not None
                        else ""
                    )
                ),
            ]
            for r in pairs
        ]
        parts.append(
            "<p>The same, paired by trial: the change in perplexity of the larger budget against the smaller at "
            "equal training energy, on the trials whose curves both cover that energy (negative: the larger budget, "
            "seen fewer times, is better at that cost). 95 % t-intervals of the mean log-perplexity difference, "
            "back-transformed; one interval per energy, not a corrected test.</p>"
            + table(["training energy", "comparison", "trials", "perplexity change [95 % CI]"], body, left=2)
        )
    falls = [
        [
            _Raw(esc(condition_name(r["series"], r["budget"]))),
            _Raw(f"{r['n_fell']} of {r['n_defined']}"),
            _Raw(_centre_ci(r, "fall_energy", suffix="_j")),
        ]
        for r in curves.get("gain_falls") or []
    ]
    if falls:
        parts.append(
            f"<h3>Where the marginal gain stops paying</h3><p>Quality gained per kJ (−Δ loss per kJ of training energy) "
            f"between evaluation points; a trial's gain has fallen once it is below {curves['gain_fraction']:g} of its "
            "first segment's.</p>" + table(["condition", "fell", "energy where it fell [95 % CI]"], falls)
        )
    trajectory = curves.get("trajectory") or {}
    tr = [
        [
            _Raw(esc(condition_name(r["series"], r["budget"]))),
            r.get("n_backslides"),
            r.get("n_spikes"),
            _Raw(esc(r.get("best_point"))),
            r.get("final_minus_best_loss"),
        ]
        for r in trajectory.get("trials", [])
    ]
    if tr:
        parts.append(
            f"<h3>Trajectories</h3><p>Backslides: points whose loss rose over the previous one; spikes: rises above "
            f"{trajectory['spike_k']:g} × the trial's median absolute change. Per trial:</p>"
            + table(["condition", "backslides", "spikes", "best point", "final − best loss (nats)"], tr)
            + "".join(
                f"<p>RM-ANOVA of eval loss over the points ({esc(condition_name(a.get('series', ''), a.get('budget')))}"
                f'): <span class="apa">{esc(a.get("apa", a.get("message", "")))}</span></p>'
                for a in trajectory.get("anova", [])
            )
        )
    for name, outcome in (curves.get("stopping") or {}).items():
        rows = [
            [
                _Raw(esc(condition_name(r["series"], r["budget"]))),
                _Raw(f"{r['n_stopped']} of {r['n']}"),
                _Raw(
                    f"{r['energy_saved_pct']:.1f} % [{r['energy_saved_pct_ci95_low']:.1f}, {r['energy_saved_pct_ci95_high']:.1f}]"
                    if r.get("energy_saved_pct_ci95_low") is not None
                    else "—"
                ),
                _Raw(
                    f"{r['ppl_increase_pct']:+.1f} % [{r['ppl_increase_pct_ci95_low']:+.1f}, {r['ppl_increase_pct_ci95_high']:+.1f}]"
                    if r.get("ppl_increase_pct_ci95_low") is not None
                    else "—"
                ),
            ]
            for r in outcome["cells"]
        ]
        parts.append(
            f"<h3>Stopping rule {esc(name)}</h3><p>{esc(json.dumps(outcome['rule']))}, replayed on the full runs, paired "
            f"by trial. {esc(outcome['note'])}</p>"
            + table(["condition", "stopped", "energy saved [95 % CI]", "perplexity change [95 % CI]"], rows)
        )
    return "\n".join(parts)


def _figures_html(figures: dict[str, tuple[bytes, str]]) -> str:
    return "".join(
        f'<figure id="fig-{esc(name)}"><img alt="{esc(caption)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
        for name, (png, caption) in figures.items()
    )


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * (x - 1):+.1f} %"


def _profile_name(key: str) -> str:
    return f"device profile ({series_label(key.rstrip('/'))})" if key else "device profile"


def _profile_warning(check: list[dict[str, Any]]) -> str:
    disturbed = [v for v in check if v.get("status") == "disturbed"]
    if not disturbed:
        return ""
    return (
        "".join(
            f'<div class="warn"><b>The {esc(_profile_name(v["profile"]))} looks disturbed</b>: '
            + esc("; ".join(v["reasons"]))
            + ".</div>"
            for v in disturbed
        )
        + "<p>CS_TFLOPS scales every trial's PE on that device alike, so PE's changes between budgets and every test on them "
        "stand, but PE's level is uncertain; the matmul checks were judged against the median check of its trials instead. "
        "Measure the profile again with <code>snakemake --cores 1 --resources gpu=1 --forcerun device_profile</code>.</p>"
    )


def _quality_html(
    trials: pl.DataFrame,
    stats: dict[str, Any],
    profiles: dict[str, dict[str, Any] | None],
    cs: dict[str, tuple[float | None, str]],
    rerun: list[str],
    exclude_flagged: bool,
    profile_check: list[dict[str, Any]],
    cs_basis: str = "training",
) -> str:
    """CS_TFLOPS and its drift per device profile, what a precision comparison of PE means, the flags with their
    reasons, the sensitivity analysis and the rerun command."""
    parts = [
        f"<p><b>CS_TFLOPS{esc(' (' + series_label(key.rstrip('/')) + ')' if key else '')}</b> = {num(value)} TFLOP/s — "
        f"{esc(source)}.</p>"
        for key, (value, source) in cs.items()
    ]
    parts.append(
        f"<p>{esc(cs_basis_sentence(cs_basis, configured=any('configured' in src for _, src in cs.values())))}</p>"
    )
    parts.append(_profile_warning(profile_check))
    for key, profile in profiles.items():
        if not profile:
            continue
        parts.append(
            table(
                [_profile_name(key), "value"],
                [
                    [
                        _Raw("median / 25th / 75th percentile (TFLOP/s)"),
                        _Raw(
                            f"{num(profile['median_tflops'])} / {num(profile['q25_tflops'])} / {num(profile['q75_tflops'])}"
                        ),
                    ],
                    [
                        _Raw("IQR (TFLOP/s), coefficient of variation"),
                        _Raw(f"{num(profile['iqr_tflops'])}, {num(profile['cv'])}"),
                    ],
                    [
                        _Raw("windows × length (s), warm-up (s)"),
                        _Raw(f"{profile['windows']} × {num(profile['window_s'])}, {num(profile['warmup_s'])}"),
                    ],
                    [
                        _Raw("matmul size, dtype, threads"),
                        _Raw(f"{profile['matmul_size']}, {esc(profile['dtype'])}, {profile['threads']}"),
                    ],
                    [_Raw("device"), _Raw(esc(profile["device_name"]))],
                    *[
                        [_Raw(esc(k)), _Raw(esc(v))]
                        for k, v in profile.items()
                        if k.endswith(("_before", "_after")) and v is not None
                    ],
                ],
            )
        )
    if "check_before_ratio" in trials.columns and trials["check_before_ratio"].drop_nulls().len():
        ratios = pl.concat([trials["check_before_ratio"], trials["check_after_ratio"]]).drop_nulls()
        references = (
            ", ".join(dict.fromkeys(v.get("reference", "the reference") for v in profile_check)) or "the reference"
        )
        parts.append(
            f"<p><b>Drift.</b> Each trial timed the same matmul right before and after training: between "
            f"{_pct(ratios.min())} and {_pct(ratios.max())} of {esc(references)} "
            f"(median {_pct(ratios.median())}). These checks are diagnostics only; PE always uses CS_TFLOPS above.</p>"
        )
    if trials.height == 0:
        return "\n".join([*parts, "<p>No finished trials, so no measurement to judge.</p>"])
    flagged = trials.filter(pl.col("quality") == "flagged").sort("run_position")
    parts.append(
        f"<p><b>{flagged.height} of {trials.height} trials flagged</b> by the measurement-quality rules "
        "(<code>quality.*</code> in the config; thresholds in config/README.md).</p>"
    )
    if flagged.height:
        parts.append(
            table(
                ["condition", "trial", "ran as", "why flagged"],
                [
                    [
                        _Raw(esc(condition_name(r.get("series") or "", r["budget"]))),
                        r["trial"],
                        _Raw(f"#{r['run_position']}"),
                        _Raw(esc(r["quality_reasons"])),
                    ]
                    for r in flagged.iter_rows(named=True)
                ],
                left=4,
            )
        )
        primary = stats.get("primary_trials", "every trial")
        sens = stats.get("sensitivity", {})
        rows = []
        for dv in TESTED:
            a, b = stats["anova"].get(dv), sens.get("anova", {}).get(dv)
            if a is None or b is None:
                continue
            rows.append(
                [
                    _Raw(esc(label(dv))),
                    _Raw(esc(a.get("apa", a.get("message")))),
                    _Raw(esc(b.get("apa", b.get("message")))),
                ]
            )
        parts.append(
            f"<p>The primary statistics above use <b>{esc(primary)}</b> (<code>quality.exclude_flagged: "
            f"{str(exclude_flagged).lower()}</code>); the sensitivity analysis repeats them on {esc(sens.get('trials', ''))} "
            f"({esc(sens.get('subjects', 0))} subjects). A flagged trial's subject leaves every condition, since the design is "
            "repeated measures.</p>"
        )
        if sens.get("message"):
            parts.append(f'<p class="warn">{esc(sens["message"])}</p>')
        if rows:
            parts.append(
                table(["measure", f"primary ({primary})", f"sensitivity ({sens.get('trials', '')})"], rows, left=3)
            )
        parts.append(
            "<p>To measure exactly the flagged trials again (each retrains; the analysis and report follow; add the "
            "<code>--configfile</code> you ran the study with):</p>"
            f"<pre>snakemake --cores 1 --resources gpu=1 --forcerun {esc(' '.join(rerun))}</pre>"
        )
    return "\n".join(parts)


def cs_basis_sentence(basis: str, configured: bool = False) -> str:
    """What comparing PE between precisions means under ``metric.cs_basis`` (``configured``: metric.cs_tflops is a
    number, the same for every trial, so no precision's throughput enters)."""
    if configured:
        return (
            "CS_TFLOPS is the configured number (metric.cs_tflops) for every trial, whatever its precision or device: "
            "metric.cs_basis does not apply, and PE compares precisions at that one yardstick."
        )
    if basis == "training":
        return (
            "CS_TFLOPS is each trial's own precision's (metric.cs_basis: training), the metric as defined: between "
            "precisions, PE's ratio carries the ratio of their matmul peaks (on an H200 bf16's is about 12× fp32's), so a "
            "precision comparison of PE asks how well each used what its precision offers, not which is more efficient "
            "at one yardstick; set metric.cs_basis: fp32 for that."
        )
    return (
        f"CS_TFLOPS is the {basis} matmul throughput of each trial's device (metric.cs_basis: {basis}), whatever precision "
        "the trial trained in: PE compares precisions at one yardstick, so a faster precision shows as higher PE."
    )


def distinct(trials: pl.DataFrame, column: str) -> str:
    """A column's values over the trials, each once in order (a factorial study varies several)."""
    if column not in trials.columns:
        return "—"
    return ", ".join(dict.fromkeys(str(v) for v in trials[column].to_list() if v is not None)) or "—"


def training_stack(trials: pl.DataFrame) -> str:
    """Which implementation trained, compiled or not; every combination that occurred, so a mixed study shows."""
    if "implementation" not in trials.columns:
        return "—"
    compiled = trials["compiled"] if "compiled" in trials.columns else pl.Series([False] * trials.height)
    stacks = {
        f"{impl}{' (torch.compile)' if comp else ''}" for impl, comp in zip(trials["implementation"], compiled) if impl
    }
    return ", ".join(sorted(stacks)) or "—"


def render_report(
    *,
    config: dict[str, Any],
    config_hash: str,
    trials: pl.DataFrame,
    conditions: pl.DataFrame,
    changes: pl.DataFrame,
    stats: dict[str, Any],
    missing: list[str],
    figures: dict[str, tuple[bytes, str]],
    curves: dict[str, Any] | None = None,
    scaling: dict[str, Any] | None = None,
    reference: dict[str, Any],
    data_summary: dict[str, Any],
    profiles: dict[str, dict[str, Any] | None],
    cs: dict[str, tuple[float | None, str]],
    rerun: list[str],
    profile_check: list[dict[str, Any]],
    cost: dict[str, Any] | None = None,
    selection: dict[str, list[dict[str, Any]]] | None = None,
    interim: bool = False,
    made: dict[str, Any] | None = None,
) -> str:
    """The whole report as one HTML string; ``figures`` maps name → (PNG bytes, caption); ``profiles`` and ``cs``
    (CS_TFLOPS and where it came from) are keyed by device profile (one per hardware level and precision, "" when
    one); ``selection`` holds each selection step's record by level (design.selection); ``made`` says when and with
    what it was made (git state, report time, package versions)."""
    made, cost = made or {}, cost or {}
    study = config["study"]
    meters = sorted(set(trials["meter"].to_list())) if "meter" in trials.columns else []
    warnings = []
    if interim:
        warnings.append(
            f'<div class="bad"><b>INTERIM report</b>: built from the {trials.height} trial(s) finished so far; the study '
            "is still running or stopped early. Trials not finished yet are listed below and left out of every number. "
            "The final report is <code>report.html</code> beside the <code>interim</code> folder.</div>"
        )
    estimated = energy_is_estimated(trials)
    if estimated:
        warnings.append(
            '<div class="warn"><b>Energy and power are ESTIMATED</b>, not measured: no power sensor was available, so power is '
            "CPU TDP × this process's CPU utilisation. That energy is work-based (CPU time × a share of the TDP) and that "
            "power depends on how much CPU the trial got: another load on the machine lowers it. PE, energy and "
            "quality-per-joule below inherit that estimate; the measurement-quality rules flag trials whose load changed.</div>"
        )
    if "none" in meters:
        warnings.append(
            '<div class="warn"><b>Energy was not measured</b> (meter none): energy, power and PE are missing, not zero.</div>'
        )
    if any(v.get("status") == "disturbed" for v in profile_check):
        warnings.append(
            '<div class="warn"><b>A device profile looks disturbed</b>: CS_TFLOPS, and so PE\'s level, is '
            'uncertain; see <a href="#quality">Measurement quality</a>.</div>'
        )
    load, min_load = device_load(trials), config.get("quality", {}).get("min_load", 0.1)
    if load is not None and load < min_load:
        warnings.append(
            f'<div class="warn"><b>The device was barely loaded</b>: training\'s mean power was {100 * load:+.1f} % '
            "off the idle baseline (median over trials; warned below "
            f"{100 * min_load:+g} %, quality.min_load). The energy measured here is mostly idle power × time, so differences "
            "between budgets reflect how long training took, not the model's arithmetic. On a GPU, a larger model "
            "or batch loads it (see the README's GPU figures).</div>"
        )
    warnings += [f'<div class="warn">{w}</div>' for w in meter_warnings(trials)]
    n_flagged = trials.filter(pl.col("quality") == "flagged").height if "quality" in trials.columns else 0
    if n_flagged:
        warnings.append(
            f'<div class="warn"><b>{n_flagged} trial(s) flagged as possibly disturbed measurements</b>: '
            'see <a href="#quality">Measurement quality</a> for the reasons, the sensitivity analysis and how to rerun them.</div>'
        )
    if missing:
        warnings.append(
            '<div class="bad"><b>Missing or failed trials</b> (not averaged over): '
            + "; ".join(esc(m) for m in missing)
            + "</div>"
        )
    first = trials.row(0, named=True) if trials.height else {}
    started = (
        trials["started_at_unix_s"].drop_nulls()
        if "started_at_unix_s" in trials.columns
        else pl.Series([], dtype=pl.Float64)
    )
    provenance = [
        ["trials ran", f"{utc(started.min())} to {utc(started.max())}" if len(started) else "—"],
        ["report made", made.get("at", "—")],
        ["workflow code (git)", made.get("git", "—")],
        ["config hash", config_hash],
        ["meter(s)", ", ".join(meters)],
        *meter_provenance(trials),
        ["device", first.get("device_name")],
        ["device kind", first.get("device")],
        *([["GPU UUID", first.get("device_uuid")]] if first.get("device_uuid") else []),
        ["precision", distinct(trials, "precision")],
        ["parameters", distinct(trials, "params")],
        ["optimizer", distinct(trials, "optimizer")],
        ["training stack", training_stack(trials)],
        ["power polling interval (s)", first.get("interval_requested_s")],
        [
            "CS_TFLOPS",
            "; ".join(
                f"{series_label(k.rstrip('/')) + ': ' if k else ''}{num(v)} ({src})" for k, (v, src) in cs.items()
            ),
        ],
        ["trials finished", trials.height],
        [
            "documents in / out of normalization",
            f"{data_summary.get('documents_in')} / {data_summary.get('documents_out')}",
        ],
    ]
    versions = {k[len("versions_") :]: v for k, v in first.items() if k.startswith("versions_")}
    figs = _figures_html({k: v for k, v in figures.items() if k not in SCALING_FIGURES})
    scaling_figs = _figures_html({k: v for k, v in figures.items() if k in SCALING_FIGURES})
    budgets = ", ".join(budget_label(b) for b in sorted(study["budgets"]))
    design = config.get("design") or {}
    further = "".join(f", crossed with {factor}: {', '.join(map(str, levels))}" for factor, levels in design.items())
    exclude_flagged = config.get("quality", {}).get("exclude_flagged", False)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="tokenwatt-config-hash" content="{esc(config_hash)}"><title>tokenwatt {"interim " if interim else ""}report — {esc(study["name"])}</title>
<style>{CSS}</style></head><body>
<h1>tokenwatt {"INTERIM " if interim else ""}report: {esc(study["name"])}</h1>
<p><b>Question.</b> On fixed hardware, how does the number of training tokens change the energy-aware parameter efficiency
(PE = K · invPPL · CS_TFLOPS · TT_scale / (params · TT_tokens · RMS(W))) of training a language model?
Budgets {esc(budgets)} real tokens per epoch{esc(further)}, {esc(study["trials"])} trials each; trial <i>i</i> runs under every
{"cell" if further else "budget"} (the subject of the repeated-measures analysis).</p>
{"".join(warnings)}
{_summary_html(trials, stats, missing, estimated, n_flagged, profile_check, cost, target_sentence(curves or {}))}
<h2>Conditions</h2>
<p>{esc(frame_note(trials, exclude_flagged))}</p>
{_conditions_html(conditions, config.get("cost", {}).get("currency", ""))}
<h2>Statistics</h2>
{_stats_html(stats)}
<h2 id="curves">Energy to quality</h2>
{_curves_html(curves or {})}
{f'<h2 id="selection">Data selection</h2>{selection_html(selection, trials, curves or {})}' if selection else ""}
<h2 id="scaling">Scaling</h2>
{scaling_html(scaling or {})}
{scaling_figs}
<h2>Figures</h2>
{figs}
<h2 id="quality">Measurement quality</h2>
{_quality_html(trials, stats, profiles, cs, rerun, exclude_flagged, profile_check, config.get("metric", {}).get("cs_basis", "training"))}
<h2>Against the reference study</h2>
{_reference_html(reference, conditions, changes, stats)}
<h2>Provenance</h2>
{table(["item", "value"], [[_Raw(esc(k)), _Raw(esc(v))] for k, v in provenance])}
<p>Trials ran with: {esc(json.dumps(versions, sort_keys=True))}</p>
<p>Analysis and report made with: {esc(json.dumps(made.get("versions", {}), sort_keys=True))}</p>
<h3>Configuration</h3>
<pre>{esc(json.dumps(config, indent=2, sort_keys=True, default=str))}</pre>
</body></html>
"""
