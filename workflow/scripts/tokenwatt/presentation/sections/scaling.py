"""Scaling (the scaling product) and its figures: the law with intervals that name their units, whether it fits, e(N)
in both forms, and the energy-optimal allocation beside the FLOP-optimal one (the survey's question, answered
here)."""

from __future__ import annotations

from typing import Any

import numpy as np
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


def unsure(value: str, note: str = "(no interval)") -> Markup:
    """An estimate without an interval: greyed, so a table's eye never reads it as a finding beside those that have
    one."""
    return Markup(f'<span class="no-interval">{text(value)}</span> <span class="ci">{text(note)}</span>')


def _estimate(value: str, band: str | None) -> Markup:
    return noted(value, band) if band else unsure(value)


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
            _estimate(f"{fixed(n / 1e6)} M", _band(alloc, "N", i, 1e6)),
            _estimate(f"{fixed(d / 1e6)} M", _band(alloc, "D", i, 1e6)),
            _estimate(fixed(loss), _band(alloc, "loss", i, 1.0)),
            fixed(d / n),
            f"{fixed(fn / 1e6)} M / {fixed(fd / 1e6)} M",
            _estimate(
                fixed(c["ratio_N"]),
                f"[{fixed(c['ci_low'])}, {fixed(c['ci_high'])}]" if c["ci_low"] is not None else None,
            ),
            "extrapolated" if x else "measured range",
        ]
        for i, (j, n, d, loss, fn, fd, x, c) in enumerate(columns)
    ]
    header = ["energy budget", "N*", "D*", "L*", "D*/N*", "FLOP-optimal N* / D*", "N* ÷ FLOP-optimal N*", "range"]
    return table(header, rows)


def _wide(widths: list[float]) -> str:
    """How wide the intervals that hold 1 are, as factors from end to end: what a difference could be and go unseen."""
    if len(widths) == 1:
        return f"the interval is ×{fixed(widths[0])} wide"
    return f"the intervals are ×{fixed(min(widths))} to ×{fixed(max(widths))} wide"


