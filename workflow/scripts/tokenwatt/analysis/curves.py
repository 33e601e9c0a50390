"""Energy-to-quality curves: what each trial's evaluation points say about joules and quality.

A study's question, "are more tokens worth their energy?", is answered by the curve, not the endpoint:
how much training energy each budget needed to reach the same quality (energy to target, the MLPerf
Training Power score), what quality each budget had at the same joules (equal energy: repeat the data or
add new data, Muennighoff et al. 2023), where a joule stopped buying quality (marginal gain per kJ), how the
loss moved between points (the trajectory statistics of arXiv:2606.13370) and what an energy-aware stopping
rule would have saved and cost, replayed on the full runs.

Input: the long ``curves`` table, one row per (trial run, evaluation point): ``cell``, ``series``, ``budget``,
``trial`` (the subject), ``point`` (1..P), ``real_tokens``, ``train_energy_j`` (cumulative training energy,
evaluation excluded; null with meter none), ``train_s``, ``eval_loss`` (nats/token) and ``final`` (the last
point, on the whole eval set; earlier points may use a fixed subset). A run is one (cell, trial).

Conventions. Positions between points are interpolated on log axes: losses fall roughly linearly in log
tokens and log energy, and the points are log-spaced. A point with no position on the axis (an evaluation
before any training: 0 tokens or 0 J) is left out of that interpolation; it stays in the trajectory
statistics. Nothing is extrapolated beyond a run's own points. A run that never reached a target is
censored: kept and counted, never dropped or imputed. Energies are on the log scale (geometric means,
ratios), losses on the raw scale (a loss is already a log: log perplexity), as ``tokenwatt.common.measures`` declares.
Every test takes the subjects present in every cell it compares; the caller passes curves of the analysis
frame's subjects.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from ..plan.cost import trial_cost
from ..plan.stopping import StopRule, segment_gain, should_stop, stop_rule
from .frame import MIN_SUBJECTS
from .scale import paired_change, summary
from .stats import anova_effects, complete_block, posthoc, rm_anova
from .tables import series_blocks

REQUIRED = (
    "cell",
    "series",
    "budget",
    "trial",
    "point",
    "real_tokens",
    "train_energy_j",
    "train_s",
    "eval_loss",
    "final",
)
RUN_SCHEMA = {"cell": pl.String, "series": pl.String, "budget": pl.Int64, "trial": pl.Int64}
TARGET_MEASURE = "energy_to_target_j"  # the measure (tokenwatt.common.measures) the energy-to-target test runs on


class CurvesError(ValueError):
    """A curves table the analysis cannot read (a column missing, a point repeated); the message says which."""


class _Run(NamedTuple):
    """One trial run's points in order, nulls as NaN."""

    cell: str
    series: str
    budget: int
    trial: int
    point: np.ndarray
    tokens: np.ndarray
    energy: np.ndarray
    seconds: np.ndarray
    loss: np.ndarray
    final: np.ndarray

    def key(self) -> dict[str, Any]:
        return {"cell": self.cell, "series": self.series, "budget": self.budget, "trial": self.trial}


def _floats(frame: pl.DataFrame, column: str) -> np.ndarray:
    return frame[column].cast(pl.Float64).fill_null(float("nan")).to_numpy()


def _runs(curves: pl.DataFrame) -> list[_Run]:
    """Every run, cells in the table's order (the design's), trials ascending, points in order."""
    missing = [c for c in REQUIRED if c not in curves.columns]
    if missing:
        raise CurvesError(f"the curves table lacks column(s) {', '.join(missing)}")
    if curves.select("cell", "trial", "point").is_duplicated().any():
        raise CurvesError("the curves table holds a (cell, trial, point) more than once")
    order = {c: i for i, c in enumerate(dict.fromkeys(curves["cell"].to_list()))}
    parts = curves.sort("point").partition_by("cell", "trial", as_dict=True, maintain_order=True)
    runs = []
    for cell, trial in sorted(parts, key=lambda k: (order[k[0]], k[1])):
        part = parts[(cell, trial)]
        runs.append(
            _Run(
                cell,
                part["series"][0],
                int(part["budget"][0]),
                int(trial),
                part["point"].to_numpy(),
                _floats(part, "real_tokens"),
                _floats(part, "train_energy_j"),
                _floats(part, "train_s"),
                _floats(part, "eval_loss"),
                part["final"].to_numpy(),
            )
        )
    return runs


def _value(x: float) -> float | None:
    """A float for a table; NaN (unmeasured, undefined) as null."""
    return float(x) if x is not None and math.isfinite(x) else None


def _table(rows: list[dict[str, Any]], schema: Mapping[str, Any]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=dict(schema), orient="row")


