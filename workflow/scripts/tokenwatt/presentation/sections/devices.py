"""Devices (the devices product, design.devices): does a second device buy quality per joule, or only time? Each
level with more devices against the fewest, paired by trial id, with the interval over trial ids."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ...analysis.apa import p_value
from ..html import table
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    devices = inputs.product("devices")
    return render_template(
        "sections/devices.html.j2",
        estimate=inputs.estimated,
        comparisons=devices.get("comparisons", []),
        confidence=devices.get("confidence", 0.95),
        left_out=devices.get("trial_ids_left_out", []),
        table=_table(devices.get("comparisons", [])),
    )


def _ratio(m: dict[str, Any]) -> str:
    if m["ratio"] is None:
        return "—"
    interval = f" [{m['low']:.3g}, {m['high']:.3g}]" if m["low"] is not None else " (no interval)"
    return f"×{m['ratio']:.3g}{interval}"


def _table(comparisons: list[dict[str, Any]]) -> Markup | None:
    rows = [
        [
            f"{c['devices']} vs {c['reference']}",
            m["measure"],
            _ratio(m),
            p_value(m["p"]) if m["p"] is not None else "—",
            m["verdict"],
            m["trial_ids"],
            m["pairs"],
        ]
        for c in comparisons
        for m in c["measures"].values()
    ]
    header = ["devices", "measure", "ratio [95 % CI]", "p", "verdict", "trial ids", "pairs"]
    return table(header, rows, left=2) if rows else None
