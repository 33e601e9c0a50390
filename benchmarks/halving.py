"""Benchmark: energy-budgeted successive halving over a WSD model-size ladder against the full grid at equal energy:
how often each picks the best size, its regret in true loss, what halving spends, and the drop test's family-wise
size when every candidate is equal.

Simulates ladders with the known law and e(N) of benchmarks/frontier_estimators.py (imported from it: L(N, D) =
E + A/N^α + B/D^β, e(N) affine) and runs the workflow's own round decision (``tokenwatt.analysis.halving``:
``rank_round``, ``next_step``) on them. A ladder is ``--sizes`` model sizes from 1e5 to 1e7 parameters (the
candidates) × ``--trials`` trial ids × ``--rounds`` rounds at energies J_k = J₀ · 2^k: an equal-energy ladder, each
size training D_k = J_k / e(N) tokens at round k, J₀ chosen so that the true optimum at the last round's energy is the
ladder's middle size (log scale). Each trial's cooled point at round k has, with frontier_estimators.simulate's
noise levels:

- loss = L(N, D_k) × exp(size deviation + trial-id effect + run effect + point noise): each size sits off the law by
  its own lognormal amount (sd ``--size-sd``, 1 %), trial id t shares one effect across sizes (0.5 %), each run (a
  size × trial id: one stable run, its cooldowns the rounds' points) has its own (0.5 %), each point 0.3 %;
- energy = J_k × exp(run energy noise): each run spends 3 % more or less per token than planned, in every round.

What a round costs per trial id, WSD accounting (a stable run to 80 % of the budget, shared by the rounds, plus a
20 % cooldown per round): round 0 costs J₀, round k ≥ 1 costs 0.8 (J_k − J_{k−1}) + 0.2 J_k, each times its run's
energy noise. The full grid runs every candidate through every round. Halving runs round 0 with every candidate;
after each round ``rank_round`` ranks the candidates that entered it on all points so far (confidence 0.95) and its
"kept" train next, if ``next_step`` says the spend so far plus the next round's exact cost for them fits
``--budget-share`` × the full grid's cost (``inf``: no limit). Halving's choice is the rank-1 candidate of the last
round it ran, compared at that round's J; the full grid's choice at that J is the size with the lowest mean observed
loss over trial ids at that round (the same simulated data); the truth is the size of least true L(N, J/e(N)).

Printed, as markdown tables:

1. per ``--keep`` value and budget share: how often halving and the full grid pick the true best size (and the best
   size once its deviation from the law is counted, the best any data could show), the median and 90th-percentile
   regret in true loss (nats) of each at equal energy, halving's joules over the full grid's (mean), the rounds
   halving reached, and how often a round's verdicts were not monotone in rank (a candidate dropped above a kept one);
2. the null check: every candidate the same size (so the same true loss, no size deviation), every round run with
   every candidate: the share of rounds in which ``rank_round`` drops any candidate (its family-wise size, nominal
   5 %; ± its standard error, clustered by ladder), for 4, 7 and 15 candidates × 3 and 5 trial ids, per ``--keep``
   value.

Seeds are fixed: the same arguments print the same tables.

Usage: .venv/bin/python benchmarks/halving.py [--sims 400] [--sizes 7] [--trials 3] [--rounds 4]
[--keep 0.5 0.333] [--budget-share inf 0.3333] [--size-sd 0.01]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from frontier_estimators import COST, LAW, commit  # noqa: E402
from tokenwatt.analysis.halving import Cooled, next_step, rank_round  # noqa: E402
from tokenwatt.measurement.devices import cpu_model_name  # noqa: E402
from tokenwatt.plan.allocation import kept_count  # noqa: E402

# noise levels of frontier_estimators.simulate (literals there, restated): trial-id effect, run effect, point noise,
# run energy noise (the size deviation is --size-sd, default 0.01 as there)
TRIAL_SD, RUN_SD, POINT_SD, ENERGY_SD = 0.005, 0.005, 0.003, 0.03
STABLE, COOLDOWN = 0.8, 0.2  # WSD: the stable run to 80 % of a round's budget, a 20 % cooldown per round
CONFIDENCE = 0.95
SEED = 20261203
NULL_CANDIDATES, NULL_TRIALS = (4, 7, 15), (3, 5)


@dataclass(frozen=True)
class Ladder:
    """One simulated study: observed losses ``loss[c, t, k]``, each run's energy factor ``factor[c, t]``, and each
    candidate's true loss ``truth[c, k]`` (the law) and ``realized[c, k]`` (the law × its size deviation)."""

    names: list[str]
    energies: np.ndarray
    loss: np.ndarray
    factor: np.ndarray
    truth: np.ndarray
    realized: np.ndarray

    def points(self, chosen: list[int], k: int) -> list[Cooled]:
        return [
            Cooled(self.names[c], t, k, float(self.energies[k] * self.factor[c, t]), float(self.loss[c, t, k]))
            for c in chosen
            for t in range(self.factor.shape[1])
        ]

    def cost(self, chosen: list[int], k: int) -> float:
        """What round k costs for the ``chosen`` candidates, every trial id (WSD accounting)."""
        return float(round_costs(self.energies)[k] * self.factor[chosen].sum())

    def full_grid_cost(self) -> float:
        return float(round_costs(self.energies).sum() * self.factor.sum())


