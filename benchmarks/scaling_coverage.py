"""Benchmark: do the scaling analysis's 95 % intervals cover the truth 95 % of the time on the shipped designs?

Simulates studies of the shapes of ``config/scaling.yaml`` (5 sizes of 36 K–400 K parameters × budgets
10K–80K × 3 trials, one final point per trial, as its cosine schedule requires; each cell at its best rate, or with
--sweep at each rate of its sweep, the best chosen per size × budget by the workflow and again in every jackknife
refit, the true best inside the sweep for the middle sizes and at its edges for the smallest and largest) and ``config/paper-scaling.yaml`` (5 sizes of 20 M–1.1 B ×
50M–400M tokens × 3 trials, 8 points from 2 %, points first_epoch), one epoch, with the effects real
studies have:

- each trial's token counts a few tokens off its budget's (a subset overshoots by part of a chunk);
- loss = L(N, D) × exp(size deviation + trial-id effect + run effect + point noise): each model size sits
  off the law by its own lognormal amount (sd ``--size-sd``, 1 %), trial id t shares one effect across every
  cell (its seed and subset, sd 0.5 %), each run (cell × trial) has its own (0.5 %), each point 0.3 %;
- joules per token = c · N^γ × exp(size deviation (sd 5 %) + run noise (3 %)).

Every study goes through the workflow's own function (``analyse_scaling``, points ``first_epoch``), and the
benchmark prints, per design and parameter (α, β, a = β/(α+β), γ of e(N)), how often the interval held the
truth, how often no interval was given (and why), the median width, and the spread of the estimates
themselves (their SD and RMSE about the truth): a width near 4 × the SD is what a valid interval costs. Seeds are fixed: the same run prints
the same table.

Usage: .venv/bin/python benchmarks/scaling_coverage.py [--sims 60] [--size-sd 0.01] [--design cpu|gpu|both] [--sweep]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from tokenwatt.analysis.scaling.law import Law  # noqa: E402
from tokenwatt.analysis.scaling.study import analyse_scaling  # noqa: E402
from tokenwatt.training.evalplan import EvalSchedule, eval_thresholds  # noqa: E402

DESIGNS = {
    "cpu (config/scaling.yaml)": {
        "sizes": np.geomspace(36e3, 400e3, 5),
        "budgets": [10_000, 20_000, 40_000, 80_000],
        "trials": 3,
        "eval": {"points": 0},
        "points": "final",
        "law": Law(E=1.5, A=60.0, B=60.0, alpha=0.35, beta=0.3),
        "c": 3e-8,
        "gamma": 0.45,
    },
    "gpu (config/paper-scaling.yaml)": {
        "sizes": np.array([20e6, 60e6, 120e6, 450e6, 1.1e9]),
        "budgets": [50_000_000, 100_000_000, 200_000_000, 400_000_000],
        "trials": 3,
        "eval": {"points": 8, "first_fraction": 0.02},
        "points": "first_epoch",
        "law": Law(E=1.82, A=482.0, B=2085.4, alpha=0.348, beta=0.366),
        "c": 1e-10,
        "gamma": 0.8,
    },
}
SD = {"trial": 0.005, "run": 0.005, "point": 0.003, "energy_size": 0.05, "energy_run": 0.03}


# The learning-rate sweep of --sweep (config/scaling.yaml's design.lr): each size's best rate (the smallest size's at
# the top edge of the sweep, the largest's at the bottom edge, the middle ones inside it), and the cost of a rate off
# it, exp(κ · ln(lr / best)²): a neighbouring rate (× 3.16) costs 0.5 %, about one seed's SD, so rates nearly tie.
SWEEP = {"rates": [0.003, 0.01, 0.03], "kappa": 0.0038}


def best_rate(design: dict, n: float) -> float:
    sizes = list(design["sizes"])
    rates = SWEEP["rates"]
    return rates[-1] if n == sizes[0] else rates[0] if n == sizes[-1] else rates[1]


def simulate(
    design: dict, rng: np.random.Generator, size_sd: float, sweep: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One study's eval curves and trials tables, as the aggregation writes them; with ``sweep`` every size × budget
    at each rate of ``SWEEP`` (an own run per rate, the trial id's effect shared), the law true at each size's best."""
    law: Law = design["law"]
    size_dev = dict(zip(design["sizes"], rng.normal(0, size_sd, len(design["sizes"]))))
    energy_dev = dict(zip(design["sizes"], rng.normal(0, SD["energy_size"], len(design["sizes"]))))
    trial_dev = rng.normal(0, SD["trial"], design["trials"])
    curves, trials = [], []
    for t in range(design["trials"]):
        for n in design["sizes"]:
            for b, lr in ((b, lr) for b in design["budgets"] for lr in (SWEEP["rates"] if sweep else [None])):
                cell = f"model={n:.0f}/b{b}" if lr is None else f"lr={lr:g}/model={n:.0f}/b{b}"
                off = 0.0 if lr is None else SWEEP["kappa"] * np.log(lr / best_rate(design, n)) ** 2
                run = rng.normal(0, SD["run"]) + off
                jpt = design["c"] * n ** design["gamma"] * np.exp(energy_dev[n] + rng.normal(0, SD["energy_run"]))
                trials.append(
                    {
                        "cell": cell,
                        "trial": t + 1,
                        **({} if lr is None else {"lr": lr}),
                        "series": cell.rsplit("/", 1)[0],
                        "budget": b,
                        "params": int(n),
                        "embedding_params": 0,
                        "tied_embeddings": True,
                        "real_tokens": b,
                        "energy_j": jpt * b,
                        "dynamic_energy_j": 0.7 * jpt * b,
                    }
                )
                at = [*eval_thresholds(b, EvalSchedule(**design["eval"])), b]
                for k, d in enumerate(at, 1):
                    d = d + int(rng.integers(0, 40))
                    shift = size_dev[n] + trial_dev[t] + run + rng.normal(0, SD["point"])
                    curves.append(
                        {
                            "cell": cell,
                            "trial": t + 1,
                            "point": k,
                            "real_tokens": d,
                            "distinct_tokens": d,
                            "train_energy_j": jpt * d,
                            "eval_loss": float(law.loss(int(n), d) * np.exp(shift)),
                            "final": k == len(at),
                        }
                    )
                trials[-1]["eval_loss"] = curves[-1][
                    "eval_loss"
                ]  # the trial's final evaluation, as its record holds it
    return pl.DataFrame(curves), pl.DataFrame(trials)


