"""Benchmark: time, energy and peak memory per training step of each model family (design.architecture) at matched
size and of each optimizer (design.optimizer), side by side in one run.

Two named sizes, each a Llama shape the other families match in non-embedding parameters (plan/architectures.py):
the default study's (config/config.yaml: llama-tiny, 18.6 K non-embedding parameters) and one about ten times larger
(hidden 96, 0.20 M). The variants: each family with the fused AdamW, and the Llama with each other optimizer
(plan/optimizers.py). Every variant trains the same random chunks (chunk.length 64 with a padded tail, the default's
batch of 4) for the same steps with tokenwatt's loop, one thread, the variants alternating within each repeat
(A B C … A B C …) so that machine noise hits them alike. Per variant and size it prints the median time per optimizer
step, its energy per step as the CPU estimate meter would count it (65 W TDP × the process's CPU seconds ÷ the
machine's CPUs: an ESTIMATE, measurement/cpu_meters.py), tokens/s, the family's own FLOPs per token
(analysis/efficiency.py) with the rate they were done at, the optimizer state's bytes per parameter (computed from the kind's layout), and the peak
memory the training added to the process (VmHWM reset at its start, measurement/memory.py: on a CPU the resident
set's growth). Each measurement runs in a fresh process after a one-step warm-up (imports, kernels, torchao's
compile), so no variant inherits another's freed memory or warm allocator.

Mamba trains here through transformers' reference PyTorch scan, a Python loop over positions, as it does in a CPU
study: its time says what that path costs, not what Mamba's fused CUDA kernels would.

Usage: .venv/bin/python benchmarks/step_costs.py [--steps 40] [--repeats 3]
       (a smoke run: --steps 2 --repeats 1)
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # the reference-path notice, once per model
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenwatt.analysis.efficiency import flops_per_token  # noqa: E402
from tokenwatt.measurement.memory import PeakMemory  # noqa: E402
from tokenwatt.plan.architectures import FAMILIES  # noqa: E402
from tokenwatt.plan.optimizers import KINDS, normalized  # noqa: E402
from tokenwatt.training.model import build_model, describe, preset_sizes  # noqa: E402
from tokenwatt.training.train import TrainSettings, train  # noqa: E402

TOK = {"vocab_size": 1024, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
CONTEXT, BATCH = 64, 4
TDP_W = 65.0  # the estimate meter's default (meter.cpu_tdp_w)
# (family, optimizer): every family with the default optimizer, the Llama with every other
VARIANTS = [(f, "adamw") for f in FAMILIES] + [("llama", k) for k in KINDS if k != "adamw"]
SIZES = {
    "default (llama-tiny)": {},
    "10x (hidden 96)": dict(
        hidden_size=96, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    ),
}


def data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(3, TOK["vocab_size"], size=(n, CONTEXT)))
    mask = torch.ones(n, CONTEXT, dtype=torch.long)
    mask[:, CONTEXT - 8 :] = 0  # a padded tail, as real chunks have
    return ids.masked_fill(mask == 0, 0), mask


def measure(variant: tuple[str, str], overrides: dict, steps: int) -> dict[str, float]:
    """In a process of its own: a one-step warm-up (imports, kernels, a compile), then the measured training."""
    torch.set_num_threads(1)
    ids, mask = data(steps * BATCH)
    run(variant, overrides, ids[:BATCH], mask[:BATCH])
    return run(variant, overrides, ids, mask)


def run(variant: tuple[str, str], overrides: dict, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """One variant's training over the chunks: seconds and estimated joules per step, tokens/s, its FLOPs per token,
    its optimizer state's bytes per parameter (the kind's layout, plan/optimizers.py, as if every tensor were quantized) and peak memory growth."""
    family, optimizer = variant
    sizes = preset_sizes("llama-tiny", overrides, TOK, CONTEXT)
    model = build_model(sizes, seed=0, implementation="native" if family == "llama" else "hf", family=family)
    settings = TrainSettings(
        epochs=1,
        batch_size=BATCH,
        lr=1e-3,
        weight_decay=0.0,
        precision="fp32",
        seed=0,
        log_every=100,
        optimizer=normalized(optimizer),
    )
    memory = PeakMemory(torch.device("cpu"))
    memory.start()
    t0, cpu0 = time.perf_counter(), time.process_time()
    result = train(model, ids, mask, torch.device("cpu"), settings)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    peak = memory.read()
    arch = describe(model)
    count = flops_per_token(arch, CONTEXT)  # per position, padding included, as a trial is credited
    grew = peak["peak_memory_bytes"] and peak["memory_at_start_bytes"]
    return {
        "non_embedding": arch["params"] - 2 * arch["embedding_params"],
        "s_per_step": elapsed / result.n_steps,
        "j_per_step": TDP_W * cpu / (os.cpu_count() or 1) / result.n_steps,
        "state_bytes_per_param": KINDS[optimizer].state_bytes(normalized(optimizer)),
        "tokens_per_s": result.real_tokens / elapsed,
        "flops_per_token": count.times(1),
        "gflops_per_s": count.times(result.padded_tokens) / elapsed / 1e9,
        "peak_growth_mb": (peak["peak_memory_bytes"] - peak["memory_at_start_bytes"]) / 1e6 if grew else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps per variant and repeat")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    results: dict[tuple[str, tuple[str, str]], list[dict[str, float]]] = {}
    spawn = multiprocessing.get_context("spawn")
    for _ in range(args.repeats):
        for size, overrides in SIZES.items():
            for variant in VARIANTS:
                with spawn.Pool(1) as pool:
                    results.setdefault((size, variant), []).append(
                        pool.apply(measure, (variant, overrides, args.steps))
                    )
    print(
        f"{args.steps} steps of {BATCH} × {CONTEXT} tokens, {args.repeats} repeats, 1 thread; medians; "
        f"mJ/step an ESTIMATE ({TDP_W:g} W TDP × CPU seconds ÷ {os.cpu_count()} CPUs)"
    )
    header = (
        f"{'size':22} {'family':9} {'optimizer':19} {'non-emb':>8} {'ms/step':>8} {'mJ/step':>8} {'tokens/s':>9} "
        f"{'MFLOP/tok':>10} {'GFLOP/s':>8} {'state B/p':>9} {'peak +MB':>9}"
    )
    print(header)
    for (size, (family, optimizer)), runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"{size:22} {family:9} {optimizer:19} {med['non_embedding']:>8,.0f} {med['s_per_step'] * 1e3:>8.1f} "
            f"{med['j_per_step'] * 1e3:>8.1f} {med['tokens_per_s']:>9,.0f} {med['flops_per_token'] / 1e6:>10.3f} "
            f"{med['gflops_per_s']:>8.3f} {med['state_bytes_per_param']:>9.2f} {med['peak_growth_mb']:>9.1f}"
        )


if __name__ == "__main__":
    main()
