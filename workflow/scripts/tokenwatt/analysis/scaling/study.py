"""The scaling analysis of a study: its trials and eval curves turned into points, the law L(N, D) fitted for
both counts of N, joules per token as a function of N per device profile (hardware level and precision: what a
token costs depends on both), and the energy- and FLOP-optimal
allocations. Every number comes from ``analysis.scaling``; this module only chooses the points.

N is data, never guessed from a level's name: each trial records its parameter count and embedding size.
Kaplan et al. counted non-embedding parameters and Hoffmann et al. total ones (Pearce & Song 2024 traced much of
their disagreement to that choice); at tokenwatt's sizes embeddings are a large share of N, so both are fitted and
reported; the allocation uses total N (what the device multiplies, and what e(N) is measured against).

Uncertainty counts the design's real units (``units``): the trial ids and the model sizes, each left out in
turn; the loss law, e(N) and the allocation are refitted together without each, so the allocation's intervals carry
the uncertainty of both fits. Before any allocation the law's lack of fit at the cell means is judged against the
between-trial noise, and e(N) is chosen between a power law and an affine form by AICc on the size means.

Which points enter (``scaling.points``): ``first_epoch`` (default) — the eval points within each trial's first
epoch, where D counts distinct tokens as the law assumes (repeated tokens are worth less than new ones:
Muennighoff et al. 2023); ``final`` — one point per trial, D its total tokens, repeats included; ``all`` — every
point, repeats included.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as sps

from ...plan.design import factor_name, recipe_columns
from ..frame import frame, in_frame
from ..products import Result
from ..tables import SCALING_TABLES
from .energy_per_token import choose_energy
from .frontier import FrontierPoints, frontier
from .law import PUBLISHED, LawFit, ScalingInputError, fit_law
from .optimal import allocation
from .units import (
    LACK_OF_FIT_REPLICATES,
    SIZE,
    TRIAL,
    LawUncertainty,
    lack_of_fit,
    law_uncertainty,
    without,
)

N_COUNTS = {"total": "params", "non_embedding": "non_embedding_params"}


def sizes(trials: pl.DataFrame) -> pl.DataFrame:
    """Per trial: N counted both ways (a head tied to the embedding is one matrix; untied, the head is a second
    vocabulary-sized one, also excluded from the non-embedding count), joules and training FLOPs per real token."""
    tied = pl.col("tied_embeddings").fill_null(False) if "tied_embeddings" in trials.columns else pl.lit(False)
    return trials.select(
        "cell",
        pl.col("trial").cast(pl.Int64),
        "series",
        "budget",
        "params",
        "real_tokens",
        (pl.col("params") - pl.col("embedding_params") * pl.when(tied).then(1).otherwise(2)).alias(
            "non_embedding_params"
        ),
        (pl.col("energy_j") / pl.col("real_tokens")).alias("joules_per_token"),
        (pl.col("dynamic_energy_j") / pl.col("real_tokens")).alias("dynamic_joules_per_token")
        if "dynamic_energy_j" in trials.columns
        else pl.lit(None, pl.Float64).alias("dynamic_joules_per_token"),
        # the trial's training FLOPs per real token (analysis/efficiency.py), the frontier's compute axis
        (pl.col("flops") / pl.col("real_tokens") if "flops" in trials.columns else pl.lit(None, pl.Float64)).alias(
            "flops_per_token"
        ),
        (pl.col("device_profile") if "device_profile" in trials.columns else pl.lit("")).alias("hardware"),
    )


def _final_loss(trials: pl.DataFrame) -> pl.Expr:
    """A trial's final eval loss, a diverged or unevaluated one ranked last (+inf)."""
    loss = pl.col("eval_loss").cast(pl.Float64)
    return pl.when(loss.is_finite()).then(loss).otherwise(float("inf"))


