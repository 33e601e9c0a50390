"""The GPU path before any GPU runs it: configs that stand on their own, the plan's refusals, SLURM routing."""

import re

import pytest
import yaml
from tokenwatt.plan.config import ConfigError, load_schema, validate_config
from tokenwatt.plan.preview import RUNTIME_UNKNOWN_MIN, trial_runtime_min
from workflow_helpers import clone, snakemake

GPU_CONFIGS = ["paper.yaml", "paper-model-size.yaml", "paper-scaling.yaml"]


def _yaml(root, name):
    return yaml.safe_load((root / "config" / name).read_text())


@pytest.fixture(scope="module")
def schema(root):
    return load_schema(root / "workflow/schemas/config.schema.yaml")


@pytest.mark.parametrize("name", GPU_CONFIGS)
def test_a_gpu_config_inherits_no_evaluation_or_quality_key_from_the_cpu_default(root, name):
    """--configfile overlays config/config.yaml: a key the GPU config leaves out takes the CPU study's value."""
    default, gpu = _yaml(root, "config.yaml"), _yaml(root, name)
    for section in ("eval", "quality"):
        inherited = set(default[section]) - set(gpu.get(section, {}))
        assert not inherited, f"{name} inherits {section}.{sorted(inherited)} from config/config.yaml"


@pytest.mark.parametrize("name", GPU_CONFIGS)
def test_a_gpu_config_bounds_the_cooldown_a_trial_may_wait(root, name):
    meter = _yaml(root, name)["meter"]
    assert meter["cooldown_s"] + meter["cooldown_timeout_s"] <= 180  # 150 trials: at most 7.5 h of waiting


def _nvml_study(root, max_tokens, tokens_per_s, kind="nvml"):
    cfg = _yaml(root, "config.yaml")
    cfg["meter"]["kind"] = kind
    cfg["eval"] = {"points": 8, "max_tokens": max_tokens}
    cfg["plan"] = {"tokens_per_s": tokens_per_s}
    return cfg


def test_the_plan_refuses_an_evaluation_too_short_for_the_nvml_counter_by_its_key(root, schema):
    # 4 096 tokens at 3 × 700 tokens/s: ~2 s, long enough; at 3 × 70 000 tokens/s: 20 ms, not.
    validate_config(_nvml_study(root, 4096, 700), schema)
    with pytest.raises(ConfigError, match=r"eval.max_tokens: .* 20 ms \(estimated at 3 × plan.tokens_per_s"):
        validate_config(_nvml_study(root, 4096, 70_000), schema)


def test_the_plan_leaves_short_evaluations_a_cpu_meter_resolves_alone(root, schema):
    validate_config(_nvml_study(root, 4096, 70_000, kind="estimate"), schema)


def test_a_trials_time_limit_is_the_plans_estimate_with_room():
    # 2M tokens × 3 epochs at 600 tokens/s and 300 s fixed: 10 300 s, × 1.5 = 258 min, + 15.
    assert trial_runtime_min(2_000_000, 3, {"tokens_per_s": 600, "fixed_s": 300}) == 273


def test_a_trials_time_limit_counts_the_pauses_its_checkpoints_make():
    from tokenwatt.plan.disk import CHECKPOINT_BYTES_PER_PARAMETER, CHECKPOINT_BYTES_PER_S, checkpoint_seconds

    tinyllama = 1_100_048_384
    # a checkpoint every 200K of 6M tokens: 30 saves and the warning's own, each 13.2 GB at the plan's write rate
    every = checkpoint_seconds(tinyllama, 6_000_000, 200_000)
    assert every == 31 * CHECKPOINT_BYTES_PER_PARAMETER * tinyllama / CHECKPOINT_BYTES_PER_S
    assert checkpoint_seconds(tinyllama, 6_000_000, 0) == pytest.approx(every / 31)  # only the warning's
    assert checkpoint_seconds(None, 6_000_000, 200_000) == 0.0  # a pretrained model's size is not in the config
    pilot = {"tokens_per_s": 600, "fixed_s": 300}
    assert trial_runtime_min(2_000_000, 3, pilot, every) == 273 + round(1.5 * every / 60)


def test_a_trials_time_limit_without_a_pilot_is_the_fallback():
    assert trial_runtime_min(2_000_000, 3, {"tokens_per_s": None}) == RUNTIME_UNKNOWN_MIN