def round_costs(energies: np.ndarray) -> np.ndarray:
    """Each round's joules per run (before its energy noise): J₀, then 0.8 (J_k − J_{k−1}) + 0.2 J_k."""
    later = STABLE * np.diff(energies) + COOLDOWN * energies[1:]
    return np.concatenate([energies[:1], later])


def final_energy(n_mid: float) -> float:
    """The energy J at which the true optimum along D = J / e(N) is ``n_mid``: where d L / d log N = 0, i.e.
    α A N^−α = β B D^−β · d log e / d log N."""
    slope = float(COST.local_slope(n_mid))
    tokens = (LAW.beta * LAW.B * slope / (LAW.alpha * LAW.A * n_mid**-LAW.alpha)) ** (1 / LAW.beta)
    return float(tokens * COST(n_mid))


def simulate(
    rng: np.random.Generator,
    sizes: np.ndarray,
    trials: int,
    energies: np.ndarray,
    size_sd: float,
    by_index: bool = False,
) -> Ladder:
    """A ladder of ``sizes`` × ``trials`` trial ids × rounds at ``energies``, each size training J_k / e(N) tokens;
    ``by_index`` names the candidates by index (for a ladder of equal sizes)."""
    c, r = sizes.size, energies.size
    tokens = energies[None, :] / COST(sizes)[:, None]
    truth = LAW.loss(sizes[:, None], tokens)
    size_dev = rng.normal(0, size_sd, c) if size_sd > 0 else np.zeros(c)
    effect = (
        size_dev[:, None, None]
        + rng.normal(0, TRIAL_SD, trials)[None, :, None]
        + rng.normal(0, RUN_SD, (c, trials))[:, :, None]
        + rng.normal(0, POINT_SD, (c, trials, r))
    )
    factor = np.exp(rng.normal(0, ENERGY_SD, (c, trials)))
    names = [f"N={n:.3g}" for n in sizes] if not by_index else [f"c{i}" for i in range(c)]
    return Ladder(names, energies, truth[:, None, :] * np.exp(effect), factor, truth, truth * np.exp(size_dev)[:, None])


@dataclass(frozen=True)
class Outcome:
    """One halving run: its choice (index), the last round it ran, its spend over the full grid's, and the rounds
    whose verdicts were not monotone in rank."""

    choice: int
    last: int
    spent_share: float
    non_monotone: int