def tuned_learning_rates(trials: pl.DataFrame) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """Where a model size × budget was trained at several learning rates (``design.lr``), the trials of the rate
    whose trials reached the lowest mean final eval loss, and per size × budget the rate chosen beside every rate
    tried. Porian et al. (2024) showed that one rate for every size makes the larger models lose at small scale;
    tuning per size and budget is their fix. A rate at the edge of the sweep is marked: the best may lie beyond it.
    With one rate per size × budget: every trial, and an empty list."""
    if "lr" not in trials.columns or "eval_loss" not in trials.columns or trials.height == 0:
        return trials, []
    if trials.group_by("params", "budget").agg(pl.col("lr").n_unique().alias("k"))["k"].max() <= 1:
        return trials, []
    means = (
        trials.with_columns(final=_final_loss(trials))
        .group_by("params", "budget", "lr")
        .agg(pl.col("final").mean().alias("mean_loss"), pl.len().alias("trials"))
        .sort("params", "budget", "mean_loss", "lr")
    )
    chosen = []
    for (params, budget), block in means.partition_by("params", "budget", as_dict=True, maintain_order=True).items():
        rates = sorted(block["lr"].to_list())
        best = block.row(0, named=True)
        chosen.append(
            {
                "params": int(params),
                "budget": int(budget),
                "lr": float(best["lr"]),
                "mean_final_loss": best["mean_loss"] if np.isfinite(best["mean_loss"]) else None,
                "tried": {f"{r:g}": (m if np.isfinite(m) else None) for r, m in zip(block["lr"], block["mean_loss"])},
                "at_edge": len(rates) > 1 and best["lr"] in (rates[0], rates[-1]),
            }
        )
    keep = pl.DataFrame([{k: c[k] for k in ("params", "budget", "lr")} for c in chosen]).cast(
        {"params": trials["params"].dtype, "budget": trials["budget"].dtype, "lr": trials["lr"].dtype}
    )
    return trials.join(keep, on=["params", "budget", "lr"], how="semi"), chosen


def size_effect(trials: pl.DataFrame) -> dict[str, Any] | None:
    """Can this study see model size at all? At its largest budget, the smallest model's mean final loss minus the
    largest's (the gain), against its standard error: Welch's t-test of the two sizes' final losses (their variances
    need not be equal; two-sided, p < .05). A gain the test cannot tell from zero means the corpus lets the smallest
    model reach what the largest reaches, or the optimiser holds the larger back; whether the law's α is identified
    is the fit's own verdict, not predicted here."""
    if "eval_loss" not in trials.columns or trials.height == 0 or trials["params"].n_unique() < 2:
        return None
    top = trials.filter(pl.col("budget") == trials["budget"].max()).with_columns(final=_final_loss(trials))
    sizes = sorted(top["params"].unique().to_list())
    small, large = (top.filter(pl.col("params") == n)["final"].to_numpy() for n in (sizes[0], sizes[-1]))
    if not (np.isfinite(small).all() and np.isfinite(large).all()):
        return None
    gain = float(small.mean() - large.mean())
    # the tokens each trained: the budget, unless its model level scales it (design.model.<level>.budget_scale)
    tokens = {n: float(top.filter(pl.col("params") == n)["real_tokens"].mean()) for n in (sizes[0], sizes[-1])}
    energy = {n: top.filter(pl.col("params") == n)["energy_j"].mean() for n in (sizes[0], sizes[-1])}
    out = {
        "budget": int(top["budget"][0]),
        "smallest": {
            "params": int(sizes[0]),
            "mean_final_loss": float(small.mean()),
            "n": int(small.size),
            "real_tokens": tokens[sizes[0]],
            "energy_j": energy[sizes[0]],
        },
        "largest": {
            "params": int(sizes[-1]),
            "mean_final_loss": float(large.mean()),
            "n": int(large.size),
            "real_tokens": tokens[sizes[-1]],
            "energy_j": energy[sizes[-1]],
        },
        "gain": gain,
        # sizes that trained different tokens at one budget level (an equal-energy ladder) differ in data too
        "same_tokens": bool(np.isclose(tokens[sizes[0]], tokens[sizes[-1]], rtol=0.02)),
    }
    if min(small.size, large.size) < 2 or (np.ptp(small) == 0 and np.ptp(large) == 0):
        return {**out, "se": None, "df": None, "t": None, "p": None, "visible": None}
    test = sps.ttest_ind(small, large, equal_var=False)
    se = float(np.sqrt(small.var(ddof=1) / small.size + large.var(ddof=1) / large.size))
    p = float(test.pvalue)
    return {**out, "se": se, "df": float(test.df), "t": float(test.statistic), "p": p, "visible": p < 0.05 and gain > 0}


