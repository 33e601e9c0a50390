"""GPU checks that CI cannot run: CUDA training in each precision with the real NVML meter.

For each precision it measures the device profile (CS_TFLOPS, as the device_profile rule does),
trains a small Llama on synthetic chunks through ``run_trial`` (the same code path as the
workflow) with ``meter.kind: nvml``, derives MFU as the analysis does, and prints, side by side:
tokens/s, CS_TFLOPS and its IQR, the trial's matmul checks against the profile, the NVML energy
counter against the integral of the polled power (their ratio should be near 1), RMS power, and
whether the meter's GPU UUID equals the one nvidia-smi reports for CUDA device 0. Writes
everything to gpu_check.json in --out.

Usage: python benchmarks/gpu_check.py [--out DIR] [--steps 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import torch  # noqa: E402

from tokenwatt.efficiency import derived_metrics  # noqa: E402
from tokenwatt.throughput import profile_device  # noqa: E402
from tokenwatt.trial import run_trial  # noqa: E402

TOK = {"vocab_size": 1024, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def chunks(n: int) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 1024, size=(n, 64))
    mask = np.ones((n, 64), dtype=np.int8)
    return pl.DataFrame({"chunk_id": np.arange(n), "doc_id": np.arange(n), "input_ids": ids, "attention_mask": mask, "n_real": mask.sum(1).astype(np.int64)})


def smi_uuid() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "0"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    assert torch.cuda.is_available(), "no CUDA device visible"
    data = chunks(args.steps + 64)
    results = {"device": torch.cuda.get_device_name(0), "nvidia_smi_uuid": smi_uuid(), "runs": []}
    for precision in ("fp32", "bf16-mixed", "fp16-mixed"):
        profile = profile_device(device_name="cuda", precision=precision, threads=4, size=8192, window_s=0.5, windows=20, warmup_s=5.0)
        metrics, power, _ = run_trial(
            budget=args.steps * 64, trial=1, seed=1,
            subset={"chunk_ids": list(range(args.steps)), "n_chunks": args.steps, "real_tokens": args.steps * 64},
            train_chunks=data, eval_chunks=data[args.steps:], tokenizer=TOK,
            model_cfg={"source": "config", "preset": "llama-small", "overrides": {}},
            train_cfg=dict(epochs=1, batch_size=1, lr=1e-3, weight_decay=0.0, precision=precision, device="cuda", threads=4,
                           log_every=500, eval_every_epoch=False, eval_batch_size=64),
            meter_cfg=dict(kind="nvml", interval_s=0.1, idle_seconds=2.0, cpu_tdp_w=0, rapl_root="/nonexistent",
                           cooldown_s=0, cooldown_below_c=None, cooldown_timeout_s=0),
            check_cfg={"matmul_size": 8192, "window_s": 0.5, "windows": 3},
        )
        metrics.update(derived_metrics(metrics, cs_tflops=profile["cs_tflops"], K=1.0, tt_scale=1e6))
        valid = power.drop_nulls("power_w")
        t, p = valid["t_s"].to_numpy(), valid["power_w"].to_numpy()
        integrated = float(((p[1:] + p[:-1]) / 2 * np.diff(t)).sum())
        run = {k: metrics[k] for k in ("precision", "meter", "energy_j", "idle_power_w", "power_rms_w", "power_max_w", "samples",
                                      "interval_achieved_s", "sample_errors", "tokens_per_s", "cs_tflops", "mfu", "eval_loss",
                                      "device_uuid", "power_limit_w", "temperature_max_c", "meter_thread_cpu_s", "train_s")}
        run["integrated_power_j"] = integrated
        run["profile_iqr_tflops"] = profile["iqr_tflops"]
        run["checks_over_profile"] = [x / profile["cs_tflops"] for x in metrics["check_before_tflops"] + metrics["check_after_tflops"]]
        run["counter_over_integrated"] = metrics["energy_j"] / integrated if integrated else None
        run["uuid_matches_nvidia_smi"] = metrics["device_uuid"] == results["nvidia_smi_uuid"]
        results["runs"].append(run)
        print(json.dumps(run, indent=1), flush=True)
    Path(args.out, "gpu_check.json").write_text(json.dumps(results, indent=2))
    ok = all(r["meter"] == "nvml-energy" and r["uuid_matches_nvidia_smi"] and r["sample_errors"] == 0 for r in results["runs"])
    print("GPU CHECK", "PASSED" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