def _centre(values: np.ndarray, prefix: str, suffix: str = "") -> dict[str, Any]:
    """Median, and the geometric mean with its 95 % interval (``scale.summary`` on log values): energies and
    times are ratio-scale measures."""
    s = summary(values, "log")
    return {
        f"{prefix}_median{suffix}": float(np.median(values)) if len(values) else None,
        f"{prefix}_geomean{suffix}": s["center"],
        f"{prefix}_ci95_low{suffix}": s["ci95_low"],
        f"{prefix}_ci95_high{suffix}": s["ci95_high"],
    }


def _cost_centre(values: np.ndarray, prefix: str) -> dict[str, Any]:
    """``_centre`` of a cost to a target; a price or carbon intensity of 0 makes every run's cost 0, which is the
    answer (0), not a missing geometric mean."""
    if len(values) and not values.any():
        return {f"{prefix}_{k}": 0.0 for k in ("median", "geomean", "ci95_low", "ci95_high")}
    return _centre(values, prefix)


def _centre_schema(prefix: str, suffix: str = "") -> dict[str, Any]:
    return {f"{prefix}_{k}{suffix}": pl.Float64 for k in ("median", "geomean", "ci95_low", "ci95_high")}


# ---- targets -------------------------------------------------------------------------------------------


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


# ---- energy to target ----------------------------------------------------------------------------------

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


def _crossing(run: _Run, loss: float) -> dict[str, Any]:
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
        return _value(np.exp(at(np.log(np.where(x > 0, x, np.nan))))) if np.all(pair > 0) else _value(at(x))

    if i == 0:
        return {
            "reached": True,
            "at_first_point": True,
            "point_reached": int(points[0]),
            "real_tokens": _value(tokens[0]),
            "energy_j": _value(energy[0]),
            "train_s": _value(seconds[0]),
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
        for run in _runs(curves):
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
    return _table(rows, REACH_SCHEMA)


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
    **_centre_schema("energy", "_j"),
    **_centre_schema("train_s"),
    **{k: v for c in TARGET_COSTS for k, v in _centre_schema(c).items()},
}


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
                **_centre(got["energy_j"].drop_nulls().to_numpy(), "energy", "_j"),
                **_centre(got["train_s"].drop_nulls().to_numpy(), "train_s"),
                **{k: v for c in TARGET_COSTS for k, v in _cost_centre(got[c].drop_nulls().to_numpy(), c).items()},
            }
        )
    return _table(rows, REACH_SUMMARY_SCHEMA)


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


# ---- quality at equal energy ---------------------------------------------------------------------------

GRID_SCHEMA = {"series": pl.String, "energy_j": pl.Float64}
AT_ENERGY_SCHEMA = {
    "series": pl.String,
    "energy_j": pl.Float64,
    "cell": pl.String,
    "budget": pl.Int64,
    "trial": pl.Int64,
    "in_range": pl.Boolean,
    "eval_loss": pl.Float64,
}


def _on_energy(run: _Run) -> tuple[np.ndarray, np.ndarray]:
    """The run's (energy, loss) points that have a place on a log-energy axis."""
    keep = np.isfinite(run.energy) & (run.energy > 0) & np.isfinite(run.loss)
    return run.energy[keep], run.loss[keep]


def energy_grid(curves: pl.DataFrame, n: int = 8) -> pl.DataFrame:
    """Per series, ``n`` log-spaced training energies where every run with measured energy has data: from the
    largest first-point energy to the smallest last-point energy (the smallest budget's end, where "repeat the
    data or add new data" is asked). A series whose runs share no range has no grid."""
    rows = []
    by_series: dict[str, list[tuple[float, float]]] = {}
    for run in _runs(curves):
        energy, _ = _on_energy(run)
        if energy.size:
            by_series.setdefault(run.series, []).append((energy[0], energy[-1]))
    for series, ranges in by_series.items():
        lo, hi = max(r[0] for r in ranges), min(r[1] for r in ranges)
        if lo <= hi:
            rows += [{"series": series, "energy_j": float(e)} for e in dict.fromkeys(np.geomspace(lo, hi, n).tolist())]
    return _table(rows, GRID_SCHEMA)


def quality_at_energy(curves: pl.DataFrame, energies: Sequence[float] | None = None, n: int = 8) -> pl.DataFrame:
    """Each run's eval loss at the same cumulative training energies: ``energies`` (J, for every series) or
    ``energy_grid(curves, n)``. The loss is linear in log energy between the two points around each energy;
    an energy outside the run's own range (or a run without measured energy) is null with ``in_range`` false,
    never extrapolated."""
    if energies is not None:
        energies = sorted(float(e) for e in energies)
        if not all(math.isfinite(e) and e > 0 for e in energies):
            raise CurvesError(f"energies {energies!r}: each is a finite number of joules > 0")
    runs = _runs(curves)
    grid = (
        energy_grid(curves, n)
        if energies is None
        else pl.DataFrame(
            [{"series": s, "energy_j": e} for s in dict.fromkeys(r.series for r in runs) for e in energies],
            schema=GRID_SCHEMA,
        )
    )
    rows = []
    for (series,), block in grid.partition_by("series", as_dict=True, maintain_order=True).items():
        mine = [r for r in runs if r.series == series]
        for e in block["energy_j"].to_list():
            for run in mine:
                energy, loss = _on_energy(run)
                inside = bool(energy.size) and energy[0] <= e <= energy[-1]
                rows.append(
                    {
                        "series": series,
                        "energy_j": e,
                        "cell": run.cell,
                        "budget": run.budget,
                        "trial": run.trial,
                        "in_range": inside,
                        "eval_loss": float(np.interp(np.log(e), np.log(energy), loss)) if inside else None,
                    }
                )
    return _table(rows, AT_ENERGY_SCHEMA)


