"""Benchmark: tokenwatt's training loop in each mode against Hugging Face Trainer, and the meter's cost.

Trains the same model (same initial weights) on the same chunks for the same number of
steps, alternating the variants within one run (A B C D ... A B C D ...) so that machine noise
hits all of them alike, and prints median ratios of tokens/s:

  ours (native) / Trainer          the default training stack against transformers' Trainer
  ours (hf) / Trainer              our loop driving LlamaForCausalLM (model.implementation: hf)
  ours (native) / native compiled  the default against the fastest loop measured here
                                   (train.compile: on; the compile itself is excluded, as in a trial)
  meter on / off                   1 - this is the meter's cost
  meter CPU share                  the polling thread's own CPU time / training time (noise-free)

Usage: .venv/bin/python benchmarks/train_loop.py [--steps 600] [--repeats 3] [--interval 0.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenwatt.measurement.cpu_meters import EstimateReader  # noqa: E402
from tokenwatt.measurement.meter import Meter, Polling  # noqa: E402
from tokenwatt.training.model import build_model, preset_sizes  # noqa: E402
from tokenwatt.training.train import TrainHooks, TrainSettings, compile_model, labels_for, train  # noqa: E402

TOK = {"vocab_size": 1024, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def data(n: int, length: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(3, 1024, size=(n, length)))
    mask = torch.ones(n, length, dtype=torch.long)
    mask[:, length - 8 :] = 0  # a padded tail, as real chunks have
    return ids.masked_fill(mask == 0, 0), mask


def model(implementation: str = "native"):
    return build_model(preset_sizes("llama-tiny", {}, TOK, 64), seed=0, implementation=implementation)


def ours(
    ids, mask, lr, meter_interval: float | None, implementation: str = "native", compiled: bool = False
) -> tuple[float, float | None]:
    """Tokens/s of our loop, and the meter thread's CPU share of the training time."""
    settings = TrainSettings(epochs=1, batch_size=1, lr=lr, weight_decay=0.0, precision="fp32", seed=0, log_every=100)
    net = model(implementation)
    forward = compile_model(net, ids, mask, torch.device("cpu"), settings)[0] if compiled else None
    meter = Meter(EstimateReader(65.0), Polling(meter_interval)) if meter_interval else None
    if meter:
        meter.start()
    t0 = time.perf_counter()
    result = train(net, ids, mask, torch.device("cpu"), settings, hooks=TrainHooks(forward))
    elapsed = time.perf_counter() - t0
    share = meter.stop().meter_thread_cpu_s / elapsed if meter else None
    return result.real_tokens / elapsed, share


def trainer(ids, mask, lr) -> float:
    from transformers import Trainer, TrainingArguments

    rows = [{"input_ids": i, "attention_mask": m, "labels": labels_for(i, m)} for i, m in zip(ids, mask)]
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=1,
            num_train_epochs=1,
            learning_rate=lr,
            lr_scheduler_type="constant",
            weight_decay=0.0,
            optim="adamw_torch_fused",
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_strategy="steps",
            logging_steps=100,
            disable_tqdm=True,
            seed=0,
            dataloader_num_workers=0,
        )
        t0 = time.perf_counter()
        Trainer(model=model("hf"), args=args, train_dataset=rows).train()
        elapsed = time.perf_counter() - t0
    return int(mask.sum()) / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--interval", type=float, default=0.5, help="meter polling interval (s) for the meter-on runs")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tokenwatt-inductor-"))
    ids, mask = data(args.steps)
    ours(ids[:50], mask[:50], 1e-3, None)  # warm-up: allocator, kernels, CPU clocks
    ours(ids[:50], mask[:50], 1e-3, None, compiled=True)  # the compile cache, so repeats compile warm
    ratios: dict[str, list[float]] = {
        "native / Trainer": [],
        "hf / Trainer": [],
        "native / native compiled": [],
        "meter on / off": [],
    }
    shares = []
    for r in range(args.repeats):
        # Alternate which meter variant goes first so drift does not favour one of them.
        first_on = r % 2 == 1
        a = ours(ids, mask, 1e-3, args.interval if first_on else None)
        b = ours(ids, mask, 1e-3, None if first_on else args.interval)
        (on, share), (off, _) = (a, b) if first_on else (b, a)
        hf_loop = ours(ids, mask, 1e-3, None, implementation="hf")[0]
        fastest = ours(ids, mask, 1e-3, None, compiled=True)[0]
        hf = trainer(ids, mask, 1e-3)
        for name, value in zip(ratios, (off / hf, hf_loop / hf, off / fastest, on / off)):
            ratios[name].append(value)
        shares.append(share)
        print(
            f"repeat {r + 1}: native {off:,.0f} tok/s, native+meter {on:,.0f}, hf {hf_loop:,.0f}, native compiled "
            f"{fastest:,.0f}, Trainer {hf:,.0f}",
            flush=True,
        )
    print(
        f"\n{args.steps} steps × batch 1 × 64 tokens, llama-tiny, 1 thread, {args.repeats} paired repeats (medians of ratios)"
    )
    for name, values in ratios.items():
        print(f"tokens/s {name:<26}: {statistics.median(values):.2f}  (range {min(values):.2f}-{max(values):.2f})")
    print(
        f"meter thread CPU / train : {100 * statistics.median(shares):.3f} %  (the poller's own cost, free of machine noise)"
    )


if __name__ == "__main__":
    main()
