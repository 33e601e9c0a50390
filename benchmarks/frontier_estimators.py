"""Benchmark: each frontier estimator's N*(J) against the truth: bias, refusals, coverage counted over every study,
the paired agreement test's rate of "contradict", and whether the envelope's estimand moves with the trial ids.

Simulates ladders with a known loss L(N, D) and a known e(N) (joules per token), and runs the workflow's own
estimators (``tokenwatt.analysis.scaling.frontier``) on each. A ladder is ``--sizes`` model sizes from 1e5 to 1e7
parameters × ``--trials`` trial ids, each size × trial id one constant-rate run evaluated at 16 log-spaced token
counts (so every point may stand for its budget), with the effects real ladders have:

- loss = L(N, D) × exp(size deviation + trial-id effect + run effect + point noise): each model size sits off the
  law by its own lognormal amount (sd ``--size-sd``, 1 %), trial id t shares one effect across its sizes (0.5 %),
  each run has its own (0.5 %), each point 0.3 %;
- L(N, D) is the law E + A/N^α + B/D^β, plus, with ``--misspecify b``, a term b · ln(N/1e6)² / ln D the law's form
  lacks (the loss bends in log N, less so the more tokens), so the law's fit cannot match it;
- joules per token = e(N) × exp(size deviation (sd 5 %) + run noise (3 %)), e(N) affine (a fixed cost per token
  plus one proportional to N), so its local slope grows with N as a CPU's does.

The truth is the optimum of the true L along the true e(N), at energies where it lies well inside the sizes. Printed,
as markdown tables:

1. per approach and energy, over ALL studies: the share with no N̂ (refused), with an N̂ but no interval, and with an
   interval that held the truth (unconditional coverage: a study without an interval counts as not covering), beside
   the coverage among the intervals given; the median log(N̂/N*); and the median |log(N̂/N*)| of the estimates with
   and without an interval, so that intervals missing not at random show;
2. per pair of approaches and energy, the paired test's verdict (``frontier()["agreement"]``): how often it says
   "contradict" out of all studies and out of those it tested, and the median width of the "no contradiction
   detected" intervals; and how often some pair contradicts at that energy, as the report would say (the law's
   lack-of-fit screen is not run here, so the law is never left out);
3. the envelope's estimand: its N* and L* bias beside those of the same envelope drawn over each size's median run
   across trial ids (``median_run``), a candidate estimand that does not depend on how many trial ids there are.

Seeds are fixed: the same arguments print the same tables.

Usage: .venv/bin/python benchmarks/frontier_estimators.py [--sims 40] [--sizes 7] [--trials 3] [--size-sd 0.01]
[--misspecify 0]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
from scipy import optimize  # noqa: E402
from tokenwatt.analysis.scaling.energy_per_token import PerToken  # noqa: E402
from tokenwatt.analysis.scaling.frontier import APPROACHES, PAIRS, FrontierPoints, envelope, frontier  # noqa: E402
from tokenwatt.analysis.scaling.law import Law  # noqa: E402
from tokenwatt.measurement.devices import cpu_model_name  # noqa: E402

LAW = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)
COST = PerToken("affine", 2e-4, 2e-9)  # J per token: 0.2 mJ fixed, 2 nJ per parameter
ENERGIES = np.geomspace(300.0, 3000.0, 3)
TOKENS = np.geomspace(3e4, 3e9, 16)
BEND_AT = 1e6  # the misspecified term is 0 here, so the truth stays inside the sizes
SEED = 20261202


def true_loss(n: np.ndarray, d: np.ndarray, bend: float) -> np.ndarray:
    return LAW.loss(n, d) + bend * np.log(n / BEND_AT) ** 2 / np.log(d)


def true_optimum(energies: np.ndarray, bend: float) -> tuple[np.ndarray, np.ndarray]:
    """(N*, L*) of the true loss along e(N)·D = J, by a grid in log N refined by a bounded search (the misspecified
    loss has no closed form for ``allocation.optimum`` to solve)."""
    grid = np.linspace(np.log(1e3), np.log(1e9), 2001)
    n_opt, l_opt = [], []
    for energy in energies:

        def along(u: float, energy: float = energy) -> float:
            n = np.exp(u)
            return float(true_loss(n, energy / COST(n), bend))

        i = int(np.argmin([along(u) for u in grid]))
        got = optimize.minimize_scalar(along, bounds=(grid[i - 1], grid[i + 1]), method="bounded")
        n_opt.append(np.exp(got.x))
        l_opt.append(got.fun)
    return np.array(n_opt), np.array(l_opt)


def simulate(rng: np.random.Generator, sizes: np.ndarray, size_sd: float, trials: int, bend: float) -> FrontierPoints:
    size_loss = rng.normal(0, size_sd, sizes.size)
    size_cost = rng.normal(0, 0.05, sizes.size)
    trial_effect = rng.normal(0, 0.005, trials)
    rows = []
    for t in range(trials):
        for k, n in enumerate(sizes):
            run_loss, run_cost = rng.normal(0, 0.005), rng.normal(0, 0.03)
            noise = rng.normal(0, 0.003, TOKENS.size)
            loss = true_loss(n, TOKENS, bend) * np.exp(size_loss[k] + trial_effect[t] + run_loss + noise)
            joules = COST(n) * TOKENS * np.exp(size_cost[k] + run_cost)
            rows.append((np.full(TOKENS.size, n), TOKENS, joules, loss, np.full(TOKENS.size, t)))
    return FrontierPoints.of(*(np.concatenate(c) for c in zip(*rows, strict=True)))


def median_run(points: FrontierPoints) -> FrontierPoints:
    """Each size's median run across its trial ids, point by point (the simulated runs share their token counts):
    the envelope over these is drawn over a typical run per size, not over the luckiest of however many trial ids."""
    rows = []
    for n in np.unique(points.N):
        for d in np.unique(points.D[points.N == n]):
            at = (points.N == n) & (points.D == d)
            rows.append((n, d, np.median(points.J[at]), np.median(points.loss[at])))
    n, d, j, loss = (np.array(c) for c in zip(*rows, strict=True))
    return FrontierPoints.of(n, d, j, loss)


def commit() -> str:
    """The short commit, and whether the tree differs from it (a table from a dirty tree is not that commit's)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"
    return head + (" + uncommitted changes" if dirty else "")


def tally(result: dict, truth_n: np.ndarray, records: dict, verdicts: dict) -> None:
    """One study's estimates (``records[(approach, j)]``: status, log error, covered) and paired verdicts
    (``verdicts[(pair, j)]``: contradict True/False/None, width factor)."""
    for name in APPROACHES:
        for j, e in enumerate(result["approaches"][name]["estimates"]):
            if e["n_opt"] is None:
                records[(name, j)].append(("refused", np.nan, False))
                continue
            err = float(np.log(e["n_opt"] / truth_n[j]))
            if e["n_low"] is None:
                records[(name, j)].append(("no interval", err, False))
            else:
                records[(name, j)].append(("interval", err, bool(e["n_low"] <= truth_n[j] <= e["n_high"])))
    for j, row in enumerate(result["agreement"]):
        for test in row["pairs"]:
            verdicts[(tuple(test["approaches"]), j)].append((test["contradict"], test["width_factor"]))
        # what the report says at this energy: some pair contradicts (the three pairs are tested uncorrected)
        verdicts[("any pair", j)].append((row["contradict"], None))


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f} %" if n else "—"


