"""The trials product's figures (matplotlib, headless): each function takes tables and returns a Figure; ``draw`` is
the product's (``tokenwatt.analysis.products``), drawing every one from the aggregate's tables and the product's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib import ticker  # noqa: E402

from ..analysis.frame import frame, in_frame  # noqa: E402
from ..analysis.tables import series_blocks  # noqa: E402
from ..analysis.traces import traces_of  # noqa: E402
from ..common.measures import (  # noqa: E402
    LOG_MAX_FLOAT,
    MEASURES,
    budget_label,
    display,
    display_exponent,
    label,
    power_of_ten,
    scale_of,
)
from ..measurement.traces import by_rank, training_samples  # noqa: E402
from ..plan.design import LEVEL_PREFIX, condition_name, factor_name, parse_cell, series_label  # noqa: E402
from .memory_figure import memory_vs_energy  # noqa: E402


class _PlainLog(ticker.LogFormatter):
    """A log axis's tick labels as plain numbers ("2", "300", "5,000", "0.05"; from ten thousand on "20k", "1M"), never
    "2 × 10⁰"."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        if x >= 1e4:
            exponent = min(12, int(np.floor(np.log10(x) / 3) * 3))
            return f"{x / 10**exponent:g}{ {3: 'k', 6: 'M', 9: 'G', 12: 'T'}[exponent] }"
        return f"{x:,.0f}" if x >= 1 else f"{x:.6f}".rstrip("0").rstrip(".") if x >= 1e-4 else f"{x:g}"


def plain_ticks(ax, *axes: str) -> None:
    """Plain tick labels on ``ax``'s log axes among ``axes`` ("x", "y"): the major ticks and, where a range holds too
    few decades to read, the minor ones (matplotlib's own choice of which)."""
    for name in axes:
        axis = getattr(ax, f"{name}axis")
        if axis.get_scale() == "log":
            axis.set_major_formatter(_PlainLog(labelOnlyBase=False))
            axis.set_minor_formatter(_PlainLog(labelOnlyBase=False))


def _from_zero(ax, values: list[float]) -> None:
    """A power axis from 0 W on a linear scale, so that a difference in power shows at its true size (32.4 against
    33.2 W is 2.5 %, not a cliff)."""
    ax.set_yscale("linear")
    ax.set_ylim(0, 1.1 * max([v for v in values if v is not None and np.isfinite(v)], default=1.0))


def _spread_note(values: list[float]) -> str:
    """How far apart ``values`` (centres of a ratio-scale measure) are, the largest over the smallest, in words."""
    shown = [v for v in values if v is not None and np.isfinite(v) and v > 0]
    if len(shown) < 2:
        return ""
    return f"the conditions' centres differ by at most {100 * (max(shown) / min(shown) - 1):.1f} %"


def _estimate_note(estimated: bool) -> str:
    return "\n(power and energy ESTIMATED from CPU utilisation × TDP, not measured)" if estimated else ""


def _series(table: pl.DataFrame) -> list[str]:
    return [s for s, _ in series_blocks(table)]


def _of(table: pl.DataFrame, series: str) -> pl.DataFrame:
    return table.filter(pl.col("series") == series) if "series" in table.columns else table


def _centre_name(measure: str) -> str:
    return "geometric mean ± 95 % CI" if scale_of(measure) == "log" else "mean ± 95 % CI"


