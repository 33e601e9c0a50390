"""Energy to quality (the curves product): energy to each target with its test, quality at equal energy, where the
marginal gain falls, the trajectories, and each stopping rule against the full runs."""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from ...analysis.apa import fmt_p, p_value
from ...common.measures import fixed, si
from ...plan.design import condition_name, series_label
from ...plan.preview import shared_process_note
from ..html import Footnote, noted, table, text
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    curves = inputs.product("curves")
    if curves.get("status") != "ok":
        return render_template("sections/curves.html.j2", curves=curves)
    trajectory = curves.get("trajectory") or {}
    reach, pairs = _reach(curves), _pairs(curves.get("quality_at_energy_comparison") or [])
    return render_template(
        "sections/curves.html.j2",
        curves=curves,
        **reach,
        # said where budgets are compared: a study whose budgets share one process compares it with itself
        same_process=shared_process_note(inputs.config) if reach["ratios"] or pairs else None,
        equal=_equal(curves.get("quality_at_energy") or []),
        pairs=pairs,
        falls=_falls(curves.get("gain_falls") or []),
        trajectory=_trajectory(trajectory.get("trials", [])),
        trajectory_smooth=bool(trajectory.get("trials")) and not _uneven(trajectory["trials"]),
        stopping=[
            (name, json.dumps(outcome["rule"]), outcome["note"], _stopping(outcome["cells"]))
            for name, outcome in (curves.get("stopping") or {}).items()
        ],
    )


def _median_ci(r: dict[str, Any], prefix: str, unit: str = "J", factor: float = 1.0, suffix: str = "") -> Markup:
    """A Kaplan–Meier median and its interval (``{prefix}_median{suffix}``, ``_ci95_low``, ``_ci95_high``) with an SI
    prefix; a median the censored runs leave undefined, or an interval without an upper bound, said in words."""
    got = r.get(f"{prefix}_median{suffix}")
    if got is None:
        return text("not reached by half" if r.get("n") and r.get("n_censored") else "—")
    low, high = r.get(f"{prefix}_ci95_low{suffix}"), r.get(f"{prefix}_ci95_high{suffix}")
    shown = lambda x: si(x * factor, unit) if x is not None else "∞"  # noqa: E731
    return noted(
        si(got * factor, unit), f"[{shown(low)}, {shown(high)}]" if low is not None or high is not None else None
    )


def _reach(curves: dict[str, Any]) -> dict[str, Any]:
    """The energy to each target, with the CO2e and money beside it where the study priced them, and each pair of
    budgets' energy ratio."""
    reach = curves["energy_to_target"]
    currency = curves.get("currency", "")
    extra = [
        (c, name, unit, factor)
        for c, name, unit, factor in (
            ("kg_co2e", "CO2e", "g", 1000.0),
            ("total_cost", f"cost ({currency})" if currency else "cost", currency, 1.0),
        )
        if any(r.get(f"{c}_median") is not None for r in reach)
    ]
    rows = [
        [
            r["target"],
            condition_name(r["series"], r["budget"]),
            noted(
                f"{r['n_reached']} of {r['n']}",
                f"({r['n_at_first_point']} at the first point)" if r.get("n_at_first_point") else None,
            ),
            _median_ci(r, "energy", suffix="_j"),
            *[_median_ci(r, c, unit, factor) for c, _, unit, factor in extra],
            r["n_censored"],
        ]
        for r in reach
    ]
    header = ["target", "condition", "reached", "median energy [95 % CI]", *[e[1] for e in extra], "censored"]
    return {
        "priced": bool(extra),
        "priced_estimate": bool(extra) and bool(curves.get("cost_is_estimate")),
        "reach": table(header, rows, left=2),
        "ratios": _ratios(curves.get("energy_to_target_comparisons") or []),
        "level_ratios": _level_ratios(curves.get("energy_to_target_level_comparisons") or []),
    }


