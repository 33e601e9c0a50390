"""The terminal lines of a running study: each trial's end, and the time and energy still to go."""

import yaml
from tokenwatt.common.codeclosure import closure
from tokenwatt.plan.config import checked_config, load_schema
from tokenwatt.presentation.progress import profile_estimate, study_progress, trial_finished, trial_started
from trial_records import QUALITY, raw_record
from workflow_helpers import ROOT

# quality.* as the schema names them (the two derived keys come from meter.* and profile.*)
QUALITY_KEYS = {k: v for k, v in QUALITY.items() if k not in ("start_below_c", "profile_cv_max")}


def test_a_trial_announces_its_start_and_its_result_in_one_line_each():
    assert trial_started(10_000, 3) == "▶ 10K · trial 3: started (progress lines in its log)"
    line = trial_finished(
        raw_record(10_000, 3, train_s=2.5, real_tokens=30_000, power_mean_w=32.0, energy_j=80.0, eval_loss=2.5)
    )
    assert (
        line
        == "■ 10K · trial 3: 12,000 tokens/s, 32.0 W estimated, 80.0 J estimated, eval loss 2.5000, 2.5 s training / 5.0 s in all"
    )


def test_a_diverged_trial_says_so_in_its_line():
    line = trial_finished(raw_record(1000, 1, status="diverged", diverged_at_step=7, eval_loss=None))
    assert "DIVERGED at step 7" in line


def test_the_time_and_energy_to_go_come_from_finished_trials_of_the_same_cell():
    expected = {("b1000", 1): 1000, ("b1000", 2): 1000, ("b2000", 1): 2000, ("b2000", 2): 2000}
    finished = {
        ("b1000", 1): raw_record(1000, 1, run_s=10.0, real_tokens=3000, energy_j=30.0),
        ("b2000", 1): raw_record(2000, 1, run_s=30.0, real_tokens=6000, energy_j=90.0),
    }
    line = study_progress(finished, expected)
    # to go: one 1000-trial (10 s, 30 J) and one 2000-trial (30 s, 90 J)
    assert line == "  study: 2 of 4 trials done; ~0.7 min and ~0.12 kJ of estimated energy to go"


def test_a_cell_without_finished_trials_is_scaled_from_the_others_by_tokens():
    line = study_progress(
        {("b1000", 1): raw_record(1000, 1, run_s=10.0, real_tokens=3000, energy_j=30.0)},
        {("b1000", 1): 1000, ("b2000", 1): 2000},
    )
    assert "~0.3 min and ~0.06 kJ" in line  # 2000 tokens per epoch: twice the tokens of the 1000-trial


def test_a_cell_whose_model_level_scales_its_budget_is_estimated_by_the_tokens_it_is_asked_for():
    line = study_progress(
        {("model=a/b1000", 1): raw_record(1000, 1, run_s=10.0, real_tokens=3000, energy_j=30.0)},
        {("model=a/b1000", 1): 1000, ("model=b/b1000", 1): 500},  # model b: budget_scale 0.5
    )
    assert "~0.1 min and ~0.01 kJ" in line  # half the tokens of the finished trial: 5 s, 15 J


def test_a_cell_without_finished_trials_is_estimated_from_those_sharing_its_model_level():
    finished = {
        ("model=a/lr=0.01/b1000", 1): raw_record(1000, 1, run_s=10.0, real_tokens=1000, energy_j=30.0),
        ("model=b/lr=0.01/b1000", 1): raw_record(1000, 1, run_s=40.0, real_tokens=1000, energy_j=120.0),
    }
    for key in finished:
        finished[key]["cell"] = key[0]
    expected = {**{k: 1000 for k in finished}, ("model=b/lr=0.1/b1000", 1): 1000}
    assert "~0.7 min and ~0.12 kJ" in study_progress(finished, expected)  # model b's pace, not a's or the median


def test_before_any_trial_finishes_the_time_to_go_is_unknown_and_after_the_last_nothing_is_left():
    assert study_progress({}, {("b1000", 1): 1000}).endswith("time to go unknown until a trial finishes.")
    assert study_progress({("b1000", 1): raw_record(1000, 1)}, {("b1000", 1): 1000}) == "  study: 1 of 1 trials done."


