"""Energy to target: how much training energy each budget needed to reach the same quality.

The MLPerf Training Power score, per run: the real tokens, joules and seconds at which its eval loss first reached
a target (a perplexity or a loss; by default the median final perplexity of each budget), what that energy cost in
CO2e and money, per cell the centre of those that got there, and per series a repeated-measures test of log energy
between budgets. A run that never reached a target is censored (counted, never imputed); one already below it at
its first point has only an upper bound, which the summaries keep and the tests leave out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from ..plan.cost import trial_cost
from .curve_runs import RUN_SCHEMA, CurvesError, Run, centre, centre_schema, nullable, rows_table, runs_of
from .stats import posthoc, rm_anova
from .tables import series_blocks

TARGET_MEASURE = "energy_to_target_j"  # the measure (tokenwatt.common.measures) the energy-to-target test runs on


@dataclass(frozen=True)
class Target:
    """A quality to reach: a loss (nats/token) or a perplexity, whose loss is ln ppl."""

    kind: str
    value: float
    digits: int = 3  # of the label only; ``distinct_labels`` raises it where two targets would read alike

    @property
    def loss(self) -> float:
        return self.value if self.kind == "loss" else math.log(self.value)

    @property
    def label(self) -> str:
        # Three significant digits, as a reader says it ("perplexity 5.61"); the loss it stands for keeps every digit.
        return f"{self.kind} {self.value:.{self.digits}g}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "loss": self.loss, "label": self.label}


def target(spec: Target | Mapping[str, float]) -> Target:
    """A target from ``{"perplexity": 9}`` or ``{"loss": 2.2}``; a bare number is refused, since it could be either."""
    if isinstance(spec, Target):
        return spec
    if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in ("loss", "perplexity"):
        raise CurvesError(f"target {spec!r}: a target is {{perplexity: value}} or {{loss: value}}")
    kind, value = next(iter(spec.items()))
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < (1.0 if kind == "perplexity" else 0.0)
    ):
        raise CurvesError(f"target {spec!r}: a perplexity is a finite number ≥ 1, a loss a finite number ≥ 0")
    return Target(kind, float(value))


def default_targets(curves: pl.DataFrame) -> list[Target]:
    """One perplexity target per budget, ascending: the median final perplexity of that budget's runs (every
    series pooled). The median of the largest budget is a quality about half its runs reached, so the smaller
    budgets' energy to it shows what they would have had to spend, or that they never got there (censored)."""
    final = curves.filter(pl.col("final")).with_columns(ppl=pl.col("eval_loss").exp())
    medians = final.group_by("budget").agg(pl.col("ppl").median()).sort("budget")["ppl"].to_list()
    return [Target("perplexity", float(v)) for v in dict.fromkeys(medians) if v is not None and math.isfinite(v)]


def distinct_labels(targets: Sequence[Target]) -> list[Target]:
    """The targets with as few label digits as keep every distinct target's label distinct (a report sentence and
    its table find a target's rows by label: "perplexity 12.3" must not name both 12.31 and 12.34)."""
    distinct = len({(t.kind, t.value) for t in targets})
    for digits in range(3, 18):
        out = [replace(t, digits=digits) for t in targets]
        if len({t.label for t in out}) == distinct:
            return out
    return out


def targets_from_config(specs: Sequence[Mapping[str, float]] | None, curves: pl.DataFrame) -> list[Target]:
    """``analysis.targets`` as targets; none configured: ``default_targets``; labels distinct."""
    return distinct_labels([target(s) for s in specs] if specs else default_targets(curves))


# What reaching a target cost beside its joules (``cost.trial_cost`` at the crossing's energy and training time).
TARGET_COSTS = ("kg_co2e", "electricity_cost", "device_cost", "total_cost")
REACH_SCHEMA = {
    "target": pl.String,
    "target_loss": pl.Float64,
    **RUN_SCHEMA,
    "reached": pl.Boolean,
    "at_first_point": pl.Boolean,
    "point_reached": pl.Int64,
    "real_tokens": pl.Float64,
    "energy_j": pl.Float64,
    "train_s": pl.Float64,
    **{c: pl.Float64 for c in TARGET_COSTS},
}