def non_monotone(ranked: dict) -> bool:
    """Whether some dropped candidate ranks above a kept one."""
    verdicts = [row["verdict"] for row in sorted(ranked["candidates"], key=lambda row: row["rank"])]
    return "dropped" in verdicts and "kept" in verdicts[verdicts.index("dropped") :]


def halve(ladder: Ladder, keep: float, share: float) -> Outcome:
    """Energy-budgeted successive halving on ``ladder`` with the workflow's round decision."""
    index = {name: i for i, name in enumerate(ladder.names)}
    rounds = ladder.energies.size
    full = ladder.full_grid_cost()
    entering, points, spent, odd = list(range(len(ladder.names))), [], 0.0, 0
    for k in range(rounds):
        points += ladder.points(entering, k)
        spent += ladder.cost(entering, k)
        ranked = rank_round(points, [ladder.names[c] for c in entering], k, keep, CONFIDENCE)
        odd += non_monotone(ranked)
        survivors = [index[name] for name in ranked["kept"]]
        estimate = ladder.cost(survivors, k + 1) if k + 1 < rounds else None
        step, _ = next_step(k, rounds, spent, share * full, estimate)
        if step != "continue":
            break
        entering = survivors
    top = next(row for row in ranked["candidates"] if row["rank"] == 1)
    return Outcome(index[top["candidate"]], k, spent / full, odd)


def tally(ladder: Ladder, outcome: Outcome) -> dict[str, float]:
    """One halving run against the full grid at the energy of halving's last round."""
    k = outcome.last
    grid = int(np.argmin(ladder.loss[:, :, k].mean(axis=1)))
    truth, realized = ladder.truth[:, k], ladder.realized[:, k]
    best, best_realized = int(np.argmin(truth)), int(np.argmin(realized))
    return {
        "halving_true": outcome.choice == best,
        "grid_true": grid == best,
        "halving_realized": outcome.choice == best_realized,
        "grid_realized": grid == best_realized,
        "halving_regret": float(truth[outcome.choice] - truth[best]),
        "grid_regret": float(truth[grid] - truth[best]),
        "spent": outcome.spent_share,
        "rounds": k + 1,
        "non_monotone": outcome.non_monotone,
    }


def run_ladders(args: argparse.Namespace, energies: np.ndarray) -> dict[tuple[float, float], list[dict[str, float]]]:
    """``--sims`` ladders, each run through halving under every keep value and budget share (the same data)."""
    rng = np.random.default_rng(SEED)
    sizes = np.geomspace(1e5, 1e7, args.sizes)
    results: dict[tuple[float, float], list[dict[str, float]]] = defaultdict(list)
    for _ in range(args.sims):
        ladder = simulate(rng, sizes, args.trials, energies, args.size_sd)
        for keep in args.keep:
            for share in args.budget_share:
                results[(keep, share)].append(tally(ladder, halve(ladder, keep, share)))
    return results


def null_sizes(args: argparse.Namespace, energies: np.ndarray) -> dict[tuple[float, int, int], np.ndarray]:
    """Per keep value, candidates and trial ids: each null ladder's count of rounds in which rank_round dropped any
    candidate, every candidate the ladder's middle size with no size deviation, every round run with every candidate."""
    rng = np.random.default_rng(SEED + 1)
    middle = float(np.sqrt(1e5 * 1e7))
    counts: dict[tuple[float, int, int], np.ndarray] = {}
    for candidates in NULL_CANDIDATES:
        for trials in NULL_TRIALS:
            drops = {keep: np.zeros(args.sims, int) for keep in args.keep}
            for i in range(args.sims):
                ladder = simulate(rng, np.full(candidates, middle), trials, energies, 0.0, by_index=True)
                points = [p for k in range(energies.size) for p in ladder.points(list(range(candidates)), k)]
                for k in range(energies.size):
                    for keep in args.keep:
                        drops[keep][i] += bool(rank_round(points, ladder.names, k, keep, CONFIDENCE)["dropped"])
            for keep in args.keep:
                counts[(keep, candidates, trials)] = drops[keep]
    return counts


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _budget(share: float) -> str:
    return "unlimited" if math.isinf(share) else f"{share:.3g} × full grid"