AT_ENERGY_SUMMARY_SCHEMA = {
    "series": pl.String,
    "energy_j": pl.Float64,
    "cell": pl.String,
    "budget": pl.Int64,
    "n": pl.Int64,
    "n_in_range": pl.Int64,
    "n_outside": pl.Int64,
    "loss_mean": pl.Float64,
    "loss_sd": pl.Float64,
    "loss_ci95_low": pl.Float64,
    "loss_ci95_high": pl.Float64,
    "ppl_geomean": pl.Float64,
    "ppl_ci95_low": pl.Float64,
    "ppl_ci95_high": pl.Float64,
}


def _exp(x: float | None) -> float | None:
    return math.exp(x) if x is not None else None


def quality_at_energy_summary(at: pl.DataFrame) -> pl.DataFrame:
    """Per series, energy and cell (of ``quality_at_energy``'s table): the runs in range and outside it (counted,
    not imputed), the mean loss with its 95 % t-interval on the raw scale, and the same as a perplexity
    (exp of the mean loss: the geometric mean perplexity)."""
    rows = []
    for (series, energy, cell), block in at.partition_by(
        "series", "energy_j", "cell", as_dict=True, maintain_order=True
    ).items():
        inside = block.filter(pl.col("in_range"))
        s = summary(inside["eval_loss"].to_numpy(), "raw")
        rows.append(
            {
                "series": series,
                "energy_j": energy,
                "cell": cell,
                "budget": block["budget"][0],
                "n": block.height,
                "n_in_range": inside.height,
                "n_outside": block.height - inside.height,
                "loss_mean": s["center"],
                "loss_sd": s["sd"],
                "loss_ci95_low": s["ci95_low"],
                "loss_ci95_high": s["ci95_high"],
                "ppl_geomean": _exp(s["center"]),
                "ppl_ci95_low": _exp(s["ci95_low"]),
                "ppl_ci95_high": _exp(s["ci95_high"]),
            }
        )
    return _table(rows, AT_ENERGY_SUMMARY_SCHEMA)


COMPARISON_SCHEMA = {
    "series": pl.String,
    "energy_j": pl.Float64,
    "budget_a": pl.Int64,
    "budget_b": pl.Int64,
    "n": pl.Int64,
    "loss_change": pl.Float64,
    "loss_change_ci95_low": pl.Float64,
    "loss_change_ci95_high": pl.Float64,
    "ppl_change_pct": pl.Float64,
    "ppl_change_ci95_low": pl.Float64,
    "ppl_change_ci95_high": pl.Float64,
}


def _pct(x: float | None) -> float | None:
    """A mean loss difference as the % change of the geometric mean perplexity."""
    return 100.0 * math.expm1(x) if x is not None else None


def quality_at_energy_comparison(at: pl.DataFrame) -> pl.DataFrame:
    """Per series and energy, every pair of budgets a < b paired by trial on the runs in range in both: the mean
    loss difference b − a (negative: the larger budget is better at that cost) with its 95 % t-interval, and the
    same as a % change in perplexity. Intervals, not p values: one comparison per grid energy, which a p value
    would have to be corrected for."""
    rows = []
    for (series, energy), block in at.partition_by("series", "energy_j", as_dict=True, maintain_order=True).items():
        values = {
            b: dict(part.filter(pl.col("in_range")).select("trial", "eval_loss").iter_rows())
            for (b,), part in block.partition_by("budget", as_dict=True).items()
        }
        for a, b in itertools.combinations(sorted(values), 2):
            common = sorted(set(values[a]) & set(values[b]))
            c = paired_change(np.array([values[a][t] for t in common]), np.array([values[b][t] for t in common]), "raw")
            rows.append(
                {
                    "series": series,
                    "energy_j": energy,
                    "budget_a": a,
                    "budget_b": b,
                    "n": c["change_n"],
                    "loss_change": c["change"],
                    "loss_change_ci95_low": c["change_ci95_low"],
                    "loss_change_ci95_high": c["change_ci95_high"],
                    "ppl_change_pct": _pct(c["change"]),
                    "ppl_change_ci95_low": _pct(c["change_ci95_low"]),
                    "ppl_change_ci95_high": _pct(c["change_ci95_high"]),
                }
            )
    return _table(rows, COMPARISON_SCHEMA)


