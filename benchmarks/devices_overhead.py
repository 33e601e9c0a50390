"""Benchmark: what a second device costs a trial, side by side in one run: the default model (llama-tiny, the
embedded study's) trained on the same chunks in the same global batches by one process and by two gloo ranks (CPU),
each as a whole trial with its meter (the estimate), alternating one and two (A B A B ...) so machine noise hits both.

It prints, per device count, medians over the repeats:

  seconds per optimizer step     training time ÷ steps (the slowest rank's time on two): the per-step overhead of two
                                 ranks at equal global batch is the ratio of the two
  meter CPU per rank             the poller thread's CPU seconds ÷ training seconds, per rank: what metering each
                                 device costs the process that trains on it
  energy per step (estimate)     the devices' summed estimate ÷ steps

Two CPU ranks on a 2-core machine share its cores with each other, the meters and the launcher, so the ratio here
is the gloo all-reduce and the process split, not what two GPUs would do; a GPU's is gpu_validate.sh's two-GPU step.

Usage: .venv/bin/python benchmarks/devices_overhead.py [--chunks 1600] [--batch 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from tokenwatt.measurement.devices import cpu_model_name  # noqa: E402
from tokenwatt.measurement.meters import MeterSettings  # noqa: E402
from tokenwatt.measurement.throughput import ThroughputCheck  # noqa: E402
from tokenwatt.training.evalplan import EvalSchedule  # noqa: E402
from tokenwatt.training.launch import run_on_devices  # noqa: E402
from tokenwatt.training.spec import TrialSpec  # noqa: E402
from tokenwatt.training.train import TrainSettings  # noqa: E402
from train_loop import TOK, data  # noqa: E402  the training benchmark's vocabulary and chunks


def inputs(folder: Path, chunks: int) -> dict[str, str]:
    """The trial's files: ``chunks`` training chunks (all in the subset) and 32 eval chunks."""
    ids, mask = data(chunks + 32)
    table = pl.DataFrame(
        {
            "chunk_id": np.arange(len(ids)),
            "doc_id": np.arange(len(ids)),
            "input_ids": ids.numpy(),
            "attention_mask": mask.numpy().astype(np.int8),
            "n_real": mask.sum(1).numpy(),
        }
    )
    table[:chunks].write_parquet(folder / "train.parquet")
    table[chunks:].write_parquet(folder / "eval.parquet")
    subset = {"budget": chunks, "trial": 1, "chunk_ids": list(range(chunks)), "n_chunks": chunks}
    subset["real_tokens"] = int(mask[:chunks].sum())
    (folder / "subset.json").write_text(json.dumps(subset))
    (folder / "tokenizer").mkdir(exist_ok=True)
    (folder / "tokenizer" / "tokenwatt.json").write_text(json.dumps(TOK))
    return {
        "subset": str(folder / "subset.json"),
        "train": str(folder / "train.parquet"),
        "eval": str(folder / "eval.parquet"),
        "tokenizer": str(folder / "tokenizer"),
    }


def spec(batch: int) -> TrialSpec:
    train = dict(epochs=1, batch_size=batch, lr=3e-3, weight_decay=0.0, precision="fp32", device="cpu", threads=1)
    return TrialSpec(
        budget=1,
        trial=1,
        cell="benchmark",
        model={"source": "config", "preset": "llama-tiny", "overrides": {}},
        train=TrainSettings.from_config({**train, "log_every": 50, "compile": False}, seed=0),
        evaluation=EvalSchedule(),
        meter=MeterSettings(
            kind="estimate", interval_s=0.1, cpu_tdp_w=65.0, rapl_root="/nonexistent", idle_seconds=0.5
        ),
        check=ThroughputCheck(matmul_size=256, window_s=0.05, windows=2),
    )


def one_run(base: TrialSpec, files: dict[str, str], devices: int) -> dict[str, float]:
    """One whole trial on ``devices`` ranks (one device: the same launcher path with one rank, so both pay it)."""
    metrics = run_on_devices(
        dataclasses.replace(base, train=dataclasses.replace(base.train, devices=devices)), files, lambda s: None
    )[0]
    ranks = metrics.get("ranks") or [{"train_s": metrics["train_s"]}]
    # the poller's CPU per rank: one rank's record holds it; on two, the combined record holds their sum
    meter_cpu = (metrics["meter_thread_cpu_s"] or 0.0) / len(ranks)
    return {
        "s_per_step": metrics["train_s"] / metrics["steps"],
        "meter_cpu_share": meter_cpu / metrics["train_s"],
        "j_per_step": metrics["energy_j"] / metrics["steps"],
        "steps": metrics["steps"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=1600)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {cpu_model_name()}, commit {commit or 'unknown'}")
    base = spec(args.batch)
    runs: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as work:
        files = inputs(Path(work), args.chunks)
        for _ in range(args.repeats):
            for devices in (1, 2):
                runs[devices].append(one_run(base, files, devices))
    med = {d: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for d, rs in runs.items()}
    print(
        f"{args.chunks} chunks of 64 tokens, global batch {args.batch}, {med[1]['steps']:.0f} steps, {args.repeats} repeats"
    )
    for d in (1, 2):
        m = med[d]
        print(
            f"  {d} device(s): {1e3 * m['s_per_step']:.2f} ms per step, meter CPU {100 * m['meter_cpu_share']:.2f} % of "
            f"training per rank, {m['j_per_step']:.3f} J per step (ESTIMATE)"
        )
    print(f"two ranks / one, seconds per step: {med[2]['s_per_step'] / med[1]['s_per_step']:.2f}")
    print(f"two ranks / one, energy per step:  {med[2]['j_per_step'] / med[1]['j_per_step']:.2f}")


if __name__ == "__main__":
    main()
