"""Benchmark: is the energy-to-target comparison's test of the right size, and do its intervals cover the truth,
when the trials that never reached the target are the costly ones (informative censoring)?

Simulates the default study's two smallest budgets (50K and 100K tokens) for m trial ids, each trial's energy to
the target lognormal: log E = log E₀ + budget effect + trial-id effect (shared by the budgets: its seed, sd 10 %)
+ run noise (unequal: 8 % under the smaller budget, 12 % under the larger). A run stops at its budget's total
energy (the larger budget's is twice the smaller's, each ±2 % per run): a run whose E lies beyond it never reached
the target and is right-censored there, the way a trial whose loss never fell to the target is. The target sets
how many of the small budget's runs get there (``--reach``; the default targets: 4 in 5; the old ones, the
median final perplexity: 1 in 2); a run already there by 1/8 of its budget (its first eval point) is
left-censored. The last two cases censor both budgets (the larger stops only 15 % later) and put the first point at
80 % of a run, so left-censored runs and trial ids censored under both budgets occur; each row says how many. Truth: the ratio of the larger budget's energy to the smaller's is 1 (no effect) or 1/1.1 (the
small budget needs 10 % more).

The workflow's model assumes normal log energies. ``--noise`` draws the trial-id and run effects from other laws of
the same SD, to see what its size and coverage are worth when that assumption is wrong: ``t4`` (Student's t on 4
degrees of freedom: now and then a run far off, either way) and ``skewed`` (a centred exponential: now and then a
run far costlier, as a disturbed one is).

For each case the benchmark prints how often the workflow's paired censored-normal ratio
(``tokenwatt.analysis.curves.censored.paired_ratio``) rejected a ratio of 1 at p < .05 (the type-I error where the truth
is 1, the power where it is not), how often its 95 % interval held the true ratio, and how often no ratio could be
given (fewer than 3 trial ids reached the target under both budgets); beside it, the survivors-only analysis the
workflow used before (the geometric mean ratio and a paired t-test over the trial ids that reached the target under
both budgets), which conditions on the outcome. Seeds are fixed: the same run prints the same table.

Usage: .venv/bin/python benchmarks/censored_energy.py [--sims 200] [--rows 8 9] [--noise normal|t4|skewed]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
from tokenwatt.analysis.curves import paired_rank  # noqa: E402
from tokenwatt.analysis.curves.censored import ABOVE, BELOW, EXACT, paired_ratio  # noqa: E402
from tokenwatt.analysis.curves.paired_rank import RunsToTarget, paired_rank_test  # noqa: E402

TRIAL_SD, RUN_SD = 0.10, (0.08, 0.12)  # log-scale SDs: trial id, run under the small and the large budget
STOP_SD = 0.02  # a run's total tokens about its budget's
RATE_SD = 0.05  # a run's J/token about the others', where it varies (--bound dependent)
FIRST_POINT = 1 / 8  # where the first eval point sits, as a share of the run's total energy
# each effect's law, as unit-SD draws: the model's own, a heavy-tailed and a right-skewed one
NOISE = {
    "normal": lambda rng, m: rng.normal(0.0, 1.0, m),
    "t4": lambda rng, m: rng.standard_t(4, m) / math.sqrt(2.0),  # t4's variance is 2
    "skewed": lambda rng, m: rng.exponential(1.0, m) - 1.0,
}


@dataclass(frozen=True)
class World:
    """What the simulated runs are like beyond their budgets: the law of the effects (``NOISE``), whether the
    budgets' run effects have unequal SDs (``RUN_SD``) or both the small one's, and whether a run's J/token varies
    and so enters both its energy to the target and its censoring bound (``dependent``) or is the same for all."""

    noise: str = "normal"
    spread: str = "unequal"
    bound: str = "independent"


def one_study(
    rng: np.random.Generator,
    m: int,
    reach: float,
    log_ratio: float,
    gap: float = 2.0,
    first: float = FIRST_POINT,
    world: World = World(),
) -> tuple[RunsToTarget, RunsToTarget]:
    """The small budget's runs and the large budget's, for m trial ids: each run's tokens to the target (its
    trial id's effect and its own, each drawn from ``NOISE[world.noise]``), its J/token (1, or lognormal of SD
    ``RATE_SD`` with ``world.bound`` dependent) and its budget in tokens (±2 %); the larger budget ``gap`` × the
    smaller, each run's first eval point at ``first`` of its own tokens."""
    draw = NOISE[world.noise]
    run_sd = RUN_SD if world.spread == "unequal" else (RUN_SD[0], RUN_SD[0])
    spread = math.hypot(TRIAL_SD, run_sd[0])
    # so that about a share ``reach`` of small-budget runs get there (exactly, under normal noise)
    stop_small = stats.norm.ppf(reach) * spread
    trial = TRIAL_SD * draw(rng, m)
    true = (trial + run_sd[0] * draw(rng, m), trial + log_ratio + run_sd[1] * draw(rng, m))
    out = []
    for log_t, stop in zip(true, (stop_small, stop_small + math.log(gap))):
        last = stop + rng.normal(0.0, STOP_SD, m)  # log tokens at the run's last point
        log_rate = rng.normal(0.0, RATE_SD, m) if world.bound == "dependent" else np.zeros(m)
        start = last + math.log(first)
        status = np.where(log_t > last, ABOVE, np.where(log_t <= start, BELOW, EXACT))
        tokens = np.exp(np.where(status == ABOVE, last, np.where(status == BELOW, start, log_t)))
        # each run's curve: energy in proportion to its tokens, from its first eval point to its last
        ends = np.exp(np.stack([start, last], axis=1))
        curves = tuple((t, r * t) for t, r in zip(ends, np.exp(log_rate)))
        out.append(RunsToTarget(status, np.exp(log_rate) * tokens, tokens, curves))
    return out[0], out[1]


