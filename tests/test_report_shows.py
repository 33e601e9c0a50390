"""The report shows only what the run can show: no test of a measure its meter makes flat, no empty panel, no row
of zeros or repeated row, no test that training lowers the loss; units a reader uses, plain ticks, power axes from
0 W, and the CPU estimate's assumptions in its warning."""

import functools
import re

import curve_study
import matplotlib
import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.conditions import conditions_table
from tokenwatt.analysis.curves.summary import analyse_curves
from tokenwatt.analysis.stats import stats_product
from tokenwatt.common.measures import display, si
from tokenwatt.presentation import figures as F
from tokenwatt.presentation.inputs import ReportInputs
from tokenwatt.presentation.sections import conditions, curves, quality, statistics, warnings
from trial_records import COST, QUALITY, aggregate, raw_record

matplotlib.use("Agg")
BUDGETS = [10_000, 20_000, 40_000]
RAPL_REFUSED = (
    "meter.kind auto chose estimate, an ESTIMATE, because no real meter works here: rapl unavailable: "
    "no readable RAPL domains under /sys/class/powercap (meter.rapl_root)"
)


@functools.cache
def _trials(meter: str = "estimate", checks: bool = True, device_price: float | None = None) -> pl.DataFrame:
    """5 trials × 3 budgets whose power is the same at every budget (as the CPU estimate makes it) and whose energy
    and time double with the budget; priced for electricity, and for device-hours where ``device_price`` is set."""
    rng = np.random.default_rng(2)
    records = []
    for t in range(1, 6):
        for i, b in enumerate(BUDGETS):
            seconds, power = 5.0 * 2**i * rng.lognormal(0, 0.02), 32.8 * rng.lognormal(0, 0.01)
            extra = {} if checks else {"check_before_tflops": [], "check_after_tflops": []}
            records.append(
                raw_record(
                    b,
                    t,
                    meter=meter,
                    meter_is_estimate=meter == "estimate",
                    meter_choice=RAPL_REFUSED if meter == "estimate" else "meter.kind auto chose rapl",
                    eval_loss=2.8 - 0.4 * i + rng.normal(0, 0.03),
                    train_s=seconds,
                    duration_s=seconds,
                    power_rms_w=power,
                    power_mean_w=power,
                    energy_j=power * seconds,
                    **extra,
                )
            )
    cost = {**COST, "electricity_price_per_kwh": 0.3, "device_hour_price": device_price}
    trials, _ = aggregate(
        records, [(b, t) for t in range(1, 6) for b in BUDGETS], quality={**QUALITY, "min_samples": 10}, cost=cost
    )
    return trials


def _inputs(trials: pl.DataFrame, **products) -> ReportInputs:
    return ReportInputs(
        config={
            "study": {"name": "s", "budgets": BUDGETS, "trials": 5},
            "cost": {"currency": "EUR"},
            "meter": {"cpu_tdp_w": 65.0},
        },
        trials=trials,
        conditions=conditions_table(trials),
        products={"stats": stats_product(trials, False).data, **products},
        cs={"": (0.15, "measured: device profile")},
    )


def test_power_under_the_cpu_estimate_is_not_tested_and_the_statistics_say_why_once():
    stats = stats_product(_trials(), False).data
    assert "power_rms_w" not in stats["anova"] and not [r for r in stats["posthoc"] if r["dv"] == "power_rms_w"]
    assert "flat by construction" in stats["not_tested"]["power_rms_w"]
    assert {"pe", "energy_j", "train_s"} <= set(stats["anova"])  # what grows with the work is still tested
    page = str(statistics.render(_inputs(_trials())))
    assert page.count("flat by construction") == 1 and "<b>RMS power</b> is not tested" in page


def test_power_under_a_measured_meter_is_still_tested():
    stats = stats_product(_trials(meter="rapl"), False).data
    assert "power_rms_w" in stats["anova"] and stats["not_tested"] == {}


def test_the_estimate_warning_names_the_tdp_why_no_sensor_what_ratios_keep_and_how_to_measure():
    box = str(warnings.render(_inputs(_trials())))
    box = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", box))
    assert "Power is the CPU's TDP, 65 W (meter.cpu_tdp_w)" in box
    assert "rapl unavailable: no readable RAPL domains" in box  # why no sensor, in the run's words
    assert "Ratios between conditions" in box and "do not depend on it" in box and "Absolute joules" in box
    assert "meter.kind: rapl" in box and "train.device: cuda" in box
    assert "RMS power is not tested" in box


