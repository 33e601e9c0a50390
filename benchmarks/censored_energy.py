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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
from tokenwatt.analysis.curves.censored import ABOVE, BELOW, EXACT, paired_ratio  # noqa: E402

TRIAL_SD, RUN_SD = 0.10, (0.08, 0.12)  # log-scale SDs: trial id, run under the small and the large budget
STOP_SD = 0.02  # a run's total energy about its budget's
FIRST_POINT = 1 / 8  # where the first eval point sits, as a share of the run's total energy
# each effect's law, as unit-SD draws: the model's own, a heavy-tailed and a right-skewed one
NOISE = {
    "normal": lambda rng, m: rng.normal(0.0, 1.0, m),
    "t4": lambda rng, m: rng.standard_t(4, m) / math.sqrt(2.0),  # t4's variance is 2
    "skewed": lambda rng, m: rng.exponential(1.0, m) - 1.0,
}


def one_study(
    rng: np.random.Generator,
    m: int,
    reach: float,
    log_ratio: float,
    gap: float = 2.0,
    first: float = FIRST_POINT,
    noise: str = "normal",
) -> tuple[np.ndarray, ...]:
    """Log energies (reached, or the bound) and their censoring, small budget then large, for m trial ids; the
    larger budget stops at ``gap`` × the smaller's energy, each run's first eval point at ``first`` of its own;
    each effect drawn from ``NOISE[noise]``."""
    draw = NOISE[noise]
    spread = math.hypot(TRIAL_SD, RUN_SD[0])
    # so that about a share ``reach`` of small-budget runs get there (exactly, under normal noise)
    stop_small = stats.norm.ppf(reach) * spread
    trial = TRIAL_SD * draw(rng, m)
    true = (trial + RUN_SD[0] * draw(rng, m), trial + log_ratio + RUN_SD[1] * draw(rng, m))
    out = []
    for y, stop in zip(true, (stop_small, stop_small + math.log(gap))):
        total = stop + rng.normal(0.0, STOP_SD, m)
        start = total + math.log(first)
        status = np.where(y > total, ABOVE, np.where(y <= start, BELOW, EXACT))
        out += [np.where(status == ABOVE, total, np.where(status == BELOW, start, y)), status]
    return tuple(out)


def survivors(y_s, s_s, y_l, s_l) -> tuple[float, float] | None:
    """The old analysis: ratio and paired-t p over the trial ids that reached the target between points under
    both budgets."""
    both = (s_s == EXACT) & (s_l == EXACT)
    if both.sum() < 2:
        return None
    d = y_l[both] - y_s[both]
    p = stats.ttest_1samp(d, 0.0).pvalue if np.ptp(d) > 0 else 1.0
    return math.exp(d.mean()), float(p)


def run(sims: int, rows: list[int] | None = None, noise: str = "normal") -> None:
    # (trial ids, share of the small budget's runs that get there, true log ratio, the large budget's stop over the
    # small's, where the first eval point sits): the last two rows censor both budgets (the large one stops only 15 %
    # later) and put the first point at 80 % of a run, so runs are censored to the left too
    cases = [
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
    ]
    print(
        f"{sims} simulated studies per row; true ratio = energy under 100K / under 50K; nominal 5 % / 95 %;"
        f" trial-id and run effects {noise}"
    )
    print(
        f"{'trial ids':>9} {'small reach':>11} {'true ratio':>10} | {'no ratio':>8} {'reject':>7} {'covered':>8}"
        f" {'median ratio':>12} | survivors only: {'reject':>7} {'mean ratio':>10}"
    )
    for k, (m, reach, log_ratio, gap, first) in enumerate(cases):
        if rows and k not in rows:
            continue
        rng = np.random.default_rng(2026 + k)
        truth = math.exp(log_ratio)
        rejected = covered = given = 0
        ratios, old_ratios, old_rejected, old_given = [], [], 0, 0
        kinds = {ABOVE: 0, BELOW: 0, "both": 0}
        started = time.perf_counter()
        for _ in range(sims):
            y_s, s_s, y_l, s_l = one_study(rng, m, reach, log_ratio, gap, first, noise)
            kinds[ABOVE] += int((s_s == ABOVE).sum() + (s_l == ABOVE).sum())
            kinds[BELOW] += int((s_s == BELOW).sum() + (s_l == BELOW).sum())
            kinds["both"] += int(((s_s != EXACT) & (s_l != EXACT)).sum())
            got = paired_ratio(y_l, s_l, y_s, s_s)
            if got.ratio is not None:
                given += 1
                rejected += got.p < 0.05
                covered += (got.ci95_low or 0.0) <= truth <= (got.ci95_high or math.inf)
                ratios.append(got.ratio)
            old = survivors(y_s, s_s, y_l, s_l)
            if old is not None:
                old_given += 1
                old_ratios.append(old[0])
                old_rejected += old[1] < 0.05
        print(
            f"{m:>9} {reach:>11.0%} {truth:>10.3f} | {1 - given / sims:>8.1%} {rejected / max(given, 1):>7.1%}"
            f" {covered / max(given, 1):>8.1%} {np.median(ratios) if ratios else float('nan'):>12.3f} |"
            f" {'':16}{old_rejected / max(old_given, 1):>7.1%} {np.exp(np.mean(np.log(old_ratios))):>10.3f}"
            f"   (censored per study: {kinds[ABOVE] / sims:.1f} above, {kinds[BELOW] / sims:.1f} below, "
            f"{kinds['both'] / sims:.1f} trial ids in both; {time.perf_counter() - started:.0f} s)",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--rows", type=int, nargs="*", help="run only these rows of the table (0-based); each has its seed")
    ap.add_argument("--noise", choices=sorted(NOISE), default="normal", help="the law of the trial-id and run effects")
    args = ap.parse_args()
    run(args.sims, args.rows, args.noise)


if __name__ == "__main__":
    main()
