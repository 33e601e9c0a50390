"""Measurement-quality rules: each one trips on a synthetic trace made to break it, and stays quiet on a steady one."""

import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.quality import (
    RULES,
    Unjudged,
    assess,
    device_load,
    diagnose,
    power_step,
    profile_verdict,
    steady_deviation,
    trial_pace,
    window_rates,
)

Q = dict(
    throughput_tolerance=0.1,
    steady_tolerance=0.25,
    steady_window=3,
    check_tolerance=0.15,
    profile_cv_max=0.1,
    idle_tolerance=0.25,
    idle_floor_w=2.0,
    power_step_tolerance=0.25,
    power_step_window=5,
    power_step_window_s=0.5,
    min_samples=60,
    max_interval_ratio=1.5,
    start_below_c=None,
)


def steps(rates, window_steps=10, tokens_per_step=None):
    """A loss curve of ``window_steps`` steps per window whose windows ran at ``rates`` steps per second (the first
    window is warm-up); ``tokens_per_step``: the real tokens of each window's steps (default 100)."""
    per_step = np.full(len(rates), 100) if tokens_per_step is None else np.asarray(tokens_per_step)
    elapsed = np.cumsum(window_steps / np.asarray(rates, dtype=float))
    done = np.arange(1, len(rates) + 1) * window_steps
    return pl.DataFrame(
        {"step": done, "tokens": np.cumsum(per_step * window_steps).astype(np.int64), "elapsed_s": elapsed}
    )


def trace(power, temperature=None, interval=0.5):
    n = len(power)
    return pl.DataFrame(
        {"t_s": np.arange(n) * interval, "power_w": np.asarray(power, dtype=float), "temperature_c": [temperature] * n},
        schema={"t_s": pl.Float64, "power_w": pl.Float64, "temperature_c": pl.Float64},
    )


def record(budget=1000, trial=1, idle_w=10.0, samples=100, checks=(1.0, 1.0), levels=None, **extra):
    levels = levels or {}
    return {
        "budget": budget,
        "trial": trial,
        "levels": levels,
        "cell": "".join(f"{f}={v}/" for f, v in levels.items()) + f"b{budget}",
        "real_tokens": 10_000,
        "train_s": 10.0,
        "idle_power_w": idle_w,
        "meter": "estimate",
        "samples_with_power": samples,
        "interval_requested_s": 0.5,
        "interval_achieved_s": 0.5,
        "sample_errors": 0,
        "check_before_tflops": [checks[0]] * 3,
        "check_after_tflops": [checks[1]] * 3,
        **extra,
    }


STEADY_STEPS = steps([800, 1000, 1010, 990, 1000, 1005, 995])


def paced(rate, warm_up=None):
    """A steady loss curve at ``rate`` steps per second after a warm-up window at ``warm_up`` (default 0.8 × rate)."""
    return steps([warm_up or 0.8 * rate] + [rate] * 6)


STEADY_TRACE = trace(30 + np.sin(np.arange(100)) * 0.5, interval=0.05)


def judge(recs, traces=None, curves=None, reference=1.0, **q):
    n = len(recs)
    settings = {**Q, **q}
    return assess(
        recs, diagnose(recs, traces or [STEADY_TRACE] * n, curves or [STEADY_STEPS] * n, reference, settings), settings
    )


def test_a_steady_trial_like_its_peers_is_ok():
    verdicts = judge([record(trial=t) for t in (1, 2, 3)])
    assert [v["quality"] for v in verdicts] == ["ok"] * 3
    assert all(v["quality_reasons"] == "" for v in verdicts)


def test_a_trial_slower_than_its_series_is_flagged_with_the_size_of_the_gap():
    verdicts = judge([record(trial=t) for t in (1, 2, 3)], curves=[paced(1000), paced(1000), paced(700)])
    assert [v["flag_throughput"] for v in verdicts] == [False, False, True]
    assert "pace 0.70 × the median optimizer steps per second of its series" in verdicts[2]["quality_reasons"]


