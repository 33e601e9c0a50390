"""The report's Scaling section: the law with intervals that name their units, whether it fits, e(N) in both
forms, and the energy-optimal allocation beside the FLOP-optimal one (the survey's question, answered here)."""

from __future__ import annotations

from typing import Any

from ..common.measures import display_exponent, fixed, power_of_ten, si
from ..plan.design import series_label
from .html import Raw, esc, table

NAMES = ("E", "A", "B", "alpha", "beta", "a", "b")
SHOWN = {"alpha": "α", "beta": "β", "a": "a = β/(α+β)", "b": "b = α/(α+β)"}


def _scaled(x: float) -> str:
    """A bound far from its estimate keeps four digits, never a run of zeros."""
    exponent = display_exponent([x])
    return f"{fixed(x, exponent)}{power_of_ten(exponent)}"


def _ours(law: dict[str, Any], k: str) -> Raw:
    """The estimate and its interval, or the word for why there is none."""
    iv = law["intervals"][k]
    if iv["ci_low"] is not None:
        return Raw(f'{_scaled(law[k])} <span class="ci">[{_scaled(iv["ci_low"])}, {_scaled(iv["ci_high"])}]</span>')
    if (iv.get("why") or "").startswith("not identified"):
        return Raw(f'<span class="ci">not identified</span> ({_scaled(law[k])})')
    return Raw(f'{_scaled(law[k])} <span class="ci">(no interval)</span>')


def _law_html(scaling: dict[str, Any]) -> list[str]:
    published = scaling["published"]
    rows = [
        [
            Raw(esc(SHOWN.get(k, k))),
            _ours(scaling["law_total"], k),
            _ours(scaling["law_non_embedding"], k),
            *[p[k] for p in published],
        ]
        for k in NAMES
    ]
    law = scaling["law_total"]
    units = scaling["units"]
    dfs = [iv["df"] for iv in law["intervals"].values() if iv.get("df")]
    df_text = f" (Satterthwaite df {min(dfs):.1f} to {max(dfs):.1f})" if dfs else ""
    parts = [
        f"<p>L(N, D) = E + A / N^α + B / D^β, fitted as Hoffmann et al. 2022 (approach 3): Huber loss (δ = "
        f"{law['delta']:g}) on log loss, its 4 500-point start grid screened and the best starts refined by L-BFGS-B "
        f"with analytic gradients; objective {law['objective']:.6g}, "
        f"{'converged' if law['success'] else 'NOT converged'} ({esc(law['message'])}), largest gradient component "
        f"{law['grad_norm']:.2g}. Points: {esc(scaling['points'])} (scaling.points), {law['n_points']} of them from "
        f"{units.get('model size')} model sizes, {scaling['budgets']} budgets and {units.get('trial id')} trial ids."
        + (f" {esc(scaling['points_note'])}." if scaling.get("points_note") else "")
        + "</p>",
        f"<p><b>Units of the intervals:</b> {esc(scaling['interval_method'])}{df_text}. The eval points of a trial share "
        "its seed, and the trials of a size share that size's deviation from the law, so the intervals count trial ids "
        "and model sizes, not points; 95 % t intervals from the jackknife variances, E, A and B on the log scale. E, A "
        "and B depend on the tokenizer and the data: compare the exponents.</p>",
        table(["parameter", "ours, total N", "ours, non-embedding N", *[p["source"] for p in published]], rows),
    ]
    missing = [
        f"{SHOWN.get(k, k)}: {iv['why']}"
        for k, iv in law["intervals"].items()
        if iv["ci_low"] is None and iv.get("why")
    ]
    if missing:
        parts.append("<p>Without an interval (total N): " + esc("; ".join(missing)) + ".</p>")
    return parts


def _fit_verdict(scaling: dict[str, Any]) -> str:
    """Whether the law fits its cell means within the between-trial noise: said before anything is allocated."""
    lof = scaling["law_total"]["lack_of_fit"]
    cls = "warn" if lof.get("fits") is False else ""
    sd = lof.get("noise_sd_log")
    detail = (
        f" RMS residual at the {lof['cells']} cell means {lof['rms_residual_log']:.3g} in log loss against a "
        f"trial × cell SD of {sd:.3g}."
        if sd is not None
        else ""
    )
    return (
        f'<p class="{cls}"><b>Does the law fit?</b> {esc(lof["verdict"][0].upper() + lof["verdict"][1:])}.{detail}</p>'
    )


