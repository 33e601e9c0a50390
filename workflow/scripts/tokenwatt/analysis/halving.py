"""Successive halving's rounds (plan/allocation.py): rank the candidates that entered a round at equal energy, keep the
best share and every candidate within the noise of the share, and decide whether the next round fits the budget.

The criterion is the eval loss after a cooldown (a cooled point: its energy the stable run's to its branch plus its
own cooldown's), compared at one energy for every candidate: the round's common energy, the least of the candidates'
median energies to its point. Each trial's loss there is read off its own cooled points of this round and the rounds
before, linear in log energy between the two around it; a trial whose first point already cost more is read at that
point (its loss at a higher energy: the comparison favours it, and the round says by how much); one whose last point
cost less is read there (its loss held flat up to the common energy: against it). Never extrapolated.

A candidate is kept or dropped as a whole, across trial ids, paired by trial id (trial i of every candidate trains on
the same tokens in the same order). Below the ``keep`` share, a candidate is dropped only where the one-sided
``confidence`` bound (Bonferroni over the candidates below the share) of its paired loss difference, with the round's
noise pooled over every candidate (``_noise``), is above zero against the weakest candidate of the share that was read
at no more than 1.1 × its energy (none: kept, not comparable): ties within the noise are kept,
never broken by chance; and a candidate ranked above one so kept is kept too, so the verdicts follow the ranking. A
candidate with a diverged (or unmeasured) trial ranks after every other and is dropped: it has no loss to compare, and
training it on would spend joules on a run that failed. Where every candidate has one, none is kept and the study stops.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from ..plan.allocation import MEASURES, RoundSettings, kept_count
from ..plan.design import series_of
from .aggregate import flat_record
from .totals import study_totals

# How much more energy a candidate of the kept share may have been read at than one below it for a drop against it to
# stand: a trial whose first point cost more than the common energy is read there, never extrapolated back.
UNEQUAL_ENERGY = 1.10


@dataclass(frozen=True)
class Cooled:
    """One trial's cooled point: its candidate, trial id, round, energy (J, stable run's included) and eval loss (None:
    diverged, or not measured)."""

    candidate: str
    trial: int
    round: int
    energy_j: float | None
    loss: float | None


def cooled_points(records: Iterable[Mapping[str, Any]], budgets: Sequence[int]) -> list[Cooled]:
    """The cooled points of trial records (metrics.json), each at its budget's round."""
    rounds = {b: k for k, b in enumerate(sorted(budgets))}
    return [
        Cooled(
            series_of(r["levels"]),
            int(r["trial"]),
            rounds[int(r["budget"])],
            r.get("energy_j"),
            r.get("eval_loss") if r.get("status", "ok") == "ok" else None,
        )
        for r in records
    ]


def loss_at(points: Sequence[Cooled], energy: float) -> tuple[float, float]:
    """One trial's loss at ``energy`` on its own cooled points (linear in log energy between the two around it), and
    the energy it was read at over ``energy`` (1: interpolated; above 1: the trial's first point cost more)."""
    curve = sorted((p.energy_j, p.loss) for p in points if p.energy_j is not None and p.loss is not None)
    if energy <= curve[0][0]:
        return curve[0][1], curve[0][0] / energy
    for (e0, l0), (e1, l1) in zip(curve, curve[1:]):
        if e0 <= energy <= e1:
            share = math.log(energy / e0) / math.log(e1 / e0) if e1 > e0 else 0.0
            return l0 + share * (l1 - l0), 1.0
    return curve[-1][1], curve[-1][0] / energy