def test_a_budget_whose_every_trial_ran_slow_is_flagged_against_the_other_budgets():
    """A hog beside every trial of one budget (as the repeatability benchmark's run order can place it): against its
    own condition's median no trial of that budget was slow; against its series every one of them was."""
    budgets = [1000] * 3 + [2000] * 3 + [4000] * 3
    curves = [paced(650)] * 3 + [paced(1000)] * 6
    verdicts = judge([record(budget=b, trial=t % 3 + 1) for t, b in enumerate(budgets)], curves=curves)
    assert [v["flag_throughput"] for v in verdicts] == [True] * 3 + [False] * 6


def test_pace_is_compared_within_its_series_only():
    small, large = {"model": "small"}, {"model": "large"}
    recs = [record(budget=b, trial=t, levels=lv) for lv in (small, large) for b in (1000, 2000) for t in (1, 2)]
    verdicts = judge(recs, curves=[paced(1000)] * 4 + [paced(300)] * 4)
    assert not any(v["flag_throughput"] for v in verdicts)


def test_a_trial_twice_as_fast_scores_what_one_half_as_fast_does():
    slow = judge([record(trial=t) for t in (1, 2, 3)], curves=[paced(1000)] * 2 + [paced(500)])[2]
    fast = judge([record(trial=t) for t in (1, 2, 3)], curves=[paced(1000)] * 2 + [paced(2000)])[2]
    assert slow["flag_throughput"] and fast["flag_throughput"]
    assert judge([record(trial=t) for t in (1, 2, 3)], curves=[paced(1000)] * 2 + [paced(1090)])[2]["quality"] == "ok"


def test_the_warm_up_before_the_first_loss_record_is_left_out_of_the_pace():
    """A short trial spends more of its time warming up: its pace after the first record is its series'."""
    assert trial_pace(paced(1000, warm_up=50)) == pytest.approx(1000.0)
    verdicts = judge([record(trial=t) for t in (1, 2, 3)], curves=[paced(1000)] * 2 + [paced(1000, warm_up=50)])
    assert not any(v["flag_throughput"] for v in verdicts)


def test_a_trial_with_one_loss_record_has_no_pace_and_says_why():
    one = steps([1000])
    assert trial_pace(one) is None
    verdict = judge([record(trial=t) for t in (1, 2, 3)], curves=[paced(1000)] * 2 + [one])[2]
    assert not verdict["flag_throughput"]
    assert verdict["unjudged_throughput"].startswith("its loss records after the first span less than half its steps")


def test_records_after_the_first_that_span_only_the_last_steps_give_no_pace():
    """Recorded every 100 steps, a trial of 104 steps has records at 100 and 104: four steps say nothing of its pace."""
    last_few = pl.DataFrame({"step": [100, 104], "tokens": [38_696, 40_055], "elapsed_s": [5.35, 5.56]})
    assert trial_pace(last_few) is None
    assert trial_pace(last_few.with_columns(pl.Series("step", [50, 104]))) == pytest.approx(54 / 0.21)


def test_the_warm_up_window_is_left_out_of_the_steady_state():
    assert window_rates(steps([100, 1000, 1000, 1000])).tolist() == pytest.approx([1000.0, 1000.0, 1000.0])
    assert steady_deviation(steps([100] + [1000] * 6), 3) == pytest.approx(0.0, abs=1e-9)


def test_a_load_change_mid_trial_shows_as_unsteady_throughput():
    verdicts = judge([record()], curves=[steps([800, 1000, 1000, 1000, 500, 500, 500])])
    assert (
        verdicts[0]["flag_unsteady"]
        and "changed level by 100 % against the level before it" in (verdicts[0]["quality_reasons"])
    )
    assert not judge([record()], curves=[steps([800] + [1000, 1010, 990] * 2)])[0]["flag_unsteady"]


def test_real_tokens_per_step_that_drift_at_a_steady_step_rate_are_not_a_load_change():
    """A curriculum from short to long documents fills more of each padded batch as it goes: real tokens/s rise by
    design while the device's pace (steps per second) holds."""
    growing = steps([800] + [1000] * 6, tokens_per_step=[40, 40, 60, 80, 100, 120, 140])
    assert steady_deviation(growing, 3) == pytest.approx(0.0, abs=1e-9)
    assert not judge([record()], curves=[growing])[0]["flag_unsteady"]


