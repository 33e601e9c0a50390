"""Scaling (the scaling product) and its figures: the law with intervals that name their units, whether it fits, e(N)
in both forms, and the energy-optimal allocation beside the FLOP-optimal one (the survey's question, answered
here)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ...analysis.products import product
from ...common.measures import display_exponent, fixed, power_of_ten, si
from ...plan.design import series_label
from ..html import noted, table, text
from ..inputs import ReportInputs
from ..templating import render_template
from .figures import figures_html

NAMES = ("E", "A", "B", "alpha", "beta", "a", "b")
SHOWN = {"alpha": "α", "beta": "β", "a": "a = β/(α+β)", "b": "b = α/(α+β)"}


def render(inputs: ReportInputs) -> Markup:
    """The section; its figures only for a fitted law (unfitted, each would repeat the section's one sentence)."""
    scaling = inputs.product("scaling")
    fitted = bool(scaling) and scaling.get("status") == "ok"
    return render_template(
        "sections/scaling.html.j2",
        body=scaling_html(scaling),
        figures=figures_html({k: v for k, v in inputs.figures.items() if k in product("scaling").figures})
        if fitted
        else "",
    )


def scaling_html(scaling: dict[str, Any]) -> Markup:
    """The law beside the published fits, its lack of fit, e(N), and the allocations."""
    front = (scaling or {}).get("frontier") or {}
    shown = {
        "frontier": front,
        "frontier_table": _frontier(front) if front.get("status") == "ok" else None,
        "frontier_refusals": _frontier_refusals(front) if front.get("status") == "ok" else [],
        "frontier_versus": _frontier_versus(front.get("energy_vs_flop")) if front.get("status") == "ok" else None,
    }
    if not scaling or scaling.get("status") != "ok":
        return render_template("sections/scaling_body.html.j2", scaling=scaling, **shown)
    law = scaling["law_total"]
    alloc = scaling.get("allocation_energy")
    return render_template(
        "sections/scaling_body.html.j2",
        scaling=scaling,
        law=law,
        rates=_rates(scaling.get("learning_rates") or []),
        size_effect=scaling.get("size_effect") or {},
        dfs=[iv["df"] for iv in law["intervals"].values() if iv.get("df")],
        law_table=_law_table(scaling),
        without_interval="; ".join(
            f"{SHOWN.get(k, k)}: {iv['why']}"
            for k, iv in law["intervals"].items()
            if iv["ci_low"] is None and iv.get("why")
        ),
        energy=_energy(scaling["energy_per_token"]),
        first_fit=next((e["fits"]["power"] for e in scaling["energy_per_token"] if e["status"] == "ok"), None),
        allocation=_allocation(scaling) if alloc else None,
        versus=energy_vs_flops_sentence(scaling["energy_vs_flops"]) if alloc else "",
        **shown,
    )


def _scaled(x: float) -> str:
    """A bound far from its estimate keeps four digits, never a run of zeros."""
    exponent = display_exponent([x])
    return f"{fixed(x, exponent)}{power_of_ten(exponent)}"


def _ours(law: dict[str, Any], k: str) -> Markup:
    """The estimate and its interval, or the word for why there is none."""
    iv = law["intervals"][k]
    if iv["ci_low"] is not None:
        return noted(_scaled(law[k]), f"[{_scaled(iv['ci_low'])}, {_scaled(iv['ci_high'])}]")
    if (iv.get("why") or "").startswith("not identified"):
        return Markup(f'<span class="ci">not identified</span> ({text(_scaled(law[k]))})')
    return noted(_scaled(law[k]), "(no interval)")


def _law_table(scaling: dict[str, Any]) -> Markup:
    published = scaling["published"]
    rows = [
        [SHOWN.get(k, k), _ours(scaling["law_total"], k), _ours(scaling["law_non_embedding"], k)]
        + [p[k] for p in published]
        for k in NAMES
    ]
    return table(["parameter", "ours, total N", "ours, non-embedding N", *[p["source"] for p in published]], rows)


def _rates(rates: list[dict[str, Any]]) -> Markup | None:
    """Which learning rate each size × budget was fitted with (design.lr)."""
    rows = [
        [
            f"{fixed(r['params'] / 1e6)} M",
            si(r["budget"], ""),
            Markup(f"<b>{r['lr']:g}</b>") + noted("", "(edge of the sweep)" if r["at_edge"] else None),
            ", ".join(f"{k}: {fixed(v) if v is not None else 'diverged'}" for k, v in r["tried"].items()),
        ]
        for r in rates
    ]
    return table(["N", "budget", "chosen lr", "mean final loss per lr tried"], rows, left=4) if rows else None


def _energy(energy_per_token: list[dict[str, Any]]) -> Markup:
    """e(N) per device profile and energy: the power law's γ, the affine form, and which one the allocation uses."""
    rows = []
    for e in energy_per_token:
        profile, kind = series_label(e["hardware"].rstrip("/")) or "the study's", e["energy"].replace("_", " ")
        if e["status"] != "ok":
            rows.append([profile, kind, e["message"], "", ""])
            continue
        power, affine = e["fits"]["power"], e["fits"]["affine"]
        g, (g_lo, g_hi) = power["params"]["gamma"], power["ci"]["gamma"]
        lo, hi = affine["local_slope"]
        rows.append(
            [
                profile,
                kind,
                f"{g:.3f} [{g_lo:.3f}, {g_hi:.3f}]",
                f"{si(affine['params']['e0'], 'J')} + {affine['params']['b']:.3g} J·N; local slope {lo:.2f} to {hi:.2f}",
                Markup(f"<b>{text(e['chosen'])}</b>: {text(e['reason'])}"),
            ]
        )
    return table(["device profile", "energy", "power: γ [95 % CI]", "affine: e₀ + b·N", "chosen"], rows, left=2)


def _band(alloc: dict[str, Any], key: str, j: int, scale: float) -> str | None:
    band = alloc.get(f"{key}_band")
    if not band or band[0][j] is None:
        return None
    return f"[{fixed(band[0][j] / scale)}, {fixed(band[1][j] / scale)}]"


def _allocation(scaling: dict[str, Any]) -> Markup:
    """The energy-optimal N, D and loss per energy budget beside the FLOP-optimal split of the same compute."""
    alloc, flops, compare = scaling["allocation_energy"], scaling["allocation_flops"], scaling["energy_vs_flops"]
    columns = zip(
        alloc["budget"],
        alloc["N"],
        alloc["D"],
        alloc["loss"],
        flops["N"],
        flops["D"],
        alloc["extrapolated"],
        compare,
        strict=True,
    )
    rows = [
        [
            si(j, "J"),
            noted(f"{fixed(n / 1e6)} M", _band(alloc, "N", i, 1e6)),
            noted(f"{fixed(d / 1e6)} M", _band(alloc, "D", i, 1e6)),
            noted(fixed(loss), _band(alloc, "loss", i, 1.0)),
            fixed(d / n),
            f"{fixed(fn / 1e6)} M / {fixed(fd / 1e6)} M",
            noted(
                fixed(c["ratio_N"]),
                f"[{fixed(c['ci_low'])}, {fixed(c['ci_high'])}]" if c["ci_low"] is not None else None,
            ),
            "extrapolated" if x else "measured range",
        ]
        for i, (j, n, d, loss, fn, fd, x, c) in enumerate(columns)
    ]
    header = ["energy budget", "N*", "D*", "L*", "D*/N*", "FLOP-optimal N* / D*", "N* ÷ FLOP-optimal N*", "range"]
    return table(header, rows)


def energy_vs_flops_sentence(compare: list[dict[str, Any]]) -> str:
    """The survey's question in one sentence: does the energy-optimal split differ from the FLOP-optimal one here?"""
    ratios = [c["ratio_N"] for c in compare]
    judged = [c for c in compare if c["differs"] is not None]
    lo, hi = min(ratios), max(ratios)
    span = f"{fixed(lo)}" if fixed(lo) == fixed(hi) else f"{fixed(lo)} to {fixed(hi)}"
    sentence = (
        f"Over these budgets the energy-optimal N* is {span} × the FLOP-optimal N* of the same compute "
        f"(tokens per parameter {fixed(compare[0]['tokens_per_parameter_energy'])} against "
        f"{fixed(compare[0]['tokens_per_parameter_flops'])} at the first budget). "
    )
    reasons = "; ".join(dict.fromkeys(c["not_judged"] for c in compare if c.get("not_judged")))
    if not judged:
        return sentence + f"Whether the two splits differ is not judged at any budget: {reasons}."
    differ = sum(c["differs"] for c in judged)
    beyond = sum(bool(c.get("extrapolated")) for c in judged)
    sentence += (
        f"At {beyond} of the budgets judged an optimum lies beyond the measured model sizes or tokens, where the "
        "law's form, not a measurement, carries it. "
        if beyond
        else ""
    )
    return sentence + (
        f"The 95 % interval of the ratio excludes 1 at {differ} of the {len(judged)} budgets judged "
        + (f"({len(compare) - len(judged)} not judged: {reasons}): " if reasons else ": ")
        + (
            "on this hardware the energy-optimal split differs from the FLOP-optimal one."
            if differ == len(judged)
            else "the two splits are not distinguishable at every budget."
            if differ
            else "the data cannot tell the two splits apart."
        )
    )


APPROACH_NAMES = {"envelope": "lower envelope", "isoenergy": "iso-energy slices", "law": "law with e(N)"}


def _frontier_cell(e: dict[str, Any]) -> Markup:
    """One approach at one energy: N* with its interval, D* and L*, or "refused"."""
    if e["n_opt"] is None:
        return Markup('<span class="ci">refused</span>')
    band = f"[{si(e['n_low'], '')}, {si(e['n_high'], '')}]" if e["n_low"] is not None else "(no interval)"
    beyond = "".join(
        f", beyond the {what} measured"
        for what, flag in (("sizes", e["beyond_sizes"]), ("tokens", e.get("beyond_tokens")))
        if flag
    )
    return noted(si(e["n_opt"], ""), band + beyond) + Markup(
        f"<br>D* {text(si(e['d_opt'], ''))}, L* {text(fixed(e['loss_opt']))}"
    )


def _frontier(front: dict[str, Any]) -> Markup:
    """Per energy: each approach's N* (interval), D* and L*, and whether the N* intervals agree."""
    approaches = front["approaches"]
    rows = []
    for j, energy in enumerate(front["energies_j"]):
        agreement = front["agreement"][j]
        compared = ", ".join(APPROACH_NAMES[a] for a in agreement["with_intervals"])
        verdict = "—" if agreement["agree"] is None else f"{'agree' if agreement['agree'] else 'disagree'} ({compared})"
        rows.append([si(energy, "J"), *(_frontier_cell(a["estimates"][j]) for a in approaches.values()), text(verdict)])
    return table(["energy", *(APPROACH_NAMES[k] for k in approaches), "N* intervals"], rows)


def _frontier_versus(versus: dict[str, Any] | None) -> str | None:
    """The slices' energy- against FLOP-optimal size at each energy where both are interior, in one paragraph: what
    each interval says, energy by energy, and no verdict beyond them (the energies share their points)."""
    if not versus:
        return None
    found = [e for e in versus["estimates"] if e["ratio"] is not None]
    intro = (
        "At each energy, the iso-energy optimum N*_E trains some number of FLOPs; the same slices on the compute "
        f"axis (FLOPs counted as {versus.get('flops', '6ND')}) give the FLOP-optimal N*_C of that compute from the same points. "
    )
    if not found:
        whys = "; ".join(dict.fromkeys(e["why"] for e in versus["estimates"] if e["why"]))
        return intro + f"No ratio at any energy reported: {whys}."
    parts = []
    for e in found:
        band = (
            f" [{fixed(e['ratio_low'])}, {fixed(e['ratio_high'])}]"
            if e["ratio_low"] is not None
            else f" (no interval: {e['interval_why']})"
        )
        verdict = "" if e["excludes_one"] is None else (", excludes 1" if e["excludes_one"] else ", includes 1")
        parts.append(
            f"at {si(e['energy_j'], 'J')} N*_E {si(e['n_energy'], '')} against N*_C {si(e['n_flop'], '')}: "
            f"{fixed(e['ratio'])}×{band}{verdict}"
        )
    judged = [e for e in found if e["excludes_one"] is not None]
    above = sum(bool(e["excludes_one"]) and e["ratio"] > 1 for e in judged)
    below = sum(bool(e["excludes_one"]) and e["ratio"] < 1 for e in judged)
    said = (
        f"Each 95 % interval ({versus['intervals']}) stands for its own energy (the energies share their points; no "
        f"correction for several): {above + below} of {len(judged)} exclude 1"
        + (f" ({above} with N*_E above N*_C, {below} below)" if above + below else "")
        + "."
        if judged
        else "No energy has an interval."
    )
    listed = "; ".join(parts)
    return intro + listed[0].upper() + listed[1:] + f" ({len(found)} of {len(versus['estimates'])} energies). " + said


def _frontier_refusals(front: dict[str, Any]) -> list[str]:
    """Each approach's reasons for refusing, once each, with at how many energies."""
    out = []
    for name, approach in front["approaches"].items():
        whys: dict[str, int] = {}
        for e in approach["estimates"]:
            if e["why"]:
                whys[e["why"]] = whys.get(e["why"], 0) + 1
        out += [
            f"{APPROACH_NAMES[name]}, at {n} of {len(approach['estimates'])} energies: {w}" for w, n in whys.items()
        ]
    return out