def test_the_slurm_profile_routes_the_device_profile_as_the_trials(root):
    resources = yaml.safe_load((root / "profiles/slurm/config.yaml").read_text())["set-resources"]
    assert resources["device_profile"] == resources["train_trial"]
    assert not {"runtime", "cpus_per_task"} & set(resources["train_trial"])  # the rules' derived values stand


def test_the_slurm_profile_warns_a_trial_before_its_time_limit_with_time_left_to_checkpoint(root):
    from tokenwatt.plan.preview import RUNTIME_EXTRA_MIN

    extra = yaml.safe_load((root / "profiles/slurm/config.yaml").read_text())["set-resources"]["train_trial"]
    warned = re.fullmatch(r"--signal=TERM@(\d+)", extra["slurm_extra"])
    # SIGTERM that many seconds before the limit; the shortest limit a trial gets is RUNTIME_EXTRA_MIN past its estimate
    assert warned and 60 <= int(warned[1]) <= RUNTIME_EXTRA_MIN * 60 / 2


def _jobs(out: str, rule: str) -> list[dict[str, str]]:
    """The wildcards and resources Snakemake's dry run lists for each job of ``rule``, as one dict per job."""
    jobs = []
    for block in re.findall(rf"rule {rule}:\n(.*?)\n\[", out, flags=re.S):
        fields = re.findall(r"(?:resources|wildcards): (.*)", block)
        jobs.append(dict(kv.split("=", 1) for line in fields for kv in line.split(", ")))
    return jobs


@pytest.mark.workflow
def test_slurm_puts_every_gpu_job_on_the_gpu_type_with_the_trials_threads_and_a_derived_time_limit(tmp_path):
    work = clone(tmp_path)
    profile = work / "profiles/slurm/config.yaml"
    profile.write_text(profile.read_text().replace("# gpu_model: a100", "gpu_model: a100"))
    (work / "own.yaml").write_text("plan: {tokens_per_s: 10, fixed_s: 0, workload: null}\ntrain: {threads: 3}\n")
    proc = snakemake(
        work,
        *("-n", "--profile", "profiles/slurm", "--workflow-profile", "none"),
        *("--configfile", ".test/config/config.yaml", "own.yaml"),
    )
    (profile_job,) = _jobs(proc.stdout + proc.stderr, "device_profile")
    trials = _jobs(proc.stdout + proc.stderr, "train_trial")
    assert profile_job["gpu_model"] == "a100" and profile_job["cpus_per_task"] == "3"
    assert len(trials) == 6 and all(t["gpu_model"] == "a100" and t["cpus_per_task"] == "3" for t in trials)
    # 1 epoch at 10 tokens/s and the warning signal's checkpoint (a few ms for this model), × 1.5, + 15 min:
    # 1 000 tokens 100 s → 3 + 15 min; 2 000 tokens just over 200 s → 6 + 15.
    assert {t["cell"]: t["runtime"] for t in trials} == {"b1000": "18", "b2000": "21"}


def _trials(**columns):
    import polars as pl

    return pl.DataFrame(columns)


def test_the_report_explains_energy_above_idle_at_or_below_zero_with_its_figures():
    from tokenwatt.presentation.meter_notes import meter_warnings

    trials = _trials(
        dynamic_energy_j=[-3.0, 40.0],
        power_mean_w=[123.0, 180.0],
        idle_power_w=[125.0, 125.0],
        idle_after_s=[61.0, 61.0],
    )
    (warning,) = meter_warnings(trials)
    assert "1 trial(s) have energy above idle at or below zero" in warning
    assert "123.0 W" in warning and "125.0 W" in warning and "61 s after" in warning and "meter.cooldown_s" in warning


def test_the_report_warns_when_trials_read_power_two_ways():
    from tokenwatt.presentation.meter_notes import meter_warnings

    (warning,) = meter_warnings(_trials(power_reading=["instant", "average"]))
    assert "2 different NVML readings" in warning and "RMS power" in warning


def test_the_report_names_a_mig_slice_its_whole_gpu_and_the_meter_choice():
    from tokenwatt.presentation.meter_notes import meter_provenance, meter_warnings

    trials = _trials(
        mig=[True],
        mig_parent_uuid=["GPU-parent"],
        meter_choice=["meter.kind auto chose nvml"],
        power_reading_source=["one-second average (nvmlDeviceGetPowerUsage)"],
    )
    rows = dict(meter_provenance(trials))
    assert (
        rows["meter choice"] == "meter.kind auto chose nvml" and "nvmlDeviceGetPowerUsage" in rows["NVML power reading"]
    )
    assert "GPU-parent" in rows["MIG"] and "Trained on a MIG slice" in meter_warnings(trials)[0]