def test_one_slow_loss_curve_window_is_not_a_load_change():
    assert steady_deviation(steps([800, 1000, 1000, 400, 1000, 1000, 1000]), 3) == pytest.approx(0.0, abs=1e-9)


def test_too_few_loss_curve_windows_give_no_steadiness_verdict_and_say_why():
    """Five loss records give four windows, three after the warm-up one: a rolling level of 3 needs 6."""
    assert isinstance(steady_deviation(steps([800, 1000, 500, 600, 700]), 3), Unjudged)
    (verdict,) = judge([record()], curves=[steps([800, 1000, 500, 600, 700])])
    assert not verdict["flag_unsteady"] and verdict["quality"] == "ok"
    assert verdict["unjudged_unsteady"].startswith("5 loss records give 4 paced windows after the first")


def test_a_pace_halved_over_a_third_of_a_trial_is_a_load_change():
    """80 steps/s, then 40 for a third of the windows: against the whole trial's median (the fast level) that was a
    change of 50 %, under the tolerance, and the trial's pace fell to 0.75 × its series' (1.33 × slower), under its
    tolerance too."""
    fast = steps([60] + [80] * 12, window_steps=100)
    slow = steps([60] + [80] * 4 + [40] * 4 + [80] * 4, window_steps=100)
    verdicts = judge(
        [record(trial=t) for t in (1, 2, 3, 4, 5)],
        curves=[fast] * 4 + [slow],
        throughput_tolerance=0.35,
        steady_tolerance=0.75,
    )
    assert [v["flag_unsteady"] for v in verdicts] == [False] * 4 + [True]
    assert not verdicts[4]["flag_throughput"]


def test_a_slow_down_scores_what_the_same_speed_up_does():
    slower = steps([60] + [80] * 4 + [40] * 4 + [80] * 4, window_steps=100)
    faster = steps([60] + [40] * 4 + [80] * 4 + [40] * 4, window_steps=100)
    assert steady_deviation(slower, 3) == pytest.approx(steady_deviation(faster, 3)) == pytest.approx(1.0)


def test_matmul_checks_far_from_the_device_profile_are_flagged():
    verdicts = judge([record(checks=(1.0, 0.7)), record(trial=2, checks=(1.05, 0.95))])
    assert verdicts[0]["flag_matmul_check"] and "after -30 %" in verdicts[0]["quality_reasons"]
    assert not verdicts[1]["flag_matmul_check"]


def test_idle_power_far_from_the_studys_median_is_flagged():
    verdicts = judge([record(trial=t, idle_w=40.0) for t in (1, 2, 3)] + [record(trial=4, idle_w=55.0)])
    assert [v["flag_idle_power"] for v in verdicts] == [False, False, False, True]


def test_idle_power_within_the_absolute_floor_is_not_flagged():
    verdicts = judge([record(trial=1, idle_w=0.2), record(trial=2, idle_w=0.3), record(trial=3, idle_w=1.5)])
    assert not any(v["flag_idle_power"] for v in verdicts)


def test_a_step_in_the_power_trace_is_flagged_and_a_single_spike_is_not():
    step = trace([32.0] * 50 + [12.0] * 50, interval=0.05)
    spike = trace([32.0] * 50 + [90.0] + [32.0] * 49, interval=0.05)
    assert power_step(step, 0.5, 5) == pytest.approx(32 / 12 - 1)
    assert power_step(spike, 0.5, 5) == 0.0
    verdicts = judge([record(), record(trial=2)], traces=[step, spike])
    assert [v["flag_power_step"] for v in verdicts] == [True, False]


def test_a_one_second_trials_power_ramp_from_idle_is_no_disturbance():
    """A quiet 1-s trial sampled every 10 ms: 50 ms of ramp from 12 W to the 32.5 W of load, then steady. Windows
    of 5 samples read the ramp as a level and flagged it ("power stepped by 39 %"); in 0.5-s windows with the first
    left out, one second holds one window: not judged, and said."""
    rng = np.random.default_rng(8)
    t = np.arange(0.0, 1.0, 0.01)
    ramp = np.where(t < 0.05, 12 + 20.5 * t / 0.05, 32.5) + rng.normal(0, 0.3, t.size)
    short = pl.DataFrame(
        {"t_s": t, "power_w": ramp, "temperature_c": [None] * t.size}, schema_overrides={"temperature_c": pl.Float64}
    )
    (verdict,) = judge([record(samples=100, interval_achieved_s=0.01, interval_requested_s=0.1)], traces=[short])
    assert not verdict["flag_power_step"] and "fewer than two 0.5-s windows" in verdict["unjudged_power_step"]