def _crossing(run: Run, loss: float) -> dict[str, Any]:
    """Where the run's loss first reached ``loss``: between the last point above it and the first at or below,
    the loss is linear in log real tokens, and log energy and log time are too (both grow in proportion to the
    tokens), so tokens, energy and time describe the same instant. A run already below the target at its first
    point reached it at or before that point: it carries the first point's tokens, energy and time, marked
    ``at_first_point`` because they are an upper bound. It stays in every summary (dropping it would drop the
    cheapest runs and bias the mean up), which counts such runs, and is left out of the tests between budgets
    (``energy_to_target_tests``)."""
    on = run.tokens > 0
    tokens, losses, energy, seconds, points = (
        run.tokens[on],
        run.loss[on],
        run.energy[on],
        run.seconds[on],
        run.point[on],
    )
    below = np.flatnonzero(losses <= loss)
    if not below.size:
        return {"reached": False, "at_first_point": False}
    i = int(below[0])
    a, frac = (i, 0.0) if i == 0 else (i - 1, (losses[i - 1] - loss) / (losses[i - 1] - losses[i]))

    def at(x: np.ndarray) -> float:
        return x[a] + frac * (x[i] - x[a])

    def on_log(x: np.ndarray) -> float | None:
        pair = x[[a, i]]
        return nullable(np.exp(at(np.log(np.where(x > 0, x, np.nan))))) if np.all(pair > 0) else nullable(at(x))

    if i == 0:
        return {
            "reached": True,
            "at_first_point": True,
            "point_reached": int(points[0]),
            "real_tokens": nullable(tokens[0]),
            "energy_j": nullable(energy[0]),
            "train_s": nullable(seconds[0]),
        }
    return {
        "reached": True,
        "at_first_point": False,
        "point_reached": int(points[i]),
        "real_tokens": on_log(tokens),
        "energy_j": on_log(energy),
        "train_s": on_log(seconds),
    }


