"""Energy to target: how much training energy each budget needed to reach the same quality.

The MLPerf Training Power score, per run: the real tokens, joules and seconds at which its eval loss first reached
a target (a perplexity or a loss; by default a quality 4 in 5 of each budget's runs reached), what that energy cost
in CO2e and money, per cell the Kaplan–Meier median of those energies with its interval, and per series each pair
of budgets' energy ratio, paired by trial id (``censored``). A run that never reached a target is right-censored at
the energy it stopped at (it needed more), one already below it at its first point left-censored there (it needed
at most that): both stay in every median and ratio as what they are, bounds, never dropped and never imputed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from ...plan.cost import trial_cost
from ..stats import holm
from ..tables import series_blocks
from .censored import ABOVE, BELOW, EXACT, NEVER, PairedRatio, km_median, paired_ratio
from .paired_rank import RankTest, paired_rank_test, runs_to_target
from .runs import RUN_SCHEMA, CurvesError, Run, nullable, rows_table, runs_of

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


DEFAULT_REACHED_SHARE = 0.8  # of a budget's runs that reach its default target by their last point


def default_targets(curves: pl.DataFrame) -> list[Target]:
    """One perplexity target per budget, ascending: the quality ``DEFAULT_REACHED_SHARE`` of that budget's runs
    reached by their end (that quantile of their final perplexities, every series pooled). Not the median: at a
    budget's median final perplexity half its runs reach the target only at their last point, so that budget's
    median energy to it is its total energy by construction. At 4 in 5 the budget's median crossing is measured
    between points; the larger budgets' targets are qualities the smaller ones mostly never reach (censored)."""
    final = curves.filter(pl.col("final")).with_columns(ppl=pl.col("eval_loss").exp())
    levels = (
        final.group_by("budget")
        .agg(pl.col("ppl").quantile(DEFAULT_REACHED_SHARE, interpolation="linear"))
        .sort("budget")["ppl"]
        .to_list()
    )
    return [Target("perplexity", float(v)) for v in dict.fromkeys(levels) if v is not None and math.isfinite(v)]


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
    "stopped_by_rule": pl.Boolean,
    "point_reached": pl.Int64,
    "real_tokens": pl.Float64,
    "energy_j": pl.Float64,
    "train_s": pl.Float64,
    # the run's eval points with a position on the axis (real tokens, cumulative training energy): where the rank
    # test censors a pair's runs again, on the token window both observed, at each run's own energy there
    "curve_tokens": pl.List(pl.Float64),
    "curve_energy_j": pl.List(pl.Float64),
    **{c: pl.Float64 for c in TARGET_COSTS},
}


def _window(run: Run) -> dict[str, Any]:
    """The run's eval points with a position on both axes (real tokens and training energy above 0)."""
    on = (run.tokens > 0) & (run.energy > 0)
    return {"curve_tokens": run.tokens[on].tolist(), "curve_energy_j": run.energy[on].tolist()}


