from tokenwatt.plan.preview import cost_preview
from tokenwatt.plan.runorder import run_order, trial_priorities


def test_preview_before_any_trial_counts_trials_and_tokens_and_says_time_is_unknown():
    text = cost_preview(_expected([1000, 2000], [1, 2, 3]), "2 budgets × 3 trials", epochs=3, finished={})
    assert (
        "2 budgets × 3 trials = 6 trials, 6 without a record yet" in text
        and "~27,000 of ~27,000 training tokens" in text
    )
    assert "Time: unknown until the first trial finishes" in text


def test_preview_estimates_the_remaining_time_from_finished_trials():
    finished = {("b1000", 1): {"run_s": 12.0, "train_s": 10.0, "real_tokens": 3000}}
    text = cost_preview(_expected([1000, 2000], [1]), "2 budgets × 1 trial", epochs=3, finished=finished)
    # 6000 tokens left at 300 tokens/s = 20 s, plus 2 s fixed for the one trial left
    assert "~0.4 min" in text and "ESTIMATE" in text and "300 tokens/s" in text


def _expected(budgets, trials):
    return {(f"b{b}", t): b for b in budgets for t in trials}


KEYS = [(b, t) for b in (1, 2, 3) for t in range(1, 6)]  # the design's order: cell by cell, trial by trial


def test_interleaved_order_mixes_cells_and_is_seeded():
    order = run_order(KEYS, seed=7, mode="interleaved")
    assert order == run_order(KEYS, seed=7, mode="interleaved")
    assert sorted(order) == KEYS
    assert [b for b, _ in order[:5]] != [1] * 5


def test_sequential_order_runs_cell_by_cell_and_priorities_follow_it():
    order = run_order(KEYS[:2] + KEYS[5:7], seed=0, mode="sequential")
    assert order == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert [trial_priorities(order, 0, "sequential")[pair] for pair in order] == [4, 3, 2, 1]


def test_preview_states_the_energy_co2_and_money_still_to_go_labelled_an_estimate():
    finished = {
        ("b1000", 1): {
            "run_s": 12.0,
            "train_s": 10.0,
            "real_tokens": 3000,
            "energy_j": 3000.0,
            "meter_is_estimate": True,
        }
    }
    cost = {
        "carbon_intensity": 400.0,
        "pue": 1.0,
        "electricity_price_per_kwh": 0.3,
        "device_hour_price": None,
        "currency": "EUR",
    }
    text = cost_preview(_expected([1000, 2000], [1]), "2 budgets × 1 trial", epochs=3, finished=finished, cost=cost)
    # 6000 tokens left at 1 J/token = 6000 J = 0.00167 kWh; × 400 g = 0.667 g; × 0.30 = 0.0005 EUR
    assert "Energy: ~0.001667 kWh, ~0.6667 g CO2e, ~0.0005000 EUR for the remaining trials" in text
    assert "whose energy is itself estimated" in text


def test_before_any_trial_finishes_a_pilot_in_the_config_gives_the_time_and_energy_with_its_source():
    pilot = {"tokens_per_s": 2000.0, "joules_per_token": 0.01, "fixed_s": 10.0, "source": "a 2-core VM, 2026-12-01"}
    text = cost_preview(_expected([1_000_000], [1, 2]), "1 budget × 2 trials", epochs=1, finished={}, pilot=pilot)
    # 2 M tokens at 2 000 tokens/s plus 2 × 10 s: 1 020 s = 17.0 min; 2 M × 0.01 J = 20 kJ = 0.005556 kWh
    assert "~17.0 min" in text and "plan.tokens_per_s" in text and "a 2-core VM, 2026-12-01" in text
    assert "0.005556 kWh" in text and "plan.joules_per_token" in text


def test_a_finished_trial_calibrates_the_plan_instead_of_the_pilot():
    finished = {("b1000", 1): {"run_s": 12.0, "train_s": 10.0, "real_tokens": 3000, "energy_j": 300.0}}
    text = cost_preview(
        _expected([1000, 2000], [1]),
        "2 budgets × 1 trial",
        epochs=3,
        finished=finished,
        pilot={"tokens_per_s": 1.0, "source": "elsewhere"},
    )
    assert "plan.tokens_per_s" not in text and "from 1 finished trial" in text


def test_a_trial_on_several_devices_is_another_workload_and_one_device_keeps_its_key():
    from tokenwatt.plan.preview import workload_key

    base = {"train": {"batch_size": 4, "precision": "fp32", "device": "cpu", "threads": 1, "compile": "auto"}}
    one = {"train": {**base["train"], "devices": 1}}
    two = {"train": {**base["train"], "devices": 2}}
    assert workload_key(one) == workload_key(base) != workload_key(two)