def points(curves: pl.DataFrame, trials: pl.DataFrame, which: str) -> pl.DataFrame:
    """The (N, D, loss) points of the frame's trials, with their subject (the trial), chosen by ``scaling.points``; a
    point inside its trial's warmup (``lr_warmup_steps``) never stands for its D: the rate was still rising."""
    joined = curves.with_columns(pl.col("trial").cast(pl.Int64)).join(
        sizes(trials), on=["cell", "trial"], how="inner", suffix="_trial"
    )
    if "lr_warmup_steps" in trials.columns and "step" in curves.columns:
        warmups = trials.select("cell", pl.col("trial").cast(pl.Int64), "lr_warmup_steps")
        joined = joined.join(warmups, on=["cell", "trial"], how="left").filter(
            pl.col("lr_warmup_steps").is_null() | (pl.col("step") > pl.col("lr_warmup_steps"))
        )
    if which == "final":
        joined = joined.filter(pl.col("final"))
    elif which == "first_epoch":
        joined = joined.filter(pl.col("real_tokens") <= pl.col("distinct_tokens"))
    return joined.filter(pl.col("real_tokens") > 0).select(
        "cell",
        "trial",
        "point",
        "params",
        "non_embedding_params",
        pl.col("real_tokens").alias("tokens"),
        "eval_loss",
        "train_energy_j",
        "flops_per_token",
        "hardware",
    )


