"""The report's Data selection section: what each level kept and removed and why, what the selection cost in joules,
and the energy to each target with and without that cost."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from ..analysis.selection import SHARED, energy_to_target_with_selection, level_costs
from ..common.measures import si
from ..plan.design import condition_name
from .html import Raw, esc, table


def _removed(step: Mapping[str, Any]) -> str:
    return ", ".join(f"{rule} {n}" for rule, n in step["removed_by"].items()) or "—"


def _joules(x: float | None) -> str:
    return si(x, "J") if x is not None else "not measured"


def _step_rows(level: str, steps: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [
            Raw(esc(level)),
            Raw(esc(s["step"])),
            Raw(f"<code>{esc(json.dumps(s['settings'], sort_keys=False))}</code>" if s["settings"] else "not applied"),
            s["documents_in"],
            s["kept"],
            Raw(esc(_removed(s))),
            Raw(_joules(s["energy"]["energy_j"])),
            f"{s['energy']['duration_s']:.2f}",
        ]
        for s in steps
    ]


def _examples(level: str, steps: Sequence[Mapping[str, Any]]) -> str:
    items = [
        f"<li><b>{esc(level)}, {esc(s['step'])}</b>: doc {e['doc_id']}, {esc(e['why'])}: "
        f"<code>{esc(e['text'][:160])}</code></li>"
        for s in steps
        for e in s["examples"]
    ]
    return "".join(items)


def selection_html(
    records: Mapping[str, Sequence[Mapping[str, Any]]], trials: pl.DataFrame, curves: Mapping[str, Any]
) -> str:
    """The section from the steps' records (by level; SHARED for the eval clearance), the trials and the curves."""
    costs = level_costs(records, trials)
    shared = records.get(SHARED, [])
    estimate = any(c["is_estimate"] for c in costs)
    parts = [
        "<p>Every level trains on the same tokenizer and is scored on the same eval documents, both taken before any "
        "selection; training documents that near-duplicate an eval document are removed from every level first. Each "
        "step ran in its own metered window"
        + (" (energy ESTIMATED: no power sensor)" if estimate else "")
        + "; a level's joules are amortised over the trials that trained on it, the shared clearance's over every "
        "trial.</p>",
        table(
            ["level", "step", "settings", "documents in", "kept", "removed by", "energy", "time (s)"],
            _step_rows("every level", shared) + [row for c in costs for row in _step_rows(c["level"], c["steps"])],
        ),
        table(
            ["level", "training documents", "its steps", "shared clearance", "trials", "selection per trial"],
            [
                [
                    Raw(esc(c["level"])),
                    c["documents"],
                    Raw(_joules(c["joules"])),
                    Raw(_joules(c["shared_joules"])),
                    c["trials"],
                    Raw(_joules(c["share_per_trial_j"])),
                ]
                for c in costs
            ],
        ),
    ]
    rows = energy_to_target_with_selection(curves.get("energy_to_target") or [], costs)
    if rows:
        parts.append(
            "<h3>Energy to each target, with and without the selection</h3><p>Training energy: the geometric mean over "
            "the trials that reached the target (the Energy to quality section); with the selection: plus the level's "
            "share per trial.</p>"
            + table(
                ["target", "condition", "reached", "training", "+ selection", "with selection"],
                [
                    [
                        Raw(esc(r["target"])),
                        Raw(esc(condition_name(r["series"], r["budget"]))),
                        f"{r['n_reached']} of {r['n']}",
                        Raw(_joules(r["training_j"])),
                        Raw(_joules(r["selection_j"])),
                        Raw(_joules(r["with_selection_j"])),
                    ]
                    for r in rows
                ],
            )
        )
    examples = _examples("every level", shared) + "".join(_examples(c["level"], c["steps"]) for c in costs)
    if examples:
        parts.append(f"<h3>What was removed, and why (the first of each step)</h3><ul>{examples}</ul>")
    return "".join(parts)