def _protocol_html(scaling: dict[str, Any]) -> list[str]:
    """Which learning rate each size × budget was fitted with, and whether the study can see model size at all."""
    parts = []
    rates = scaling.get("learning_rates") or []
    if rates:
        rows = [
            [
                Raw(f"{fixed(r['params'] / 1e6)} M"),
                Raw(si(r["budget"], "")),
                Raw(f"<b>{r['lr']:g}</b>" + (' <span class="ci">(edge of the sweep)</span>' if r["at_edge"] else "")),
                Raw(", ".join(f"{k}: {fixed(v) if v is not None else 'diverged'}" for k, v in r["tried"].items())),
            ]
            for r in rates
        ]
        edge = sum(r["at_edge"] for r in rates)
        parts.append(
            "<p>Learning rate tuned per model size × budget (design.lr): each is fitted with the trials of the rate "
            "whose trials reached the lowest mean final eval loss"
            + (
                f"; {edge} of {len(rates)} chose a rate at the edge of the sweep, where the best may lie beyond"
                if edge
                else ""
            )
            + ".</p>"
            + table(["N", "budget (tokens)", "chosen lr", "mean final loss per lr tried"], rows, left=4)
        )
    effect = scaling.get("size_effect")
    if effect and effect.get("between_seed_sd") is not None:
        words = (
            "more than the between-seed SD: the study can see model size"
            if effect["visible"]
            else "no more than the between-seed SD: at this budget the study cannot tell the sizes apart (the corpus's "
            "floor is within the smallest model's reach, or the optimiser holds the larger ones back), and α will not "
            "be identified"
        )
        cls = "" if effect["visible"] else "warn"
        parts.append(
            f'<p class="{cls}"><b>Can this study see model size?</b> At {si(effect["budget"], "")} tokens the largest model '
            f"({fixed(effect['largest']['params'] / 1e6)} M) reached {fixed(effect['largest']['mean_final_loss'])} nats and "
            f"the smallest ({fixed(effect['smallest']['params'] / 1e6)} M) {fixed(effect['smallest']['mean_final_loss'])}: "
            f"a gain of {fixed(effect['gain'])}, {words} ({fixed(effect['between_seed_sd'])}).</p>"
        )
    return parts


def _energy_html(scaling: dict[str, Any]) -> str:
    rows = []
    for e in scaling["energy_per_token"]:
        profile = Raw(esc(series_label(e["hardware"].rstrip("/")) or "the study's"))
        kind = Raw(esc(e["energy"].replace("_", " ")))
        if e["status"] != "ok":
            rows.append([profile, kind, Raw(esc(e["message"])), "", ""])
            continue
        power, affine = e["fits"]["power"], e["fits"]["affine"]
        g, (g_lo, g_hi) = power["params"]["gamma"], power["ci"]["gamma"]
        lo, hi = affine["local_slope"]
        rows.append(
            [
                profile,
                kind,
                Raw(f"{g:.3f} [{g_lo:.3f}, {g_hi:.3f}]"),
                Raw(
                    f"{si(affine['params']['e0'], 'J')} + {affine['params']['b']:.3g} J·N; local slope {lo:.2f} to {hi:.2f}"
                ),
                Raw(f"<b>{esc(e['chosen'])}</b>: {esc(e['reason'])}"),
            ]
        )
    first = next((e for e in scaling["energy_per_token"] if e["status"] == "ok"), None)
    counts = (
        f" ({first['fits']['power']['n_sizes']} sizes, {first['fits']['power']['n_trials']} trials)" if first else ""
    )
    return (
        "<h3>Joules per token against model size</h3><p>e(N) fitted to the geometric mean of each size's trials"
        f"{counts}, in two forms: a power law c · N^γ (its γ interval t-based on the sizes, df = sizes − 2) and an affine "
        "e₀ + b · N (a fixed cost per token plus a part that grows with the parameters, whose local slope rises with N); "
        "the allocation uses the chosen one (the last column says whether the data prefer it).</p>"
        + table(["device profile", "energy", "power: γ [95 % CI]", "affine: e₀ + b·N", "chosen"], rows, left=2)
    )


def _band(alloc: dict[str, Any], key: str, j: int, scale: float) -> str:
    band = alloc.get(f"{key}_band")
    if not band or band[0][j] is None:
        return ""
    return f' <span class="ci">[{fixed(band[0][j] / scale)}, {fixed(band[1][j] / scale)}]</span>'