def test_a_cpu_study_gets_no_gpu_warning():
    from tokenwatt.presentation.meter_notes import meter_warnings

    assert (
        meter_warnings(_trials(meter=["estimate"], dynamic_energy_j=[5.0], power_mean_w=[9.0], idle_power_w=[1.0]))
        == []
    )


@pytest.fixture
def gpu_validate(root, monkeypatch):
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    import gpu_validate

    return gpu_validate


def test_the_counter_is_compared_with_the_polled_power_over_the_same_windows_only(gpu_validate):
    import polars as pl

    # Idle at 100 W, training at 200 W; the training window's counter read 200 J over its second.
    trace = pl.DataFrame({"t_s": [0.0, 0.5, 1.0, 1.5, 2.0], "power_w": [100.0, 100.0, 200.0, 200.0, 200.0]})
    metrics = {
        "windows": [
            {"name": "idle", "start_s": 0.0, "end_s": 1.0, "energy_j": 100.0},
            {"name": "train_1", "start_s": 1.0, "end_s": 2.0, "energy_j": 200.0},
        ]
    }
    assert gpu_validate.window_closure(metrics, trace, "instant", "train") == pytest.approx(1.0)


def test_nvidia_smi_is_asked_for_the_physical_gpu_cuda_device_0_is(gpu_validate, monkeypatch):
    import subprocess
    from types import SimpleNamespace

    asked = []
    monkeypatch.setattr(
        subprocess, "run", lambda cmd, **kw: asked.append(cmd[cmd.index("-i") + 1]) or SimpleNamespace(stdout="GPU-x\n")
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert gpu_validate.smi_uuid(0) == "GPU-x" and asked == ["2"]


# The update period the meter assumes for the fake counter against the fake sensor's own 0.01 s: k times longer plays
# a CPU k times faster, since everything the validation times against the counter then spans k times fewer periods.
SIMULATED_CPU = {"as is": None, "3x faster": 0.03, "3x slower": 0.01 / 3}


@pytest.mark.workflow
@pytest.mark.parametrize("period_s", SIMULATED_CPU.values(), ids=SIMULATED_CPU.keys())
def test_gpu_validate_passes_on_a_cpu_against_the_fake_nvml_printing_a_banded_line_per_check(root, tmp_path, period_s):
    import json
    import os
    import subprocess

    proc = subprocess.run(
        ["bash", str(root / "benchmarks/gpu_validate.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "FAKE": "1", "OUT": str(tmp_path), **({"FAKE_PERIOD_S": str(period_s)} if period_s else {})},
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[-1] == "GPU VALIDATION PASSED", proc.stdout + proc.stderr[-3000:]
    checks = json.loads((tmp_path / "gpu_validate.json").read_text())
    assert len(lines) == len(checks) + 1 and all(line[:4] in ("PASS", "INFO") for line in lines[:-1])
    names = [c["name"] for c in checks]
    for expected in (
        "CUDA device -> NVML UUID",
        "MIG slice",
        "sum of windows ÷ counter change",
        "counter update period",
        "peak memory reserved",
        "GradScaler skipped steps",
        "shortest evaluation window",
        "energy above idle",
        "same seed: loss curve",
        "same seed: energy per step",
        "CS_TFLOPS fp32",
    ):
        assert expected in names
    assert all(c["band"] for c in checks)


def test_energy_above_idle_at_or_below_zero_with_a_trial_whose_power_was_not_recorded_still_gets_its_sentence():
    import polars as pl
    from tokenwatt.presentation.meter_notes import dynamic_energy_sentence

    trials = pl.DataFrame(
        {
            "dynamic_energy_j": [-1.0, -2.0],
            "power_mean_w": [None, 120.0],
            "idle_power_w": [125.0, 125.0],
        }
    )
    assert "1 trial(s) have energy above idle at or below zero" in dynamic_energy_sentence(trials)


@pytest.mark.parametrize("seconds_per_token", [1e-6, 3e-6, 9e-6])
def test_the_fake_evaluation_spans_its_margin_of_counter_periods_at_any_measured_pace(gpu_validate, seconds_per_token):
    tokens = gpu_validate.fake_eval_tokens(seconds_per_token, period_s=0.01)
    need_s = gpu_validate.FAKE_EVAL_MARGIN * gpu_validate.MIN_COUNTER_PERIODS * 0.01
    span = tokens * seconds_per_token
    assert tokens % 64 == 0 and need_s * (1 - 1e-9) <= span < need_s + 64 * seconds_per_token  # float to 1e-9
