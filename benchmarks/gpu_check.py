"""GPU checks that CI cannot run: CUDA training in each precision with the real NVML meter.

For each precision it measures the device profile (CS_TFLOPS, as the device_profile rule does),
trains a small Llama on synthetic chunks through ``run_trial`` (the same code path as the
workflow) with ``meter.kind: nvml``, derives MFU as the analysis does, and prints, side by side:
tokens/s, CS_TFLOPS and its IQR, the trial's matmul checks against the profile, the NVML energy
counter against the integral of the polled power over the same training windows (their ratio should be near 1),
RMS power, and whether the meter's GPU UUID equals the one nvidia-smi reports for CUDA device 0 (under
CUDA_VISIBLE_DEVICES, nvidia-smi's index for it is that variable's entry). Then steps/s
and MFU of each training stack (transformers' model, the native model, the native model
compiled) in fp32 and bf16, and whether the same seed repeats the same loss curve bit for bit.
Writes everything to gpu_check.json in --out.

Usage: python benchmarks/gpu_check.py [--out DIR] [--steps 1000] [--speed-steps 600]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import polars as pl  # noqa: E402
import torch  # noqa: E402
from gpu_validate import chunks, smi_uuid, window_closure  # noqa: E402
from tokenwatt.analysis.efficiency import derived_metrics  # noqa: E402
from tokenwatt.measurement.meters import MeterSettings  # noqa: E402
from tokenwatt.measurement.nvml import NvmlReader  # noqa: E402
from tokenwatt.measurement.throughput import ThroughputCheck, profile_device  # noqa: E402
from tokenwatt.training.evalplan import EvalSchedule  # noqa: E402
from tokenwatt.training.spec import TrialData, TrialSpec  # noqa: E402
from tokenwatt.training.train import TrainSettings  # noqa: E402
from tokenwatt.training.trial import run_trial  # noqa: E402

DEVICE = "cuda"  # a smoke test of this script on a CPU sets "cpu"
TOK = {"vocab_size": 1024, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def trial(
    data: pl.DataFrame,
    steps: int,
    precision: str,
    *,
    meter: str,
    implementation: str = "native",
    compile_: bool = False,
    checks: int = 3,
    seed: int = 1,
) -> tuple[dict, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """One trial through ``run_trial``, the workflow's own code path."""
    train = dict(
        epochs=1,
        batch_size=1,
        lr=1e-3,
        weight_decay=0.0,
        precision=precision,
        device=DEVICE,
        threads=4,
        log_every=250,
        eval_batch_size=64,
        on_divergence="fail",
        compile=compile_,
        compile_min_steps=1,
    )
    spec = TrialSpec(
        budget=steps * 64,
        trial=1,
        cell=f"b{steps * 64}",
        model={"source": "config", "preset": "llama-small", "overrides": {}, "implementation": implementation},
        train=TrainSettings.from_config(train, seed=seed),
        evaluation=EvalSchedule(),
        meter=MeterSettings(
            kind=meter,
            interval_s=0.1,
            idle_seconds=2.0 if meter != "none" else 0,
            cpu_tdp_w=0,
            rapl_root="/nonexistent",
            cooldown_s=0,
            cooldown_below_c=None,
            cooldown_timeout_s=0,
        ),
        check=ThroughputCheck(matmul_size=8192, window_s=0.5, windows=checks),
    )
    subset = {"chunk_ids": list(range(steps)), "n_chunks": steps, "real_tokens": steps * 64}
    return run_trial(spec, TrialData(subset=subset, train_chunks=data, eval_chunks=data[-64:], tokenizer=TOK))


