"""The study's answer in words, from the analysis products alone: how the training energy grows with the tokens (the
energy per token at each budget and the change per doubling, from the conditions table), what each budget needed to
reach every quality target with every paired ratio (the curves product), and how PE and perplexity changed (the
statistics product's headline).

The report opens with it (``sections/summary.py``); ``terminal_lines`` is its short form, which the report rule writes
beside the report (answer.txt) and the run prints at its end (``tokenwatt.presentation.finished``).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from ..analysis.apa import fmt_p, p_value
from ..common.measures import budget_label, si
from ..plan.design import condition_name, series_label


def change_sentences(headline: dict[str, Any] | None) -> list[str]:
    """The statistics product's headline (``analysis/headline.py``) in words: PE's and perplexity's change from the
    smallest budget to the largest."""
    if not headline:
        return []
    if headline["status"] == "no subject":
        return [
            "No subject finished every cell of the design (see Conditions), so no change between budgets is computed."
        ]
    first, last = headline.get("first"), headline.get("last")
    if headline["status"] == "one budget":
        return [
            f"With one budget ({budget_label(headline['budgets'][0])}) the study describes it but cannot test a "
            "budget effect."
        ]
    names = {"pe": "PE", "perplexity": "Perplexity"}
    return [
        f"{names[got['measure']]}{_where(got['series'])} changed by {got['change']:+.1f} % from {budget_label(first)} "
        f"to {budget_label(last)} tokens (geometric mean ratio over {got['change_n']} trials, 95 % CI "
        f"{got['change_ci95_low']:+.1f} to {got['change_ci95_high']:+.1f} %)."
        for got in headline["changes"]
    ]


def _where(series: str) -> str:
    return f" ({series_label(series)})" if series else ""


def growth_sentences(conditions: pl.DataFrame) -> list[str]:
    """How the training energy grew with the tokens, one sentence per series: the energy per token at each budget
    (geometric means) and each step's paired change of the energy, per doubling of the tokens, with what the change
    of the energy per token says about it."""
    if not conditions.height or "measure" not in conditions.columns:
        return []
    said = []
    for series in dict.fromkeys(conditions["series"].to_list()):
        mine = conditions.filter(pl.col("series") == series)
        per_token = _by_budget(mine, "joules_per_token")
        if not per_token or all(r["center"] is None for r in per_token.values()):
            said.append(f"Energy was not measured{_where(series)}, so how it grows with the tokens is not known.")
            continue
        at = ", ".join(
            f"{si(r['center'], 'J')} at {budget_label(b)}" for b, r in per_token.items() if r["center"] is not None
        )
        sentence = f"Energy per token{_where(series)} was {at} (geometric means over trials)"
        steps = list(zip(list(per_token), list(per_token)[1:]))
        if not steps:
            said.append(sentence + ": with one budget there is no growth to show.")
            continue
        energy = _by_budget(mine, "energy_j")
        grew = [_step(energy.get(b), a, b) for a, b in steps]
        said.append(f"{sentence}; {_per_token_verdict([per_token[b] for _, b in steps])} {' and '.join(grew)}.")
    return said


def _by_budget(conditions: pl.DataFrame, measure: str) -> dict[int, dict[str, Any]]:
    rows = conditions.filter(pl.col("measure") == measure).sort("budget").iter_rows(named=True)
    return {r["budget"]: r for r in rows}


def _per_token_verdict(steps: list[dict[str, Any]]) -> str:
    """What the energy per token's paired changes between budgets say: no change shown (every interval holds 0),
    or a rise or a fall (every interval on one side), so the energy grew with, faster or slower than the tokens."""
    lows = [r.get("change_ci95_low") for r in steps]
    highs = [r.get("change_ci95_high") for r in steps]
    if any(x is None for x in lows + highs):
        return "training energy grew"
    if all(lo > 0 for lo in lows):
        return "it rose with the budget, so training energy grew faster than the tokens:"
    if all(hi < 0 for hi in highs):
        return "it fell with the budget, so training energy grew more slowly than the tokens:"
    if all(lo <= 0 <= hi for lo, hi in zip(lows, highs)):
        return "no change of it between budgets is shown, as if training energy grew in proportion to the tokens:"
    return "it changed between budgets, not in one direction; training energy grew"


def _step(r: dict[str, Any] | None, a: int, b: int) -> str:
    """One step's paired change of the energy (its % change of the geometric mean [95 % CI]), per doubling of the
    tokens: said as it is where the step is a doubling, else converted (the change compounds per doubling)."""
    where = f"from {budget_label(a)} to {budget_label(b)}"
    if r is None or r.get("change") is None:
        return f"no paired change {where}"
    doublings = math.log2(b / a)
    per = (lambda c: c) if math.isclose(doublings, 1.0) else (lambda c: 100 * ((1 + c / 100) ** (1 / doublings) - 1))
    low, high = r.get("change_ci95_low"), r.get("change_ci95_high")
    interval = f" [{per(low):+.1f}, {per(high):+.1f}]" if low is not None and high is not None else ""
    in_all = "" if math.isclose(doublings, 1.0) else f" ({r['change']:+.1f} % in all)"
    return f"{per(r['change']):+.1f} %{interval} per doubling {where}{in_all}"


def _tests_in_brief(c: dict[str, Any]) -> str:
    """A ratio's tests for a terminal: the model's p, its Holm p where it differs, and the rank test's Holm p (or that
    its trial ids are too few for it to reject): a p the family or the rank test does not support never reads alone."""
    said = fmt_p(c["p"])
    if c.get("p_holm") is not None and p_value(c["p_holm"]) != p_value(c["p"]):
        said += f", Holm {p_value(c['p_holm'])}"
    if c.get("rank_p_holm_floor") is not None and c["rank_p_holm_floor"] > 0.05:
        said += "; rank test cannot reject"
    elif c.get("rank_p_holm") is not None:
        said += f"; rank test Holm {p_value(c['rank_p_holm'])}"
    return said


def ratios_in_brief(curves: dict[str, Any]) -> str:
    """Every target's paired energy ratios in one sentence, for a terminal: each ratio with its interval and tests,
    none left out; a refused one, or a target no trial reached, in a word (the report says why); and how many
    comparisons between the other factors' levels the report holds, with how many of them Holm p < .05."""
    pairs = curves.get("energy_to_target_comparisons") or []
    targets = list(dict.fromkeys(r["target"] for r in curves.get("energy_to_target") or []))
    if not pairs or not targets:
        return ""
    said = []
    for target in targets:
        shown = [
            f"{condition_name(c['series'], c['budget_b'])} / {condition_name(c['series'], c['budget_a'])} "
            + (
                f"{c['ratio']:.2f} [{_bound(c.get('ci95_low'), '0')}, {_bound(c.get('ci95_high'), '∞')}] "
                f"({_tests_in_brief(c)})"
                if c.get("ratio") is not None
                else "no ratio"
            )
            for c in pairs
            if c["target"] == target
        ]
        said.append(f"{target}: {', '.join(shown)}")
    levels = curves.get("energy_to_target_level_comparisons") or []
    shown = sum(1 for c in levels if (c.get("p_holm") or 1) < 0.05 or (c.get("rank_p_holm") or 1) < 0.05)
    between = (
        f" Between the other factors' levels: {len(levels)} paired ratio(s) in the report, {shown} with a Holm p below"
        " .05."
        if levels
        else ""
    )
    return (
        "Training energy to reach each quality target, larger budget over smaller, paired by trial id (95 % CI, "
        "normal model): " + "; ".join(said) + "." + between
    )


def _bound(x: float | None, missing: str) -> str:
    return f"{x:.2f}" if x is not None else missing


def terminal_lines(energy: list[str], curves: dict[str, Any], changes: list[str], caveats: str) -> list[str]:
    """The answer's short form, a sentence a line: how energy grew with the tokens, every target's paired ratios,
    every series' PE change, and the caveats (an estimated energy says so here too)."""
    brief = ratios_in_brief(curves)
    pe = [c for c in changes if c.startswith("PE")] or changes[:1]
    return [*energy, *([brief] if brief else []), *pe, caveats]
