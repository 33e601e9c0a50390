"""The first GPU's ten minutes: what a study's first GPU run would otherwise find out the hard way, one line a check.

Each line: PASS, FAIL or INFO (a figure to read, with no band), the check, its figure and its pass band. In order:
  device identity   the CUDA device's NVML UUID, nvidia-smi's for the same device, the driver, MIG, NVML's calls
  counter closure   idle and matmul windows: their sum against the counter's own change, counter ÷ the integral of
                    the polled power per window, the counter's real update period, idle power and temperature
  the study stack   a shortened trial of the config's model, precision and evaluations (compiled on a GPU): peak
                    memory reserved, s/step × the study's steps against the trial's time limit, GradScaler skips,
                    the evaluation windows against the counter's period, energy above idle
  CS_TFLOPS         the matmul profile of each precision against the datasheet's dense peak
  repeatability     the same trial again: loss curve bit for bit, energy per step within 2 %
  two devices       where two GPUs are visible, the same trial as two ranks (train.devices: 2): each rank metered on
                    its own GPU (two UUIDs, both NVML's), the balance of their energies, the loss against the same
                    trial on one GPU, and what the second GPU did to seconds and joules per step
Last line: GPU VALIDATION PASSED or FAILED (the exit status says the same). The README ("Validate a first GPU")
says what to do with each figure.

``--fake-nvml`` runs every check on the CPU against the suite's fake NVML (tests/fake_nvml.py), whose GPU draws
more power while this process computes: the script's own test, not a measurement.

Usage: python benchmarks/gpu_validate.py [--config config/paper.yaml] [--steps 300] [--fake-nvml] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from tokenwatt.measurement.devices import device_sync, gpu_uuid  # noqa: E402
from tokenwatt.measurement.energy import MIN_COUNTER_PERIODS, integrate  # noqa: E402
from tokenwatt.measurement.meter import Meter, Polling  # noqa: E402
from tokenwatt.measurement.meters import MeterSettings  # noqa: E402
from tokenwatt.measurement.nvml import NvmlReader  # noqa: E402
from tokenwatt.measurement.throughput import ThroughputCheck, profile_device  # noqa: E402
from tokenwatt.plan.preview import trial_runtime_min  # noqa: E402
from tokenwatt.training import session as session_module  # noqa: E402
from tokenwatt.training import trial as trial_module  # noqa: E402
from tokenwatt.training.evalplan import EvalSchedule  # noqa: E402
from tokenwatt.training.launch import run_on_devices  # noqa: E402
from tokenwatt.training.spec import TrialData, TrialSpec  # noqa: E402
from tokenwatt.training.train import TrainingError, TrainSettings  # noqa: E402

FAKE_UUID = "GPU-fa4e0000-0000-0000-0000-000000000001"
PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed")
# NVIDIA's datasheet dense peaks (TFLOP/s) by a fragment of the device's name, the first that matches: fp32 on the
# CUDA cores (TF32 stays off in tokenwatt), fp16 and bf16 on the tensor cores without sparsity. The A10G is AWS's
# variant of the A10: its clocks, and so its peak, may be lower than the A10's figures used for it.
DATASHEET = [
    ("H200", {"fp32": 67.0, "fp16-mixed": 989.0, "bf16-mixed": 989.0}),
    ("H100 PCIe", {"fp32": 51.0, "fp16-mixed": 756.0, "bf16-mixed": 756.0}),
    ("H100", {"fp32": 67.0, "fp16-mixed": 989.0, "bf16-mixed": 989.0}),
    ("A100", {"fp32": 19.5, "fp16-mixed": 312.0, "bf16-mixed": 312.0}),
    ("L40S", {"fp32": 91.6, "fp16-mixed": 362.0, "bf16-mixed": 362.0}),
    ("A10", {"fp32": 31.2, "fp16-mixed": 125.0, "bf16-mixed": 125.0}),
    ("L4", {"fp32": 30.3, "fp16-mixed": 121.0, "bf16-mixed": 121.0}),
    ("V100", {"fp32": 15.7, "fp16-mixed": 125.0}),
]
PEAK_BAND = (0.5, 1.0)  # sustained large matmuls reach 60-90 % of the dense peak; above it the row is not this GPU's
CLOSURE_BAND = (0.98, 1.02)
REPEAT_TOLERANCE = 0.02
# A counter slower than the meter assumes makes its refusal of short evaluations too lax; a little jitter is not that.
PERIOD_SLACK = 1.2
VOCAB = 32000  # TinyLlama's tokenizer, the GPU configs' (its ids are random here: only the shapes matter)
# The study stack on a CPU against the fake NVML: a model and matmul a CPU does in seconds. Its evaluation is sized on
# the machine (fake_eval_tokens): a fixed size is 10 counter periods on one CPU and too short on one 3x faster.
FAKE_STACK = {
    "preset": "llama-tiny",
    "precision": "fp32",
    "threads": 1,
    "vocab": 1024,
    "matmul_size": 512,
    "compile": False,
}
# The fake evaluation spans this many times the counter periods the trial asks of it: room for a machine whose pace
# changes between the sizing and the trial (another process starting beside it). Under the test suite's four workers
# on two cores the trial's evaluation ran 4.6 times faster than the sizing measured (2026-12-03), past a margin of 4.
FAKE_EVAL_MARGIN = 8


@dataclass
class Check:
    name: str
    figure: str
    band: str
    ok: bool | None  # None: a figure to read (INFO), no band to pass

    def line(self) -> str:
        verdict = {True: "PASS", False: "FAIL", None: "INFO"}[self.ok]
        return f"{verdict}  {self.name:<36} {self.figure:<44} {self.band}"


def within(x: float | None, band: tuple[float, float]) -> bool:
    return x is not None and band[0] <= x <= band[1]


# -- shared with benchmarks/gpu_check.py
def chunks(n: int, vocab: int, seed: int = 0) -> pl.DataFrame:
    """``n`` full 64-token chunks of random ids, the shape of the workflow's chunk tables."""
    ids = np.random.default_rng(seed).integers(3, vocab, size=(n, 64))
    mask = np.ones((n, 64), dtype=np.int8)
    return pl.DataFrame(
        {
            "chunk_id": np.arange(n),
            "doc_id": np.arange(n),
            "input_ids": ids,
            "attention_mask": mask,
            "n_real": mask.sum(1).astype(np.int64),
        }
    )