def _allocation_html(scaling: dict[str, Any]) -> list[str]:
    alloc, flops, compare = scaling["allocation_energy"], scaling["allocation_flops"], scaling["energy_vs_flops"]
    rows = [
        [
            Raw(si(j, "J")),
            Raw(f"{fixed(n / 1e6)} M{_band(alloc, 'N', i, 1e6)}"),
            Raw(f"{fixed(d / 1e6)} M{_band(alloc, 'D', i, 1e6)}"),
            Raw(f"{fixed(loss)}{_band(alloc, 'loss', i, 1.0)}"),
            fixed(d / n),
            Raw(f"{fixed(fn / 1e6)} M / {fixed(fd / 1e6)} M"),
            Raw(
                f"{fixed(c['ratio_N'])}"
                + (
                    f' <span class="ci">[{fixed(c["ci_low"])}, {fixed(c["ci_high"])}]</span>'
                    if c["ci_low"] is not None
                    else ""
                )
            ),
            Raw("extrapolated" if x else "measured range"),
        ]
        for i, (j, n, d, loss, fn, fd, x, c) in enumerate(
            zip(
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
        )
    ]
    profile = (
        f"Device profile {esc(series_label(scaling['allocation_profile'].rstrip('/')))}, the one whose e(N) was fitted. "
        if scaling.get("allocation_profile")
        else ""
    )
    note = f" Intervals missing: {esc(alloc['band_note'])}." if alloc.get("band_note") else ""
    return [
        "<h3>The energy-optimal allocation on this hardware</h3><p>"
        + profile
        + f"For a training-energy budget J: the N and D that minimise L(N, D) subject to e(N) · D = J (total N; e(N) "
        f"{esc(scaling['energy_model']['chosen'])}), beside the compute-optimal split of the same FLOPs (C = 6ND), with "
        "95 % intervals from the same jackknife (law and e(N) refitted together without each unit). Rows outside the "
        f"measured N and D are extrapolations.{note}</p>"
        + table(
            ["energy budget", "N*", "D*", "L*", "D*/N*", "FLOP-optimal N* / D*", "N* ÷ FLOP-optimal N*", "range"], rows
        ),
        f"<p><b>Energy-optimal against FLOP-optimal.</b> {esc(energy_vs_flops_sentence(compare))}</p>",
    ]


def energy_vs_flops_sentence(compare: list[dict[str, Any]]) -> str:
    """The survey's question in one sentence: does the energy-optimal split differ from the FLOP-optimal one here?"""
    ratios = [c["ratio_N"] for c in compare]
    judged = [c for c in compare if c["differs"] is not None]
    lo, hi = min(ratios), max(ratios)
    span = f"{fixed(lo)}" if fixed(lo) == fixed(hi) else f"{fixed(lo)} to {fixed(hi)}"
    text = (
        f"Over these budgets the energy-optimal N* is {span} × the FLOP-optimal N* of the same compute "
        f"(tokens per parameter {fixed(compare[0]['tokens_per_parameter_energy'])} against "
        f"{fixed(compare[0]['tokens_per_parameter_flops'])} at the first budget). "
    )
    if not judged:
        return text + "Without intervals, whether the two splits differ beyond the noise is not judged."
    differ = sum(c["differs"] for c in judged)
    return text + (
        f"The 95 % interval of the ratio excludes 1 at {differ} of {len(judged)} budgets: "
        + (
            "on this hardware the energy-optimal split differs from the FLOP-optimal one."
            if differ == len(judged)
            else "the two splits are not distinguishable at every budget."
            if differ
            else "the data cannot tell the two splits apart."
        )
    )


def scaling_html(scaling: dict[str, Any]) -> str:
    """The law beside the published fits, its lack of fit, e(N), and the allocations."""
    if not scaling:
        return "<p>No scaling analysis was made.</p>"
    if scaling.get("status") != "ok":
        return f"<p>{esc(scaling.get('message', ''))}</p>"
    parts = [*_protocol_html(scaling), *_law_html(scaling), _energy_html(scaling), _fit_verdict(scaling)]
    if scaling.get("allocation_message"):
        parts.append(f"<p>{esc(scaling['allocation_message'])}</p>")
    if scaling.get("allocation_energy"):
        parts.extend(_allocation_html(scaling))
    return "\n".join(parts)
