"""Benchmark: what the evaluation schedule costs beside training.

Every evaluation of a trial is metered in its own window (``eval_1`` … ``eval_final``), never inside the
training energy. This reads the trial records of a finished study and prints, per budget, the evaluation
energy and time as a share of the training energy and time (median and maximum over trials), for the
schedule the study ran (``eval.*``). The aim for the embedded default's schedule (8 points, intermediate
evaluations on 4 096 eval tokens): evaluation energy ≤ 10 % of training energy.

Usage: .venv/bin/python benchmarks/eval_overhead.py [RESULTS_DIR]   (default: results, after `make study`)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "results")
    records = [json.loads(p.read_text()) for p in sorted(results.glob("trials/**/metrics.json"))]
    records = [
        r for r in records if r.get("status") == "ok" and r.get("energy_j") and r.get("eval_energy_j") is not None
    ]
    if not records:
        sys.exit(f"no finished trials with measured training and evaluation energy under {results}/trials")
    print(
        f"{len(records)} trials under {results}; {records[0]['eval_points']} evaluation points per trial, intermediate ones on "
        f"{records[0]['eval_subset_tokens']:,} eval tokens, the final on {records[0]['eval_tokens']:,}"
    )
    every = []
    for budget in sorted({r["budget"] for r in records}):
        mine = [r for r in records if r["budget"] == budget]
        energy = [r["eval_energy_j"] / r["energy_j"] for r in mine]
        time = [r["eval_window_s"] / r["train_s"] for r in mine]
        every += energy
        print(
            f"budget {budget:>9,}: evaluation ÷ training energy {100 * statistics.median(energy):5.1f} % (max {100 * max(energy):.1f} %), "
            f"time {100 * statistics.median(time):5.1f} % (max {100 * max(time):.1f} %)"
        )
    print(
        f"all trials: evaluation ÷ training energy, median {100 * statistics.median(every):.1f} %, max {100 * max(every):.1f} % "
        "(aim ≤ 10 %)"
    )


if __name__ == "__main__":
    main()
