import pytest
from tokenwatt.plan.preview import budgets_share_one_process, cost_preview, shared_process_note
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


def _study(epochs=1, budgets=(50_000, 200_000), design=None, **schedule):
    return {
        "study": {"budgets": list(budgets)},
        "train": {"epochs": epochs, "schedule": {"kind": "constant", "warmup_fraction": 0.0, **schedule}},
        "design": design or {},
    }


def test_budgets_at_a_constant_rate_over_one_epoch_are_said_to_compare_only_the_meter_and_the_eval_grid():
    note = shared_process_note(_study())
    assert note.startswith("The budgets share one process") and "tests only the meter and the eval grid" in note
    # what to set instead: a schedule that ends with each trial
    assert "train.schedule.kind cosine" in note and "wsd" in note and "branch_every" in note
    assert budgets_share_one_process(_study(warmup_tokens_per_parameter=1.0))  # a warmup by size is every budget's


@pytest.mark.parametrize(
    "config",
    [
        _study(kind="cosine"),  # a decay to each trial's own end
        _study(kind="wsd"),  # a cooldown over each trial's last steps
        _study(warmup_fraction=0.1),  # a warmup by share of each trial's steps
        _study(epochs=3),  # a smaller budget repeats its own subset
        _study(budgets=(50_000,)),  # nothing to compare
        {"study": {"budgets": [50_000, 200_000]}},  # a report's partial config: not asserted
    ],
)
def test_budgets_whose_schedule_or_epochs_end_with_the_budget_get_no_such_note(config):
    assert not budgets_share_one_process(config) and shared_process_note(config) is None


def test_a_selection_level_with_an_order_of_its_own_is_named_as_the_exception():
    note = shared_process_note(_study(design={"selection": {"easy_first": {"order": {"by": "length"}}, "all": "none"}}))
    assert "selection levels easy_first excepted" in note