# ---- marginal quality per kJ ---------------------------------------------------------------------------

SEGMENT_SCHEMA = {
    **RUN_SCHEMA,
    "point": pl.Int64,
    "real_tokens": pl.Float64,
    "train_energy_j": pl.Float64,
    "delta_loss": pl.Float64,
    "delta_kj": pl.Float64,
    "gain_per_kj": pl.Float64,
}


def _points(run: _Run) -> list[dict[str, Any]]:
    """The run's points as ``tokenwatt.plan.stopping`` reads them."""
    return [{"train_energy_j": _value(e), "eval_loss": float(v)} for e, v in zip(run.energy, run.loss)]


def marginal_gains(curves: pl.DataFrame) -> pl.DataFrame:
    """Per segment (from the point before to ``point``, whose tokens and energy are given): the loss change, the
    kJ spent and the quality gained per kJ, ``−Δ loss / Δ kJ`` (``stopping.segment_gain``, the quantity the
    stopping rule judges; null where the meter saw no energy)."""
    rows = []
    for run in _runs(curves):
        points = _points(run)
        for j in range(1, len(points)):
            rows.append(
                {
                    **run.key(),
                    "point": int(run.point[j]),
                    "real_tokens": _value(run.tokens[j]),
                    "train_energy_j": _value(run.energy[j]),
                    "delta_loss": float(run.loss[j] - run.loss[j - 1]),
                    "delta_kj": _value((run.energy[j] - run.energy[j - 1]) / 1000.0),
                    "gain_per_kj": segment_gain(points[j - 1], points[j]),
                }
            )
    return _table(rows, SEGMENT_SCHEMA)


FALL_SCHEMA = {
    **RUN_SCHEMA,
    "first_gain_per_kj": pl.Float64,
    "threshold_per_kj": pl.Float64,
    "fell": pl.Boolean,
    "fall_point": pl.Int64,
    "fall_real_tokens": pl.Float64,
    "fall_energy_j": pl.Float64,
}


def gain_falls(curves: pl.DataFrame, fraction: float = 0.1) -> pl.DataFrame:
    """Per run: its first segment's gain per kJ and the first later point whose segment gained less than
    ``fraction`` of it (where a joule had stopped paying), with that point's tokens and energy; ``fell`` false
    if none did, null where the first gain is not a positive number (a fraction of it means nothing)."""
    if not 0 < fraction < 1:
        raise CurvesError(
            f"fraction {fraction!r}: a fraction of the first segment's gain lies strictly between 0 and 1"
        )
    rows = []
    for run in _runs(curves):
        points = _points(run)
        gains = [segment_gain(p, q) for p, q in zip(points, points[1:])]
        first = gains[0] if gains else None
        row = {**run.key(), "first_gain_per_kj": first}
        if first is None or first <= 0:
            rows.append(row)
            continue
        threshold = fraction * first
        k = next((j for j in range(1, len(gains)) if gains[j] is not None and gains[j] < threshold), None)
        row |= {"threshold_per_kj": threshold, "fell": k is not None}
        if k is not None:  # segment k ends at point index k + 1
            row |= {
                "fall_point": int(run.point[k + 1]),
                "fall_real_tokens": _value(run.tokens[k + 1]),
                "fall_energy_j": _value(run.energy[k + 1]),
            }
        rows.append(row)
    return _table(rows, FALL_SCHEMA)


FALL_SUMMARY_SCHEMA = {
    "cell": pl.String,
    "series": pl.String,
    "budget": pl.Int64,
    "n": pl.Int64,
    "n_defined": pl.Int64,
    "n_fell": pl.Int64,
    "first_gain_median_per_kj": pl.Float64,
    "fall_point_median": pl.Float64,
    "fall_real_tokens_median": pl.Float64,
    **_centre_schema("fall_energy", "_j"),
}


def gain_falls_summary(falls: pl.DataFrame) -> pl.DataFrame:
    """Per cell (of ``gain_falls``' table): how many runs had a defined first gain and how many fell below the
    fraction, the median first gain, and where the fall came (median point and tokens; energy as median and
    geometric mean with its 95 % interval) among those that fell."""
    rows = []
    for (cell,), block in falls.partition_by("cell", as_dict=True, maintain_order=True).items():
        fell = block.filter(pl.col("fell"))
        rows.append(
            {
                "cell": cell,
                "series": block["series"][0],
                "budget": block["budget"][0],
                "n": block.height,
                "n_defined": block["fell"].is_not_null().sum(),
                "n_fell": fell.height,
                "first_gain_median_per_kj": block["first_gain_per_kj"].median(),
                "fall_point_median": fell["fall_point"].median(),
                "fall_real_tokens_median": fell["fall_real_tokens"].median(),
                **_centre(fell["fall_energy_j"].drop_nulls().to_numpy(), "fall_energy", "_j"),
            }
        )
    return _table(rows, FALL_SUMMARY_SCHEMA)


