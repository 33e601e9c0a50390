"""The study's totals (cost.json): what its training used, each trial on its devices and each stable run once, and
what it spent beside that (work lost to resumes, checkpoint saves), in J, kWh, CO2 and money."""

import pytest
from tokenwatt.analysis.aggregate import cost_summary
from trial_records import COST, aggregate, raw_record

PRICED = {**COST, "pue": 1.0, "electricity_price_per_kwh": 0.3, "device_hour_price": 1.0}
INTENSITY = (400.0, "configured (cost.carbon_intensity)")
EVERY = 2000  # real tokens between a stable run's saved points


def _record(budget: int, trial: int = 1, **overrides) -> dict:
    """A trial's record at real scale (150–400 J), with nothing lost and no checkpoint unless said."""
    return raw_record(budget, trial, **{"checkpoint_energy_j": 0.0, "lost_energy_j": 0.0, **overrides})


def _branch(point: int, stable_j: float, stable_run_s: float, own_j: float, trial: int = 1, **overrides) -> dict:
    """A cooldown branched from its stable run's point ``point``: its record holds the stable run's energy to it."""
    budget = point * EVERY + 500
    branch = {
        "every": EVERY,
        "from_point": point,
        "from_step": 10 * point,
        "from_real_tokens": point * EVERY,
        "stable_train_s": 2.0 * point,
        "stable_run_s": stable_run_s,
        "stable_energy_j": stable_j,
        "cooldown_from_step": 10 * point + 2,
    }
    return _record(budget, trial, energy_j=stable_j + own_j, train_s=2.0 * point + 1.0, branch=branch, **overrides)


def _stretch(point: int, energy_j: float, run_s: float, trial: int = 1, **overrides) -> dict:
    """A stable run's stretch record (training/stretch.py): the run's figures up to its point."""
    return {
        "series": "",
        "trial": trial,
        "point": point,
        "real_tokens": point * EVERY,
        "energy_j": energy_j,
        "train_s": 2.0 * point,
        "run_s": run_s,
        "checkpoints": 0,
        "checkpoint_energy_j": 0.0,
        "checkpoint_s": 0.0,
        "resumed": 0,
        "lost_energy_j": 0.0,
        "lost_train_s": 0.0,
        "diverged": False,
        **overrides,
    }


def _summary(records: list[dict], stretches: list[dict] = ()) -> dict:
    expected = [(r["budget"], r["trial"]) for r in records]
    trials, missing = aggregate(records, expected, cost=PRICED, intensity=INTENSITY[0])
    assert not missing
    return cost_summary(trials, PRICED, INTENSITY, stretches), trials


def test_the_studys_device_cost_is_the_sum_of_its_trials_own_on_two_devices():
    records = [_record(b, devices=2, run_s=3600.0, energy_j=300.0) for b in (1000, 2000, 4000)]
    summary, trials = _summary(records)
    # each trial held 2 devices for an hour: 2.00 at 1.00 per device-hour, 6.00 in all
    assert trials["device_cost"].to_list() == pytest.approx([2.0, 2.0, 2.0])
    assert summary["total_device_cost"] == pytest.approx(6.0) and summary["total_device_s"] == pytest.approx(21_600)


def test_a_missing_cooldown_keeps_its_stable_stretch_in_the_total():
    # one stable run saved at points 1, 2, 3 (100, 210, 310 J so far); the cooldown from point 3 never finished
    stretches = [_stretch(1, 100.0, 10.0), _stretch(2, 210.0, 20.0), _stretch(3, 310.0, 30.0)]
    records = [_branch(1, 100.0, 10.0, own_j=60.0), _branch(2, 210.0, 20.0, own_j=70.0)]
    summary, _ = _summary(records, stretches)
    assert summary["total_energy_j"] == pytest.approx(60.0 + 70.0 + 310.0)
    assert summary["stable_energy_j"] == pytest.approx(310.0) and summary["stable_from"] == "stretch records"
    # its device time too: each branch's own 5 s and the stable run's 30 s, once
    assert summary["total_device_s"] == pytest.approx(5.0 + 5.0 + 30.0)


def test_with_every_cooldown_finished_the_stretch_records_agree_with_the_branch_records():
    stretches = [_stretch(1, 100.0, 10.0), _stretch(2, 210.0, 20.0)]
    records = [_branch(1, 100.0, 10.0, own_j=60.0), _branch(2, 210.0, 20.0, own_j=70.0)]
    summary, trials = _summary(records, stretches)
    without, _ = _summary(records)  # results written before the stretch records: the trials' branch records alone
    assert summary["total_energy_j"] == without["total_energy_j"] == pytest.approx(60.0 + 70.0 + 210.0)
    assert summary["total_energy_j"] == pytest.approx(trials["energy_j"].sum() - summary["branch_shared_energy_j"])
    assert "branch records" in without["stable_from"]