def test_a_study_without_matmul_checks_gets_no_empty_checks_panel():
    assert len(F.measurement_quality(_trials(checks=False), True).axes) == 2
    assert len(F.measurement_quality(_trials(), True).axes) == 3


def test_rules_that_judged_no_trial_are_one_line_not_rows_of_zeros():
    trials = _trials()
    page = str(quality.render(_inputs(trials)))
    idle = re.search(r"Rules that judged no trial here</b>: (.*?)\.</p>", page).group(1)
    rows = re.findall(r'<tr><td class="l">([a-z_]+)</td><td class="l">(\d+)</td>', page)
    assert rows and all(judged != "0" for _, judged in rows)
    assert "resumed (" in idle and "resumed" not in [rule for rule, _ in rows]


def test_the_total_cost_row_is_left_out_where_it_repeats_the_electricity_row():
    page = str(conditions.render(_inputs(_trials())))
    assert "Cost, electricity + device-hours (" not in page and "Electricity cost (" in page
    assert "the same as Electricity cost, the one part priced here" in page
    both = str(conditions.render(_inputs(_trials(device_price=2.0))))
    assert "Cost, electricity + device-hours (" in both and "the same as" not in both


def test_energy_at_the_facility_and_money_are_written_in_joules_and_meur_not_powers_of_ten():
    page = str(conditions.render(_inputs(_trials())))
    assert "Energy at the facility (× PUE) (J)" in page and "Electricity cost (mEUR)" in page
    assert "kWh ×10" not in page and "EUR ×10" not in page and "µEUR" not in page
    assert display("kwh", [1e-6]).unit == "J" and display("kwh", [1e-9]).unit == "mJ"  # 3.6 J, 3.6 mJ
    assert display("kwh", [1e-9]).factor == pytest.approx(3.6e9)
    assert display("electricity_cost", [9.193e-5], "EUR").unit == "mEUR"
    assert display("pe", [4.9e-8]).label.endswith("×10⁻⁹")  # no unit to prefix: the power of ten stays
    assert si(9.193e-5, "EUR") == "0.09193 mEUR" and si(9.193e-5, "J") == "91.93 µJ"


def test_the_quality_against_cost_axis_is_in_joules_and_meur():
    trials = _trials()
    fig = F.quality_vs_cost(trials, conditions_table(trials), True, "EUR")
    assert [ax.get_xlabel().split(" —")[0] for ax in fig.axes] == [
        "Energy per trial at the facility (J)",
        "Cost per trial (mEUR)",
    ]


def test_log_axes_label_their_ticks_as_plain_numbers():
    trials = _trials()
    table = conditions_table(trials)
    for fig in (F.perplexity_vs_tokens(trials, table, True), F.time_by_budget(trials, table, True)):
        fig.canvas.draw()
        labels = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels(minor=True)]
        labels += [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
        assert any(labels) and not [x for x in labels if "times" in x or "^" in x or "×" in x]


def test_power_axes_start_at_zero_and_say_how_far_apart_the_conditions_are():
    trials = _trials()
    fig = F.power_energy_by_budget(trials, conditions_table(trials), True)
    power = fig.axes[0]
    assert power.get_ylim()[0] == 0 and power.get_yscale() == "linear"
    assert re.search(r"differ by at most \d+\.\d %", power.get_title())
    qc = F.measurement_quality(trials, True).axes[1]
    assert qc.get_ylim()[0] == 0
    trace = pl.DataFrame({"t_s": [0.0, 0.5, 1.0], "power_w": [32.4, 33.2, 32.8]})
    assert F.power_traces({("b10000", 1): trace}, True).axes[0].get_ylim()[0] == 0


def test_the_trajectories_show_no_test_that_training_lowers_the_loss():
    product = analyse_curves(curve_study.budget_study(n=5), {})
    assert product["trajectory"]["anova"]  # the analysis keeps it, for a replication of the follow-up study
    page = str(curves.render(_inputs(_trials(), curves=product)))
    assert "<h3>Trajectories</h3>" in page and "RM-ANOVA of eval loss" not in page