# ---- trajectory statistics -----------------------------------------------------------------------------

POINT_SCHEMA = {
    **RUN_SCHEMA,
    "point": pl.Int64,
    "real_tokens": pl.Float64,
    "train_energy_j": pl.Float64,
    "train_s": pl.Float64,
    "eval_loss": pl.Float64,
    "perplexity": pl.Float64,
    "delta_loss": pl.Float64,
    "backslide": pl.Boolean,
    "spike": pl.Boolean,
    "volatility": pl.Float64,
}
INTERVAL_SCHEMA = {
    "cell": pl.String,
    "series": pl.String,
    "budget": pl.Int64,
    "point": pl.Int64,
    "n": pl.Int64,
    "real_tokens_mean": pl.Float64,
    "train_energy_mean_j": pl.Float64,
    "loss_mean": pl.Float64,
    "loss_sd": pl.Float64,
    "loss_min": pl.Float64,
    "loss_max": pl.Float64,
    "ppl_mean": pl.Float64,
    "ppl_sd": pl.Float64,
    "volatility_mean": pl.Float64,
    "n_backslides": pl.Int64,
    "n_spikes": pl.Int64,
}
TRAJECTORY_TRIAL_SCHEMA = {
    **RUN_SCHEMA,
    "n_points": pl.Int64,
    "n_backslides": pl.Int64,
    "n_spikes": pl.Int64,
    "median_abs_change": pl.Float64,
    "best_point": pl.Int64,
    "best_loss": pl.Float64,
    "best_perplexity": pl.Float64,
    "best_real_tokens": pl.Float64,
    "best_energy_j": pl.Float64,
    "best_train_s": pl.Float64,
    "final_loss": pl.Float64,
    "final_minus_best_loss": pl.Float64,
}


@dataclass(frozen=True)
class Trajectory:
    """The trajectory statistics: ``points`` (every point with its change from the previous one, backslide, spike
    and rolling volatility), ``intervals`` (per cell and point, across trials), ``trials`` (per run: counts and
    its best point) and ``anova`` (per cell, the RM-ANOVA of the loss over points)."""

    window: int
    spike_k: float
    points: pl.DataFrame
    intervals: pl.DataFrame
    trials: pl.DataFrame
    anova: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "spike_k": self.spike_k,
            "points": self.points.to_dicts(),
            "intervals": self.intervals.to_dicts(),
            "trials": self.trials.to_dicts(),
            "anova": self.anova,
        }


def _trajectory_points(run: _Run, window: int, spike_k: float) -> tuple[list[dict[str, Any]], float | None]:
    """The run's points with their derived columns, and its median absolute change (the spike scale)."""
    delta = np.concatenate([[np.nan], np.diff(run.loss)])
    scale = float(np.nanmedian(np.abs(delta[1:]))) if np.isfinite(delta[1:]).any() else None
    rows = []
    for j in range(len(run.loss)):
        recent = delta[j - window + 1 : j + 1] if j >= window else np.array([])
        rows.append(
            {
                **run.key(),
                "point": int(run.point[j]),
                "real_tokens": _value(run.tokens[j]),
                "train_energy_j": _value(run.energy[j]),
                "train_s": _value(run.seconds[j]),
                "eval_loss": _value(run.loss[j]),
                "perplexity": _value(math.exp(run.loss[j])),
                "delta_loss": _value(delta[j]),
                "backslide": bool(delta[j] > 0),
                "spike": bool(scale is not None and delta[j] > spike_k * scale),
                "volatility": _value(float(np.std(recent, ddof=1))) if recent.size else None,
            }
        )
    return rows, scale


def _best(run: _Run) -> dict[str, Any]:
    """The run's lowest-loss point (the first of equals) and how far its end is above it."""
    b = int(np.nanargmin(run.loss))
    return {
        "best_point": int(run.point[b]),
        "best_loss": float(run.loss[b]),
        "best_perplexity": math.exp(run.loss[b]),
        "best_real_tokens": _value(run.tokens[b]),
        "best_energy_j": _value(run.energy[b]),
        "best_train_s": _value(run.seconds[b]),
        "final_loss": _value(run.loss[-1]),
        "final_minus_best_loss": _value(run.loss[-1] - run.loss[b]),
    }


