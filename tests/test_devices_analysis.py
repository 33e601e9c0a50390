"""The devices product: each device count against the fewest, paired by trial id, budget and every other level; its
interval counts trial ids (the replicates), not trials, and covers a known ratio as often as it says."""

import math

import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.devices import answer, devices_product

BUDGETS = (20_000, 40_000, 80_000)


def _study(rng, trials=5, time_ratio=0.6, energy_ratio=1.15, models=("small",)):
    """Trial records at real scale: seconds ~ budget / 400 tok/s, joules ~ 30 W × s, eval loss ~ 3.2 nats; each trial
    id its own multiplicative level (its data and weights), shared by its device levels; multiplicative noise,
    larger on two devices (a second process on the machine)."""
    rows = []
    for trial in range(1, trials + 1):
        level = rng.lognormal(0, 0.2)
        loss = 3.2 + rng.normal(0, 0.05)
        for model in models:
            for budget in BUDGETS:
                for devices in (1, 2):
                    noise = rng.lognormal(0, 0.03 if devices == 1 else 0.08)
                    train_s = budget / 400 * level * noise * (time_ratio if devices == 2 else 1.0)
                    energy = 30 * budget / 400 * level * noise * (energy_ratio if devices == 2 else 1.0)
                    rows.append(
                        {
                            "trial": trial,
                            "budget": budget,
                            "levels_model": model,
                            "levels_devices": str(devices),
                            "status": "ok",
                            "meter": "estimate",
                            "train_s": train_s,
                            "energy_j": energy,
                            "quality_per_kj": math.exp(-loss) / (energy / 1e3),
                        }
                    )
    return pl.DataFrame(rows)


def test_the_interval_counts_trial_ids_not_trials():
    result = devices_product(None, _study(np.random.default_rng(1), models=("small", "base")))
    c = result.data["comparisons"][0]
    assert c["pairs"] == 5 * 3 * 2 and c["measures"]["train_s"]["trial_ids"] == 5


def test_the_intervals_cover_the_true_ratios_at_their_nominal_rate():
    rng = np.random.default_rng(7)
    covered = {"train_s": 0, "energy_j": 0}
    runs = 300
    for _ in range(runs):
        measures = devices_product(None, _study(rng, trials=4)).data["comparisons"][0]["measures"]
        covered["train_s"] += measures["train_s"]["low"] <= 0.6 <= measures["train_s"]["high"]
        covered["energy_j"] += measures["energy_j"]["low"] <= 1.15 <= measures["energy_j"]["high"]
    # nominal 95 %: 300 studies put the binomial's 99 % range at about 91-98 %
    assert all(0.91 <= n / runs <= 0.985 for n in covered.values()), covered


def test_with_no_device_effect_the_time_test_rejects_at_about_its_size():
    rng = np.random.default_rng(11)
    runs = 300
    rejected = sum(
        devices_product(None, _study(rng, trials=4, time_ratio=1.0)).data["comparisons"][0]["measures"]["train_s"]["p"]
        < 0.05
        for _ in range(runs)
    )
    assert rejected / runs <= 0.085


def test_a_second_device_that_saves_time_and_costs_energy_is_said_to_buy_time_paid_for_in_quality_per_joule():
    c = devices_product(None, _study(np.random.default_rng(3), trials=6)).data["comparisons"][0]
    assert c["measures"]["train_s"]["verdict"] == "lower" and c["measures"]["quality_per_kj"]["verdict"] == "lower"
    assert c["answer"].endswith("The extra devices bought time, paid for in quality per joule.")
    assert "saved training time, lowered quality per joule" in c["answer"]


def test_it_reads_the_analysis_frame_and_names_the_trial_ids_left_out():
    trials = _study(np.random.default_rng(4)).with_columns(in_frame=pl.col("trial") != 2)
    result = devices_product(None, trials).data
    assert result["comparisons"][0]["pairs"] == 4 * 3 and result["trial_ids_left_out"] == [2]


def test_a_pair_metered_by_two_meters_is_left_out_and_counted():
    trials = _study(np.random.default_rng(6)).with_columns(
        meter=pl.when((pl.col("trial") == 1) & (pl.col("levels_devices") == "1"))
        .then(pl.lit("rapl"))
        .otherwise("meter")
    )
    c = devices_product(None, trials).data["comparisons"][0]
    assert (c["pairs"], c["other_meter"], c["trial_ids"]) == (4 * 3, 3, 4)


def test_one_trial_id_gives_no_interval_and_no_answer():
    c = devices_product(None, _study(np.random.default_rng(5), trials=1)).data["comparisons"][0]
    assert c["measures"]["train_s"]["low"] is None and "not judged" in c["answer"]


@pytest.mark.parametrize(
    ("time", "quality", "bought"),
    [
        ("lower", "no difference shown", "bought time; whether they changed quality per joule is not shown"),
        ("lower", "higher", "bought time and quality per joule"),
        ("no difference shown", "lower", "cost quality per joule and bought nothing shown"),
        ("higher", "higher", "bought quality per joule, paid for in time"),
        (
            "no difference shown",
            "no difference shown",
            "bought nothing shown: neither difference is told apart from none",
        ),
    ],
)
def test_the_answer_says_what_the_extra_devices_bought(time, quality, bought):
    measures = {"train_s": {"verdict": time}, "quality_per_kj": {"verdict": quality}}
    assert answer(2, 1, measures).endswith(f"The extra devices {bought}.")