def _finite(value: Any) -> Any:
    """The analysis as JSON can hold it: a float that is not finite (a fit's bound on a tiny study) becomes null."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _decays(trials: pl.DataFrame) -> bool:
    """Whether any trial's learning rate decays over its steps (its record's ``lr_schedule.kind``, flattened)."""
    if "lr_schedule_kind" not in trials.columns:
        return False
    return bool((trials["lr_schedule_kind"].fill_null("constant") != "constant").any())


def _ordered(trials: pl.DataFrame) -> bool:
    """Whether any trial trained its chunks in an order of its own (``data_order`` given: a selection level's order),
    not reshuffled from its seed."""
    if "data_order" not in trials.columns:
        return False
    return bool((trials["data_order"].cast(pl.String).fill_null("shuffled") == "given").any())


def _points_setting(trials: pl.DataFrame, settings: Mapping[str, Any]) -> tuple[str, str | None]:
    """``scaling.points`` and why it is overruled, if it is: trials whose learning rate decays to their own last step
    are fitted at their final point only, since an intermediate point of such a trial is partway through a longer
    schedule, not the law at its D (Hoffmann et al. 2022 matched the cosine to each run's tokens for exactly this
    reason); so are trials trained in an order of their own, whose first D tokens are the order's first documents
    (a curriculum's easiest), not a random draw of D."""
    asked = settings.get("points", "first_epoch")
    if asked == "final":
        return asked, None
    if _decays(trials):
        why = "the trials' learning rate decays to their own last step (train.schedule)"
    elif _ordered(trials):
        why = "some trials train in an order of their own (design.selection.<level>.order), not a random draw"
    else:
        return asked, None
    return "final", (
        f"scaling.points is {asked}, but {why}, so only each trial's final point measures the law at its D: the fit "
        "uses points: final"
    )


def analyse_scaling(curves: pl.DataFrame, trials: pl.DataFrame, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The study's scaling analysis, or why it cannot be made (it needs 3 model sizes and 3 budgets)."""
    n_sizes = trials["params"].n_unique() if trials.height else 0
    n_budgets = trials["budget"].n_unique() if trials.height else 0
    chosen_points, points_note = _points_setting(trials, settings)
    out: dict[str, Any] = {
        "points": chosen_points,
        "model_sizes": n_sizes,
        "budgets": n_budgets,
        "published": [p.to_dict() for p in PUBLISHED],
        **({"points_note": points_note} if points_note else {}),
    }
    if varied := [factor_name(c) for c in recipe_columns(trials.columns) if trials[c].n_unique() > 1]:
        return {
            **out,
            "status": "not fitted",
            "message": f"A scaling law describes one training recipe: this study varies {', '.join(varied)}, whose "
            "levels train different models at the same size, so no single L(N, D) is fitted across them (run the "
            "sizes of each level as a study of its own to fit its law).",
        }
    # With points along each run (first_epoch, all) the token counts come from the eval points, so one long budget per
    # size serves (a constant rate: every point is the law at its D); with final points each budget is one D.
    if n_sizes < 3 or (n_budgets < 3 and chosen_points == "final"):
        return {
            **out,
            "status": "not fitted",
            "message": f"A scaling law needs at least 3 model sizes and 3 budgets (with scaling.points final; with "
            f"first_epoch or all, 3 token counts among the eval points); this study has {n_sizes} and {n_budgets}.",
        }
    swept = trials
    trials, rates = tuned_learning_rates(swept)
    retuned = None
    if rates:
        out["learning_rates"] = rates

        @functools.cache
        def retuned(dim: str, unit: Any) -> tuple[pl.DataFrame, pl.DataFrame, list[dict[str, Any]]]:
            """The points and sizes with the rate chosen again on the trials left without ``unit``: the choice
            looked at the same losses the law is fitted to, so each jackknife refit makes it anew."""
            kept, again = tuned_learning_rates(without(swept, dim, unit))
            return points(curves, kept, out["points"]), sizes(kept), again

    out["size_effect"] = size_effect(trials)
    chosen = points(curves, trials, out["points"])
    if warming := points(curves, trials.drop("lr_warmup_steps", strict=False), out["points"]).height - chosen.height:
        said = f"{warming} eval point(s) inside their trial's warmup were left out (the rate was still rising)"
        out["points_note"] = f"{out['points_note']}; {said}" if out.get("points_note") else said
    if chosen.height == 0:
        return {
            **out,
            "status": "not fitted",
            "message": f"No eval point is left for scaling.points: {out['points']} (with several "
            "epochs and eval.points 0 there is no point within the first epoch: set eval.points, or scaling.points: final).",
        }
    tuned = bool(rates) and out["points"] != "final"
    try:
        fitted = _fits(chosen, sizes(trials), trials, settings, retuned)
    except ScalingInputError as err:
        # The frontier's envelope and slices do not rest on the law: they stand where it cannot be fitted.
        return _finite(
            {
                **out,
                "status": "not fitted",
                "message": f"The law cannot be fitted to these points: {err}",
                "frontier": _frontier(
                    chosen, retuned, f"the study's law could not be fitted and screened ({err})", tuned
                ),
            }
        )
    lof = fitted["law_total"]["lack_of_fit"]
    doubt = (
        "its lack-of-fit screen rejects it"
        if lof.get("fits") is False
        else f"its lack-of-fit screen could not judge it ({lof.get('verdict')})"
        if lof.get("fits") is None
        else None
    )
    return _finite({**out, **fitted, "frontier": _frontier(chosen, retuned, doubt, tuned)})


def _energy_fits(sized: pl.DataFrame) -> list[dict[str, Any]]:
    """e(N) per device profile and kind of energy, both forms with the choice between them, or why not."""
    out = []
    for (hardware,), block in sized.partition_by("hardware", as_dict=True, maintain_order=True).items():
        for kind in ("joules_per_token", "dynamic_joules_per_token"):
            rows = block.drop_nulls(kind).filter(pl.col(kind) > 0)
            row: dict[str, Any] = {"hardware": hardware, "energy": kind, "left_out": block.height - rows.height}
            try:
                choice = choose_energy(rows["params"].to_numpy(), rows[kind].to_numpy())
                out.append({**row, "status": "ok", **choice.to_dict()})
            except ScalingInputError as err:
                out.append({**row, "status": "not fitted", "message": str(err)})
    return out


def _units(points: pl.DataFrame) -> dict[str, np.ndarray]:
    return {TRIAL: points["trial"].to_numpy(), SIZE: points["params"].to_numpy().astype(float)}


def _fits(
    chosen: pl.DataFrame,
    sized: pl.DataFrame,
    trials: pl.DataFrame,
    settings: Mapping[str, Any],
    retuned: Callable[[str, Any], tuple[pl.DataFrame, pl.DataFrame, list[dict[str, Any]]]] | None = None,
) -> dict[str, Any]:
    """The law (both N counts) with its intervals and screen, e(N), and the allocations; ``retuned``: the points
    and sizes with the learning rate chosen again without a unit, for the jackknife refits (None: no sweep)."""
    out: dict[str, Any] = {"energy_per_token": _energy_fits(sized)}
    ids = _units(chosen)
    laws: dict[str, tuple[LawFit, LawUncertainty]] = {}
    for count, column in N_COUNTS.items():
        N, D, L = (chosen[c].to_numpy().astype(float) for c in (column, "tokens", "eval_loss"))
        fit = fit_law(N, D, L)

        def again(dim: str, unit: Any, column: str = column) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            rechosen = retuned(dim, unit)[0]
            return tuple(rechosen[c].to_numpy().astype(float) for c in (column, "tokens", "eval_loss"))

        uncertainty = law_uncertainty(N, D, L, ids, fit, again if retuned else None)
        laws[count] = (fit, uncertainty)
        out[f"law_{count}"] = {
            **fit.to_dict(),
            "intervals": uncertainty.intervals(fit),
            "n_points": int(N.size),
            "lack_of_fit": lack_of_fit(
                N,
                D,
                L,
                (chosen["cell"] + "#" + chosen["point"].cast(pl.String)).to_numpy(),
                ids[TRIAL],
                fit,
                run=(chosen["cell"] + "#" + chosen["trial"].cast(pl.String)).to_numpy(),
                replicates=settings.get("screen_replicates", LACK_OF_FIT_REPLICATES),
            ),
        }
    out["units"], out["interval_method"] = laws["total"][1].counts, laws["total"][1].method
    if retuned:
        out["learning_rates_without"] = {
            f"{dim} {unit:g}" if isinstance(unit, float) else f"{dim} {unit}": [
                {k: r[k] for k in ("params", "budget", "lr")} for r in retuned(dim, unit)[2]
            ]
            for dim, refits in laws["total"][1].refits.items()
            for unit, _ in refits
        }
    out.update(allocation(out, laws["total"], sized, trials, settings, retuned))
    out["status"] = "ok"
    return out


def _frontier_points(chosen: pl.DataFrame) -> FrontierPoints:
    """The frontier's points: each chosen point's N (total), tokens, cumulative training energy, eval loss and
    training FLOPs so far (its trial's FLOPs per real token, ``FLOPS``, times its tokens); a point without a finite
    loss (a diverged run's) is never on the frontier and is left out (``_frontier`` counts them)."""
    finite = chosen.filter(pl.col("eval_loss").is_finite())
    columns = ("params", "tokens", "train_energy_j", "eval_loss", "trial")
    counted = finite["flops_per_token"].null_count() == 0
    flops = (finite["flops_per_token"] * finite["tokens"]).to_numpy() if counted else None  # None: 6·N·D
    return FrontierPoints.of(*(finite[c].to_numpy() for c in columns), flops=flops)


def _flops_label(chosen: pl.DataFrame) -> str:
    """How ``_frontier_points`` counted the points' compute: the trials' own FLOPs, or 6·N·D where a trial has none."""
    finite = chosen.filter(pl.col("eval_loss").is_finite())
    return FLOPS if finite["flops_per_token"].null_count() == 0 else "6ND (N total: some trials carry no FLOP count)"


# How the frontier's compute axis counts a point's FLOPs (the trials' own count, as PE's: analysis/efficiency.py).
FLOPS = (
    "the trials' training FLOPs per real token (6 × the parameters a step multiplies, the input embedding's lookup "
    "left out, plus attention, padded positions included: analysis/efficiency.py) × the point's tokens"
)


def _frontier(
    chosen: pl.DataFrame,
    retuned: Callable[[str, Any], tuple[pl.DataFrame, pl.DataFrame, list[dict[str, Any]]]] | None,
    law_doubt: str | None,
    tuned_at_end: bool,
) -> dict[str, Any]:
    """The energy-optimal frontier by its three estimators (``frontier``) on one device profile's points, each
    jackknife refit on the points with the learning rate chosen again without its unit; or why there is none. It does
    not rest on the law's fit (``law_doubt``: why the law's own column is in doubt, if it is); ``tuned_at_end``: a
    learning rate chosen by the runs' final loss stands for every point of them, which is said."""
    if chosen["hardware"].n_unique() > 1:
        return {
            "status": "not computed",
            "message": "Several device profiles (hardware levels or precisions): a joule on one is not a joule on "
            "another, so the frontier is one profile's; run it per profile.",
        }
    metered = chosen.filter(pl.col("train_energy_j").is_not_null() & (pl.col("train_energy_j") > 0))
    if metered.height < chosen.height:
        return {
            "status": "not computed",
            "message": f"{chosen.height - metered.height} of {chosen.height} points have no training energy "
            "(meter.kind none, or a trial that did not finish): the frontier needs every point on the joule axis",
        }
    notes = []
    if diverged := chosen.height - chosen.filter(pl.col("eval_loss").is_finite()).height:
        notes.append(
            f"{diverged} of {chosen.height} points have no finite loss (a diverged or unevaluated run's) and are left out"
        )
    if tuned_at_end:
        notes.append(
            "each size's learning rate was chosen by its runs' final loss, and every point of those runs stands for "
            "its energy: far below a run's end another rate may have been better"
        )

    def without(dim: str, unit: Any) -> FrontierPoints:
        return _frontier_points(retuned(dim, unit)[0])

    try:
        got = frontier(
            _frontier_points(chosen),
            without=without if retuned else None,
            law_doubt=law_doubt,
            flops=_flops_label(chosen),
        )
    except ScalingInputError as err:
        return {"status": "not computed", "message": f"The frontier cannot be estimated from these points: {err}"}
    return {"status": "ok", "notes": notes, **got}


def fitted_points(curves: pl.DataFrame, trials: pl.DataFrame, which: str) -> dict[str, pl.DataFrame]:
    """The points the law is fitted to and the trials e(N) is (each cell's chosen rate where rates were swept), as the
    product's tables ``scaling_points`` and ``scaling_sizes``: what its figures draw."""
    tuned, _ = tuned_learning_rates(trials) if trials.height else (trials, [])
    if not tuned.height:
        return {name: pl.DataFrame(schema=schema) for name, schema in SCALING_TABLES.items()}
    return {"scaling_points": points(curves, tuned, which), "scaling_sizes": sizes(tuned)}


def scaling_product(trials: pl.DataFrame, curves: pl.DataFrame, settings: Mapping[str, Any]) -> Result:
    """The scaling product (``settings``: the config's scaling section) on the study's frame of trials, with the
    points and sizes it was fitted to."""
    analysed, in_curves = frame(trials), in_frame(curves, trials)
    result = analyse_scaling(in_curves, analysed, settings)
    return Result(
        data=result,
        tables=fitted_points(in_curves, analysed, result["points"]),
        summary=f"scaling: {result['status']} {result.get('message', '')}",
    )