def _interval_anova(points: pl.DataFrame) -> list[dict[str, Any]]:
    """Per cell, the RM-ANOVA of the raw eval loss with the point (interval) as the within factor and the trial as
    the subject (GG ε and Mauchly's W from ``stats.anova_effects``), on the trials with every point (a stopped
    run, with fewer, is named in ``dropped_trials``). The perplexity's ANOVA on its log scale is this one: ln ppl
    is the loss."""
    out = []
    for (cell,), block in points.partition_by("cell", as_dict=True, maintain_order=True).items():
        y, factors, levels, kept, dropped = complete_block(block.sort("point"), "eval_loss", ["point"])
        row: dict[str, Any] = {
            "cell": cell,
            "series": block["series"][0],
            "budget": block["budget"][0],
            "dv": "eval_loss",
            "scale": "raw",
            "points": levels[0] if levels else [],
            "n_trials": len(kept),
            "dropped_trials": dropped,
        }
        if not factors:
            out.append(
                {**row, "status": "not tested", "message": f"{cell}: one evaluation point, no interval to compare"}
            )
        elif len(kept) < MIN_SUBJECTS:
            out.append(
                {
                    **row,
                    "status": "not tested",
                    "message": f"{cell}: only {len(kept)} trials have every point; "
                    f"the analysis needs at least {MIN_SUBJECTS}",
                }
            )
        else:
            effect = anova_effects(y, factors)[0]
            out.append({**row, **{k: v for k, v in effect.items() if k not in ("effect", "factors")}})
    return out


def trajectory(curves: pl.DataFrame, window: int = 3, spike_k: float = 3.0) -> Trajectory:
    """The follow-up study's trajectory statistics (arXiv:2606.13370), with energy beside them. Definitions:
    the change at a point is its loss minus the previous point's; a *backslide* is a point whose loss is higher
    than the previous point's (change > 0); a *spike* is a rise larger than ``spike_k`` times the trial's median
    absolute change over all its points (a scale robust to the large early falls; a run whose median change is
    0 calls any rise a spike); the *rolling volatility* at a point is the sd of the last ``window`` changes
    ending there (null before ``window`` changes exist). Between-seed spread: per point the sd and range of the
    loss across trials. Points are aligned by index (the schedule gives every trial of a cell the same tokens)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise CurvesError(f"window {window!r}: a rolling sd needs a whole number of changes ≥ 2")
    if not (isinstance(spike_k, (int, float)) and math.isfinite(spike_k) and spike_k > 0):
        raise CurvesError(f"spike_k {spike_k!r}: a spike is a rise above a positive multiple of the median change")
    rows, trials = [], []
    for run in _runs(curves):
        mine, scale = _trajectory_points(run, window, spike_k)
        rows += mine
        trials.append(
            {
                **run.key(),
                "n_points": len(mine),
                "n_backslides": sum(r["backslide"] for r in mine),
                "n_spikes": sum(r["spike"] for r in mine),
                "median_abs_change": scale,
                **_best(run),
            }
        )
    points = _table(rows, POINT_SCHEMA)
    intervals = points.group_by("cell", "point", maintain_order=True).agg(
        pl.col("series").first(),
        pl.col("budget").first(),
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("real_tokens").mean().alias("real_tokens_mean"),
        pl.col("train_energy_j").mean().alias("train_energy_mean_j"),
        pl.col("eval_loss").mean().alias("loss_mean"),
        pl.col("eval_loss").std().alias("loss_sd"),
        pl.col("eval_loss").min().alias("loss_min"),
        pl.col("eval_loss").max().alias("loss_max"),
        pl.col("perplexity").mean().alias("ppl_mean"),
        pl.col("perplexity").std().alias("ppl_sd"),
        pl.col("volatility").mean().alias("volatility_mean"),
        pl.col("backslide").sum().cast(pl.Int64).alias("n_backslides"),
        pl.col("spike").sum().cast(pl.Int64).alias("n_spikes"),
    )
    order = {c: i for i, c in enumerate(dict.fromkeys(points["cell"].to_list()))}
    intervals = (
        intervals.sort(pl.col("cell").replace_strict(order), "point")
        .select(list(INTERVAL_SCHEMA))
        .cast(INTERVAL_SCHEMA)
    )
    return Trajectory(
        window, float(spike_k), points, intervals, _table(trials, TRAJECTORY_TRIAL_SCHEMA), _interval_anova(points)
    )


# ---- stopping rules, replayed ----------------------------------------------------------------------------

STOP_TRIAL_SCHEMA = {
    **RUN_SCHEMA,
    "stopped": pl.Boolean,
    "stop_point": pl.Int64,
    "stop_reason": pl.String,
    "stop_eval_whole_set": pl.Boolean,
    "full_energy_j": pl.Float64,
    "stop_energy_j": pl.Float64,
    "energy_saved_pct": pl.Float64,
    "full_train_s": pl.Float64,
    "stop_train_s": pl.Float64,
    "time_saved_pct": pl.Float64,
    "full_real_tokens": pl.Float64,
    "stop_real_tokens": pl.Float64,
    "full_loss": pl.Float64,
    "stop_loss": pl.Float64,
    "loss_increase": pl.Float64,
    "ppl_increase_pct": pl.Float64,
}
STOP_CELL_SCHEMA = {
    "cell": pl.String,
    "series": pl.String,
    "budget": pl.Int64,
    "n": pl.Int64,
    "n_stopped": pl.Int64,
    **{
        f"{m}{k}": pl.Float64
        for m in ("energy_saved_pct", "time_saved_pct", "loss_increase", "ppl_increase_pct")
        for k in ("", "_ci95_low", "_ci95_high")
    },
}
STOP_NOTE = (
    "The stopped runs are the full runs cut where the rule first said stop (the rule at the final point "
    "changes nothing). Their loss is the evaluation at the stop point; where intermediate evaluations use a "
    "subset of the eval set (eval.max_tokens) and the final one the whole set, quality lost compares a subset "
    "loss with a whole-set loss (stop_eval_whole_set says which)."
)


@dataclass(frozen=True)
class StoppingOutcomes:
    """A rule replayed on full runs: ``trials`` (per run: where and why it would have stopped, and what that
    saved and lost against its own full run), ``cells`` (per cell, the paired savings and losses with 95 %
    intervals), ``targets`` (``energy_to_target_summary`` of the full and the stopped runs, column ``run``)."""

    rule: StopRule
    trials: pl.DataFrame
    cells: pl.DataFrame
    targets: pl.DataFrame
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.to_dict(),
            "trials": self.trials.to_dicts(),
            "cells": self.cells.to_dicts(),
            "targets": self.targets.to_dicts(),
            "note": self.note,
        }


def _stop_index(run: _Run, rule: StopRule) -> tuple[int, str | None]:
    """The index of the point the rule would have stopped the run at, and why; the last point and None if never."""
    points = _points(run)
    for k in range(1, len(points)):
        reason = should_stop(points[:k], rule)
        if reason is not None:
            return k - 1, reason
    return len(points) - 1, None


def _saved(full: float, stop: float) -> float | None:
    return _value(100.0 * (1.0 - stop / full)) if full and math.isfinite(full) else None


def _bounds(c: dict[str, Any], as_value: Any) -> tuple[Any, Any, Any]:
    """``paired_change``'s change and interval through ``as_value`` (a decreasing map swaps the bounds)."""
    values = [as_value(c[k]) if c[k] is not None else None for k in ("change", "change_ci95_low", "change_ci95_high")]
    low, high = sorted(values[1:]) if None not in values[1:] else values[1:]
    return values[0], low, high


