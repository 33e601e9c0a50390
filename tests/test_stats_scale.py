"""Multiplicative measures are tested on the log scale: the questions the tests answer are the ones a reader asks.

Fixtures at the real scale of the data: PE ~1e-8, effects that multiply, lognormal noise, unequal variances.
"""

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps
from statsmodels.stats.anova import AnovaRM
from tokenwatt.analysis.stats import anova_effects, complete_block, interaction_contrasts, posthoc, rm_anova

BUDGETS = [10_000, 20_000, 40_000]


def _pe_study(n=10, seed=0, levels=(1e-8, 1e-7), factors=(0.5, 0.5), noise=0.05) -> pl.DataFrame:
    """Trials × budgets × model sizes of PE: model m starts at ``levels[m]`` and is multiplied by ``factors[m]``
    per doubling of the budget, each trial with its own multiplicative level and 5 % lognormal noise per cell."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(1, n + 1):
        subject = rng.lognormal(0, 0.1)
        for m, (level, factor) in enumerate(zip(levels, factors)):
            for k, b in enumerate(BUDGETS):
                rows.append(
                    {
                        "trial": t,
                        "budget": b,
                        "levels_model": f"m{m}",
                        "series": f"model=m{m}",
                        "pe": level * factor**k * subject * rng.lognormal(0, noise),
                    }
                )
    return pl.DataFrame(rows)


def _interaction(result):
    return next(e for e in result["effects"] if e["factors"] == ["budget", "levels_model"])


def test_two_series_halving_per_doubling_at_levels_tenfold_apart_show_no_interaction():
    trials = _pe_study()
    interaction = _interaction(rm_anova(trials, "pe"))
    assert interaction["p"] > 0.05 and interaction["eta2_g"] < 0.05
    # The raw values of the same data "interact" hugely: the raw-scale test answers a question about levels.
    y, factors, _, _, _ = complete_block(trials.with_columns(eval_loss=pl.col("pe")), "eval_loss")
    raw = next(e for e in anova_effects(y, factors) if len(e["factors"]) == 2)
    assert raw["p"] < 1e-6 and raw["eta2_g"] > 0.5


def test_a_series_whose_pe_falls_faster_shows_an_interaction():
    interaction = _interaction(rm_anova(_pe_study(factors=(0.5, 0.35)), "pe"))
    assert interaction["p"] < 0.001


def test_log_scale_f_and_generalized_eta_squared_match_statsmodels_and_pingouin_on_log_values():
    import pingouin as pg

    trials = _pe_study(factors=(0.5, 0.4), seed=3)
    logged = trials.with_columns(pl.col("pe").log()).to_pandas()
    theirs_f = (
        AnovaRM(logged, depvar="pe", subject="trial", within=["budget", "levels_model"])
        .fit()
        .anova_table["F Value"]
        .to_list()
    )
    theirs = pg.rm_anova(data=logged, dv="pe", within=["budget", "levels_model"], subject="trial", effsize="ng2")
    ours = rm_anova(trials, "pe")
    assert ours["scale"] == "log"
    assert [e["F"] for e in ours["effects"]] == pytest.approx(theirs_f, rel=1e-8)
    assert [e["eta2_g"] for e in ours["effects"]] == pytest.approx(theirs["ng2"].to_list(), rel=1e-8)


def test_a_value_at_or_below_zero_on_the_log_scale_drops_its_subject_and_names_it():
    trials = _pe_study().with_columns(
        pl.when((pl.col("trial") == 4) & (pl.col("budget") == BUDGETS[1])).then(0.0).otherwise(pl.col("pe")).alias("pe")
    )
    ours = rm_anova(trials, "pe")
    assert ours["dropped_trials"] == [4] and ours["n_trials"] == 9


def test_interaction_contrasts_compare_log_ratios_and_keep_a_precise_effect():
    # Noise of 1e-9 relative: per-trial differences of PE agree to ~1e-17, which an absolute tolerance of 1e-8 called identical.
    rows = interaction_contrasts(_pe_study(factors=(0.5, 0.35), noise=1e-9), "pe")
    assert len(rows) == 1 and rows[0]["status"] == "ok" and rows[0]["p_unc"] < 1e-6
    assert rows[0]["change_a"] == pytest.approx(-75.0, abs=1e-4)  # two halvings: × 0.25
    assert rows[0]["change_b"] == pytest.approx(100 * (0.35**2 - 1), abs=1e-4)
    assert rows[0]["ratio_of_changes"] == pytest.approx(0.25 / 0.35**2, rel=1e-6)


def test_equal_log_changes_in_every_trial_are_reported_as_untestable_not_dropped():
    rows = interaction_contrasts(_pe_study(noise=0.0), "pe")
    assert len(rows) == 1 and rows[0]["status"] == "not tested" and "t is undefined" in rows[0]["message"]


def test_posthoc_on_the_log_scale_is_a_paired_t_of_log_values_with_the_geometric_mean_ratio():
    trials = _pe_study(seed=5).filter(pl.col("levels_model") == "m1")
    row = next(r for r in posthoc(trials, "pe") if (r["budget_a"], r["budget_b"]) == (BUDGETS[0], BUDGETS[2]))
    wide = trials.pivot(on="budget", index="trial", values="pe").sort("trial")
    a, b = np.log(wide[str(BUDGETS[0])].to_numpy()), np.log(wide[str(BUDGETS[2])].to_numpy())
    assert abs(row["t"]) == pytest.approx(abs(sps.ttest_rel(a, b).statistic), rel=1e-10)
    assert row["ratio"] == pytest.approx(np.exp((b - a).mean()), rel=1e-12)
    assert isinstance(row["df"], int) and row["df"] == 9


def test_eval_loss_stays_on_the_raw_scale():
    trials = _pe_study().with_columns(eval_loss=3.0 - pl.col("budget") / 40_000)
    assert rm_anova(trials, "eval_loss")["scale"] == "raw"