def energy_to_target(
    curves: pl.DataFrame, targets: Sequence[Target | Mapping[str, float]], cost: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """Per target and run: whether and where the run first reached the target's loss (``point_reached``, the first
    point at or below it), and the real tokens, training energy (J) and time (s) at the crossing, interpolated
    between that point and the one before on log tokens. ``at_first_point``: already below at the first point,
    so the crossing lies at or before it and its values (the first point's) are an upper bound. A censored run (never reached
    it, or stopped before) has ``reached`` false and null values. With ``cost`` (the aggregate step's cost
    summary: PUE, prices and the resolved carbon intensity) the CO2e and money of that energy and of the
    device-hours of that training time (``cost.trial_cost``; null where a price or the intensity is not set)."""
    rows = []
    for t in map(target, targets):
        for run in runs_of(curves):
            row = {"target": t.label, "target_loss": t.loss, **run.key(), **_crossing(run, t.loss)}
            if cost and row.get("energy_j") is not None:
                row.update(
                    trial_cost(
                        {"energy_j": row["energy_j"], "run_s": row["train_s"]},
                        cost,
                        cost.get("carbon_intensity_g_per_kwh"),
                    )
                )
            rows.append(row)
    return rows_table(rows, REACH_SCHEMA)


REACH_SUMMARY_SCHEMA = {
    "target": pl.String,
    "target_loss": pl.Float64,
    "cell": pl.String,
    "series": pl.String,
    "budget": pl.Int64,
    "n": pl.Int64,
    "n_reached": pl.Int64,
    "n_censored": pl.Int64,
    "n_at_first_point": pl.Int64,
    **centre_schema("energy", "_j"),
    **centre_schema("train_s"),
    **{k: v for c in TARGET_COSTS for k, v in centre_schema(c).items()},
}


def _cost_centre(values: np.ndarray, prefix: str) -> dict[str, Any]:
    """``centre`` of a cost to a target; a price or carbon intensity of 0 makes every run's cost 0, which is the
    answer (0), not a missing geometric mean."""
    if len(values) and not values.any():
        return {f"{prefix}_{k}": 0.0 for k in ("median", "geomean", "ci95_low", "ci95_high")}
    return centre(values, prefix)


def energy_to_target_summary(reached: pl.DataFrame) -> pl.DataFrame:
    """Per target and cell (of ``energy_to_target``'s table): n runs, how many reached the target, were censored or
    were below it at their first point, and among those that reached it the median and the geometric mean with
    its 95 % interval (``scale.summary`` on log values) of energy and time. The censored runs stay in ``n``; the
    runs below it at their first point enter with that point's values, upper bounds, so where
    ``n_at_first_point`` > 0 the centres are upper bounds too."""
    rows = []
    for (label, loss, cell), block in reached.partition_by(
        "target", "target_loss", "cell", as_dict=True, maintain_order=True
    ).items():
        got = block.filter(pl.col("reached"))
        rows.append(
            {
                "target": label,
                "target_loss": loss,
                "cell": cell,
                "series": block["series"][0],
                "budget": block["budget"][0],
                "n": block.height,
                "n_reached": got.height,
                "n_censored": block.height - got.height,
                "n_at_first_point": int(got["at_first_point"].sum()),
                **centre(got["energy_j"].drop_nulls().to_numpy(), "energy", "_j"),
                **centre(got["train_s"].drop_nulls().to_numpy(), "train_s"),
                **{k: v for c in TARGET_COSTS for k, v in _cost_centre(got[c].drop_nulls().to_numpy(), c).items()},
            }
        )
    return rows_table(rows, REACH_SUMMARY_SCHEMA)


@dataclass(frozen=True)
class TargetTest:
    """The repeated-measures comparison of log energy-to-target between the budgets of one series: ``used`` of
    ``subjects`` subjects reached the target in every cell of the series (the others are ``left_out``: censored
    in at least one cell, or missing one), ``anova`` is ``stats.rm_anova`` on them, ``pairs`` ``stats.posthoc``
    (geometric mean ratios between budgets, Holm-corrected)."""

    target: str
    target_loss: float
    series: str
    budgets: list[int]
    subjects: int
    used: int
    left_out: list[int]
    anova: dict[str, Any]
    pairs: list[dict[str, Any]]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def energy_to_target_tests(reached: pl.DataFrame) -> list[TargetTest]:
    """Per target and series, ``TargetTest``: a test between budgets needs every subject in every cell, and a
    censored run has no energy to compare, and a run below the target at its first point only an upper bound, so a
    subject enters only if it crossed the target between eval points in all of them (never imputed); the message
    says how many did."""
    out = []
    for (label, loss), one in reached.partition_by("target", "target_loss", as_dict=True, maintain_order=True).items():
        for series, block in series_blocks(one):
            budgets = sorted(block["budget"].unique().to_list())
            per = block.group_by("trial").agg(
                pl.col("budget").n_unique().alias("cells"),
                # A run below the target at its first point has only an upper bound, looser the later that point
                # comes (it sits at a fraction of each budget): compared, it would make a budget effect of its own.
                (pl.col("reached") & pl.col("energy_j").is_not_null() & ~pl.col("at_first_point")).all().alias("ok"),
            )
            used = sorted(per.filter((pl.col("cells") == len(budgets)) & pl.col("ok"))["trial"].to_list())
            left_out = sorted(set(per["trial"].to_list()) - set(used))
            table = block.filter(pl.col("trial").is_in(used)).select(
                "trial", "budget", "series", pl.col("energy_j").alias(TARGET_MEASURE)
            )
            anova = rm_anova(table, TARGET_MEASURE)
            if block["energy_j"].is_null().all() and block["reached"].any():
                message = f"no training energy was measured (meter none), so no energy to {label} can be compared"
            else:
                message = (
                    f"{len(used)} of {per.height} subjects reached {label} in every cell of the series and enter the "
                    "comparison"
                    + (
                        f"; left out (censored, or below the target already at the first eval point, which gives "
                        "only an upper bound, in at least one cell, or missing one): trial "
                        f"{', '.join(map(str, left_out))}"
                        if left_out
                        else ""
                    )
                )
            out.append(
                TargetTest(
                    label,
                    loss,
                    series,
                    budgets,
                    per.height,
                    len(used),
                    left_out,
                    anova,
                    posthoc(table, TARGET_MEASURE) if anova["status"] == "ok" else [],
                    message,
                )
            )
    return out