def ratio_text(r: dict[str, Any]) -> str:
    """A paired energy ratio with its interval and p, or why there is none."""
    if r.get("ratio") is None:
        return r["status"]
    low, high = r.get("ci95_low"), r.get("ci95_high")
    text = (
        f"{r['ratio']:.3f} [{f'{low:.3f}' if low is not None else '0'}, {f'{high:.3f}' if high is not None else '∞'}]"
    )
    holds_one = (low is None or low <= 1.0) and (high is None or high >= 1.0)
    if holds_one and r.get("detectable") is not None:
        # an interval holding 1 is no finding of "no difference": say how large a one this design could have shown
        text += f"; no difference shown, ×{r['detectable']:.2f} detectable at 80 % power"
    return text


def _ratios(rows: list[dict[str, Any]]) -> Markup | None:
    """Each pair of budgets' energy ratio to each target, paired by trial id, censored trials included."""
    if not rows:
        return None
    return table(
        ["target", "budgets", "trial ids (crossed under both)", *PAIR_HEADER],
        [
            [
                r["target"],
                f"{condition_name(r['series'], r['budget_b'])} / {condition_name(r['series'], r['budget_a'])}",
                *_pair_cells(r),
            ]
            for r in rows
        ],
        left=2,
    )


# The ratio and its p rest on a normal law of log energy (a censored run's energy read off its tail); the rank test
# assumes no law and censors each pair on the token window both runs observed (``paired_rank``): it is the one to
# trust where the two disagree.
PAIR_HEADER = ("energy ratio [95 % CI], normal model", "p", "p (Holm)", "rank test p (Holm)")


def _pair_cells(r: dict[str, Any]) -> list[Any]:
    """A comparison's counts, ratio with its interval, p and Holm p, and the rank test's Holm p, as table cells."""
    return [
        f"{r['n_pairs']} ({r['n_exact']})" + (f", {r['n_never']} stopped by a rule" if r.get("n_never") else ""),
        # a refusal is one sentence that several pairs repeat: a word in the cell, the sentence under the table
        ratio_text(r) if r.get("ratio") is not None else Footnote("no ratio", r["status"]),
        p_value(r["p"]) if r.get("p") is not None else "—",
        p_value(r["p_holm"]) if r.get("p_holm") is not None else "—",
        _rank_cell(r),
    ]


def _rank_cell(r: dict[str, Any]) -> str:
    """The rank test's Holm p, and where its trial ids are too few for any p below .05, that it cannot reject."""
    if r.get("rank_p_holm") is None:
        return "—"
    few = r.get("rank_p_holm_floor") is not None and r["rank_p_holm_floor"] > 0.05
    return p_value(r["rank_p_holm"]) + (f" (cannot reject with {r['rank_n_informative']} trial ids)" if few else "")


def _level_ratios(rows: list[dict[str, Any]]) -> Markup | None:
    """Each pair of the other factors' levels (series) at each budget: energy to each target, paired by trial id."""
    if not rows:
        return None
    return table(
        ["target", "budget", "levels", "trial ids (crossed under both)", *PAIR_HEADER],
        [
            [
                r["target"],
                condition_name("", r["budget"]),
                f"{series_label(r['series_b'])} / {series_label(r['series_a'])}",
                *_pair_cells(r),
            ]
            for r in rows
        ],
        left=3,
    )


def _equal(equal: list[dict[str, Any]]) -> Markup | None:
    """Each condition's mean eval loss at the same training energies."""
    if not equal:
        return None
    cells = list(dict.fromkeys((r["series"], r["budget"]) for r in equal))
    energies = list(dict.fromkeys(r["energy_j"] for r in equal))
    got = {(r["series"], r["budget"], r["energy_j"]): r for r in equal}
    loss = lambda c, e: got.get((*c, e), {}).get("loss_mean")  # noqa: E731
    body = [[si(e, "J"), *[fixed(loss(c, e)) if loss(c, e) is not None else "—" for c in cells]] for e in energies]
    return table(["training energy", *[condition_name(s, b) for s, b in cells]], body)


def _signed(x: float | None) -> str:
    return f"{x:+.1f}" if x is not None else "—"