def _stop_cell(block: pl.DataFrame) -> dict[str, Any]:
    """One cell's paired savings (geometric mean ratio stopped / full on log values, as % saved) and losses (mean
    loss increase on the raw scale, and as the % change of the geometric mean perplexity)."""

    def pair(before: str, after: str, scale: str) -> dict[str, Any]:
        return paired_change(_floats(block, before), _floats(block, after), scale)

    row: dict[str, Any] = {
        "cell": block["cell"][0],
        "series": block["series"][0],
        "budget": block["budget"][0],
        "n": block.height,
        "n_stopped": int(block["stopped"].sum()),
    }
    for name, before, after in (
        ("energy_saved_pct", "full_energy_j", "stop_energy_j"),
        ("time_saved_pct", "full_train_s", "stop_train_s"),
    ):
        saved = _bounds(pair(before, after, "log"), lambda v: 0.0 - v)  # a change of −x % is x % saved
        row.update(zip((name, f"{name}_ci95_low", f"{name}_ci95_high"), saved))
    loss = pair("full_loss", "stop_loss", "raw")
    row.update(zip(("loss_increase", "loss_increase_ci95_low", "loss_increase_ci95_high"), _bounds(loss, lambda v: v)))
    row.update(
        zip(("ppl_increase_pct", "ppl_increase_pct_ci95_low", "ppl_increase_pct_ci95_high"), _bounds(loss, _pct))
    )
    return row