def rank_round(
    points: Sequence[Cooled], entering: Sequence[str], round_: int, keep: float, confidence: float
) -> dict[str, Any]:
    """Round ``round_``'s decision over the candidates ``entering`` it: each one's loss at the common energy per trial
    id, its rank, and kept or dropped with the evidence (module docstring)."""
    mine = [p for p in points if p.candidate in entering and p.round <= round_]
    now = [p for p in mine if p.round == round_]
    trials = sorted({p.trial for p in now})
    common = _common_energy(now)
    rows = [_candidate(c, mine, now, trials, common) for c in entering]
    rows.sort(key=lambda r: (r["diverged"], r["mean_loss"] if r["mean_loss"] is not None else math.inf))
    comparable = [r for r in rows if not r["diverged"]]
    least = min(kept_count(len(rows), keep), len(comparable))
    # Bonferroni over the candidates below the share: each is tested against an order statistic chosen from the same
    # noisy losses, so one test per candidate at the nominal level drops equal candidates far more often than it says
    per_test = 1 - (1 - confidence) / max(1, len(comparable) - least)
    noise = _noise(comparable, trials)
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank
        if row["diverged"]:
            missing = [t for t, v in row["losses"].items() if v is None]
            row["verdict"], row["evidence"] = (
                "dropped",
                (f"no loss at the common energy for trial id(s) {', '.join(missing)} (diverged or unmeasured)"),
            )
        elif rank <= least:
            row["verdict"], row["evidence"] = "kept", "in the best share"
        else:
            row["verdict"], row["evidence"] = _judged(row, rows[:least], trials, per_test, noise)
    # Verdicts monotone in rank: a candidate ranked above one a test kept within the noise is kept too (tested against
    # a stronger rival, its own test may have shown a difference the one below it did not); a keep that no test made (not
    # comparable at equal energy) does not spread
    last = max(
        (i for i, r in enumerate(comparable) if r["verdict"] == "kept" and not isinstance(r["evidence"], str)),
        default=least - 1,
    )
    for row in comparable[: last + 1]:
        if row["verdict"] == "dropped":
            below = comparable[last]["candidate"]
            row["verdict"], row["evidence"] = "kept", {**row["evidence"], "kept_above": below}
    return {
        "round": round_,
        "entering": list(entering),
        "trials": trials,
        "common_energy_j": common,
        "keep": keep,
        "confidence": confidence,
        "per_test_confidence": per_test,
        "noise_sd": noise[0],
        "noise_df": noise[1],
        "least_kept": least,
        "candidates": rows,
        "kept": [r["candidate"] for r in rows if r["verdict"] == "kept"],
        "dropped": [r["candidate"] for r in rows if r["verdict"] == "dropped"],
    }


def _common_energy(now: Sequence[Cooled]) -> float | None:
    """The round's common energy: the least of the candidates' median energies to their point (a median, so that one
    trial's short meter window does not move every comparison); None where no trial has an energy and a loss."""
    energies: dict[str, list[float]] = {}
    for p in now:
        if p.energy_j is not None and p.loss is not None:
            energies.setdefault(p.candidate, []).append(p.energy_j)
    return min(float(np.median(v)) for v in energies.values()) if energies else None


def _candidate(
    candidate: str, mine: Sequence[Cooled], now: Sequence[Cooled], trials: Sequence[int], common: float | None
) -> dict[str, Any]:
    """One candidate's losses at the common energy by trial id, and the round's own energies."""
    losses: dict[int, float | None] = {}
    read_at: dict[int, float | None] = {}
    for t in trials:
        own = [p for p in mine if p.candidate == candidate and p.trial == t]
        point = next((p for p in now if p.candidate == candidate and p.trial == t), None)
        if common is None or point is None or point.loss is None or point.energy_j is None:
            losses[t], read_at[t] = None, None
            continue
        losses[t], read_at[t] = loss_at(own, common)
    known = [v for v in losses.values() if v is not None]
    energies = [p.energy_j for p in now if p.candidate == candidate and p.energy_j is not None]
    return {
        "candidate": candidate,
        "losses": {str(t): v for t, v in losses.items()},
        # the energy its losses were read at over the common energy (1: interpolated), a geometric mean over trial ids
        "read_at_ratio": float(np.exp(np.mean(np.log(ratios))))
        if (ratios := [v for v in read_at.values() if v])
        else None,
        "mean_loss": float(np.mean(known)) if len(known) == len(trials) else None,
        "energy_j": float(np.mean(energies)) if energies else None,
        "diverged": len(known) < len(trials),
    }


