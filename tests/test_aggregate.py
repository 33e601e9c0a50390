import polars as pl
import pytest

from tokenwatt.aggregate import changes_table, conditions_table, trials_table
from tokenwatt.measures import budget_label


def _rec(budget, trial, pe, ppl, power, status="ok"):
    return {"budget": budget, "trial": trial, "status": status, "pe": pe, "perplexity": ppl, "power_rms_w": power,
            "energy_j": None, "versions": {"torch": "2.13"}, "sample_error_messages": []}


def test_missing_and_failed_trials_are_named_not_averaged():
    expected = [(1000, 1), (1000, 2), (2000, 1), (2000, 2)]
    recs = [_rec(1000, 1, 1.0, 10, 100), None, _rec(2000, 1, 0.5, 8, 100), _rec(2000, 2, 0.4, 8, 100, status="failed")]
    trials, missing = trials_table(recs, expected)
    assert trials.height == 2
    assert missing == ["budget 1000 trial 2: no metrics", "budget 2000 trial 2: status failed"]
    assert trials["versions_torch"].to_list() == ["2.13", "2.13"]


def test_conditions_have_mean_sd_sem_and_a_t_interval():
    recs = [_rec(1000, t, pe, 10, 100) for t, pe in enumerate([1.0, 2.0, 3.0], 1)]
    cond = conditions_table(trials_table(recs, [(1000, t) for t in (1, 2, 3)])[0])
    row = cond.filter(pl.col("measure") == "pe").row(0, named=True)
    assert (row["n"], row["mean"], row["sd"]) == (3, 2.0, 1.0)
    assert row["sem"] == pytest.approx(1 / 3**0.5)
    assert row["ci95_high"] - row["mean"] == pytest.approx(4.302653 / 3**0.5, rel=1e-6)


def test_null_energy_is_left_out_not_counted_as_zero():
    recs = [_rec(1000, 1, 1.0, 10, 100)]
    cond = conditions_table(trials_table(recs, [(1000, 1)])[0])
    energy = cond.filter(pl.col("measure") == "energy_j").row(0, named=True)
    assert energy["n"] == 0 and energy["mean"] is None


def test_changes_table_reports_the_studys_percentages():
    recs = [_rec(500_000, 1, 0.85, 10.0, 145.2), _rec(1_000_000, 1, 0.62, 9.58, 167.8)]
    changes = changes_table(conditions_table(trials_table(recs, [(500_000, 1), (1_000_000, 1)])[0])).row(0, named=True)
    assert changes["pe_drop_pct"] == pytest.approx(27.06, abs=0.01)
    assert changes["perplexity_reduction_pct"] == pytest.approx(4.2)
    assert changes["power_change_pct"] == pytest.approx(15.56, abs=0.01)


@pytest.mark.parametrize("tokens,text", [(500_000, "500K"), (1_000_000, "1M"), (2_500, "2.5K"), (12_345, "12345"), (40, "40")])
def test_budget_labels(tokens, text):
    assert budget_label(tokens) == text
