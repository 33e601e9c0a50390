"""Benchmark: how biased is each frontier estimator's N*(J), and do its 95 % intervals cover the truth?

Simulates ladders with a known law L(N, D) = E + A/N^α + B/D^β and a known e(N) (joules per token), and runs the
workflow's own estimators (``tokenwatt.analysis.scaling.frontier``) on each. A ladder is ``--sizes`` model sizes from 1e5
to 1e7 parameters × 3 trial ids, each size × trial id one constant-rate run evaluated at 16 log-spaced token counts
(so every point may stand for its budget), with the effects real ladders have:

- loss = L(N, D) × exp(size deviation + trial-id effect + run effect + point noise): each model size sits off the
  law by its own lognormal amount (sd ``--size-sd``, 1 %), trial id t shares one effect across its sizes (0.5 %),
  each run has its own (0.5 %), each point 0.3 %;
- joules per token = e(N) × exp(size deviation (sd 5 %) + run noise (3 %)), e(N) affine (a fixed cost per token
  plus one proportional to N), so its local slope grows with N as a CPU's does.

The truth is the optimum of the true law along the true e(N) (``allocation.optimum``), at energies where it lies
well inside the sizes. Printed per approach and energy: how often it refused (and the commonest why), the median
and RMSE of log(N̂/N*) over the estimates given, how often a 95 % interval was given and how often it held the
truth. Seeds are fixed: the same run prints the same table.

Usage: .venv/bin/python benchmarks/frontier_estimators.py [--sims 40] [--sizes 7] [--size-sd 0.01]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
from tokenwatt.analysis.scaling.allocation import allocate  # noqa: E402
from tokenwatt.analysis.scaling.energy_per_token import PerToken  # noqa: E402
from tokenwatt.analysis.scaling.frontier import APPROACHES, FrontierPoints, frontier  # noqa: E402
from tokenwatt.analysis.scaling.law import Law  # noqa: E402
from tokenwatt.measurement.devices import cpu_model_name  # noqa: E402

LAW = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)
COST = PerToken("affine", 2e-4, 2e-9)  # J per token: 0.2 mJ fixed, 2 nJ per parameter
ENERGIES = np.geomspace(300.0, 3000.0, 3)
TOKENS = np.geomspace(3e4, 3e9, 16)


def simulate(rng: np.random.Generator, sizes: np.ndarray, size_sd: float, trials: int = 3) -> FrontierPoints:
    size_loss = rng.normal(0, size_sd, sizes.size)
    size_cost = rng.normal(0, 0.05, sizes.size)
    trial_effect = rng.normal(0, 0.005, trials)
    rows = []
    for t in range(trials):
        for k, n in enumerate(sizes):
            run_loss, run_cost = rng.normal(0, 0.005), rng.normal(0, 0.03)
            noise = rng.normal(0, 0.003, TOKENS.size)
            loss = LAW.loss(n, TOKENS) * np.exp(size_loss[k] + trial_effect[t] + run_loss + noise)
            joules = COST(n) * TOKENS * np.exp(size_cost[k] + run_cost)
            rows.append((np.full(TOKENS.size, n), TOKENS, joules, loss, np.full(TOKENS.size, t)))
    return FrontierPoints.of(*(np.concatenate(c) for c in zip(*rows, strict=True)))


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=40)
    ap.add_argument("--sizes", type=int, default=7)
    ap.add_argument("--size-sd", type=float, default=0.01)
    args = ap.parse_args()
    sizes = np.geomspace(1e5, 1e7, args.sizes)
    truth = allocate(LAW, COST, ENERGIES).N
    rng = np.random.default_rng(20261202)
    errors, covered, given, refused = (defaultdict(list) for _ in range(4))
    for _ in range(args.sims):
        result = frontier(simulate(rng, sizes, args.size_sd), ENERGIES)
        for name in APPROACHES:
            for j, e in enumerate(result["approaches"][name]["estimates"]):
                key = (name, j)
                if e["n_opt"] is None:
                    refused[key].append(e["why"].split(":")[0])
                    continue
                errors[key].append(np.log(e["n_opt"] / truth[j]))
                if e["n_low"] is not None:
                    given[key].append(1)
                    covered[key].append(e["n_low"] <= truth[j] <= e["n_high"])
    print(
        f"{args.sims} simulated ladders of {args.sizes} sizes (1e5–1e7) × 3 trial ids × 16 points, size sd "
        f"{args.size_sd:g}; commit {commit()}, {cpu_model_name()}"
    )
    print(
        f"{'approach':10} {'energy J':>9} {'true N*':>9} {'refused':>8} {'median log':>10} {'RMSE log':>9} "
        f"{'intervals':>9} {'covered':>8}"
    )
    for name in APPROACHES:
        for j, energy in enumerate(ENERGIES):
            key = (name, j)
            err = np.array(errors[key])
            why = Counter(refused[key]).most_common(1)
            median = f"{np.median(err):+.3f}" if err.size else "—"
            rmse = f"{np.sqrt(np.mean(err**2)):.3f}" if err.size else "—"
            cover = f"{sum(covered[key])}/{len(covered[key])}" if covered[key] else "—"
            print(
                f"{name:10} {energy:9.4g} {truth[j]:9.3g} {len(refused[key]):8d} {median:>10} {rmse:>9} "
                f"{len(given[key]):9d} {cover:>8}" + (f"   commonest refusal: {why[0][0]}" if why else "")
            )


if __name__ == "__main__":
    main()