def _med(x: list[float], signed: bool = False) -> str:
    return ("—" if not x else f"{np.median(x):+.3f}") if signed else ("—" if not x else f"{np.median(x):.3f}")


def print_coverage(records: dict, sims: int, truth_n: np.ndarray) -> None:
    print(
        "\n| approach | energy | true N* | refused | N̂, no interval | held the truth (of all) | held (of intervals)"
        " | median log(N̂/N*) | median abs. error, interval | median abs. error, no interval |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in APPROACHES:
        for j, energy in enumerate(ENERGIES):
            rec = records[(name, j)]
            given = [r for r in rec if r[0] != "refused"]
            with_iv = [r for r in rec if r[0] == "interval"]
            bare = [r for r in rec if r[0] == "no interval"]
            held = sum(r[2] for r in with_iv)
            print(
                f"| {name} | {energy:,.0f} J | {truth_n[j]:.3g} | {_pct(sims - len(given), sims)} | "
                f"{_pct(len(bare), sims)} | {held}/{sims} = {_pct(held, sims)} | "
                f"{held}/{len(with_iv)} = {_pct(held, len(with_iv))} | {_med([r[1] for r in given], True)} | "
                f"{_med([abs(r[1]) for r in with_iv])} ({len(with_iv)}) | {_med([abs(r[1]) for r in bare])} "
                f"({len(bare)}) |"
            )


def print_agreement(verdicts: dict, sims: int) -> None:
    print(
        "\n| pair | energy | tested | contradict (of all) | contradict (of tested) | median width, no contradiction |"
    )
    print("|---|---|---|---|---|---|")
    for pair in (*PAIRS, "any pair"):
        for j, energy in enumerate(ENERGIES):
            got = verdicts[(pair, j)]
            tested = [v for v in got if v[0] is not None]
            said = sum(v[0] for v in tested)
            widths = [v[1] for v in tested if not v[0] and v[1] is not None]
            print(
                f"| {'–'.join(pair) if pair != 'any pair' else pair} | {energy:,.0f} J | {len(tested)}/{sims} | "
                f"{said} = {_pct(said, sims)} | "
                f"{_pct(said, len(tested))} | {'×' + _med(widths) if widths else '—'} |"
            )


def print_envelopes(errors: dict, sims: int) -> None:
    print("\n| envelope over | energy | refused | median log(N̂/N*) | RMSE log N̂ | median log(L̂/L*) |")
    print("|---|---|---|---|---|---|")
    for variant in ("every point (the workflow's)", "each size's median run"):
        for j, energy in enumerate(ENERGIES):
            got = errors[(variant, j)]
            n_err = [e[0] for e in got]
            rmse = f"{np.sqrt(np.mean(np.square(n_err))):.3f}" if n_err else "—"
            print(
                f"| {variant} | {energy:,.0f} J | {_pct(sims - len(got), sims)} | {_med(n_err, True)} | {rmse} | "
                f"{_med([e[1] for e in got], True)} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=40)
    ap.add_argument("--sizes", type=int, default=7)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--size-sd", type=float, default=0.01)
    ap.add_argument("--misspecify", type=float, default=0.0, help="b of the term b·ln(N/1e6)²/ln D the law lacks")
    args = ap.parse_args()
    sizes = np.geomspace(1e5, 1e7, args.sizes)
    truth_n, truth_l = true_optimum(ENERGIES, args.misspecify)
    rng = np.random.default_rng(SEED)
    records, verdicts, env_errors = (defaultdict(list) for _ in range(3))
    start = time.monotonic()
    for _ in range(args.sims):
        points = simulate(rng, sizes, args.size_sd, args.trials, args.misspecify)
        tally(frontier(points, ENERGIES), truth_n, records, verdicts)
        for variant, pts in (("every point (the workflow's)", points), ("each size's median run", median_run(points))):
            got = envelope(pts, ENERGIES)
            for j in np.flatnonzero(np.isfinite(got.n)):
                env_errors[(variant, j)].append((np.log(got.n[j] / truth_n[j]), np.log(got.loss[j] / truth_l[j])))
    print(
        f"{args.sims} simulated ladders of {args.sizes} sizes (1e5–1e7) × {args.trials} trial ids × 16 points, size sd "
        f"{args.size_sd:g}, misspecification b = {args.misspecify:g}; seed {SEED}; commit {commit()}; "
        f"{cpu_model_name()}; {time.monotonic() - start:.0f} s"
    )
    print_coverage(records, args.sims, truth_n)
    print_agreement(verdicts, args.sims)
    print_envelopes(env_errors, args.sims)


if __name__ == "__main__":
    main()