def run(design: dict, sims: int, size_sd: float, seed: int, sweep: bool = False) -> tuple[dict[str, dict], Counter]:
    """Per parameter its coverage figures, and how the lack-of-fit screen judged the studies' laws."""
    law: Law = design["law"]
    truth = {"alpha": law.alpha, "beta": law.beta, "a": law.a, "gamma": design["gamma"]}
    held, refused, widths = Counter(), {k: Counter() for k in truth}, {k: [] for k in truth}
    estimates = {k: [] for k in truth}
    screened = Counter()
    for s in range(sims):
        curves, trials = simulate(design, np.random.default_rng(seed + s), size_sd, sweep)
        got = analyse_scaling(curves, trials, {"points": design["points"], "energy_budgets": [1.0]})
        screened[{True: "fits", False: "rejected", None: "not judged"}[got["law_total"]["lack_of_fit"]["fits"]]] += 1
        bounds = {k: got["law_total"]["intervals"][k] for k in ("alpha", "beta", "a")}
        energy = next(e for e in got["energy_per_token"] if e["energy"] == "joules_per_token")
        lo, hi = energy["fits"]["power"]["ci"]["gamma"]
        bounds["gamma"] = {"ci_low": lo, "ci_high": hi, "why": None}
        estimates["gamma"].append(energy["fits"]["power"]["params"]["gamma"])
        for k in ("alpha", "beta", "a"):
            estimates[k].append(got["law_total"][k])
        for k, iv in bounds.items():
            if iv["ci_low"] is None:
                refused[k][iv["why"].split(":")[0]] += 1
                continue
            held[k] += iv["ci_low"] <= truth[k] <= iv["ci_high"]
            widths[k].append(iv["ci_high"] - iv["ci_low"])
    return {
        k: {
            "covered": held[k],
            "given": len(widths[k]),
            "refused": dict(refused[k]),
            "width": float(np.median(widths[k])) if widths[k] else float("nan"),
            "sd": float(np.std(estimates[k], ddof=1)),
            "rmse": float(np.sqrt(np.mean((np.array(estimates[k]) - truth[k]) ** 2))),
        }
        for k in truth
    }, screened


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=60)
    ap.add_argument("--size-sd", type=float, default=0.01)
    ap.add_argument("--design", choices=["cpu", "gpu", "both"], default="both")
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--sweep", action="store_true", help="the cpu design with its learning-rate sweep, chosen per size")
    args = ap.parse_args()
    print(
        f"coverage of nominal 95 % intervals, {args.sims} simulated studies per design, size deviation sd {args.size_sd}"
    )
    print(
        f"{'design':34} {'parameter':9} {'covered':>12} {'coverage':>9} {'median width':>13} {'sd of est.':>11} {'RMSE':>9}  no interval"
    )
    for name, design in DESIGNS.items():
        if args.design != "both" and not name.startswith(args.design):
            continue
        if args.sweep and not name.startswith("cpu"):
            continue  # the gpu design's config trains one rate
        figures, screened = run(design, args.sims, args.size_sd, args.seed, args.sweep)
        name = f"{name[:22]} + lr sweep" if args.sweep else name
        for k, r in figures.items():
            cov = r["covered"] / r["given"] if r["given"] else float("nan")
            why = ", ".join(f"{n}× {w}" for w, n in r["refused"].items()) or "-"
            print(
                f"{name:34} {k:9} {r['covered']:>5} of {r['given']:<4} {cov:>9.1%} {r['width']:>13.4g} {r['sd']:>11.4g} {r['rmse']:>9.4g}  {why}"
            )
        judged = screened["fits"] + screened["rejected"]
        truth = (
            "the law exactly true: a size" if args.size_sd == 0 else f"sizes off the law by sd {args.size_sd}: a power"
        )
        print(
            f"{name:34} lack-of-fit screen rejected {screened['rejected']} of {judged} laws at p < .05 "
            f"({screened['rejected'] / max(judged, 1):.1%}; {truth}); not judged: {screened['not judged']}"
        )


if __name__ == "__main__":
    main()