def print_choices(results: dict[tuple[float, float], list[dict[str, float]]], rounds: int) -> None:
    print(
        "\n| keep | budget | P(halving picks true best) | P(full grid picks it) | P(halving picks realized best) | "
        "P(full grid picks realized best) | halving regret, median / p90 (nats) | full grid regret, median / p90 (nats) | "
        "halving J / full grid J | rounds reached, mean | reached the last | rounds with non-monotone verdicts |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (keep, share), rows in results.items():
        col = {key: np.array([r[key] for r in rows], float) for key in rows[0]}
        regrets = [
            f"{np.median(col[k]):.4f} / {np.quantile(col[k], 0.9):.4f}" for k in ("halving_regret", "grid_regret")
        ]
        print(
            f"| {keep:g} | {_budget(share)} | {_pct(col['halving_true'].mean())} | {_pct(col['grid_true'].mean())} | "
            f"{_pct(col['halving_realized'].mean())} | {_pct(col['grid_realized'].mean())} | {regrets[0]} | "
            f"{regrets[1]} | {col['spent'].mean():.3f} | {col['rounds'].mean():.2f} | "
            f"{_pct((col['rounds'] == rounds).mean())} | {int(col['non_monotone'].sum())}/{int(col['rounds'].sum())} |"
        )


def print_null(counts: dict[tuple[float, int, int], np.ndarray], rounds: int) -> None:
    """The family-wise size per round, with its standard error clustered by ladder (a ladder's rounds share its runs'
    effects)."""
    print(
        "\n| keep | candidates | trial ids | kept share (fewest) | rounds dropping any candidate | family-wise size "
        "(± s.e.) | nominal |"
    )
    print("|---|---|---|---|---|---|---|")
    for (keep, candidates, trials), drops in sorted(counts.items(), key=lambda kv: (-kv[0][0], *kv[0][1:])):
        share, se = drops.mean() / rounds, drops.std(ddof=1) / rounds / np.sqrt(drops.size)
        print(
            f"| {keep:g} | {candidates} | {trials} | {kept_count(candidates, keep)} | {drops.sum()}/{drops.size * rounds}"
            f" | {_pct(share)} ± {_pct(se)} | {_pct(1 - CONFIDENCE)} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--sizes", type=int, default=7)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--keep", type=float, nargs="+", default=[0.5, 0.333])
    ap.add_argument("--budget-share", type=float, nargs="+", default=[math.inf, 1 / 3], help="inf: no limit")
    ap.add_argument("--size-sd", type=float, default=0.01)
    args = ap.parse_args()
    last = final_energy(float(np.sqrt(1e5 * 1e7)))
    energies = last * 2.0 ** (np.arange(args.rounds) - (args.rounds - 1))
    start = time.monotonic()
    results = run_ladders(args, energies)
    counts = null_sizes(args, energies)
    sizes = np.geomspace(1e5, 1e7, args.sizes)
    best = [sizes[int(np.argmin(LAW.loss(sizes, j / COST(sizes))))] for j in energies]
    print(
        f"{args.sims} simulated ladders of {args.sizes} sizes (1e5–1e7) × {args.trials} trial ids × {args.rounds} "
        f"rounds at J = {', '.join(f'{j:.4g}' for j in energies)} J (true best size {', '.join(f'{n:.3g}' for n in best)}"
        f"), size sd {args.size_sd:g}; confidence {CONFIDENCE}; seed {SEED}; commit {commit()}; {cpu_model_name()}; "
        f"{time.monotonic() - start:.0f} s"
    )
    print_choices(results, args.rounds)
    print_null(counts, args.rounds)


if __name__ == "__main__":
    main()
