"""Measurement quality: CS_TFLOPS and its drift per device profile, what a precision comparison of PE means, the
flags with their reasons, the sensitivity analysis and the rerun command."""

from __future__ import annotations

from typing import Any

import polars as pl
from markupsafe import Markup

from ...common.measures import TESTED, label
from ...plan.design import condition_name, series_label
from ..html import num, table, text
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    trials, stats = inputs.trials, inputs.product("stats")
    flagged = trials.filter(pl.col("quality") == "flagged").sort("run_position") if trials.height else trials
    sensitivity = stats.get("sensitivity", {})
    primary = stats.get("primary_trials", "every trial")
    basis = inputs.config.get("metric", {}).get("cs_basis", "training")
    return render_template(
        "sections/quality.html.j2",
        cs=[
            (series_label(key.rstrip("/")) if key else "", value, source) for key, (value, source) in inputs.cs.items()
        ],
        basis=cs_basis_sentence(basis, configured=any("configured" in src for _, src in inputs.cs.values())),
        disturbed=[
            (_profile_name(v["profile"]), "; ".join(v["reasons"]))
            for v in inputs.profile_check
            if v.get("status") == "disturbed"
        ],
        profiles=[_profile_table(key, profile) for key, profile in inputs.profiles.items() if profile],
        drift=_drift(trials, inputs.profile_check),
        finished=trials.height,
        flagged=flagged.height,
        flagged_table=_flagged_table(flagged) if flagged.height else None,
        rules_table=_rules_table(trials) if trials.height else None,
        idle_rules=_idle_rules(trials),
        primary=primary,
        exclude_flagged=str(inputs.exclude_flagged).lower(),
        sensitivity=sensitivity,
        sensitivity_table=_sensitivity_table(stats, primary, sensitivity),
        rerun=" ".join(inputs.rerun),
        resumed=_resumed(trials),
    )


def _resumed(trials: pl.DataFrame) -> list[str]:
    """Each resumed trial in words: how often, and the work its stopped processes lost (spent beside training)."""
    if "resumed" not in trials.columns:
        return []
    said = []
    for t in trials.filter(pl.col("resumed").fill_null(0) > 0).sort("run_position").iter_rows(named=True):
        energy = f"{t['lost_energy_j']:.4g} J and " if t.get("lost_energy_j") is not None else ""
        lost = (
            f"{energy}{t['lost_train_s']:.1f} s of training lost and done again"
            if t.get("lost_train_s") is not None
            else "the work lost before a resume is not known"
        )
        name = condition_name(t.get("series") or "", t["budget"])
        said.append(f"{name} trial {t['trial']}: resumed {t['resumed']}×, {lost}")
    return said


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * (x - 1):+.1f} %"


def _profile_name(key: str) -> str:
    return f"device profile ({series_label(key.rstrip('/'))})" if key else "device profile"


def _profile_table(key: str, profile: dict[str, Any]) -> Markup:
    """One device profile: its matmul throughput's spread, how it was measured, and the device's state around it."""
    p = profile
    rows = [
        [
            "median / 25th / 75th percentile (TFLOP/s)",
            Markup(f"{num(p['median_tflops'])} / {num(p['q25_tflops'])} / {num(p['q75_tflops'])}"),
        ],
        ["IQR (TFLOP/s), coefficient of variation", Markup(f"{num(p['iqr_tflops'])}, {num(p['cv'])}")],
        ["windows × length (s), warm-up (s)", Markup(f"{p['windows']} × {num(p['window_s'])}, {num(p['warmup_s'])}")],
        ["matmul size, dtype, threads", Markup(f"{p['matmul_size']}, {text(p['dtype'])}, {p['threads']}")],
        ["device", text(p["device_name"])],
        *[[k, text(v)] for k, v in p.items() if k.endswith(("_before", "_after")) and v is not None],
    ]
    return table([_profile_name(key), "value"], rows)


def _drift(trials: pl.DataFrame, profile_check: list[dict[str, Any]]) -> dict[str, str] | None:
    """How far the matmul checks around each trial strayed from the reference they were judged against."""
    if "check_before_ratio" not in trials.columns or not trials["check_before_ratio"].drop_nulls().len():
        return None
    ratios = pl.concat([trials["check_before_ratio"], trials["check_after_ratio"]]).drop_nulls()
    references = ", ".join(dict.fromkeys(v.get("reference", "the reference") for v in profile_check))
    return {
        "low": _pct(ratios.min()),
        "high": _pct(ratios.max()),
        "median": _pct(ratios.median()),
        "references": references or "the reference",
    }


