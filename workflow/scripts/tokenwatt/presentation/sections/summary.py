"""The question's answer, first in the report: how the training energy grew with the tokens, the energy each budget
needed to reach every quality target with every paired ratio (a refused one a word and a footnote), how PE changed and
how sure we are, what the study used and cost, what to beware of; then the figure that answers the question."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from markupsafe import Markup

from ...analysis.aggregate import shared_by_branches
from ...common.measures import duration, si
from ...plan.preview import budgets_share_one_process
from ..answer import change_sentences, growth_sentences, terminal_lines
from ..inputs import ReportInputs
from ..templating import render_template
from .allocation import choice_sentence
from .curves import target_sentences
from .figures import ANSWER_FIGURE, figures_html
from .statistics import effect_sentence


@dataclass(frozen=True)
class Answer:
    """The answer's parts, each a list of sentences: ``energy`` (how it grew with the tokens), ``targets`` (one per
    quality target), ``pe``, ``used`` (energy, CO2, money) and ``caveats``; ``notes`` the footnotes the targets'
    sentences mark (why a ratio was refused), numbered in order."""

    energy: list[str]
    targets: list[str]
    pe: list[str]
    used: list[str]
    caveats: str
    notes: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    def sentences(self) -> list[str]:
        return [*self.energy, *self.targets, *self.pe, *self.used, self.caveats]


def render(inputs: ReportInputs) -> Markup:
    missing = inputs.missing
    finished = inputs.trials.height
    shown = {ANSWER_FIGURE: inputs.figures[ANSWER_FIGURE]} if ANSWER_FIGURE in inputs.figures else {}
    return render_template(
        "sections/summary.html.j2",
        finished=finished,
        all_diverged=bool(missing) and all("diverged" in m for m in missing),
        answer=answer(inputs) if finished else None,
        targets_source=inputs.product("curves").get("targets_source"),
        figure=figures_html(shown) if shown else None,
    )


def sentences(inputs: ReportInputs) -> list[str]:
    """The answer's sentences in order, for a study with finished trials."""
    return answer(inputs).sentences()


def answer(inputs: ReportInputs) -> Answer:
    """The answer of a study with finished trials, part by part."""
    trials = inputs.trials
    budgets = sorted(trials["budget"].unique().to_list())
    notes: list[str] = []
    targets = target_sentences(inputs.product("curves"), budgets_share_one_process(inputs.config), notes)
    changes = change_sentences(inputs.product("stats").get("headline"))
    pe = list(changes)
    a = inputs.product("stats")["anova"].get("pe", {})
    if a.get("effects"):
        pe.extend(effect_sentence(e, "PE", a.get("scale", "raw")) for e in a["effects"])
    elif a and len(budgets) >= 2:
        pe.append(f"PE was not tested: {a.get('message', 'no values')}.")
    caveats = []
    if inputs.estimated:
        caveats.append("energy and power are estimated from CPU utilisation, not measured")
    if inputs.n_flagged:
        caveats.append(f"{inputs.n_flagged} trial(s) were flagged as possibly disturbed measurements")
    if inputs.missing:
        caveats.append(f"{len(inputs.missing)} trial(s) are missing or failed")
    if inputs.disturbed_profile:
        caveats.append("a device profile looks disturbed, so PE's level (not its changes) is uncertain")
    return Answer(
        energy=growth_sentences(inputs.conditions),
        targets=[t for t in targets if t],
        pe=pe,
        used=_energy(trials, inputs.estimated, inputs.cost),
        caveats="Caveats: " + "; ".join(caveats) + "."
        if caveats
        else "No caveats: every trial finished, none was flagged.",
        notes=notes,
        changes=changes,
    )


def answer_lines(inputs: ReportInputs) -> list[str]:
    """The answer's short form for the terminal (``answer.terminal_lines``): none before a trial has finished."""
    if not inputs.trials.height:
        return ["No trial has finished, so there is no answer yet."]
    got = answer(inputs)
    # a halving study's choice first: the question it was run to answer (sections/allocation.py)
    choice = choice_sentence(inputs.product("allocation"))
    lines = terminal_lines(got.energy, inputs.product("curves"), got.changes, got.caveats)
    return [choice, *lines] if choice else lines


def _energy(trials: pl.DataFrame, estimated: bool, cost: dict[str, Any]) -> list[str]:
    """What the study's training used, and what that emitted and cost; a total only when every trial was metered."""
    if "energy_j" in trials.columns and trials.height and trials["energy_j"].null_count() == 0:
        held = float(trials["energy_j"].sum())  # every trial's record's, each branched one with its stable run's
        # cost.json's totals count each stable run once, from its stretch records (analysis/totals.py)
        used = cost.get("total_energy_j")
        train_s = cost.get("total_train_s")
        if used is None or train_s is None:  # a cost summary without them: the trials' records alone
            used = held - shared_by_branches(trials, "branch_stable_energy_j")
            train_s = float(trials["train_s"].sum()) - shared_by_branches(trials, "branch_stable_train_s")
        once = (
            f"; each stable run counted once, though the trials' records, each branched from one, hold "
            f"{si(held, 'J')} together"
            # the stable runs, counted once (and any stretch no finished trial's record holds)
            if (cost.get("stable_runs") or shared_by_branches(trials, "branch_stable_energy_j"))
            and not math.isclose(used, held, rel_tol=1e-9)
            else ""
        )
        return [
            f"Training used {si(used / 3600, 'Wh')} ({si(used, 'J')}"
            f"{', ESTIMATED' if estimated else ''}) over {duration(train_s)} of training in {trials.height} trials"
            f"{once}.",
            *cost_sentences(cost),
        ]
    if "energy_j" in trials.columns and trials["energy_j"].drop_nulls().len():
        return [
            f"Energy was measured for {trials['energy_j'].drop_nulls().len()} of {trials.height} trials, so there is "
            "no study total."
        ]
    return ["Energy was not measured."]


def spent_sentence(cost: dict[str, Any]) -> str | None:
    """What the study spent beside what its training used: work lost to resumes and done again, checkpoint saves
    (cost.json's spent_*), or why there is no such total; None where the cost summary says neither."""
    label = " (ESTIMATED, from estimated energy)" if cost.get("is_estimate") else ""
    if cost.get("spent_energy_j") is None:
        why = cost.get("spent_missing")
        return f"There is no total of what the study spent beside its training: {why}." if why else None
    spent, lost, saves = cost["spent_energy_j"], cost["lost_energy_j"], cost["checkpoint_energy_j"]
    if not lost and not saves:
        return "No work was lost to resumes and no checkpoint was saved: what it spent on training is what its training used."
    said = [si(spent, "J")]
    if cost.get("spent_kg_co2e") is not None:
        said.append(f"{si(cost['spent_kg_co2e'] * 1000, 'g')} CO2e")
    if cost.get("spent_total_cost") is not None:
        said.append(si(cost["spent_total_cost"], cost["currency"]))
    return (
        f"In all the study spent {si(spent / 3600, 'Wh')} ({', '.join(said)}){label}: its training's, plus "
        f"{si(lost, 'J')} of work lost to resumes and done again and {si(saves, 'J')} saving checkpoints."
    )


def cost_sentences(cost: dict[str, Any]) -> list[str]:
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
    if spent := spent_sentence(cost):
        out.append(spent)
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