def test_the_same_ramp_in_a_longer_trial_passes_and_a_real_step_there_is_caught():
    rng = np.random.default_rng(9)
    t = np.arange(0.0, 10.0, 0.02)
    quiet = np.where(t < 0.05, 12 + 20.5 * t / 0.05, 32.5) + rng.normal(0, 0.3, t.size)
    hogged = np.where(t < 6.0, quiet, 12.0 + rng.normal(0, 0.3, t.size))
    frames = [
        pl.DataFrame(
            {"t_s": t, "power_w": p, "temperature_c": [None] * t.size}, schema_overrides={"temperature_c": pl.Float64}
        )
        for p in (quiet, hogged)
    ]
    verdicts = judge([record(), record(trial=2)], traces=frames, power_step_tolerance=0.35)
    assert [v["flag_power_step"] for v in verdicts] == [False, True]
    assert verdicts[0]["power_step"] < 0.1


def test_a_last_window_its_samples_cover_less_than_half_of_is_no_level():
    """An estimate meter that shortened its interval to 34 ms for a 4-s trial at ~31 W (one of two cores, 65 W TDP):
    its last window holds 5 samples over the final 0.17 s, where a stall read 20 W. Counted as a 0.5-s level, such
    samples flagged a quiet trial of a real-text ladder ("power stepped by 45 %"); standing for a third of their
    window, they are none. The same stall over 0.4 s of the last window is a level, and caught."""
    rng = np.random.default_rng(10)

    def stalled_at_the_end(seconds):
        t = np.arange(0.0, seconds, 0.034)
        quiet = np.minimum(31.0 + rng.normal(0, 1.0, t.size), 32.5)
        power = np.where(t >= 4.0, 20.0 + rng.normal(0, 1.5, t.size), quiet)
        return pl.DataFrame(
            {"t_s": t, "power_w": power, "temperature_c": [None] * t.size},
            schema_overrides={"temperature_c": pl.Float64},
        )

    short_stall, long_stall = stalled_at_the_end(4.16), stalled_at_the_end(4.4)
    assert (short_stall["t_s"] >= 4.0).sum() == 5
    verdicts = judge([record(), record(trial=2)], traces=[short_stall, long_stall], power_step_tolerance=0.35)
    assert [v["flag_power_step"] for v in verdicts] == [False, True]
    assert verdicts[0]["power_step"] < 0.15


def test_too_few_power_samples_are_flagged_with_the_floor():
    verdicts = judge([record(samples=12)])
    assert verdicts[0]["flag_few_samples"] and "only 12 power samples (at least 60" in verdicts[0]["quality_reasons"]


def short_trial(samples=30, achieved=0.0115, final=0.01):
    """A scaling study's smallest trial as a quiet CPU run measured it: 0.35 s of training, the estimate's poller at
    its fastest (10 ms)."""
    return record(samples=samples, train_s=0.35, interval_achieved_s=achieved, interval_final_s=final)


def test_a_trial_too_short_for_the_floor_at_its_meters_fastest_interval_is_not_judged_by_it_and_says_why():
    (verdict,) = judge([short_trial()], target_samples=120)
    assert not verdict["flag_few_samples"] and verdict["quality"] == "ok"
    assert verdict["unjudged_few_samples"].startswith("30 power samples: it trained 0.35 s, under 60 of the 12-ms")


def test_a_trial_its_stopping_rule_ended_early_is_flagged_for_few_samples():
    """Its poller sized the interval to the planned length: a shorter interval would have given it more samples."""
    (verdict,) = judge([{**short_trial(), "stopped": True}], target_samples=120)
    assert verdict["flag_few_samples"]