def _flagged_table(flagged: pl.DataFrame) -> Markup:
    rows = [
        [
            condition_name(r.get("series") or "", r["budget"]),
            r["trial"],
            f"#{r['run_position']}",
            r["quality_reasons"],
        ]
        for r in flagged.iter_rows(named=True)
    ]
    return table(["condition", "trial", "ran as", "why flagged"], rows, left=4)


def _unjudged(trials: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per rule, the reasons it could not judge a trial: each kind of reason (its numbers aside) once, in its first
    trial's words (``why``), with how many trials gave it (``len``)."""
    out = {}
    for rule in [c.removeprefix("flag_") for c in trials.columns if c.startswith("flag_")]:
        column = f"unjudged_{rule}"
        why = (trials[column] if column in trials.columns else pl.Series([], dtype=pl.String)).cast(pl.String)
        kinds = pl.DataFrame({"why": why.drop_nulls()}).with_columns(
            kind=pl.col("why").str.replace_all(r"[0-9][0-9.]*", "#")
        )
        out[rule] = kinds.group_by("kind", maintain_order=True).agg(pl.col("why").first(), pl.len())
    return out


def _rules_table(trials: pl.DataFrame) -> Markup | None:
    """Rule by rule: how many trials it judged, flagged, and could not judge, with why (each kind of reason once,
    with its count); a rule that judged no trial is in ``_idle_rules``, not a row of zeros."""
    rows = []
    for rule, grouped in _unjudged(trials).items():
        unjudged = int(grouped["len"].sum())
        if unjudged == trials.height:
            continue
        reasons = "; ".join(f"{n}×, e.g. {r}" for r, n in grouped.select("why", "len").iter_rows()) or "—"
        rows.append([rule, trials.height - unjudged, int(trials[f"flag_{rule}"].sum()), unjudged, reasons])
    return table(["rule", "judged", "flagged", "not judged", "why not judged"], rows, left=5) if rows else None


def _idle_rules(trials: pl.DataFrame) -> list[str]:
    """Each rule that judged no trial, with why in its first trial's words: said in one line."""
    return [
        f"{rule} ({'; '.join(grouped['why'].to_list())})"
        for rule, grouped in _unjudged(trials).items()
        if trials.height and int(grouped["len"].sum()) == trials.height
    ]


def _sensitivity_table(stats: dict[str, Any], primary: str, sensitivity: dict[str, Any]) -> Markup | None:
    """Each tested measure's ANOVA with the flagged trials' subjects and without them."""
    rows = []
    for dv in TESTED:
        a, b = stats["anova"].get(dv), sensitivity.get("anova", {}).get(dv)
        if a is not None and b is not None:
            rows.append([label(dv), a.get("apa", a.get("message")), b.get("apa", b.get("message"))])
    header = ["measure", f"primary ({primary})", f"sensitivity ({sensitivity.get('trials', '')})"]
    return table(header, rows, left=3) if rows else None


def cs_basis_sentence(basis: str, configured: bool = False) -> str:
    """What comparing PE between precisions means under ``metric.cs_basis`` (``configured``: metric.cs_tflops is a
    number, the same for every trial, so no precision's throughput enters)."""
    if configured:
        return (
            "CS_TFLOPS is the configured number (metric.cs_tflops) for every trial, whatever its precision or device: "
            "metric.cs_basis does not apply, and PE compares precisions at that one yardstick."
        )
    if basis == "training":
        return (
            "CS_TFLOPS is each trial's own precision's (metric.cs_basis: training), the metric as defined: between "
            "precisions, PE's ratio carries the ratio of their matmul peaks (on an H200 bf16's is about 12× fp32's), so a "
            "precision comparison of PE asks how well each used what its precision offers, not which is more efficient "
            "at one yardstick; set metric.cs_basis: fp32 for that."
        )
    return (
        f"CS_TFLOPS is the {basis} matmul throughput of each trial's device (metric.cs_basis: {basis}), whatever precision "
        "the trial trained in: PE compares precisions at one yardstick, so a faster precision shows as higher PE."
    )