def _paired(
    ax, trials: pl.DataFrame, conditions: pl.DataFrame, measure: str, scale: float = 1.0, unit_label: str | None = None
) -> None:
    """Every trial as a point, its budgets joined by a line, and the centre ± 95 % CI on the measure's scale
    (a log-scale measure: geometric mean, on a log axis, where equal ratios look equal): one line per series
    (the levels of the other factors), an interaction plot when there are several."""
    budgets = sorted(trials["budget"].unique().to_list())
    # A log2 axis: budgets that double sit one step apart, and any other spacing shows as what it is.
    x = {b: float(np.log2(b)) for b in budgets}
    step = float(np.diff(list(x.values())).min()) if len(budgets) > 1 else 1.0
    all_series = _series(trials)
    one = len(all_series) == 1
    for k, series in enumerate(all_series):
        colour = "C3" if one else f"C{k}"
        groups = list(_of(trials, series).sort("budget").group_by("trial", maintain_order=True))
        for i, (_, grp) in enumerate(groups):
            vals = grp[measure].cast(pl.Float64)
            if vals.null_count() == len(vals):
                continue
            dodge = step * (
                0.12 * (i / max(len(groups) - 1, 1) - 0.5) + (0 if one else 0.06 * (k - (len(all_series) - 1) / 2))
            )
            ax.plot(
                [x[b] + dodge for b in grp["budget"]],
                vals.to_numpy() * scale,
                color="0.6" if one else colour,
                lw=0.8,
                alpha=0.6 if one else 0.25,
                marker="o",
                ms=3,
            )
        summary = _of(conditions, series).filter(pl.col("measure") == measure).sort("budget").drop_nulls("center")
        if summary.height:
            centre = summary["center"].to_numpy() * scale
            err = np.vstack(
                [
                    centre - summary["ci95_low"].fill_null(summary["center"]).to_numpy() * scale,
                    summary["ci95_high"].fill_null(summary["center"]).to_numpy() * scale - centre,
                ]
            )
            ax.errorbar(
                [x[b] for b in summary["budget"]],
                centre,
                yerr=err,
                color=colour,
                lw=2,
                capsize=5,
                marker="s",
                ms=7,
                label=_centre_name(measure) if one else f"{series_label(series)}: {_centre_name(measure)}",
            )
    if (
        scale_of(measure) == "log"
        and trials[measure].drop_nulls().min() is not None
        and trials[measure].drop_nulls().min() > 0
    ):
        ax.set_yscale("log")
        plain_ticks(ax, "y")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    ax.set_xticks(list(x.values()), [budget_label(b) for b in budgets])
    ax.set_xlabel("Training-token budget (real tokens per epoch, log₂ scale)")
    ax.set_ylabel(unit_label or label(measure))
    ax.grid(alpha=0.3)


def _facets(trials: pl.DataFrame) -> list[tuple[str, pl.Series | None]]:
    """With two or more further factors, one panel per level of the last one (a third factor); else one panel."""
    varying = [c for c in trials.columns if c.startswith(LEVEL_PREFIX) and trials[c].n_unique() > 1]
    if len(varying) < 2:
        return [("", None)]
    last = varying[-1]
    return [(f"{factor_name(last)} {level}", pl.col(last) == level) for level in dict.fromkeys(trials[last].to_list())]


def pe_by_budget(trials, conditions, estimated: bool):
    facets = _facets(trials)
    fig, axes = plt.subplots(
        1, len(facets), figsize=(6.5 * len(facets), 4.5), layout="constrained", squeeze=False, sharey=True
    )
    # PE is ~1e-8 in a.u.: scaled like the report's table, so no offset label collides with the title
    exponent = display_exponent(trials["pe"].drop_nulls().to_list())
    for ax, (title, keep) in zip(axes[0], facets):
        shown = trials if keep is None else trials.filter(keep)
        _paired(
            ax,
            shown,
            conditions.filter(pl.col("series").is_in(_series(shown))),
            "pe",
            scale=10.0**-exponent,
            unit_label=label("pe") + power_of_ten(exponent),
        )
        if title:
            ax.set_title(title, fontsize=9)
    heading = "PE by token budget (lines join one trial across budgets)" + _estimate_note(estimated)
    if len(facets) == 1:
        axes[0][0].set_title(heading, fontsize=10)
    else:
        fig.suptitle(heading, fontsize=10)
    return fig


def efficiency_layers(trials, conditions, estimated: bool):
    """The three efficiency layers side by side: quality per parameter, per compute and per energy, by budget
    (one line per level of the other factors)."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), layout="constrained")
    for ax, measure in zip(axes, ("quality_per_mparam", "quality_per_pflop", "quality_per_kj")):
        if trials[measure].drop_nulls().len() == 0:
            ax.set_axis_off()
            ax.set_title(f"{label(measure)}: not measured", fontsize=9)
            continue
        exponent = display_exponent(trials[measure].drop_nulls().to_list())
        _paired(
            ax, trials, conditions, measure, scale=10.0**-exponent, unit_label=label(measure) + power_of_ten(exponent)
        )
        ax.set_title(MEASURES[measure].label, fontsize=9)
    fig.suptitle("The efficiency layers by token budget" + _estimate_note(estimated), fontsize=10)
    return fig


def power_energy_by_budget(trials, conditions, estimated: bool):
    """RMS power on an axis from 0 W with how far apart the budgets' centres are, and energy in the unit its size
    calls for (mJ, J, kJ)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
    _paired(a, trials, conditions, "power_rms_w")
    _from_zero(a, trials["power_rms_w"].cast(pl.Float64).to_list())
    energy = display("energy_j", trials["energy_j"].drop_nulls().to_list())
    _paired(b, trials, conditions, "energy_j", scale=energy.factor, unit_label=energy.label)
    centres = conditions.filter(pl.col("measure") == "power_rms_w")["center"].to_list()
    a.set_title("\n".join(filter(None, ["RMS power (axis from 0 W)", _spread_note(centres)])), fontsize=10)
    b.set_title("Energy of the training window")
    fig.suptitle("Power and energy by budget" + _estimate_note(estimated), fontsize=10)
    return fig