def test_a_trial_polled_at_meter_interval_s_itself_is_flagged_for_few_samples():
    (verdict,) = judge(
        [{**short_trial(samples=3, achieved=0.1, final=0.1), "interval_requested_s": 0.1}], target_samples=120
    )
    assert verdict["flag_few_samples"]


def test_a_branched_trial_is_paced_over_its_own_jobs_steps():
    """Its records before the branch point are its stable run's: a cooldown slowed to 0.5 × over the last 200 of
    1 000 steps is 0.82 × over the whole curve, under the tolerance, and 0.5 × over its own."""
    done = np.arange(100, 1001, 100)
    elapsed = np.cumsum(np.where(done <= 800, 1.0, 2.0))
    curve = pl.DataFrame({"step": done, "tokens": done * 100, "elapsed_s": elapsed})
    assert trial_pace(curve) == pytest.approx(900 / 11)
    assert trial_pace(curve, from_step=800) == pytest.approx(50.0)


def test_a_short_trial_whose_poller_fell_behind_its_pace_is_flagged_for_few_samples():
    (verdict,) = judge([short_trial(samples=10, achieved=0.035)], target_samples=120)
    assert verdict["flag_few_samples"]


def test_a_short_trial_whose_study_asked_for_fewer_samples_than_the_floor_is_flagged_for_few_samples():
    (verdict,) = judge([short_trial(final=0.0115)], target_samples=30)
    assert verdict["flag_few_samples"] and "raise meter.target_samples" in verdict["quality_reasons"]


def test_meter_none_is_never_flagged_for_having_no_samples():
    verdicts = judge([record(samples=0, meter="none", idle_w=None)], traces=[trace([None] * 3)])
    assert not verdicts[0]["flag_few_samples"] and not verdicts[0]["flag_power_step"]
    assert verdicts[0]["unjudged_few_samples"].startswith("meter none")


def test_a_sampling_interval_far_above_the_requested_one_is_flagged():
    assert judge([record(interval_achieved_s=1.2)])[0]["flag_sample_interval"]
    assert not judge([record(interval_achieved_s=0.6)])[0]["flag_sample_interval"]


def test_failed_power_reads_are_flagged():
    verdicts = judge([record(sample_errors=3)])
    assert verdicts[0]["flag_sample_errors"] and "3 failed power reads" in verdicts[0]["quality_reasons"]


def test_a_gpu_still_warm_at_the_start_is_flagged_against_the_cooldown_target():
    warm, cool = trace([200.0] * 100, temperature=52.0), trace([200.0] * 100, temperature=40.0)
    verdicts = judge([record(), record(trial=2)], traces=[warm, cool], start_below_c=45)
    assert [v["flag_start_temperature"] for v in verdicts] == [True, False]
    assert not judge([record()], traces=[warm])[0]["flag_start_temperature"]  # no cooldown target, no verdict


def test_every_rule_has_a_flag_column_and_an_unjudged_column():
    verdict = judge([record()])[0]
    assert {f"flag_{name}" for name in RULES} | {f"unjudged_{name}" for name in RULES} <= set(verdict)


def test_a_series_of_fewer_than_three_paced_trials_gives_no_throughput_verdict():
    verdicts = judge([record(), record(trial=2)], curves=[paced(1000), paced(500)])
    assert not any(v["flag_throughput"] for v in verdicts)
    assert all("2 paced trial(s) in its series" in v["unjudged_throughput"] for v in verdicts)


def _profile(cs=1.0, cv=0.02):
    return {"cs_tflops": cs, "cv": cv}


def test_a_steady_profile_that_agrees_with_the_trials_checks_is_the_reference():
    verdict = profile_verdict(_profile(), [record(trial=t, status="ok") for t in (1, 2, 3)], Q)
    assert verdict["status"] == "ok" and verdict["reference_tflops"] == 1.0 and verdict["reasons"] == []


def test_a_profile_the_trials_checks_disagree_with_is_disturbed_and_the_median_check_takes_over():
    verdict = profile_verdict(_profile(cs=0.6), [record(trial=t, status="ok") for t in (1, 2, 3)], Q)
    assert verdict["status"] == "disturbed" and verdict["reference_tflops"] == 1.0
    assert "matmul checks before training ran +67 % off it" in verdict["reasons"][0]