def _pairs(comparison: list[dict[str, Any]]) -> Markup | None:
    """The larger budget against the smaller at equal energy, paired by trial."""
    rows = [
        [
            si(r["energy_j"], "J"),
            f"{condition_name(r['series'], r['budget_b'])} vs {condition_name(r['series'], r['budget_a'])}",
            r["n"],
            noted(
                f"{_signed(r['ppl_change_pct'])} %",
                # a bound is missing where its loss change is past what exp() holds (a diverged run)
                "[{}, {}]".format(*(_signed(r.get(f"ppl_change_ci95_{end}")) for end in ("low", "high")))
                if r.get("ppl_change_ci95_low") is not None or r.get("ppl_change_ci95_high") is not None
                else None,
            ),
        ]
        for r in comparison
        if r.get("loss_change") is not None
    ]
    return (
        table(["training energy", "comparison", "trials", "perplexity change [95 % CI]"], rows, left=2)
        if rows
        else None
    )


def _falls(falls: list[dict[str, Any]]) -> Markup | None:
    rows = [
        [
            condition_name(r["series"], r["budget"]),
            f"{r['n_fell']} of {r['n_defined']}",
            _median_ci(r, "fall_energy", suffix="_j"),
        ]
        for r in falls
    ]
    return table(["condition", "fell", "energy where it fell: Kaplan–Meier median [95 % CI]"], rows) if rows else None


def _uneven(trials: list[dict[str, Any]]) -> bool:
    """Some trial's loss rose between evaluation points, or ended above its best, or has no such count (a diverged
    trial's): its row is shown."""
    return any(r.get(k) != 0 for r in trials for k in ("n_backslides", "n_spikes", "final_minus_best_loss"))


def _trajectory(trials: list[dict[str, Any]]) -> Markup | None:
    """A row per trial, where some trial's loss rose; none where every row would read zero (said in one sentence)."""
    if not _uneven(trials):
        return None
    rows = [
        [
            condition_name(r["series"], r["budget"]),
            r.get("n_backslides"),
            r.get("n_spikes"),
            text(r.get("best_point")),
            r.get("final_minus_best_loss"),
        ]
        for r in trials
    ]
    return (
        table(["condition", "backslides", "spikes", "best point", "final − best loss (nats)"], rows) if rows else None
    )


def _stopping(cells: list[dict[str, Any]]) -> Markup:
    """One stopping rule replayed on the full runs: the energy it saves and the perplexity it costs, per condition."""

    def interval(r: dict[str, Any], key: str, spec: str) -> str:
        if r.get(f"{key}_ci95_low") is None:
            return "—"
        return f"{r[key]:{spec}} % [{r[f'{key}_ci95_low']:{spec}}, {r[f'{key}_ci95_high']:{spec}}]"

    rows = [
        [
            condition_name(r["series"], r["budget"]),
            f"{r['n_stopped']} of {r['n']}",
            interval(r, "energy_saved_pct", ".1f"),
            interval(r, "ppl_increase_pct", "+.1f"),
        ]
        for r in cells
    ]
    return table(["condition", "stopped", "energy saved [95 % CI]", "perplexity change [95 % CI]"], rows)


def _reached_text(r: dict[str, Any]) -> str:
    """How many runs reached the target, and how many of them only at or before their first eval point."""
    bound = r.get("n_at_first_point") or 0
    return f"{r['n_reached']} of {r['n']} trials reached it" + (
        f", {bound} of them at or before their first eval point (an upper bound)" if bound else ""
    )


# Said once after the ratios of a study whose budgets share one process (``preview.budgets_share_one_process``).
SAME_PROCESS = (
    " The budgets share one process (a constant learning rate over one epoch), so a ratio between them tests the "
    "meter and the eval grid, not the budget (see Energy to quality)."
)
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def note_mark(why: str, notes: list[str]) -> str:
    """The footnote mark of ``why`` (a superscript number, plain text in a terminal and a page alike), the reason added
    to ``notes`` once: five ratios refused for one reason share one note."""
    if why not in notes:
        notes.append(why)
    return str(notes.index(why) + 1).translate(SUPERSCRIPT)


def target_sentences(curves: dict[str, Any], same_process: bool = False, notes: list[str] | None = None) -> list[str]:
    """``target_sentence`` for every target, in the product's order, the same-process caveat said once after them."""
    targets = list(dict.fromkeys(r["target"] for r in curves.get("energy_to_target") or []))
    said = [target_sentence(curves, target=t, notes=notes) for t in targets]
    if same_process and curves.get("energy_to_target_comparisons") and said:
        said[-1] += SAME_PROCESS
    return said