def survivors(small: RunsToTarget, large: RunsToTarget) -> tuple[float, float] | None:
    """The old analysis: ratio and paired-t p over the trial ids that reached the target between points under
    both budgets."""
    both = (small.status == EXACT) & (large.status == EXACT)
    if both.sum() < 2:
        return None
    d = np.log(large.energy_j[both]) - np.log(small.energy_j[both])
    p = stats.ttest_1samp(d, 0.0).pvalue if np.ptp(d) > 0 else 1.0
    return math.exp(d.mean()), float(p)


# (trial ids, share of the small budget's runs that get there, true log ratio, the large budget's stop over the small's,
# where the first eval point sits): the last two rows censor both budgets (the large one stops only 15 % later) and put
# the first point at 80 % of a run, so runs are censored to the left too
CASES = [
    (5, 0.8, 0.0, 2.0, FIRST_POINT),
    (5, 0.5, 0.0, 2.0, FIRST_POINT),
    (10, 0.8, 0.0, 2.0, FIRST_POINT),
    (10, 0.5, 0.0, 2.0, FIRST_POINT),
    (20, 0.5, 0.0, 2.0, FIRST_POINT),
    (50, 0.5, 0.0, 2.0, FIRST_POINT),
    (10, 0.8, -math.log(1.1), 2.0, FIRST_POINT),
    (20, 0.5, -math.log(1.1), 2.0, FIRST_POINT),
    (10, 0.6, 0.0, 1.15, 0.8),
    (20, 0.6, 0.0, 1.15, 0.8),
    (20, 0.8, 0.0, 2.0, FIRST_POINT),
    (50, 0.8, 0.0, 2.0, FIRST_POINT),
    (50, 0.5, -math.log(1.1), 2.0, FIRST_POINT),
]