def test_a_profile_with_scattered_windows_is_disturbed():
    verdict = profile_verdict(_profile(cv=0.19), [record(trial=1, status="ok")], Q)
    assert verdict["status"] == "disturbed" and "windows vary by 19 %" in verdict["reasons"][0]


def test_without_a_profile_the_median_check_is_the_reference():
    verdict = profile_verdict(None, [record(trial=t, status="ok", checks=(2.0, 2.0)) for t in (1, 2)], Q)
    assert verdict["status"] == "no profile" and verdict["reference_tflops"] == 2.0


def test_device_load_is_the_median_power_over_idle_of_finished_trials():
    trials = pl.DataFrame(
        {
            "status": ["ok", "ok", "ok", "diverged"],
            "power_mean_w": [123.0, 126.0, 250.0, 500.0],
            "idle_power_w": [125.0, 125.0, 125.0, 125.0],
        }
    )
    assert device_load(trials) == pytest.approx(126.0 / 125.0 - 1)


def test_device_load_is_unknown_without_power():
    assert (
        device_load(
            pl.DataFrame(
                {"status": ["ok"], "power_mean_w": [None], "idle_power_w": [None]},
                schema={"status": pl.Utf8, "power_mean_w": pl.Float64, "idle_power_w": pl.Float64},
            )
        )
        is None
    )


def test_a_trial_on_another_device_than_its_cs_tflops_profile_is_flagged():
    from tokenwatt.analysis.aggregate import trials_table
    from trial_records import COST, METRIC, QUALITY, raw_record, steady_steps, steady_trace

    recs = [raw_record(1000, t, device_name=name) for t, name in ((1, "NVIDIA H200"), (2, "NVIDIA A100-SXM4-80GB"))]
    trials, _ = trials_table(
        recs,
        [("b1000", 1), ("b1000", 2)],
        traces=[steady_trace()] * 2,
        steps=[steady_steps()] * 2,
        cs_tflops={"": 0.15},
        metric=METRIC,
        quality=QUALITY,
        reference_tflops={"": 0.15},
        cost=COST,
        intensity_g_per_kwh=None,
        profile_devices={"": "NVIDIA H200"},
    )
    assert trials["flag_profile_device"].to_list() == [False, True]
    assert "measured on NVIDIA H200" in trials["quality_reasons"][1]


def test_the_report_counts_rule_by_rule_the_trials_it_could_not_judge_and_why():
    from tokenwatt.presentation.sections.quality import _rules_table

    short = steps([800, 1000, 500, 600, 700])
    verdicts = judge([record(trial=t) for t in (1, 2, 3)], curves=[short, short, STEADY_STEPS])
    page = str(_rules_table(pl.DataFrame(verdicts)))
    row = page.split('<td class="l">unsteady</td>')[1].split("</tr>")[0]
    assert row.startswith('<td class="l">1</td><td class="l">0</td><td class="l">2</td>')
    assert "2×, e.g. 5 loss records give 4 paced windows after the first" in row


def test_a_meter_polling_once_a_second_is_judged_in_windows_of_enough_samples():
    """A GPU meter at 1 Hz: 0.5-s windows would hold one sample or none and judge nothing; windows of
    quality.power_step_window samples judge a 10-minute trial, and find its step."""
    stepped = trace([300.0] * 300 + [150.0] * 300, interval=1.0)
    assert power_step(stepped, 0.5, 5) == pytest.approx(1.0)
    assert power_step(trace([300.0] * 600, interval=1.0), 0.5, 5) == 0.0


def test_a_level_change_that_is_not_a_number_is_not_flagged_as_beyond_its_tolerance():
    from tokenwatt.analysis.quality import _level_change

    says = lambda change: f"changed by {change}"  # noqa: E731
    assert _level_change(float("nan"), 0.5, says) is None
    assert _level_change(0.6, 0.5, says) == "changed by 0.6" and _level_change(0.4, 0.5, says) is None
    assert isinstance(_level_change(Unjudged("too short"), 0.5, says), Unjudged)