def _noise(comparable: Sequence[dict[str, Any]], trials: Sequence[int]) -> tuple[float, int]:
    """The round's noise in a loss at the common energy: the residual sd of an additive model, candidate + trial id,
    over every comparable candidate's losses (the repeated-measures ANOVA's error term), and its degrees of freedom
    (C − 1)(T − 1). One pooled estimate: with three trial ids a pair of candidates alone has 2 degrees of freedom, so
    a test on the pair's own spread could hardly ever drop anything; pooled over 15 candidates, 28."""
    if len(comparable) < 2 or len(trials) < 2:
        return 0.0, 0
    y = np.array([[row["losses"][str(t)] for t in trials] for row in comparable])
    residual = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return float(np.sqrt((residual**2).sum() / df)), df


def _judged(
    row: dict[str, Any],
    share: Sequence[dict[str, Any]],
    trials: Sequence[int],
    confidence: float,
    noise: tuple[float, int],
) -> tuple[str, Any]:
    """A candidate below the kept share, against the weakest candidate of the share read at no more than
    ``UNEQUAL_ENERGY`` times its own energy (``_against``): a candidate that spent no more and did better shows the
    difference is not the joules. Kept where the share has none (a first round has no earlier point to read a costlier
    candidate back to)."""
    rivals = [r for r in share if r["read_at_ratio"] <= UNEQUAL_ENERGY * row["read_at_ratio"]]
    if not rivals:
        return "kept", (
            f"not compared at equal energy: every candidate of the kept share was read at more than {UNEQUAL_ENERGY:g} × "
            f"its energy ({row['read_at_ratio']:.2f} × the common energy)"
        )
    return _against(row, max(rivals, key=lambda r: r["mean_loss"]), trials, confidence, noise)


def _against(
    row: dict[str, Any], rival: dict[str, Any], trials: Sequence[int], confidence: float, noise: tuple[float, int]
) -> tuple[str, Any]:
    """Dropped where the one-sided bound of the candidate's loss difference to ``rival``, paired by trial id, with the
    round's pooled noise (``_noise``), is above zero; kept otherwise."""
    diffs = np.array([row["losses"][str(t)] - rival["losses"][str(t)] for t in trials])
    mean, (sd, df) = float(diffs.mean()), noise
    # a paired mean difference's standard error: the pooled residual variance twice (two candidates) over the pairs
    bound = mean - float(stats.t.ppf(confidence, df)) * sd * math.sqrt(2 / len(diffs)) if df else -math.inf
    evidence = {
        "against": rival["candidate"],
        "difference": mean,
        "lower_bound": bound if math.isfinite(bound) else None,
        "pairs": len(diffs),
        "df": df,
    }
    return ("dropped" if bound > 0 else "kept"), evidence


def spend_rate(records: Iterable[Mapping[str, Any]], measure: str) -> dict[str, float]:
    """Each candidate's training figure per real token over its given records (energy_j, or train_s for
    device-hours): what its next round's tokens will cost."""
    column = "energy_j" if measure == "energy_j" else "train_s"
    rates: dict[str, list[float]] = {}
    for r in records:
        if r.get(column) is not None and r.get("real_tokens"):
            rates.setdefault(series_of(r["levels"]), []).append(r[column] / r["real_tokens"])
    return {c: float(np.mean(v)) for c, v in rates.items()}


def next_step(round_: int, rounds: int, spent: float | None, limit: float, estimate: float | None) -> tuple[str, str]:
    """Whether the study goes on to the next round: ``final`` after the last, ``stop`` where the spend so far and the
    next round's estimate exceed the budget (or either is unknown), else ``continue``; and why."""
    if round_ + 1 >= rounds:
        return "final", "the last round (study.budgets' largest) has run"
    if spent is None or estimate is None:
        return "stop", "the spend so far or the next round's estimate is not known, so the budget cannot be kept"
    if spent + estimate > limit:
        return "stop", (
            f"the next round would need ~{estimate:,.6g} beside the {spent:,.6g} spent, above the budget of {limit:,.6g}"
        )
    return "continue", f"{spent:,.6g} spent and ~{estimate:,.6g} for the next round fit the budget of {limit:,.6g}"