def _crossing(run: Run, loss: float) -> dict[str, Any]:
    """Where the run's loss first reached ``loss``: between the last point above it and the first at or below,
    the loss is linear in log real tokens, and log energy and log time are too (both grow in proportion to the
    tokens), so tokens, energy and time describe the same instant. A run already below the target at its first
    point reached it at or before that point: it carries the first point's tokens, energy and time, marked
    ``at_first_point`` because they are an upper bound (left-censored). A run that never got there carries its last
    point's values, lower bounds (right-censored). Both stay in every median and ratio as the bounds they are."""
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
        # Censored where it stopped: its last point's tokens, energy and time are lower bounds of what it needed.
        return {
            "reached": False,
            "at_first_point": False,
            "point_reached": None,
            "real_tokens": nullable(tokens[-1]) if tokens.size else None,
            "energy_j": nullable(energy[-1]) if tokens.size else None,
            "train_s": nullable(seconds[-1]) if tokens.size else None,
        }
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
    it, or stopped before) has ``reached`` false and its last point's values, lower bounds. With ``cost`` (the aggregate step's cost
    summary: PUE, prices and the resolved carbon intensity) the CO2e and money of that energy and of the
    device-hours of that training time (``cost.trial_cost``; null where a price or the intensity is not set).
    ``stopped_by_rule``: the curves' column of that name (a stopping rule ended the run before its tokens), false
    where the curves have none; such a run that did not reach a target never reaches it under its rule."""
    ruled = (
        set(curves.filter(pl.col("stopped_by_rule")).select("cell", "trial").iter_rows())
        if "stopped_by_rule" in curves.columns
        else set()
    )
    rows = []
    for t in map(target, targets):
        for run in runs_of(curves):
            row = {
                "target": t.label,
                "target_loss": t.loss,
                **run.key(),
                **_crossing(run, t.loss),
                **_window(run),
                "stopped_by_rule": (run.cell, run.trial) in ruled,
            }
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


def censoring(reached: pl.DataFrame) -> pl.Series:
    """Each row's status for the censored analyses: EXACT (crossed between points), BELOW (already there at the
    first point: at most this energy), ABOVE (not there by its last point: more than this energy), NEVER (a stopping
    rule ended it first: under that rule it never gets there)."""
    return reached.select(
        pl.when(~pl.col("reached") & pl.col("stopped_by_rule"))
        .then(pl.lit(NEVER))
        .when(~pl.col("reached"))
        .then(pl.lit(ABOVE))
        .when(pl.col("at_first_point"))
        .then(pl.lit(BELOW))
        .otherwise(pl.lit(EXACT))
        .alias("censoring")
    )["censoring"]


def _km_columns(prefix: str, suffix: str = "") -> dict[str, Any]:
    return {f"{prefix}_{k}{suffix}": pl.Float64 for k in ("median", "ci95_low", "ci95_high")}


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
    **_km_columns("energy", "_j"),
    **_km_columns("train_s"),
    **{k: v for c in TARGET_COSTS for k, v in _km_columns(c).items()},
}


def _km(values: pl.Series, status: pl.Series, prefix: str, suffix: str = "") -> dict[str, Any]:
    """The Kaplan–Meier median of one measure to the target and its 95 % interval; null where a run lacks the
    measure (energy with meter none, a price not set); a price or carbon intensity of 0 makes every run's cost 0,
    which is the answer (0), not a missing median."""
    names = [f"{prefix}_{k}{suffix}" for k in ("median", "ci95_low", "ci95_high")]
    if values.null_count() or not len(values):
        return dict.fromkeys(names)
    if not values.to_numpy().any():
        return dict.fromkeys(names, 0.0)
    got = km_median(values.to_numpy(), status.to_numpy())
    return dict(zip(names, (got.median, got.ci95_low, got.ci95_high)))


def energy_to_target_summary(reached: pl.DataFrame) -> pl.DataFrame:
    """Per target and cell (of ``energy_to_target``'s table): n runs, how many reached the target, were censored or
    were below it at their first point, and the Kaplan–Meier median of energy, time and each cost to the target
    with its 95 % interval (``censored.km_median``), every run in it: a censored one as more than where it stopped.
    A median is null where the Kaplan–Meier curve does not fall below one half, an interval's upper bound where
    the curve's interval never does ("at least")."""
    rows = []
    for (label, loss, cell), block in reached.partition_by(
        "target", "target_loss", "cell", as_dict=True, maintain_order=True
    ).items():
        status = censoring(block)
        n_reached = int(block["reached"].sum())
        rows.append(
            {
                "target": label,
                "target_loss": loss,
                "cell": cell,
                "series": block["series"][0],
                "budget": block["budget"][0],
                "n": block.height,
                "n_reached": n_reached,
                "n_censored": block.height - n_reached,
                "n_at_first_point": int(block["at_first_point"].sum()),
                **_km(block["energy_j"], status, "energy", "_j"),
                **_km(block["train_s"], status, "train_s"),
                **{k: v for c in TARGET_COSTS for k, v in _km(block[c], status, c).items()},
            }
        )
    return rows_table(rows, REACH_SUMMARY_SCHEMA)


@dataclass(frozen=True)
class TargetComparison:
    """Energy to one target under budget b over budget a within one series, paired by trial id, every trial id in
    both cells in it (``paired``: ``censored.paired_ratio``'s ratio, interval, p and counts, under a normal law of
    log energy; ``rank``: ``paired_rank.paired_rank_test``, the test that assumes no law and censors each pair on
    its common token window), and ``p_holm`` and ``rank_p_holm`` over the series' pairs."""

    target: str
    target_loss: float
    series: str
    budget_a: int
    budget_b: int
    paired: PairedRatio
    p_holm: float | None
    rank: RankTest
    rank_p_holm: float | None
    rank_p_holm_floor: float | None  # the smallest Holm p any test of the family could reach: above .05, none rejects

    def to_dict(self) -> dict[str, Any]:
        """Flat, as the report and the command read it: the keys, the ratio's and the rank test's fields, the Holm
        ps."""
        return _flat(self)


Paired = tuple[PairedRatio, RankTest]


def _paired(a: pl.DataFrame, b: pl.DataFrame, label: str) -> Paired:
    """Energy to the target in ``b``'s runs over ``a``'s, paired by trial id: ``paired_ratio`` and
    ``paired_rank_test`` on the same trial ids."""
    pair = (
        a.join(b, on="trial", suffix="_b")
        .filter(pl.col("energy_j").is_not_null() & pl.col("energy_j_b").is_not_null())
        .sort("trial")
    )
    got = paired_ratio(
        np.log(pair["energy_j_b"].to_numpy()),
        pair["censoring_b"].to_list(),
        np.log(pair["energy_j"].to_numpy()),
        pair["censoring"].to_list(),
    )
    columns = ("censoring", "energy_j", "real_tokens", "curve_tokens", "curve_energy_j")
    rank = paired_rank_test(*(runs_to_target(*(pair[f"{c}{end}"] for c in columns)) for end in ("", "_b")))
    why = None
    if not a.height or not b.height:
        why = "no finished trial in one of the two cells"
    elif a["energy_j"].null_count() == a.height or b["energy_j"].null_count() == b.height:
        why = f"no training energy was measured (meter none): no energy to {label}"
    if why:
        return replace(got, status=why), replace(rank, status=why)
    return got, rank


def _holm_all(
    found: list[tuple[Any, Paired]],
) -> list[tuple[Any, PairedRatio, float | None, RankTest, float | None, float | None]]:
    """Each comparison with its Holm-adjusted p over the family ``found`` (those with a p), for the ratio's p and
    the rank test's each, and the rank tests' floor: every Holm p is at least m × the family's smallest p, so m × the
    smallest p any of them could give (few trial ids: 2/32 with 5) bounds what the family can show."""
    adjusted = iter(holm([g.p for _, (g, _) in found if g.p is not None]))
    tested = [r for _, (_, r) in found if r.p is not None]
    ranked = iter(holm([r.p for r in tested]))
    floor = min(1.0, len(tested) * min(r.min_p for r in tested)) if tested else None
    return [
        (key, g, next(adjusted) if g.p is not None else None, r, next(ranked) if r.p is not None else None, floor)
        for key, (g, r) in found
    ]


def energy_to_target_comparisons(reached: pl.DataFrame) -> list[TargetComparison]:
    """Per target and series, ``TargetComparison`` for every pair of budgets (smaller first), Holm-adjusted within
    the target and series. A run without an energy (meter none) gives no comparison; its status says so."""
    out = []
    for (label, loss), one in reached.partition_by("target", "target_loss", as_dict=True, maintain_order=True).items():
        for series, block in series_blocks(one):
            block = block.with_columns(censoring=censoring(block))
            cells = {b: block.filter(pl.col("budget") == b) for b in sorted(block["budget"].unique().to_list())}
            found = [
                ((a, b), _paired(cells[a], cells[b], label)) for i, a in enumerate(cells) for b in list(cells)[i + 1 :]
            ]
            out += [TargetComparison(label, loss, series, a, b, *rest) for (a, b), *rest in _holm_all(found)]
    return out


@dataclass(frozen=True)
class LevelComparison:
    """Energy to one target under series b over series a at one budget, paired by trial id (the levels of the
    other factors, e.g. two data-selection levels), as ``TargetComparison`` reads it; Holm over the target and
    budget's pairs of series."""

    target: str
    target_loss: float
    budget: int
    series_a: str
    series_b: str
    paired: PairedRatio
    p_holm: float | None
    rank: RankTest
    rank_p_holm: float | None
    rank_p_holm_floor: float | None  # the smallest Holm p any test of the family could reach: above .05, none rejects

    def to_dict(self) -> dict[str, Any]:
        """Flat, as the report and the command read it: the keys, the ratio's and the rank test's fields, the Holm
        ps."""
        return _flat(self)


def _flat(comparison: TargetComparison | LevelComparison) -> dict[str, Any]:
    keys = {k: v for k, v in asdict(comparison).items() if k not in ("paired", "rank")}
    return {**keys, **comparison.paired.to_dict(), **comparison.rank.to_dict()}


def _one_factor_apart(a: str, b: str) -> bool:
    """Two series (``factor=level/...``) that differ in the level of exactly one factor."""
    levels = [dict(part.split("=", 1) for part in s.split("/") if "=" in part) for s in (a, b)]
    return levels[0].keys() == levels[1].keys() and sum(levels[0][k] != levels[1][k] for k in levels[0]) == 1


def energy_to_target_level_comparisons(reached: pl.DataFrame) -> list[LevelComparison]:
    """Per target and budget, ``LevelComparison`` for every pair of series that differ in one factor's level (in
    the design's order; none with one series), Holm-adjusted within the target and budget."""
    out = []
    for (label, loss), one in reached.partition_by("target", "target_loss", as_dict=True, maintain_order=True).items():
        one = one.with_columns(censoring=censoring(one))
        names = [s for s, _ in series_blocks(one)]
        for budget in sorted(one["budget"].unique().to_list()):
            cells = {s: one.filter((pl.col("series") == s) & (pl.col("budget") == budget)) for s in names}
            found = [
                ((a, b), _paired(cells[a], cells[b], label))
                for i, a in enumerate(names)
                for b in names[i + 1 :]
                if _one_factor_apart(a, b)
            ]
            out += [LevelComparison(label, loss, budget, a, b, *rest) for (a, b), *rest in _holm_all(found)]
    return out