def one_row(case: tuple, sims: int, seed: int, world: World) -> dict[str, float]:
    """The row's rates over ``sims`` studies: no ratio, rejections and coverage of the censored-normal ratio,
    rejections of the rank test, and the survivors-only analysis, with the censoring counts."""
    m, reach, log_ratio, gap, first = case
    rng = np.random.default_rng(seed)
    truth = math.exp(log_ratio)
    got = {"given": 0, "rejected": 0, "covered": 0, "rank_given": 0, "rank_rejected": 0, "old_given": 0}
    got |= {"old_rejected": 0, ABOVE: 0, BELOW: 0, "both": 0}
    ratios, old_ratios = [], []
    for _ in range(sims):
        small, large = one_study(rng, m, reach, log_ratio, gap, first, world)
        for runs in (small, large):
            got[ABOVE] += int((runs.status == ABOVE).sum())
            got[BELOW] += int((runs.status == BELOW).sum())
        got["both"] += int(((small.status != EXACT) & (large.status != EXACT)).sum())
        bounded = [(np.log(r.energy_j), r.status) for r in (large, small)]
        ratio = paired_ratio(*bounded[0], *bounded[1])
        if ratio.ratio is not None:
            got["given"] += 1
            got["rejected"] += ratio.p < 0.05
            got["covered"] += (ratio.ci95_low or 0.0) <= truth <= (ratio.ci95_high or math.inf)
            ratios.append(ratio.ratio)
        rank = paired_rank_test(small, large)
        if rank.p is not None:
            got["rank_given"] += 1
            got["rank_rejected"] += rank.p < 0.05
        old = survivors(small, large)
        if old is not None:
            got["old_given"] += 1
            old_ratios.append(old[0])
            got["old_rejected"] += old[1] < 0.05
    got["median_ratio"] = float(np.median(ratios)) if ratios else math.nan
    got["old_ratio"] = float(np.exp(np.mean(np.log(old_ratios)))) if old_ratios else math.nan
    return got


def run(sims: int, rows: list[int] | None = None, world: World = World()) -> None:
    print(
        f"{sims} simulated studies per row; true ratio = energy under the large budget / under the small;"
        f" nominal 5 % / 95 %; effects {world.noise}, run SDs {world.spread}, bound {world.bound};"
        f" rank test over {paired_rank.FLIPS} sign flips past {paired_rank.EXACT_UP_TO} trial ids"
    )
    print(
        f"{'trial ids':>9} {'small reach':>11} {'true ratio':>10} | censored normal: {'no ratio':>8} {'reject':>7}"
        f" {'covered':>8} {'median ratio':>12} | rank: {'no test':>7} {'reject':>7} |"
        f" survivors only: {'reject':>7} {'mean ratio':>10}"
    )
    for k, case in enumerate(CASES):
        if rows and k not in rows:
            continue
        started = time.perf_counter()
        got = one_row(case, sims, 2026 + k, world)
        given, rank_given = max(got["given"], 1), max(got["rank_given"], 1)
        print(
            f"{case[0]:>9} {case[1]:>11.0%} {math.exp(case[2]):>10.3f} | {'':17}{1 - got['given'] / sims:>8.1%}"
            f" {got['rejected'] / given:>7.1%} {got['covered'] / given:>8.1%} {got['median_ratio']:>12.3f} |"
            f" {'':6}{1 - got['rank_given'] / sims:>7.1%} {got['rank_rejected'] / rank_given:>7.1%} |"
            f" {'':16}{got['old_rejected'] / max(got['old_given'], 1):>7.1%} {got['old_ratio']:>10.3f}"
            f"   (censored per study: {got[ABOVE] / sims:.1f} above, {got[BELOW] / sims:.1f} below, "
            f"{got['both'] / sims:.1f} trial ids in both; {time.perf_counter() - started:.0f} s)",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--rows", type=int, nargs="*", help="run only these rows of the table (0-based); each has its seed")
    ap.add_argument("--noise", choices=sorted(NOISE), default="normal", help="the law of the trial-id and run effects")
    ap.add_argument("--spread", choices=("unequal", "equal"), default="unequal", help="the budgets' run SDs")
    ap.add_argument(
        "--bound",
        choices=("independent", "dependent"),
        default="independent",
        help="dependent: each run's J/token varies and sets both its energy to the target and its censoring bound",
    )
    ap.add_argument("--flips", type=int, default=2000, help="the rank test's random sign flips (the workflow: 20 000)")
    args = ap.parse_args()
    paired_rank.FLIPS = args.flips
    run(args.sims, args.rows, World(args.noise, args.spread, args.bound))


if __name__ == "__main__":
    main()