def smi_uuid(cuda_index: int = 0) -> str | None:
    """nvidia-smi's UUID for CUDA device ``cuda_index``: nvidia-smi counts every GPU of the machine, CUDA only those
    in CUDA_VISIBLE_DEVICES, so the index given to ``-i`` is that variable's entry for the device (or the UUID)."""
    visible = [e.strip() for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    target = visible[cuda_index] if visible else str(cuda_index)
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", target],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def window_closure(metrics: dict[str, Any], trace: pl.DataFrame, covers: str, prefix: str) -> float | None:
    """Counter energy ÷ the integral of the polled power over the same windows (those named ``prefix``…): like
    windows, so idle, checks and evaluations never sit on one side of the ratio only."""
    valid = trace.drop_nulls("power_w")
    t, p = valid["t_s"].to_numpy(), valid["power_w"].to_numpy()
    counted = integrated = 0.0
    for w in (w for w in metrics["windows"] if w["name"].startswith(prefix)):
        if w["energy_j"] is None:
            return None
        counted += w["energy_j"]
        integrated += integrate(t, p, covers, w["start_s"], w["end_s"])
    return counted / integrated if integrated else None


# -- the checks
def identity(device: torch.device, nvml: Any, uuid: str | None, fake: bool) -> list[Check]:
    known = uuid is not None and _try(lambda: nvml.nvmlDeviceGetHandleByUUID(uuid)) is not None
    out = [Check("CUDA device -> NVML UUID", str(uuid), "NVML knows the UUID", known)]
    if fake:
        out.append(Check("nvidia-smi UUID of the same device", "not run (fake NVML)", "-", None))
    else:
        smi = smi_uuid(device.index or 0)
        out.append(Check("nvidia-smi UUID of the same device", str(smi), "= the NVML UUID", smi == uuid))
    driver = _try(nvml.nvmlSystemGetDriverVersion)
    out.append(Check("driver", str(driver), "-", None))
    if not known:
        return out
    meter = Meter(NvmlReader(nvml, uuid), Polling(0.1))
    mig = "no (whole GPU)" if meter.reader.mig_parent_uuid is None else f"slice of {meter.reader.mig_parent_uuid}"
    out.append(
        Check("MIG slice", mig, "whole GPU (a slice is metered as its GPU)", meter.reader.mig_parent_uuid is None)
    )
    calls = {
        "energy counter": meter.reader.kind == "nvml-energy",
        "instant power": meter.reader.power_reading == "instant",
        "averaged power": _try(lambda: nvml.nvmlDeviceGetPowerUsage(meter.reader.handle)) is not None,
        "temperature": _try(meter.reader.temperature) is not None,
        "power limit": meter.reader.static_info()["power_limit_w"] is not None,
    }
    working = ", ".join(k for k, v in calls.items() if v) or "none"
    out.append(Check("NVML calls that work", working, "energy counter and a power reading", calls["energy counter"]))
    return out


def _try(call) -> Any:
    """What an NVML call returns, or None where it fails (a driver or GPU without it)."""
    try:
        return call()
    except Exception:
        return None


def closure(device: torch.device, nvml: Any, uuid: str, settle_s: float, window_s: float) -> tuple[list[Check], float]:
    """Idle, then matmuls, in back-to-back windows of one meter session, against the counter read apart; with the
    counter's measured update period."""
    sync = device_sync(device)
    a = torch.randn(2048, 2048, device=device)
    sync()
    meter = Meter(NvmlReader(nvml, uuid), Polling(0.02, sync=sync))  # its first reads come after the work above
    time.sleep(settle_s)
    counter = lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(meter.reader.handle) / 1000.0  # noqa: E731
    meter.open()
    before = counter()
    meter.begin("idle")
    time.sleep(window_s)
    meter.switch("matmul")
    t_end = time.monotonic() + window_s
    while time.monotonic() < t_end:
        a = (a @ a).clamp_(-1, 1)
        sync()
    meter.end()
    after = counter()
    out = meter.close()
    windows = {w.name: w for w in out.windows}
    total = windows["idle"].energy_j + windows["matmul"].energy_j
    checks = [
        Check(
            "sum of windows ÷ counter change",
            f"{total / (after - before):.4f}",
            f"{CLOSURE_BAND[0]}-{CLOSURE_BAND[1]}",
            within(total / (after - before), CLOSURE_BAND),
        )
    ]
    for name in ("idle", "matmul"):
        ratio = window_closure(out.to_record(), out.trace, meter.reader.covers, name)
        checks.append(
            Check(
                f"{name}: counter ÷ ∫ {meter.reader.power_reading} power",
                "—" if ratio is None else f"{ratio:.4f}",
                f"{CLOSURE_BAND[0]}-{CLOSURE_BAND[1]}",
                within(ratio, CLOSURE_BAND),
            )
        )
    period = counter_period(counter)
    checks.append(
        Check(
            "counter update period",
            f"{period * 1000:.1f} ms",
            f"<= {PERIOD_SLACK:g} × {NvmlReader.update_period_s * 1000:.0f} ms (the meter's assumption)",
            period <= PERIOD_SLACK * NvmlReader.update_period_s,
        )
    )
    idle_w = windows["idle"].energy_j / windows["idle"].duration_s
    temperature = _try(meter.reader.temperature)
    checks.append(Check(f"idle after {settle_s:g} s settle", f"{idle_w:.1f} W at {temperature} °C", "-", None))
    return checks, period


def counter_period(read, seconds: float = 1.5) -> float:
    """The counter's real update period: the median time between changes of its value, read in a tight loop."""
    changes, last, t_end = [], read(), time.monotonic() + seconds
    while time.monotonic() < t_end:
        value = read()
        if value != last:
            changes.append(time.monotonic())
            last = value
    return float(np.median(np.diff(changes))) if len(changes) > 2 else math.inf


def study_settings(config_path: Path) -> dict[str, Any]:
    """The study's settings a GPU must hold, from its config over config/config.yaml (as Snakemake overlays them)."""
    merged = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for section, values in yaml.safe_load(config_path.read_text()).items():
        merged[section] = {**merged[section], **values} if isinstance(values, dict) else values
    train, model = merged["train"], merged["model"]
    return {
        "preset": model.get("preset", "tinyllama-1.1b"),  # a pretrained TinyLlama: its architecture's preset
        "precision": train["precision"],
        "batch_size": train["batch_size"],
        "lr": train["lr"],
        "threads": train["threads"],
        "eval_batch_size": train.get("eval_batch_size", 32),
        "eval_tokens": merged["eval"].get("max_tokens") or 262144,
        "budget": max(merged["study"]["budgets"]),
        "epochs": train["epochs"],
        "chunk": merged["chunk"]["length"],
        "plan": merged.get("plan", {}),
        "matmul_size": merged["profile"]["matmul_size"],
        "vocab": VOCAB,
        "compile": True,  # the GPU configs' compile: auto compiles a CUDA study this long
    }


def fake_eval_tokens(seconds_per_token: float, period_s: float, margin: float = FAKE_EVAL_MARGIN) -> int:
    """The fake stack's evaluation size, in whole 64-token chunks: ``margin`` times the MIN_COUNTER_PERIODS updates of
    the fake counter the trial refuses to measure below, at this machine's measured pace."""
    need_s = margin * MIN_COUNTER_PERIODS * period_s
    return 64 * max(1, math.ceil(need_s / seconds_per_token / 64 - 1e-9))  # 12 500.000000000002 chunks are 12 500


def eval_seconds_per_token(s: dict[str, Any], probe_tokens: int = 4096, repeats: int = 3) -> float:
    """This machine's pace for the fake stack's evaluation: the fastest of a few evaluations of its model (the
    trial's own code, ``train.evaluate``) over ``probe_tokens`` random tokens, after one to warm up."""
    from tokenwatt.training.model import build_model, preset_sizes
    from tokenwatt.training.train import evaluate

    torch.set_num_threads(s["threads"])
    tokenizer = {"vocab_size": s["vocab"], "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    model = build_model(preset_sizes(s["preset"], {}, tokenizer, 64), seed=1)
    probe = chunks(probe_tokens // 64, s["vocab"], seed=2)
    ids = torch.tensor(probe["input_ids"].to_list())
    mask = torch.tensor(probe["attention_mask"].to_list())
    times = []
    for _ in range(repeats + 1):
        t = time.perf_counter()
        evaluate(model, ids, mask, torch.device("cpu"), s["precision"], s.get("eval_batch_size", 32))
        times.append(time.perf_counter() - t)
    return min(times[1:]) / probe_tokens


def stack_trial(s: dict[str, Any], args: argparse.Namespace, nvml: Any, steps: int) -> tuple[dict, pl.DataFrame]:
    """A shortened trial of the study's stack through ``run_trial``, the workflow's own code path."""
    spec, trial_data = stack_spec(s, args, steps)
    metrics, _, steps_table, _ = trial_module.run_trial(spec, trial_data, log=lambda line: None, nvml=nvml)
    return metrics, steps_table


def stack_spec(s: dict[str, Any], args: argparse.Namespace, steps: int) -> tuple[TrialSpec, TrialData]:
    """The shortened trial's spec and data."""
    n_eval = math.ceil(s["eval_tokens"] / 64)
    data, evals = chunks(steps * s["batch_size"], s["vocab"]), chunks(n_eval, s["vocab"], seed=1)
    train = dict(
        epochs=1,
        batch_size=s["batch_size"],
        lr=s["lr"],
        weight_decay=0.0,
        precision=s["precision"],
        device=args.device,
        threads=s["threads"],
        log_every=max(1, steps // 4),
        eval_batch_size=s["eval_batch_size"],
        on_divergence="record",
        compile=s["compile"],
        compile_min_steps=1,
    )
    budget = steps * s["batch_size"] * 64
    spec = TrialSpec(
        budget=budget,
        trial=1,
        cell=f"b{budget}",
        model={"source": "config", "preset": s["preset"], "overrides": {}, "implementation": "native"},
        train=TrainSettings.from_config(train, seed=1),
        evaluation=EvalSchedule(points=3, first_fraction=0.3, max_tokens=s["eval_tokens"]),
        meter=MeterSettings(
            kind="nvml",
            interval_s=0.1,
            target_samples=120,
            idle_seconds=args.idle_s,
            cpu_tdp_w=1.0,
            rapl_root="/nonexistent",
            cooldown_s=0,
            cooldown_below_c=None,
            cooldown_timeout_s=0,
        ),
        check=ThroughputCheck(matmul_size=s["matmul_size"], window_s=0.2, windows=2),
    )
    trial_data = TrialData(
        subset={"chunk_ids": list(range(len(data))), "n_chunks": len(data), "real_tokens": len(data) * 64},
        train_chunks=data,
        eval_chunks=evals,
        tokenizer={"vocab_size": s["vocab"], "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    )
    return spec, trial_data


def two_devices(s: dict[str, Any], args: argparse.Namespace, nvml: Any) -> list[Check]:
    """The shortened trial on one GPU and as two ranks on the first two visible GPUs, both through ``launch.py`` (the
    workflow's path), at a global batch of at least 2 (each rank a share)."""
    if args.fake_nvml or torch.cuda.device_count() < 2:
        why = "not run against the fake NVML" if args.fake_nvml else f"{torch.cuda.device_count()} GPU visible"
        return [Check("two devices", f"skipped ({why})", "two GPUs", None)]
    spec, data = stack_spec({**s, "batch_size": max(2, s["batch_size"])}, args, args.steps)
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        data.train_chunks.write_parquet(folder / "train.parquet")
        data.eval_chunks.write_parquet(folder / "eval.parquet")
        (folder / "subset.json").write_text(json.dumps({"budget": spec.budget, "trial": 1, **data.subset}))
        (folder / "tokenizer").mkdir()
        (folder / "tokenizer" / "tokenwatt.json").write_text(json.dumps(data.tokenizer))
        files = {
            k: str(folder / v)
            for k, v in (
                ("subset", "subset.json"),
                ("train", "train.parquet"),
                ("eval", "eval.parquet"),
                ("tokenizer", "tokenizer"),
            )
        }
        runs = {}
        for n in (1, 2):
            try:
                runs[n] = run_on_devices(
                    dataclasses.replace(spec, train=dataclasses.replace(spec.train, devices=n)),
                    files,
                    lambda line: None,
                )[0]
            except TrainingError as err:
                return [Check(f"two devices: the study stack on {n} rank(s)", str(err)[:120], "trains", False)]
    one, two = runs[1], runs[2]
    uuids = [r["device_uuid"] for r in two["ranks"]]
    known = all(_try(lambda u=u: nvml.nvmlDeviceGetHandleByUUID(u)) is not None for u in uuids)
    energies = [r["energy_j"] for r in two["ranks"]]
    loss = abs(two["final_train_loss"] / one["final_train_loss"] - 1)
    per_step = lambda m, k: m[k] / m["steps"]  # noqa: E731
    return [
        Check(
            "two devices: each rank's GPU by UUID", ", ".join(uuids), "two, both NVML's", len(set(uuids)) == 2 and known
        ),
        Check("two devices: ranks' energy, max ÷ min", f"{max(energies) / min(energies):.3f}", "", None),
        Check(
            "two devices: final train loss vs one", f"{100 * loss:.3f} %", "< 1 % (sums in another order)", loss < 0.01
        ),
        Check("two devices: s/step two ÷ one", f"{per_step(two, 'train_s') / per_step(one, 'train_s'):.3f}", "", None),
        Check(
            "two devices: J/step two ÷ one", f"{per_step(two, 'energy_j') / per_step(one, 'energy_j'):.3f}", "", None
        ),
    ]


def stack(s: dict[str, Any], metrics: dict[str, Any], device: torch.device, period_s: float) -> list[Check]:
    out = []
    if device.type == "cuda":
        reserved = torch.cuda.max_memory_reserved(device) / 2**30
        total = torch.cuda.get_device_properties(device).total_memory / 2**30
        out.append(
            Check("peak memory reserved", f"{reserved:.1f} of {total:.1f} GiB", "<= 90 %", reserved <= 0.9 * total)
        )
    else:
        out.append(Check("peak memory reserved", "not measured on a CPU", "-", None))
    s_per_step = metrics["train_s"] / metrics["steps"]
    # Full 64-token chunks: the fewest steps a budget takes (a padded chunk holds fewer real tokens).
    study_steps = math.ceil(s["budget"] * s["epochs"] / (s["chunk"] * s["batch_size"]))
    fixed_s = metrics["run_s"] - metrics["train_s"]
    projected_min = (s_per_step * study_steps + fixed_s) / 60
    limit = trial_runtime_min(s["budget"], s["epochs"], s["plan"])
    on_gpu = device.type == "cuda"
    # Judged on a GPU only: a CPU standing in for one (the fake NVML) projects the GPU study at its own pace, so
    # its verdict would say how fast the test machine is, not whether the GPU study fits its time limit.
    out.append(
        Check(
            f"s/step × {study_steps:,} steps",
            f"{s_per_step:.4f} s -> {projected_min:,.0f} min",
            f"<= the time limit, {limit} min" + ("" if on_gpu else " on a GPU; a CPU is not judged"),
            projected_min <= limit if on_gpu else None,
        )
    )
    tokens_per_s = metrics["real_tokens"] / metrics["train_s"]
    out.append(Check("plan.tokens_per_s of this stack", f"{tokens_per_s:,.0f}", "set it in the config", None))
    skips = metrics["grad_scaler_skips"]
    out.append(
        Check(
            "GradScaler skipped steps",
            f"{skips} of {metrics['steps']}",
            "<= 1 %",
            skips is not None and skips <= 0.01 * metrics["steps"],
        )
    )
    evals = [w for w in metrics["windows"] if w["name"].startswith("eval_") and w["name"] != "eval_final"]
    shortest = min(w["duration_s"] for w in evals)
    need = MIN_COUNTER_PERIODS * period_s
    out.append(
        Check(
            "shortest evaluation window", f"{shortest:.3f} s", f">= {need:.3f} s (10 counter periods)", shortest >= need
        )
    )
    dynamic = metrics["energy_j"] - metrics["idle_power_w"] * metrics["duration_s"]
    out.append(
        Check(
            "energy above idle",
            f"{dynamic:,.1f} J ({dynamic / metrics['energy_j']:.1%} of training)",
            "> 0",
            dynamic > 0,
        )
    )
    return out


def throughput(device: torch.device, precisions: list[str], nvml: Any, fake: bool) -> list[Check]:
    name = "cpu" if fake else torch.cuda.get_device_name(device)
    peaks = next((peaks for fragment, peaks in DATASHEET if fragment in name), {})
    out = []
    for precision in precisions:
        profile = profile_device(
            device_name=str(device),
            precision=precision,
            threads=1,
            size=512 if fake else 8192,
            window_s=0.05 if fake else 0.5,
            windows=5 if fake else 10,
            warmup_s=0.1 if fake else 3.0,
            nvml=None if fake else nvml,
            log=lambda line: None,
        )
        measured, peak = profile["cs_tflops"], peaks.get(precision)
        if peak is None:
            out.append(Check(f"CS_TFLOPS {precision}", f"{measured:.4g} TFLOP/s", f"no datasheet row for {name}", None))
            continue
        out.append(
            Check(
                f"CS_TFLOPS {precision} ÷ datasheet",
                f"{measured:.4g} ÷ {peak:g} = {measured / peak:.2f}",
                f"{PEAK_BAND[0]}-{PEAK_BAND[1]}",
                within(measured / peak, PEAK_BAND),
            )
        )
    return out


def repeat(first: tuple[dict, pl.DataFrame], second: tuple[dict, pl.DataFrame], on_gpu: bool) -> list[Check]:
    """The same seed twice. Energy per step is judged on a GPU only: a CPU standing in for one (the fake NVML) draws
    in proportion to its CPU seconds, and those of the same steps vary by tens of % on a shared machine."""
    (m1, s1), (m2, s2) = first, second
    same = s1["loss"].to_list() == s2["loss"].to_list()
    ratio = (m2["energy_j"] / m2["steps"]) / (m1["energy_j"] / m1["steps"])
    band = (1 - REPEAT_TOLERANCE, 1 + REPEAT_TOLERANCE)
    return [
        Check("same seed: loss curve", "bit-equal" if same else "differs", "bit-equal", same),
        Check(
            "same seed: energy per step",
            f"{ratio:.4f}",
            f"{band[0]:.2f}-{band[1]:.2f}" + ("" if on_gpu else " on a GPU; a CPU is not judged"),
            within(ratio, band) if on_gpu else None,
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config/paper.yaml", help="the study whose stack is validated")
    ap.add_argument("--steps", type=int, default=300, help="training steps of the shortened trial")
    ap.add_argument("--settle-s", type=float, default=60.0, help="seconds idle before the idle window")
    ap.add_argument("--window-s", type=float, default=5.0, help="seconds of each closure window")
    ap.add_argument("--idle-s", type=float, default=5.0, help="the shortened trial's idle baseline")
    ap.add_argument("--fake-nvml", action="store_true", help="CPU and the suite's fake NVML: the script's own test")
    ap.add_argument(
        "--fake-period-s",
        type=float,
        default=None,
        help="the update period the meter assumes for the fake counter (default: the fake sensor's, 0.01 s); k times "
        "it plays a CPU k times faster: what is timed against the counter spans k times fewer of its periods",
    )
    ap.add_argument("--out", default=".", help="folder for gpu_validate.json")
    args = ap.parse_args()
    if args.fake_period_s is not None and (not args.fake_nvml or args.fake_period_s <= 0):
        ap.error(f"--fake-period-s {args.fake_period_s}: give a period > 0 s, and only with --fake-nvml")
    if args.fake_nvml:
        sys.path.insert(0, str(ROOT / "tests"))
        from fake_nvml import FakeNvml

        nvml = FakeNvml({FAKE_UUID: 1.0}, load_w=100.0)
        device, args.device = torch.device("cpu"), "cpu"
        # The fake sensor updates every load_update_s (--fake-period-s, when given, is the period the meter takes it
        # for: k times the sensor's plays a CPU k times faster), and a CPU trial has no CUDA UUID: the fake GPU
        # stands for it.
        NvmlReader.update_period_s = nvml.load_update_s if args.fake_period_s is None else args.fake_period_s
        session_module.gpu_uuid = lambda device, nvml=None: FAKE_UUID
        uuid = FAKE_UUID
    else:
        import pynvml as nvml

        assert torch.cuda.is_available(), "no CUDA device visible: run this on the GPU machine (or --fake-nvml)"
        device, args.device = torch.device("cuda", 0), "cuda"
        uuid = gpu_uuid(device, nvml)
    settings = study_settings(ROOT / args.config)
    if args.fake_nvml:
        settings.update(FAKE_STACK)
        settings["eval_tokens"] = fake_eval_tokens(eval_seconds_per_token(settings), NvmlReader.update_period_s)
    checks = identity(device, nvml, uuid, args.fake_nvml)
    _print(checks)
    period = NvmlReader.update_period_s
    if checks[0].ok:
        found, measured = closure(device, nvml, uuid, args.settle_s, args.window_s)
        _print(found)
        checks += found
        period = max(period, measured)
        runs = []  # the first warms up (compile, kernel choice, caches); the next two are compared
        for _ in range(3):
            try:
                runs.append(stack_trial(settings, args, nvml, args.steps))
            except TrainingError as err:
                _print(found := [Check("the study stack", str(err)[:120], "trains", False)])  # its line, as every check
                checks += found
                break
        if runs:
            _print(found := stack(settings, runs[0][0], device, period))
            checks += found
        if len(runs) == 3:
            _print(found := repeat(*runs[1:], on_gpu=device.type == "cuda"))
            checks += found
        if runs:
            _print(found := two_devices(settings, args, nvml))
            checks += found
    precisions = ["fp32"] if args.fake_nvml else [p for p in PRECISIONS if p != "bf16-mixed" or _bf16(device)]
    _print(found := throughput(device, precisions, nvml, args.fake_nvml))
    checks += found
    passed = all(c.ok is not False for c in checks)
    Path(args.out, "gpu_validate.json").write_text(json.dumps([asdict(c) for c in checks], indent=1))
    print("GPU VALIDATION", "PASSED" if passed else "FAILED", flush=True)
    sys.exit(0 if passed else 1)


def _bf16(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def _print(checks: list[Check]) -> None:
    for c in checks:
        print(c.line(), flush=True)


if __name__ == "__main__":
    main()
