"""Carbon and money from a trial's energy and time: hand-computed values, the offline country table, labels."""

import pytest
from tokenwatt.plan.cost import CostError, carbon_intensity, global_energy_mix, trial_cost
from trial_records import COST, aggregate, raw_record

PRICED = {**COST, "pue": 1.5, "electricity_price_per_kwh": 0.3, "device_hour_price": 2.0}


def test_cost_of_a_trial_matches_a_hand_computation():
    got = trial_cost({"energy_j": 7.2e6, "run_s": 1800.0, "inv_ppl": 0.5}, PRICED, 400.0)
    # 7.2 MJ = 2 kWh at the device, × PUE 1.5 = 3 kWh; 3 × 400 g = 1.2 kg; 3 × 0.3 = 0.9; 0.5 h × 2 = 1.0
    assert got["kwh"] == pytest.approx(3.0) and got["kg_co2e"] == pytest.approx(1.2)
    assert got["electricity_cost"] == pytest.approx(0.9) and got["device_cost"] == pytest.approx(1.0)
    assert got["total_cost"] == pytest.approx(1.9) and got["cost_per_inv_ppl"] == pytest.approx(3.8)
    assert got["kg_co2e_per_inv_ppl"] == pytest.approx(2.4)


def test_without_measured_energy_there_is_no_co2_or_electricity_cost_but_device_time_still_costs():
    got = trial_cost({"energy_j": None, "run_s": 3600.0, "inv_ppl": 0.5}, PRICED, 400.0)
    assert got["kwh"] is None and got["kg_co2e"] is None and got["electricity_cost"] is None
    assert got["device_cost"] == pytest.approx(2.0)
    assert got["total_cost"] is None  # electricity is priced but unmeasured: the device cost alone is no total


def test_the_total_is_the_sum_of_the_priced_parts_only():
    device_only = trial_cost(
        {"energy_j": None, "run_s": 3600.0, "inv_ppl": 0.5}, {**PRICED, "electricity_price_per_kwh": None}, None
    )
    assert device_only["total_cost"] == pytest.approx(2.0)
    assert (
        trial_cost({"energy_j": 7.2e6, "run_s": 1.0, "inv_ppl": 0.5}, COST, None)["total_cost"] is None
    )  # nothing priced


def test_a_country_code_is_looked_up_offline_in_codecarbons_energy_mix():
    value, source = carbon_intensity("FRA")
    assert 0 < value < 200 and "France (FRA)" in source and "CodeCarbon" in source
    assert carbon_intensity(420) == (420.0, "configured (cost.carbon_intensity)")
    assert carbon_intensity(None)[0] is None


def test_the_energy_mix_read_is_codecarbons_own_for_every_country():
    from codecarbon.input import DataSource

    assert global_energy_mix() == DataSource().get_global_energy_mix_data()


def test_an_unknown_country_code_names_the_key_and_the_choices():
    with pytest.raises(CostError, match=r"cost.carbon_intensity: 'XYZ' is not a country code .* DEU, FRA, USA"):
        carbon_intensity("XYZ")


def test_estimated_energy_keeps_its_label_through_to_co2_and_money():
    trials, _ = aggregate([raw_record(1000, 1, energy_j=3.6e6)], [(1000, 1)], cost=PRICED, intensity=400.0)
    row = trials.row(0, named=True)
    assert row["cost_is_estimate"] is True and row["kwh"] == pytest.approx(1.5) and row["kg_co2e"] == pytest.approx(0.6)


def test_the_report_states_co2_and_money_with_the_estimate_label():
    from tokenwatt.analysis.aggregate import cost_summary
    from tokenwatt.presentation.sections.summary import cost_sentences

    trials, _ = aggregate([raw_record(1000, 1, energy_j=3.6e6)], [(1000, 1)], cost=PRICED, intensity=400.0)
    summary = cost_summary(trials, PRICED, (400.0, "configured (cost.carbon_intensity)"))
    assert summary["total_kg_co2e"] == pytest.approx(0.6) and summary["is_estimate"]
    text = " ".join(cost_sentences(summary))
    assert "600.0 g CO2e (ESTIMATED, from estimated energy)" in text and "EUR" in text


def test_the_evaluations_energy_is_costed_beside_the_training_never_inside_it():
    from tokenwatt.analysis.aggregate import cost_summary
    from tokenwatt.presentation.sections.summary import cost_sentences

    records = [
        raw_record(1000, 1, energy_j=3.6e6, eval_energy_j=3.6e5),
        raw_record(2000, 1, energy_j=3.6e6, eval_energy_j=3.6e5),
    ]
    trials, _ = aggregate(records, [(1000, 1), (2000, 1)], cost=PRICED, intensity=400.0)
    summary = cost_summary(trials, PRICED, (400.0, "configured (cost.carbon_intensity)"))
    kwh = 7.2e5 * PRICED["pue"] / 3.6e6
    assert summary["total_kg_co2e"] == pytest.approx(2 * 3.6e6 * PRICED["pue"] / 3.6e6 * 0.4)  # training only
    assert summary["eval_kwh"] == pytest.approx(kwh) and summary["eval_kg_co2e"] == pytest.approx(kwh * 0.4)
    assert "The evaluations used 720.0 kJ" in " ".join(cost_sentences(summary))


def test_a_study_without_prices_or_intensity_is_told_how_to_get_co2_and_money_beside_its_evaluations_energy():
    from tokenwatt.analysis.aggregate import cost_summary
    from tokenwatt.presentation.sections.summary import cost_sentences

    unpriced = {**COST, "electricity_price_per_kwh": None, "device_hour_price": None}
    trials, _ = aggregate([raw_record(1000, 1, eval_energy_j=100.0)], [(1000, 1)], cost=unpriced, intensity=None)
    text = " ".join(cost_sentences(cost_summary(trials, unpriced, (None, "not set (cost.carbon_intensity)"))))
    assert "The evaluations used 100.0 J more" in text and "set cost.carbon_intensity and the prices" in text


def test_a_trial_on_two_devices_pays_two_device_hours_for_its_time():
    cost = {"pue": 1.0, "electricity_price_per_kwh": None, "device_hour_price": 2.0}
    one = trial_cost({"energy_j": 3.6e6, "run_s": 1800.0}, cost, None)
    two = trial_cost({"energy_j": 3.6e6, "run_s": 1800.0, "devices": 2}, cost, None)
    assert (one["device_cost"], two["device_cost"]) == (1.0, 2.0)