def stopping_outcomes(
    curves: pl.DataFrame, rule: StopRule, targets: Sequence[Target | Mapping[str, float]] = ()
) -> StoppingOutcomes:
    """Replay ``rule`` on full-run curves (``stopping.should_stop`` at each point, as training would call it) and
    price it per trial against the same trial's full run: energy and time saved (%), loss increase (nats) and
    perplexity increase (%); per cell the paired means with 95 % intervals (a run the rule never stopped counts
    as saving nothing, losing nothing); and the energy to each target of the full and the stopped runs. Pass full
    runs only (not runs a rule already stopped); a marginal rule needs their training energy (``StopRuleError``)."""
    rows, cut = [], []
    for run in _runs(curves):
        s, reason = _stop_index(run, rule)
        delta = float(run.loss[s] - run.loss[-1])
        rows.append(
            {
                **run.key(),
                "stopped": reason is not None,
                "stop_point": int(run.point[s]),
                "stop_reason": reason,
                "stop_eval_whole_set": bool(run.final[s]),
                "full_energy_j": _value(run.energy[-1]),
                "stop_energy_j": _value(run.energy[s]),
                "energy_saved_pct": _saved(run.energy[-1], run.energy[s]),
                "full_train_s": _value(run.seconds[-1]),
                "stop_train_s": _value(run.seconds[s]),
                "time_saved_pct": _saved(run.seconds[-1], run.seconds[s]),
                "full_real_tokens": _value(run.tokens[-1]),
                "stop_real_tokens": _value(run.tokens[s]),
                "full_loss": _value(run.loss[-1]),
                "stop_loss": _value(run.loss[s]),
                "loss_increase": _value(delta),
                "ppl_increase_pct": _pct(delta),
            }
        )
        cut.append({"cell": run.cell, "trial": run.trial, "_stop": int(run.point[s])})
    trials = _table(rows, STOP_TRIAL_SCHEMA)
    cells = _table([_stop_cell(b) for b in trials.partition_by("cell", maintain_order=True)], STOP_CELL_SCHEMA)
    stopped = (
        curves.join(
            pl.DataFrame(cut, schema={"cell": pl.String, "trial": curves.schema["trial"], "_stop": pl.Int64}),
            on=["cell", "trial"],
        )
        .filter(pl.col("point") <= pl.col("_stop"))
        .drop("_stop")
    )
    reach = [
        energy_to_target_summary(energy_to_target(c, targets)).select(pl.lit(name).alias("run"), pl.all())
        for name, c in (("full", curves), ("stopped", stopped))
    ]
    return StoppingOutcomes(rule, trials, cells, pl.concat(reach), STOP_NOTE)


def in_frame(curves: pl.DataFrame, trials: pl.DataFrame) -> pl.DataFrame:
    """The curves of the analysis frame's trials only (``frame``): the curve analysis reads the trial set the tests do."""
    if curves.height == 0 or "in_frame" not in trials.columns:
        return curves
    kept = trials.filter(pl.col("in_frame")).select("cell", pl.col("trial").cast(pl.Int64))
    return curves.with_columns(pl.col("trial").cast(pl.Int64)).join(kept, on=["cell", "trial"], how="semi")


def full_runs(curves: pl.DataFrame, trials: pl.DataFrame) -> pl.DataFrame:
    """The curves of trials that trained all their tokens (no ``train.stop`` rule applied online): the runs a
    stopping rule is replayed against."""
    if "stop_rule_rule" not in trials.columns:
        return curves
    full = trials.filter(pl.col("stop_rule_rule").fill_null("none") == "none").select(
        "cell", pl.col("trial").cast(pl.Int64)
    )
    return curves.join(full, on=["cell", "trial"], how="semi")


def analyse_curves(
    curves: pl.DataFrame,
    settings: Mapping[str, Any],
    full: pl.DataFrame | None = None,
    cost: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the report shows of the eval curves, machine-readable: energy to each target (``analysis.targets``,
    or the median final perplexity of each budget), quality at equal energy, where the marginal gain per kJ falls
    below ``analysis.gain_fraction`` of its first value, the trajectory statistics, and each named stopping rule
    (``analysis.stopping``) replayed against the full runs (``full``: those no rule stopped online; every curve
    when not given; ``cost``: the aggregate's cost summary, for CO2e and money to each target). A study without energy
    or with one point per trial says so instead."""
    if curves.height == 0:
        return {"status": "no curves", "message": "No finished trial has an eval curve yet."}
    points = int(curves.group_by("cell", "trial").len()["len"].max())
    out: dict[str, Any] = {"status": "ok", "points_per_trial": points, "trajectory": trajectory(curves).to_dict()}
    if curves["train_energy_j"].null_count() == curves.height:
        return {
            **out,
            "status": "no energy",
            "message": "Energy was not measured (meter none): no energy-to-quality analysis.",
        }
    targets = targets_from_config(settings.get("targets") or None, curves)
    reached = energy_to_target(curves, targets, cost)
    at = quality_at_energy(curves)
    out.update(
        targets=[t.to_dict() for t in targets],
        targets_source="analysis.targets"
        if settings.get("targets")
        else "the median final perplexity of each budget (analysis.targets not set)",
        energy_to_target=energy_to_target_summary(reached).to_dicts(),
        currency=(cost or {}).get("currency", ""),
        cost_is_estimate=bool((cost or {}).get("is_estimate", False)),
        energy_to_target_tests=[t.to_dict() for t in energy_to_target_tests(reached)],
        quality_at_energy=quality_at_energy_summary(at).to_dicts(),
        quality_at_energy_comparison=quality_at_energy_comparison(at).to_dicts(),
        marginal_gains=marginal_gains(curves).to_dicts(),
        gain_falls=gain_falls_summary(gain_falls(curves, settings.get("gain_fraction", 0.1))).to_dicts(),
        gain_fraction=settings.get("gain_fraction", 0.1),
        stopping={
            name: stopping_outcomes(curves if full is None else full, stop_rule(rule), targets).to_dict()
            for name, rule in (settings.get("stopping") or {}).items()
        },
    )
    if points < 2:
        out["message"] = "One evaluation per trial (eval.points: 0): energy to target reads the final points only."
    return out
