"""Data selection (the selection product, design.selection): what each level kept and removed and why, what the
selection cost in joules, and the energy to each target with and without that cost."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from ...common.measures import si
from ...plan.design import condition_name
from ...selection.order import ORDER
from ...selection.steps import EVAL_FILTER
from ..html import esc, table
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    return selection_html(inputs.product("selection"))


def selection_html(selection: Mapping[str, Any]) -> Markup:
    """The section from the selection product (tokenwatt.analysis.selection.cost.selection_product)."""
    costs, shared = selection["levels"], selection["shared"]
    steps = [("eval set" if s["step"] == EVAL_FILTER else "every level", s) for s in shared]
    steps += [(c["level"], s) for c in costs for s in c["steps"]]
    evaluated = next((s for s in shared if s["step"] == EVAL_FILTER), None)
    return render_template(
        "sections/selection.html.j2",
        estimate=any(c["is_estimate"] for c in costs),
        eval_kept=None if evaluated is None else (evaluated["kept"], evaluated["documents_in"]),
        scopes=_scopes(costs),
        steps=table(
            ["level", "step", "settings", "documents in", "kept", "removed by", "energy", "time (s)"],
            [_step_row(level, s) for level, s in steps],
        ),
        levels=table(
            ["level", "training documents", "its steps", "eval clearance", "selection in full", "trials trained on it"],
            [
                [
                    c["level"],
                    c["documents"],
                    _joules(c["joules"]),
                    _joules(c["shared_joules"]),
                    _joules(c["selection_j"]),
                    c["trials"],
                ]
                for c in costs
            ],
        ),
        with_selection=_with_selection(selection["energy_to_target"]),
        examples=[(level, s["step"], e) for level, s in steps for e in s["examples"]],
        orders=[(c["level"], _order_words(s)) for c in costs for s in c["steps"] if s["step"] == ORDER],
    )


def _order_words(step: Mapping[str, Any]) -> str:
    """How a level orders its training documents, in words: as read, or its curriculum's measure, direction and the
    measure's values at the start, middle and end of the order."""
    by = step.get("ranked_by")
    if by is None:
        return "in the order the corpus gives them, every epoch"
    values = ", ".join(f"{k} {by[k]:.3g}" for k in ("first", "median", "last") if k in by)
    return f"in a curriculum by {by['score']}, {by['direction']} ({by['score']}: {values}), every epoch"


def _scopes(costs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """Each level whose selection was measured by another meter than its training: (level, selection's, training's)."""
    return [
        (c["level"], ", ".join(c["selection_meters"]), ", ".join(c["training_meters"]))
        for c in costs
        if c["training_meters"] and c["selection_meters"] != c["training_meters"]
    ]


def _joules(x: float | None) -> str:
    return si(x, "J") if x is not None else "not measured"


def _step_row(level: str, s: Mapping[str, Any]) -> list[Any]:
    removed = ", ".join(f"{rule} {n}" for rule, n in s["removed_by"].items()) or "—"
    settings = json.dumps(s["settings"], sort_keys=False)
    return [
        level,
        s["step"],
        Markup(f"<code>{esc(settings)}</code>") if s["settings"] else "not applied",
        s["documents_in"],
        s["kept"],
        removed,
        _joules(s["energy"]["energy_j"]),
        f"{s['energy']['duration_s']:.2f}",
    ]


def _with_selection(rows: Sequence[Mapping[str, Any]]) -> Markup | None:
    """Each target's training energy of one run, the level's whole selection cost and its % of that run, their sum."""
    if not rows:
        return None
    return table(
        ["target", "condition", "reached", "one run's training", "selection in full", "% of the run", "together"],
        [
            [
                r["target"],
                condition_name(r["series"], r["budget"]),
                f"{r['n_reached']} of {r['n']}"
                + (f" ({r['n_at_first_point']} an upper bound)" if r.get("n_at_first_point") else ""),
                _joules(r["training_j"]),
                _joules(r["selection_j"]),
                f"{r['selection_pct_of_run']:.1f} %" if r.get("selection_pct_of_run") is not None else "—",
                _joules(r["with_selection_j"]),
            ]
            for r in rows
        ],
    )