def _left_out(compare: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The budgets a verdict may rest on, and a clause for each kind left out: those without an interval (refusals,
    never read), those not judged for another reason (the law in doubt, a budget outside the energies), and those
    judged whose optimum lies beyond the measured sizes or tokens (the law's form carries them, not a measurement)."""
    m = len(compare)
    refused = [c for c in compare if c["ci_low"] is None]
    other = [c for c in compare if c["ci_low"] is not None and c["differs"] is None]
    beyond = [c for c in compare if c["differs"] is not None and c.get("extrapolated")]
    judged = [c for c in compare if c["differs"] is not None and not c.get("extrapolated")]
    said = []
    if refused:
        whys = "; ".join(
            dict.fromkeys(c["not_judged"] for c in refused if c.get("not_judged") not in (None, "no interval"))
        )
        said.append(f"{len(refused)} of {m} budgets have no interval" + (f" ({whys})" if whys else "") + ": not read")
    if other:
        whys = "; ".join(dict.fromkeys(c["not_judged"] for c in other if c.get("not_judged")))
        said.append(f"{len(other)} of {m} budgets not judged: {whys}")
    if beyond:
        said.append(
            f"{len(beyond)} of {m} budgets left out of the verdict because an optimum lies beyond the measured model "
            "sizes or tokens, where the law's form, not a measurement, carries it"
        )
    return judged, said


def energy_vs_flops_sentence(compare: list[dict[str, Any]]) -> str:
    """The survey's question in one sentence: does the energy-optimal split differ from the FLOP-optimal one here?
    Read only at budgets with an interval and with both optima inside the measured sizes and tokens; the rest are
    counted and said, never read."""
    judged, left_out = _left_out(compare)
    aside = " (" + "; ".join(left_out) + ")" if left_out else ""
    if not judged:
        return f"Whether the two splits differ is not judged at any of the {len(compare)} budgets{aside}."
    ratios = [c["ratio_N"] for c in judged]
    lo, hi = min(ratios), max(ratios)
    span = f"{fixed(lo)}" if fixed(lo) == fixed(hi) else f"{fixed(lo)} to {fixed(hi)}"
    sentence = (
        f"At the {len(judged)} of {len(compare)} budgets judged{aside}, the energy-optimal N* is {span} × the "
        f"FLOP-optimal N* of the same compute (tokens per parameter {fixed(judged[0]['tokens_per_parameter_energy'])} "
        f"against {fixed(judged[0]['tokens_per_parameter_flops'])} at the first of them). "
    )
    differ = sum(c["differs"] for c in judged)
    held = [c["ci_high"] / c["ci_low"] for c in judged if not c["differs"]]
    return sentence + (
        f"The 95 % interval of the ratio excludes 1 at {differ} of the {len(judged)}: "
        + (
            "on this hardware the energy-optimal split differs from the FLOP-optimal one."
            if differ == len(judged)
            else f"the two splits are not distinguishable at every budget; where the interval holds 1 no difference "
            f"is shown ({_wide(held)})."
            if differ
            else f"no difference shown; {_wide(held)}."
        )
    )


APPROACH_NAMES = {"envelope": "lower envelope", "isoenergy": "iso-energy slices", "law": "law with e(N)"}


SHORT_NAMES = {"envelope": "envelope", "isoenergy": "slices", "law": "law"}


def _frontier_cell(e: dict[str, Any]) -> Markup:
    """One approach at one energy: N* with its interval (greyed without one), D* and L*, or "refused"."""
    if e["n_opt"] is None:
        return Markup('<span class="ci">refused</span>')
    beyond = "".join(
        f", beyond the {what} measured"
        for what, flag in (("sizes", e["beyond_sizes"]), ("tokens", e.get("beyond_tokens")))
        if flag
    )
    if e["n_low"] is None:
        shown = unsure(si(e["n_opt"], ""), "(no interval" + beyond + ")")
    else:
        shown = noted(si(e["n_opt"], ""), f"[{si(e['n_low'], '')}, {si(e['n_high'], '')}]" + beyond)
    return shown + Markup(f"<br>D* {text(si(e['d_opt'], ''))}, L* {text(fixed(e['loss_opt']))}")


def _pair_verdict(t: dict[str, Any]) -> Markup:
    """One pair's test at one energy: contradict (bold, with N*'s ratio and its paired interval), no contradiction
    detected with the interval's width, or not tested (greyed; its reason is listed under Refused)."""
    names = " – ".join(SHORT_NAMES[a] for a in t["approaches"])
    if t["contradict"] is None:
        return Markup(f'<span class="no-interval">{text(names)}: not tested</span>')
    if not t["contradict"]:
        return text(f"{names}: {t['verdict']}")
    ratio = "N* ratio {} [{}, {}]".format(*(fixed(np.exp(t[k])) for k in ("log_difference", "log_low", "log_high")))
    return Markup(f"<b>{text(names)}: contradict</b> ") + noted("", f"({ratio})")


def _frontier(front: dict[str, Any]) -> Markup:
    """Per energy: each approach's N* (interval), D* and L*, and the paired test of each pair's N*."""
    approaches = front["approaches"]
    rows = []
    for j, energy in enumerate(front["energies_j"]):
        agreement = front["agreement"][j]
        tests = [_pair_verdict(t) for t in agreement["pairs"]]
        tests += [text(f"{APPROACH_NAMES[a]} left out: in doubt") for a in agreement["left_out"]]
        cells = [_frontier_cell(a["estimates"][j]) for a in approaches.values()]
        rows.append([si(energy, "J"), *cells, Markup("<br>".join(tests))])
    return table(["energy", *(APPROACH_NAMES[k] for k in approaches), "paired test of N* (difference of log N*)"], rows)


def _frontier_versus(versus: dict[str, Any] | None) -> str | None:
    """The slices' energy- against FLOP-optimal size at each energy with an interval, in one paragraph: what each
    interval says, energy by energy, and no verdict beyond them (the energies share their points). An energy without
    an interval is counted as a refusal with its reason and never read, not even as a lean."""
    if not versus:
        return None
    rows = versus["estimates"]
    with_interval = [e for e in rows if e["ratio_low"] is not None]
    without = [e for e in rows if e["ratio_low"] is None]
    whys = "; ".join(dict.fromkeys(e["interval_why"] or e["why"] for e in without if e["interval_why"] or e["why"]))
    refusals = f"{len(without)} of {len(rows)} energies have no interval" + (f" ({whys})" if whys else "")
    intro = (
        "At each energy, the iso-energy optimum N*_E trains some number of FLOPs; the same slices on the compute "
        f"axis (FLOPs counted as {versus.get('flops', '6ND')}) give the FLOP-optimal N*_C of that compute from the same points. "
    )
    if not with_interval:
        return intro + refusals + ": nothing is read off them."
    parts = []
    for e in with_interval:
        found = f"{fixed(e['ratio'])}× [{fixed(e['ratio_low'])}, {fixed(e['ratio_high'])}]"
        verdict = (
            ", excludes 1"
            if e["excludes_one"]
            else f": no difference shown; the interval is ×{fixed(e['ratio_high'] / e['ratio_low'])} wide"
        )
        parts.append(
            f"at {si(e['energy_j'], 'J')} N*_E {si(e['n_energy'], '')} against N*_C {si(e['n_flop'], '')}: {found}{verdict}"
        )
    above = sum(bool(e["excludes_one"]) and e["ratio"] > 1 for e in with_interval)
    below = sum(bool(e["excludes_one"]) and e["ratio"] < 1 for e in with_interval)
    said = (
        f"Each 95 % interval ({versus['intervals']}) stands for its own energy (the energies share their points; no "
        f"correction for several): {above + below} of {len(with_interval)} exclude 1"
        + (f" ({above} with N*_E above N*_C, {below} below)" if above + below else "")
        + "."
    )
    listed = "; ".join(parts)
    counted = f" ({len(with_interval)} of {len(rows)} energies with an interval). "
    return intro + listed[0].upper() + listed[1:] + counted + said + (f" {refusals}: not read." if without else "")


def _frontier_refusals(front: dict[str, Any]) -> list[str]:
    """Each approach's reasons for refusing, and each pair's for going untested, once each, with at how many
    energies."""
    out = []
    for name, approach in front["approaches"].items():
        whys: dict[str, int] = {}
        for e in approach["estimates"]:
            if e["why"]:
                whys[e["why"]] = whys.get(e["why"], 0) + 1
        out += [
            f"{APPROACH_NAMES[name]}, at {n} of {len(approach['estimates'])} energies: {w}" for w, n in whys.items()
        ]
    untested: dict[tuple[str, str], int] = {}
    for agreement in front["agreement"]:
        for t in agreement["pairs"]:
            # A pair without an N* is already said by its approach's refusal above.
            if t["why"] and not t["why"].startswith("no N* from"):
                key = (" – ".join(SHORT_NAMES[a] for a in t["approaches"]), t["why"])
                untested[key] = untested.get(key, 0) + 1
    m = len(front["agreement"])
    return out + [f"the paired test {pair}, at {n} of {m} energies: {why}" for (pair, why), n in untested.items()]