def time_by_budget(trials, conditions, estimated: bool):
    fig, ax = plt.subplots(figsize=(6.5, 4.5), layout="constrained")
    _paired(ax, trials, conditions, "train_s")
    ax.set_title("Training time by budget", fontsize=10)
    return fig


def perplexity_vs_tokens(trials, conditions, estimated: bool):
    fig, ax = plt.subplots(figsize=(6.5, 4.5), layout="constrained")
    # every trial visible: a small seeded horizontal jitter (in log space) keeps points off the mean marker
    jitter = 10 ** np.random.default_rng(0).uniform(-0.03, 0.03, trials.height)
    ax.scatter(
        trials["real_tokens"].to_numpy() * jitter, trials["perplexity"], s=14, alpha=0.6, color="0.4", label="trial"
    )
    all_series = _series(trials)
    for k, series in enumerate(all_series):
        means = (
            _of(trials, series)
            .group_by("budget")
            .agg(pl.col("real_tokens").mean())
            .join(
                _of(conditions, series)
                .filter(pl.col("measure") == "perplexity")
                .select("budget", "center", "ci95_low", "ci95_high"),
                on="budget",
            )
            .sort("budget")
            .drop_nulls("center")
        )
        centre = means["center"].to_numpy()
        err = np.vstack(
            [
                centre - means["ci95_low"].fill_null(means["center"]).to_numpy(),
                means["ci95_high"].fill_null(means["center"]).to_numpy() - centre,
            ]
        )
        name = _centre_name("perplexity")
        ax.errorbar(
            means["real_tokens"],
            centre,
            yerr=err,
            color="C3" if len(all_series) == 1 else f"C{k}",
            marker="s",
            lw=2,
            capsize=5,
            label=f"budget {name}" if len(all_series) == 1 else f"{series_label(series)}: {name}",
        )
    ax.set_xscale("log")
    plain_ticks(ax, "x")
    ax.set_xlabel("Real tokens processed (each trial's tokens × epochs, log scale)")
    ax.set_ylabel("Eval perplexity")
    ax.set_title("Perplexity against tokens processed", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def tradeoff(changes: pl.DataFrame, estimated: bool):
    """Per doubling step: how much perplexity fell against how much PE fell."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5), layout="constrained")
    ok = changes.drop_nulls(["perplexity_reduction_pct", "pe_drop_pct"])
    all_series = _series(ok)
    for k, series in enumerate(all_series):
        mine = _of(ok, series)
        ax.plot(
            mine["perplexity_reduction_pct"],
            mine["pe_drop_pct"],
            marker="o",
            color=f"C{k}",
            label="step to the next budget" if len(all_series) == 1 else series_label(series),
        )
        for row in mine.iter_rows(named=True):
            ax.annotate(
                f"{budget_label(row['from_budget'])}→{budget_label(row['to_budget'])}",
                (row["perplexity_reduction_pct"], row["pe_drop_pct"]),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=9,
            )
    lim = max([1.0, *ok["perplexity_reduction_pct"].abs().to_list(), *ok["pe_drop_pct"].abs().to_list()]) * 1.15
    ax.plot([0, lim], [0, lim], ls="--", color="0.5", lw=1, label="equal change")
    ax.set_xlabel("Perplexity reduction from the previous budget (%)")
    ax.set_ylabel("PE drop from the previous budget (%)")
    ax.set_title("Trade-off: quality gained vs efficiency lost" + _estimate_note(estimated), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def power_traces(traces: dict[tuple[str, int], pl.DataFrame], estimated: bool):
    """The polled power of one trial per cell over its training window; ``traces`` maps (cell id, trial) to a trace."""
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    for (cell, trial), trace in traces.items():
        devices = by_rank(trace)
        for rank, part in enumerate(devices):  # a trial on several devices: one line per device
            valid = training_samples(part)
            device = f", device {rank + 1} of {len(devices)}" if len(devices) > 1 else ""
            ax.plot(valid["t_s"], valid["power_w"], lw=1.2, label=f"{_cell_name(cell)} (trial {trial}{device})")
    _from_zero(ax, [v for line in ax.get_lines() for v in line.get_ydata()])
    ax.set_xlabel("Time since training started (s)")
    ax.set_ylabel("Power (W, axis from 0)" + (" — estimated" if estimated else ""))
    ax.set_title("Power during training, one trial per condition" + _estimate_note(estimated), fontsize=10)
    ax.grid(alpha=0.3)
    if traces:
        ax.legend(fontsize=8)
    return fig


def _cell_name(cell: str) -> str:
    parsed = parse_cell(cell)
    return condition_name(parsed.series, parsed.budget)


def _checks_panel(ax, order: pl.DataFrame, x: np.ndarray) -> np.ndarray:
    """The matmul checks before and after each trial against their reference; the check that strayed most per trial
    (the one a flag circles)."""
    for name, marker in (("check_before_ratio", "^"), ("check_after_ratio", "v")):
        ax.scatter(
            x, order[name].cast(pl.Float64).to_numpy(), marker=marker, s=22, color="0.35", label=name.split("_")[1]
        )
    ax.axhline(1.0, color="0.5", lw=1, ls="--", label="reference (the device profile, or the median check)")
    before, after = (
        order[c].cast(pl.Float64).fill_null(1.0).to_numpy() for c in ("check_before_ratio", "check_after_ratio")
    )
    return np.where(np.abs(before - 1) >= np.abs(after - 1), before, after)


def measurement_quality(trials: pl.DataFrame, estimated: bool):
    """Pace (the steps per second the throughput rule judges), RMS power (from 0 W) and the matmul checks of every
    trial in the order the trials ran; flagged trials marked, so a disturbance shows as a point off its series' level.
    A study that takes no matmul checks (profile.check_windows: 0) gets no empty checks panel."""
    order = trials.sort("run_position")
    flagged = (order["quality"] == "flagged").to_numpy()
    cells = list(dict.fromkeys(order.sort("series", "budget")["cell"].to_list())) if "cell" in order.columns else []
    panels = [
        ("pace_steps_per_s", "Pace (optimizer steps/s)"),
        ("power_rms_w", "RMS power (W)" + (" — estimated" if estimated else "")),
    ]
    if any(_has(order, c) for c in ("check_before_ratio", "check_after_ratio")):
        panels.append((None, "Matmul check ÷ reference"))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.7 * len(panels)), sharex=True, layout="constrained")
    x = order["run_position"].to_numpy()
    for ax, (column, ylabel) in zip(axes, panels):
        if column is None:
            y = _checks_panel(ax, order, x)
        else:
            y = order[column].cast(pl.Float64).to_numpy()
            for i, cell in enumerate(cells):
                mine = (order["cell"] == cell).to_numpy()
                ax.scatter(x[mine], y[mine], s=22, color=f"C{i % 10}", label=_cell_name(cell))
        if column == "power_rms_w":
            _from_zero(ax, y.tolist())
        if flagged.any():
            ax.scatter(
                x[flagged], y[flagged], s=110, facecolors="none", edgecolors="C3", linewidths=1.6, label="flagged"
            )
        ax.set_ylabel(ylabel)
        ax.set_xlabel("Run order (position in which the trial ran)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=6, loc="best")
    fig.suptitle(
        "Measurement quality in run order (red circles: flagged trials)" + _estimate_note(estimated), fontsize=10
    )
    return fig


def quality_vs_cost(trials: pl.DataFrame, conditions: pl.DataFrame, estimated: bool, currency: str = ""):
    """What each budget bought: quality (invPPL) against the energy, and the money where priced, that a
    trial of that budget used; every trial a point, budget means with 95 % CIs on both axes."""
    priced = "total_cost" in trials.columns and trials["total_cost"].drop_nulls().len() > 0
    fig, axes = plt.subplots(
        1, 2 if priced else 1, figsize=(11 if priced else 6.5, 4.5), layout="constrained", squeeze=False
    )
    panels = [("kwh", "Energy per trial at the facility", " — estimated" if estimated else "")]
    if priced:
        panels.append(("total_cost", "Cost per trial", " — from estimated energy" if estimated else ""))
    summary = {(r["measure"], r["series"], r["budget"]): r for r in conditions.iter_rows(named=True)}
    conditions_shown = [(s_, b) for s_ in _series(trials) for b in sorted(trials["budget"].unique().to_list())]
    for ax, (column, name, note) in zip(axes[0], panels):
        # in the unit its size calls for: J or kJ rather than "kWh ×10⁻⁶", mEUR rather than µEUR
        shown = display(column, trials[column].drop_nulls().to_list(), currency)
        scale = shown.factor
        for i, (series, b) in enumerate(conditions_shown):
            mine = _of(trials, series).filter(pl.col("budget") == b).drop_nulls([column, "inv_ppl"])
            ax.scatter(mine[column].to_numpy() * scale, mine["inv_ppl"], s=14, alpha=0.5, color=f"C{i % 10}")
            x, y = summary.get((column, series, b)), summary.get(("inv_ppl", series, b))
            if not x or not y or x["center"] is None or y["center"] is None:
                continue

            def half(r: dict) -> list[list[float]]:
                return [[r["center"] - (r["ci95_low"] or r["center"])], [(r["ci95_high"] or r["center"]) - r["center"]]]

            ax.errorbar(
                x["center"] * scale,
                y["center"],
                xerr=np.array(half(x)) * scale,
                yerr=half(y),
                color=f"C{i % 10}",
                marker="s",
                ms=7,
                capsize=4,
                label=f"{condition_name(series, b)}: geometric mean ± 95 % CI",
            )
        ax.set_xlabel(f"{name} ({shown.unit}){note}")
        ax.set_ylabel(label("inv_ppl"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        "What each budget bought: quality against energy"
        + (" and money" if priced else "")
        + _estimate_note(estimated),
        fontsize=10,
    )
    return fig


def quality_vs_energy(curves: pl.DataFrame, estimated: bool):
    """How quality grew with the joules spent: each trial's eval perplexity against its cumulative training energy
    (log axes), a line per trial, a colour per condition; the final evaluation (whole eval set) marked."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    cells = list(dict.fromkeys(curves.sort("series", "budget")["cell"].to_list()))
    for i, cell in enumerate(cells):
        mine = _on_log_axes(curves.filter(pl.col("cell") == cell))
        for k, (_, run) in enumerate(mine.sort("point").group_by("trial", maintain_order=True)):
            ppl = np.exp(run["eval_loss"].to_numpy())
            ax.plot(
                run["train_energy_j"],
                ppl,
                color=f"C{i % 10}",
                lw=1,
                alpha=0.7,
                marker=".",
                ms=4,
                label=_cell_name(cell) if k == 0 else None,
            )
            final = run.filter(pl.col("final"))
            ax.scatter(
                final["train_energy_j"], np.exp(final["eval_loss"].to_numpy()), color=f"C{i % 10}", s=22, zorder=3
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_ticks(ax, "x", "y")
    ax.set_xlabel(
        "Cumulative training energy (J, log scale; evaluations excluded)" + (" — estimated" if estimated else "")
    )
    ax.set_ylabel("Eval perplexity (log scale)")
    ax.set_title(
        "Quality against the joules spent (large dots: final evaluation on the whole eval set)"
        + _estimate_note(estimated),
        fontsize=10,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def _on_log_axes(curves: pl.DataFrame) -> pl.DataFrame:
    """The eval points a log energy × log perplexity plot can place: energy above 0 J, a perplexity a float holds
    (a diverged run's loss can be finite yet past exp's range)."""
    return curves.drop_nulls(["train_energy_j", "eval_loss"]).filter(
        (pl.col("train_energy_j") > 0) & (pl.col("eval_loss") <= LOG_MAX_FLOAT)
    )


def placeholder(title: str, reason: str):
    """A figure that says why there is nothing to draw, in place of a missing one."""
    fig, ax = plt.subplots(figsize=(6.5, 2.2), layout="constrained")
    ax.set_axis_off()
    ax.set_title(title, fontsize=10)
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True, fontsize=10, color="0.3", transform=ax.transAxes)
    return fig


def _has(trials: pl.DataFrame, column: str) -> bool:
    return column in trials.columns and trials[column].drop_nulls().len() > 0


def make_all(
    trials: pl.DataFrame,
    conditions: pl.DataFrame,
    changes: pl.DataFrame,
    traces: dict[tuple[str, int], pl.DataFrame],
    estimated: bool,
    currency: str = "",
    curves: pl.DataFrame | None = None,
) -> dict:
    """Every figure of the report by name; one that has no data to show says why instead. Every figure but the
    measurement-quality one (which judges every trial) draws the analysis frame, the trials the tests use."""
    everything, trials = trials, frame(trials)
    none_measured = "not measured: meter none records no power or energy"
    no_trials = "no finished trials yet"
    plans = {
        "pe_by_budget": (lambda: pe_by_budget(trials, conditions, estimated), "pe", f"PE {none_measured}"),
        "efficiency_layers": (
            lambda: efficiency_layers(trials, conditions, estimated),
            "quality_per_mparam",
            no_trials,
        ),
        "power_energy_by_budget": (
            lambda: power_energy_by_budget(trials, conditions, estimated),
            "power_rms_w",
            f"Power {none_measured}",
        ),
        "time_by_budget": (lambda: time_by_budget(trials, conditions, estimated), "train_s", no_trials),
        "perplexity_vs_tokens": (lambda: perplexity_vs_tokens(trials, conditions, estimated), "perplexity", no_trials),
        "tradeoff": (lambda: tradeoff(changes, estimated), None, "needs PE at two or more budgets"),
        "power_traces": (lambda: power_traces(traces, estimated), None, f"Power {none_measured}"),
        "measurement_quality": (lambda: measurement_quality(everything, estimated), "run_position", no_trials),
        "quality_vs_cost": (
            lambda: quality_vs_cost(trials, conditions, estimated, currency),
            "kwh",
            f"Energy {none_measured}",
        ),
        "quality_vs_energy": (
            lambda: quality_vs_energy(curves, estimated),
            None,
            f"Energy {none_measured}, no eval curves, or no finite perplexity (every trial diverged)",
        ),
        "memory_vs_energy": (
            lambda: memory_vs_energy(trials, estimated),
            None,
            f"Energy {none_measured}, or peak memory not recorded (trials from before it was measured)",
        ),
    }
    available = {
        "tradeoff": changes.drop_nulls(["perplexity_reduction_pct", "pe_drop_pct"]).height > 0,
        "power_traces": any(t["power_w"].drop_nulls().len() for t in traces.values()),
        "memory_vs_energy": trials.drop_nulls(
            [c for c in ("peak_memory_bytes", "energy_j") if c in trials.columns]
        ).height
        > 0
        and {"peak_memory_bytes", "energy_j"} <= set(trials.columns),
        "quality_vs_energy": curves is not None
        and "train_energy_j" in curves.columns
        and _on_log_axes(curves).height > 0,
    }
    made = {}
    for name, (draw, column, reason) in plans.items():
        drawn = everything if name == "measurement_quality" else trials
        ok = available[name] if column is None else _has(drawn, column)
        why = (
            reason
            if drawn.height
            else no_trials
            if not everything.height
            else "no complete subject in the analysis frame"
        )
        made[name] = draw() if ok else placeholder(name.replace("_", " ").capitalize(), why)
    return made


def draw(data: Mapping[str, Any], tables: Mapping[str, pl.DataFrame], estimated: bool) -> dict:
    """The trials product's figures by name (``Product.draw``): from the aggregate's tables it draws (``trials``,
    ``conditions``, ``changes``, ``curves``) and its own JSON and power samples. The estimate label is the JSON's
    (any trial's energy estimated), not the frame's that ``estimated`` says: the measurement-quality figure shows every
    trial."""
    trials = tables["trials"]
    traces = traces_of(tables["trace_samples"], data["traces"])
    curves = in_frame(tables["curves"], trials)
    return make_all(
        trials,
        conditions=tables["conditions"],
        changes=tables["changes"],
        traces=traces,
        estimated=data["estimated"],
        currency=data["currency"],
        curves=curves,
    )