def energy_checks(data: pl.DataFrame, steps: int, precision: str, profile: dict, smi: str | None) -> dict:
    """The meter on real hardware: counter against integrated power, UUID, checks against the profile."""
    metrics, power, _, _ = trial(data, steps, precision, meter="nvml")
    metrics.update(derived_metrics(metrics, cs_tflops=profile["cs_tflops"], K=1.0, tt_scale=1e6))
    run = {
        k: metrics.get(k)
        for k in (
            "precision",
            "implementation",
            "meter",
            "power_reading",
            "settle_s",
            "energy_j",
            "idle_power_w",
            "power_rms_w",
            "power_max_w",
            "samples",
            "interval_achieved_s",
            "sample_errors",
            "tokens_per_s",
            "cs_tflops",
            "mfu",
            "eval_loss",
            "device_uuid",
            "power_limit_w",
            "temperature_max_c",
            "meter_thread_cpu_s",
            "train_s",
        )
    }
    run["counter_over_integrated"] = window_closure(metrics, power, NvmlReader.covers, "train")
    run["profile_iqr_tflops"] = profile["iqr_tflops"]
    run["checks_over_profile"] = [
        x / profile["cs_tflops"] for x in metrics["check_before_tflops"] + metrics["check_after_tflops"]
    ]
    run["uuid_matches_nvidia_smi"] = metrics["device_uuid"] == smi
    return run


def speed(data: pl.DataFrame, steps: int, precision: str, profile: dict) -> list[dict]:
    """Steps/s and MFU of each training stack, meter off; the compile is timed apart, as a trial does."""
    rows = []
    for implementation, compile_ in (("hf", False), ("native", False), ("native", True)):
        metrics, _, _, _ = trial(
            data, steps, precision, meter="none", implementation=implementation, compile_=compile_, checks=0
        )
        derived = derived_metrics(metrics, cs_tflops=profile["cs_tflops"], K=1.0, tt_scale=1e6)
        rows.append(
            {
                "precision": precision,
                "implementation": implementation,
                "compiled": compile_,
                "compile_s": metrics["compile_s"],
                "steps_per_s": metrics["steps"] / metrics["train_s"],
                "tokens_per_s": metrics["real_tokens"] / metrics["train_s"],
                "mfu": derived["mfu"],
                "eval_loss": metrics["eval_loss"],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def repeats_exactly(data: pl.DataFrame, steps: int, precision: str, compile_: bool) -> bool:
    """Same seed, same loss curve, bit for bit, on this GPU."""
    curves = [
        trial(data, steps, precision, meter="none", compile_=compile_, checks=0)[2]["loss"].to_list() for _ in range(2)
    ]
    return curves[0] == curves[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--steps", type=int, default=1000, help="training steps of each energy check")
    ap.add_argument("--speed-steps", type=int, default=600, help="training steps of each speed run")
    args = ap.parse_args()
    assert torch.cuda.is_available(), "no CUDA device visible"
    data = chunks(max(args.steps, args.speed_steps) + 64, TOK["vocab_size"])
    results = {
        "device": torch.cuda.get_device_name(0),
        "nvidia_smi_uuid": smi_uuid(),
        "runs": [],
        "speed": [],
        "deterministic": {},
    }
    profiles = {}
    for precision in ("fp32", "bf16-mixed", "fp16-mixed"):
        profiles[precision] = profile_device(
            device_name="cuda", precision=precision, threads=4, size=8192, window_s=0.5, windows=20, warmup_s=5.0
        )
        results["runs"].append(
            energy_checks(data, args.steps, precision, profiles[precision], results["nvidia_smi_uuid"])
        )
        print(json.dumps(results["runs"][-1], indent=1), flush=True)
    for precision in ("fp32", "bf16-mixed"):
        results["speed"] += speed(data, args.speed_steps, precision, profiles[precision])
    for compile_ in (False, True):
        results["deterministic"][f"bf16-mixed compile={compile_}"] = repeats_exactly(data, 200, "bf16-mixed", compile_)
    print("same seed, same loss curve:", results["deterministic"], flush=True)
    Path(args.out, "gpu_check.json").write_text(json.dumps(results, indent=2))
    print(f"\n{'precision':<11} {'stack':<17} {'compile s':>9} {'steps/s':>8} {'tokens/s':>9} {'MFU':>9}")
    for r in results["speed"]:
        stack = r["implementation"] + (" compiled" if r["compiled"] else "")
        print(
            f"{r['precision']:<11} {stack:<17} {r['compile_s'] or 0:>9.1f} {r['steps_per_s']:>8.1f} {r['tokens_per_s']:>9,.0f} {r['mfu']:>9.2e}"
        )
    ok = all(
        r["meter"] == "nvml-energy" and r["uuid_matches_nvidia_smi"] and r["sample_errors"] == 0
        for r in results["runs"]
    )
    ok = ok and all(results["deterministic"].values())
    print("GPU CHECK", "PASSED" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