def target_sentence(
    curves: dict[str, Any], same_process: bool = False, target: str | None = None, notes: list[str] | None = None
) -> str:
    """The study's question answered in joules for one target (the first unless named): what each budget needed to
    reach it (Kaplan–Meier medians, censored trials included), and every pair of budgets' energy ratio paired by trial
    id, none left out, with the rank test beside the model's p. A ratio refused says so in a word, its reason in
    ``notes`` (a footnote) or, without notes, beside it. With ``same_process`` (``preview.budgets_share_one_process``),
    that these ratios cannot show a budget effect."""
    rows = curves.get("energy_to_target") or []
    if not rows:
        return ""
    label = target if target is not None else rows[0]["target"]
    mine = [r for r in rows if r["target"] == label]
    if not any(r["n_reached"] for r in mine):
        return f"No trial reached {label}."
    parts = []
    for r in mine:
        name = condition_name(r["series"], r["budget"])
        if not r["n_reached"]:
            continue
        # how many reached it, said where some did not or some only bound it: the censoring the median carries
        reached = "" if r["n_reached"] == r["n"] and not r.get("n_at_first_point") else f", {_reached_text(r)}"
        if r["energy_median_j"] is None:
            why = "its energy not measured" if r["n_reached"] * 2 >= r["n"] else "fewer than half, so no median"
            parts.append(f"{name}: {_reached_text(r)}, {why}")
        else:
            low, high = r["energy_ci95_low_j"], r["energy_ci95_high_j"]
            bounds = f"{si(low, 'J') if low is not None else '0 J'}, {si(high, 'J') if high is not None else '∞'}"
            parts.append(f"{name} {si(r['energy_median_j'], 'J')} [{bounds}]{reached}")
    never = [condition_name(r["series"], r["budget"]) for r in mine if not r["n_reached"]]
    sentence = (
        f"To reach {label}, the training energy each needed (Kaplan–Meier median [95 % CI], evaluation excluded): "
        + "; ".join(parts)
        + "."
    )
    sentence += f" No trial of {', '.join(never)} reached it." if never else ""
    pairs = [c for c in curves.get("energy_to_target_comparisons") or [] if c["target"] == label]
    if pairs:
        sentence += " " + pairs_sentence(pairs, notes)
        sentence += SAME_PROCESS if same_process else ""
    return sentence


def pairs_sentence(pairs: list[dict[str, Any]], notes: list[str] | None = None) -> str:
    """Every pair of budgets' energy ratio in one sentence, larger over smaller: the normal model's ratio with its
    interval and p (Holm beside it where it differs), the rank test's p, or that its trial ids are too few to reject
    (said once for all). A ratio refused is "no ratio", its reason a footnote in ``notes`` or beside it."""
    shown, few = [], set()
    for c in pairs:
        name = f"{condition_name(c['series'], c['budget_b'])} / {condition_name(c['series'], c['budget_a'])}"
        if c.get("ratio") is None:
            shown.append(
                f"{name} no ratio{note_mark(c['status'], notes)}"
                if notes is not None
                else f"{name} no ratio ({c['status']})"
            )
            continue
        low, high = c.get("ci95_low"), c.get("ci95_high")
        bounds = f"[{f'{low:.3f}' if low is not None else '0'}, {f'{high:.3f}' if high is not None else '∞'}]"
        holm = c.get("p_holm")
        p = fmt_p(c["p"]) + (
            f" (Holm {p_value(holm)})" if holm is not None and p_value(holm) != p_value(c["p"]) else ""
        )
        rank = ""
        if c.get("rank_p_holm_floor") is not None and c["rank_p_holm_floor"] > 0.05:
            few.add(c["rank_n_informative"])
        elif c.get("rank_p_holm") is not None:
            rank = f", rank test Holm {p_value(c['rank_p_holm'])}"
        shown.append(f"{name} {c['ratio']:.3f} {bounds}, {p}{rank}")
    cannot = (
        f"; the rank test, which assumes no law, cannot reject with {'–'.join(map(str, sorted({min(few), max(few)})))} "
        "trial ids"
        if few
        else ""
    )
    return (
        "Energy ratios paired by trial id, the censored trials in them (95 % CI, normal model): "
        + "; ".join(shown)
        + cannot
        + "."
    )
