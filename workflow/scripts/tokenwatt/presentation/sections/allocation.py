"""Allocation (the allocation product, config allocation): the configuration successive halving chose for its joules,
its loss at the target energy with an interval, the spend against the budget, every dropped candidate with its round
and evidence, and the full grid's choice beside it where the same ladder was trained in full."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ..html import table
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    data = inputs.product("allocation")
    return render_template(
        "sections/allocation.html.j2",
        estimate=inputs.estimated,
        data=data,
        chosen=_chosen(data.get("chosen")),
        dropped=_dropped(data.get("dropped", [])),
    )


def choice_sentence(data: dict[str, Any]) -> str | None:
    """A halving study's answer in one sentence, which the terminal's answer opens with; None without one."""
    if not data:
        return None
    spent = "an unknown amount" if data.get("spent") is None else f"{data['spent']:,.6g} {data['unit']}"
    if data.get("chosen") is None:
        return f"Halving chose no candidate: {data['stopped_why']}."
    head = f"Halving chose {_chosen(data['chosen'])}"
    return (
        f"{head}, at {data['target_energy_j']:,.1f} J, having spent {spent} of {data['limit']:,.6g} {data['unit']} "
        f"in {data['rounds']} round(s); {len(data['dropped'])} candidate(s) dropped."
    )


def _chosen(chosen: dict[str, Any] | None) -> str:
    if chosen is None:
        return "no candidate"
    interval = (
        f" [{chosen['low']:.4g}, {chosen['high']:.4g}] over {chosen['trial_ids']} trial ids"
        if chosen["low"] is not None
        else " (one trial id: no interval)"
    )
    return f"{chosen['candidate'] or 'the only candidate'}: eval loss {chosen['loss']:.4g} nats{interval}"


def _evidence(evidence: Any) -> str:
    if not isinstance(evidence, dict):
        return str(evidence)
    bound = "—" if evidence["lower_bound"] is None else f"{evidence['lower_bound']:+.3g}"
    return (
        f"{evidence['difference']:+.3g} nats vs {evidence['against']} (one-sided bound {bound}, "
        f"{evidence['pairs']} pairs)"
    )


def _dropped(rows: list[dict[str, Any]]) -> Markup | None:
    body = [
        [
            r["candidate"],
            r["round"],
            f"{r['budget']:,}",
            "—" if r["common_energy_j"] is None else f"{r['common_energy_j']:,.1f}",
            "—" if r["loss"] is None else f"{r['loss']:.4g}",
            _evidence(r["evidence"]),
        ]
        for r in rows
    ]
    header = ["candidate", "round", "budget", "common energy (J)", "loss (nats)", "evidence"]
    return table(header, body, left=1) if body else None