def spent(records: Sequence[Mapping[str, Any]], stretches: Sequence[Mapping[str, Any]], measure: str) -> dict[str, Any]:
    """What trial ``records`` (metrics.json) and the stable runs' ``stretches`` spent, in the measure's unit (J, or
    device-hours): the study's totals (each stable run once: analysis/totals.py) of training, checkpoint saves and work
    lost to resumes, plus the trials' evaluations; and the training part alone, which each candidate's rate per token
    scales. None where a part is unknown (``missing`` says why)."""
    trials = pl.DataFrame(
        [{**flat_record(dict(r)), "series": series_of(r["levels"])} for r in records],
        infer_schema_length=None,
        strict=False,
    )
    totals = study_totals(trials, stretches)
    if measure == "energy_j":
        parts = [totals.values[k] for k in ("energy_j", "checkpoint_energy_j", "lost_energy_j")]
        evals = [r.get("eval_energy_j") for r in records]
        parts.append(None if None in evals else float(sum(evals)))
        training, scale = totals.values["energy_j"], 1.0
    else:
        parts, training, scale = [totals.values["device_s"]], totals.values["train_s"], 3600.0
    return {
        "spent": None if None in parts else sum(parts) / scale,
        "training": None if training is None else training / scale,
        "missing": totals.missing,
    }


def round_decision(
    records: Sequence[Mapping[str, Any]],
    stretches: Sequence[Mapping[str, Any]],
    entering: Sequence[str],
    before: Mapping[str, Any] | None,
    settings: RoundSettings,
    beside: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]] = ((), ()),
) -> dict[str, Any]:
    """Round ``settings.round``'s checkpoint record: its ranking (``rank_round``) of the candidates ``entering`` it,
    over the records of every trial its rounds ran so far (``records``, with the stable runs' ``stretches``), the
    spend so far, the next round's estimate from this round's measured rates, and who trains next. ``before``: the
    previous round's record (its dropped candidates carried on, so the last record holds every decision). ``beside``:
    trial and stretch records on disk up to this round's budget that the rounds no longer ask for (trained under
    other settings): not ranked, but spent, so they count against the budget."""
    k = settings.round
    ranked = rank_round(cooled_points(records, settings.budgets), entering, k, settings.keep, settings.confidence)
    money = spent([*records, *beside[0]], [*stretches, *beside[1]], settings.measure)
    budget_now = settings.budgets[k]
    rates = spend_rate([r for r in records if int(r["budget"]) == budget_now], settings.measure)
    estimate = None
    if settings.next_tokens is not None and money["spent"] is not None and money["training"]:
        overhead = money["spent"] / money["training"]
        known = [c for c in ranked["kept"] if c in rates]
        if len(known) == len(ranked["kept"]):
            scale = 3600.0 if settings.measure != "energy_j" else 1.0
            per = sum(settings.next_tokens[c] * rates[c] / scale for c in known)
            estimate = per * settings.trials * overhead
    step, why = next_step(k, len(settings.budgets), money["spent"], settings.limit, estimate)
    if not ranked["kept"]:
        step, why = "stop", "every candidate of this round diverged or went unmeasured: none is left to compare"
    history = list((before or {}).get("history", [])) + [
        {"round": k, "candidate": r["candidate"], "verdict": r["verdict"], "evidence": r["evidence"]}
        for r in ranked["candidates"]
    ]
    return {
        **ranked,
        "budget": budget_now,
        "measure": settings.measure,
        "unit": MEASURES[settings.measure],
        "limit": settings.limit,
        "spent": money["spent"],
        "spent_missing": money["missing"],
        "next_estimate": estimate,
        "next": step,
        "why": why,
        "next_candidates": ranked["kept"] if step == "continue" else [],
        "history": history,
    }
