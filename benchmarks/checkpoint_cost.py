"""Benchmark: what a trial's checkpoints cost, per save and in training time, side by side in one run.

Trains the default model (llama-tiny, the embedded study's) on the same chunks for the same steps, alternating a run
without checkpoints and one that saves every ``--every`` steps (A B A B ...), so machine noise hits both alike, and
prints:

  bytes per checkpoint           the default model's state.pt, measured; TinyLlama-1.1B's computed
                                 (disk.CHECKPOINT_BYTES_PER_PARAMETER × its parameters: it cannot train here)
  seconds per save               median over every save of the run (torch.save, fsync, rename)
  training time with / without   the ratio of the median wall times of the two loops, saves included: the slowdown at
                                 that interval

Usage: .venv/bin/python benchmarks/checkpoint_cost.py [--steps 600] [--every 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import torch  # noqa: E402
from tokenwatt.plan.disk import CHECKPOINT_BYTES_PER_PARAMETER, llama_parameters  # noqa: E402
from tokenwatt.plan.presets import PRESETS  # noqa: E402
from tokenwatt.training import checkpoint  # noqa: E402
from tokenwatt.training.checkpoint import Checkpoint  # noqa: E402
from tokenwatt.training.model import build_model, preset_sizes  # noqa: E402
from tokenwatt.training.train import Checkpointing, TrainHooks, TrainSettings, train  # noqa: E402
from train_loop import TOK, data  # noqa: E402  the training benchmark's vocabulary and chunks


def run(steps: int, every: int | None, folder: Path) -> tuple[float, list[float], int]:
    """Wall seconds of one training loop, the seconds of each save, and the last checkpoint's bytes."""
    ids, mask = data(steps)
    net = build_model(preset_sizes("llama-tiny", {}, TOK, 64), seed=0, implementation="native")
    settings = TrainSettings(epochs=1, batch_size=1, lr=3e-3, weight_decay=0.0, precision="fp32", seed=0, log_every=50)
    saves, size = [], 0

    def save(state, tokens):
        nonlocal size
        t = time.perf_counter()
        size = checkpoint.save(folder, Checkpoint(key="benchmark", number=len(saves) + 1, train=state))
        saves.append(time.perf_counter() - t)

    saving = Checkpointing(due=lambda step, tokens: step % every == 0, save=save) if every else None
    t0 = time.perf_counter()
    train(net, ids, mask, torch.device("cpu"), settings, hooks=TrainHooks(checkpoints=saving))
    return time.perf_counter() - t0, saves, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    without, with_, saves, size = [], [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            without.append(run(args.steps, None, Path(tmp))[0])
            wall, got, size = run(args.steps, args.every, Path(tmp))
            with_.append(wall)
            saves += got
    tiny_params = llama_parameters(preset_sizes("llama-tiny", {}, TOK, 64), TOK["vocab_size"])
    tinyllama = llama_parameters(PRESETS["tinyllama-1.1b"], 32_000)
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(
        f"CPU: {cpu}; torch {torch.__version__}; {args.steps} steps, a checkpoint every {args.every}, {args.repeats} repeats"
    )
    print(
        f"bytes per checkpoint, llama-tiny ({tiny_params:,} parameters): {size:,} measured ({size / tiny_params:.1f} per parameter)"
    )
    print(
        f"bytes per checkpoint, tinyllama-1.1b ({tinyllama:,} parameters): "
        f"{CHECKPOINT_BYTES_PER_PARAMETER * tinyllama / 1e9:.1f} GB computed ({CHECKPOINT_BYTES_PER_PARAMETER} per parameter)"
    )
    print(f"seconds per save: median {statistics.median(saves) * 1000:.1f} ms over {len(saves)} saves")
    ratio = statistics.median(with_) / statistics.median(without)
    print(
        f"training time with / without checkpoints: {ratio:.3f} (medians {statistics.median(with_):.2f} s / {statistics.median(without):.2f} s)"
    )


if __name__ == "__main__":
    main()