def test_lost_work_and_checkpoint_saves_are_spent_not_training_used():
    records = [
        _record(1000, energy_j=300.0, lost_energy_j=40.0, checkpoint_energy_j=12.0),
        _record(2000, energy_j=250.0),
    ]
    summary, _ = _summary(records)
    assert summary["total_energy_j"] == pytest.approx(550.0)
    assert (summary["lost_energy_j"], summary["checkpoint_energy_j"]) == pytest.approx((40.0, 12.0))
    assert summary["spent_energy_j"] == pytest.approx(602.0)
    assert summary["spent_kwh"] == pytest.approx(602.0 / 3.6e6)
    assert summary["spent_kg_co2e"] == pytest.approx(602.0 / 3.6e6 * 0.4)
    assert summary["spent_electricity_cost"] == pytest.approx(602.0 / 3.6e6 * 0.3)
    assert summary["spent_total_cost"] == pytest.approx(602.0 / 3.6e6 * 0.3 + summary["total_device_cost"])


def test_a_stable_runs_checkpoint_saves_and_lost_work_count_once_though_every_branch_inherits_them():
    # the stable run saved a 5 J checkpoint in its first stretch and lost 20 J to a kill in its second
    stretches = [_stretch(1, 100.0, 10.0, checkpoint_energy_j=5.0), _stretch(2, 210.0, 20.0, checkpoint_energy_j=5.0)]
    stretches[1]["lost_energy_j"] = 20.0
    records = [
        _branch(1, 100.0, 10.0, own_j=60.0, checkpoint_energy_j=5.0 + 3.0),  # and one of its own, 3 J
        _branch(2, 210.0, 20.0, own_j=70.0, checkpoint_energy_j=5.0, lost_energy_j=20.0),
    ]
    summary, _ = _summary(records, stretches)
    assert (summary["checkpoint_energy_j"], summary["lost_energy_j"]) == pytest.approx((8.0, 20.0))
    assert summary["spent_energy_j"] == pytest.approx(60.0 + 70.0 + 210.0 + 8.0 + 20.0)


def test_a_spent_total_with_an_unknown_part_is_none_with_its_reason():
    records = [_record(1000, energy_j=300.0, lost_energy_j=None), _record(2000, energy_j=250.0)]
    summary, _ = _summary(records)
    assert summary["total_energy_j"] == pytest.approx(550.0)  # training used is known
    assert summary["spent_energy_j"] is None and summary["spent_total_cost"] is None
    assert summary["spent_missing"] == "lost_energy_j not recorded for 1 of 2 trials"


def test_a_branchs_inherited_checkpoint_energy_without_a_stretch_record_is_no_total():
    records = [_branch(1, 100.0, 10.0, own_j=60.0, checkpoint_energy_j=5.0), _branch(2, 210.0, 20.0, own_j=70.0)]
    summary, _ = _summary(records)
    assert summary["checkpoint_energy_j"] is None and summary["spent_energy_j"] is None
    assert "includes its stable run's, which no stretch record tells apart" in summary["spent_missing"]


def test_the_report_says_what_the_study_spent_beside_what_its_training_used():
    from tokenwatt.presentation.sections.summary import cost_sentences

    records = [_record(1000, energy_j=300.0, lost_energy_j=40.0, checkpoint_energy_j=12.0)]
    text = " ".join(cost_sentences(_summary(records)[0]))
    assert "In all the study spent 97.78 mWh (352.0 J, 39.11 mg CO2e, 1.418 mEUR)" in text
    assert "plus 40.00 J of work lost to resumes and done again and 12.00 J saving checkpoints" in text


def test_the_report_says_why_there_is_no_spent_total():
    from tokenwatt.presentation.sections.summary import cost_sentences

    text = " ".join(cost_sentences(_summary([_record(1000, checkpoint_energy_j=None)])[0]))
    assert "no total of what the study spent beside its training: checkpoint_energy_j not recorded" in text


def test_a_stretch_record_sums_its_training_and_checkpoint_windows_and_its_lost_work_apart():
    from tokenwatt.training.checkpoint import BeforeTraining, SessionState
    from tokenwatt.training.stretch import STRETCH_KEYS, stretch_record

    windows = [
        {"name": "idle", "start_s": 0.0, "end_s": 5.0, "counter_j": 50.0},
        {"name": "train_1", "start_s": 5.0, "end_s": 15.0, "counter_j": 180.0},
        {"name": "checkpoint_1", "start_s": 15.0, "end_s": 15.5, "counter_j": 6.0},
        {"name": "train_1.1", "start_s": 15.5, "end_s": 20.0, "counter_j": 95.0},
    ]
    resumes = [{"from_checkpoint": 1, "from_step": 40, "lost_energy_j": 30.0, "lost_train_s": 1.5, "lost_steps": 5}]
    before = BeforeTraining("cpu", "estimate", cooled={}, idle=False, idle_after_s=0.0, check_before=[])
    session = SessionState(
        before, meter={"windows": windows}, checkpoints=({"number": 1},), resumes=tuple(resumes), stable_run_s=26.0
    )
    got = stretch_record(session, series="", trial=1, point=2, real_tokens=4000, train_s=14.5, diverged=False)
    assert set(got) == set(STRETCH_KEYS)
    assert (got["energy_j"], got["checkpoint_energy_j"], got["checkpoint_s"]) == (275.0, 6.0, 0.5)
    assert (got["lost_energy_j"], got["lost_train_s"], got["resumed"], got["run_s"]) == (30.0, 1.5, 1, 26.0)