def test_editing_the_terminal_lines_never_retrains_a_trial():
    scripts = ROOT / "workflow" / "scripts"
    assert "tokenwatt/presentation/progress.py" not in [
        p.relative_to(scripts).as_posix() for p in closure(scripts / "train_trial.py", scripts)
    ]


def test_the_end_line_carries_a_first_quality_look_from_the_trials_own_traces():
    import numpy as np
    import polars as pl
    from tokenwatt.presentation.progress import first_look
    from trial_records import steady_steps, steady_trace

    stepped = pl.DataFrame(
        {"t_s": np.arange(100) * 0.05, "power_w": [32.0] * 50 + [12.0] * 50, "temperature_c": [None] * 100},
        schema={"t_s": pl.Float64, "power_w": pl.Float64, "temperature_c": pl.Float64},
    )
    config = {"quality": QUALITY_KEYS, "meter": {"cooldown_below_c": None}, "profile": {"max_cv": 0.1}}
    look = first_look(raw_record(1000, 1), steady_trace(), steady_steps(), config)
    assert look.startswith("quality ok so far (throughput and matmul checks are judged after the study")
    assert first_look(raw_record(1000, 1), stepped, steady_steps(), config).startswith("FLAGGED: power stepped by")
    assert trial_finished(raw_record(1000, 1), "quality ok so far").endswith("; quality ok so far")
    unchecked = {**config, "profile": {"max_cv": 0.1, "check_windows": 0}}  # no matmul checks: none to be judged
    assert first_look(raw_record(1000, 1), steady_trace(), steady_steps(), unchecked) == (
        "quality ok so far (throughput is judged after the study, against the other trials)"
    )


def test_a_diverged_trial_without_tokens_gets_no_quality_look_and_no_error():
    from tokenwatt.presentation.progress import first_look
    from trial_records import steady_steps, steady_trace

    m = raw_record(1000, 1, status="diverged", diverged_at_step=2, eval_loss=None, real_tokens=0)
    assert first_look(m, steady_trace(), steady_steps(), {}) == "not judged (the trial diverged)"
    assert "0 tokens/s" in trial_finished(m)


def _default_with(plan: dict) -> dict:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["plan"] = plan
    return checked_config(config, load_schema(ROOT / "workflow/schemas/config.schema.yaml"), [], [])


def test_a_measured_device_profile_rescales_the_pilots_time_to_this_machine_before_the_first_trial():
    config = _default_with({"tokens_per_s": 10_000, "cs_tflops": 0.05, "fixed_s": 10, "source": "a pilot"})
    tokens = sum(config["study"]["budgets"]) * config["study"]["trials"] * config["train"]["epochs"]
    trials = len(config["study"]["budgets"]) * config["study"]["trials"]
    line = profile_estimate(config, "", 0.025)  # this device: half the pilot's matmul throughput
    seconds = tokens / 5_000 + trials * 10
    assert f"~{seconds / 60:.1f} min for {trials} trials" in line and "5,000 tokens/s" in line
    assert "ESTIMATE" in line and "a pilot" in line


def test_without_a_pilot_to_rescale_the_profile_says_nothing_of_time():
    assert profile_estimate(_default_with({"tokens_per_s": 10_000}), "", 0.05) is None
    assert profile_estimate(_default_with({}), "", 0.05) is None


def test_a_device_unlike_the_pilots_machine_gets_no_rescaled_time():
    config = _default_with({"tokens_per_s": 10_000, "cs_tflops": 0.05})
    assert "too unlike it" in profile_estimate(config, "", 400.0)  # a GPU against a CPU pilot


def test_a_pilot_of_another_workload_is_not_used():
    from tokenwatt.plan.preview import pilot_of, workload_key

    config = _default_with({"tokens_per_s": 10_000, "cs_tflops": 0.05, "workload": "0123456789ab"})
    assert pilot_of(config)[0] == {} and "another workload" in pilot_of(config)[1]
    assert profile_estimate(config, "", 0.05) is None
    config["plan"]["workload"] = workload_key(config)
    assert pilot_of(config)[0]["tokens_per_s"] == 10_000


def test_a_pilot_does_not_apply_to_a_study_that_adds_a_design_factor_over_its_config():
    from tokenwatt.plan.preview import pilot_of, workload_key

    config = _default_with({"tokens_per_s": 10_000})
    config["plan"]["workload"] = workload_key(config)
    config["design"] = {"batch_size": {"one": 1, "four": 4}}
    assert pilot_of(config)[0] == {}
