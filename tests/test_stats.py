from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.anova import AnovaRM
from tokenwatt.analysis.stats import analyse, friedman, posthoc, rm_anova

BUDGETS = [500_000, 1_000_000, 2_000_000]


def _trials(y: np.ndarray, budgets=BUDGETS, dv="eval_loss") -> pl.DataFrame:
    n, k = y.shape
    return pl.DataFrame({"trial": np.repeat(np.arange(1, n + 1), k), "budget": np.tile(budgets[:k], n), dv: y.ravel()})


def _study_like(n=20, seed=0) -> np.ndarray:
    """Trials × budgets with a subject effect, a budget effect and noise, like a real run: additive, so these
    tests check the ANOVA's arithmetic on a raw-scale measure (eval loss); the log scale has its own tests below."""
    rng = np.random.default_rng(seed)
    return 0.8 - np.array([0.0, 0.2, 0.4]) + rng.normal(0, 0.03, size=(n, 1)) + rng.normal(0, 0.02, size=(n, 3))


def _statsmodels_F(trials: pl.DataFrame, dv="eval_loss") -> tuple[float, float]:
    res = AnovaRM(trials.to_pandas(), depvar=dv, subject="trial", within=["budget"]).fit().anova_table
    return float(res["F Value"].iloc[0]), float(res["Pr > F"].iloc[0])


def test_rm_anova_matches_statsmodels_on_study_like_data():
    trials = _trials(_study_like())
    ours = rm_anova(trials, "eval_loss")
    F, p = _statsmodels_F(trials)
    assert ours["F"] == pytest.approx(F, rel=1e-8, abs=1e-8)
    assert ours["p"] == pytest.approx(p, rel=1e-8, abs=1e-12)
    assert (ours["df1"], ours["df2"]) == (2, 38)


def test_rm_anova_matches_an_exact_hand_computation():
    """Known answer: sums of squares in exact rational arithmetic from their definitions."""
    y = [[7, 5, 4], [9, 9, 6], [6, 4, 4], [8, 7, 3], [10, 8, 6]]
    n, k = len(y), len(y[0])
    grand = Fraction(sum(map(sum, y)), n * k)
    col = [Fraction(sum(r[j] for r in y), n) for j in range(k)]
    row = [Fraction(sum(r), k) for r in y]
    ss_effect = n * sum((c - grand) ** 2 for c in col)
    ss_error = sum((y[i][j] - row[i] - col[j] + grand) ** 2 for i in range(n) for j in range(k))
    F = (ss_effect / (k - 1)) / (ss_error / ((k - 1) * (n - 1)))
    ours = rm_anova(_trials(np.array(y, dtype=float)), "eval_loss")
    assert ours["F"] == pytest.approx(float(F), rel=1e-12)
    assert ours["ss"]["effect"] == pytest.approx(float(ss_effect), rel=1e-12)
    assert ours["F"] == pytest.approx(_statsmodels_F(_trials(np.array(y, dtype=float)))[0], rel=1e-8)


def test_generalized_eta_squared_follows_the_hand_formula():
    """η²G = SS_effect / (SS_effect + (n-1)·Σ sd²) for a one-way within design (STUDY.md)."""
    y = _study_like(n=12, seed=3)
    ours = rm_anova(_trials(y), "eval_loss")
    ss_effect = y.shape[0] * ((y.mean(axis=0) - y.mean()) ** 2).sum()
    hand = ss_effect / (ss_effect + (y.shape[0] - 1) * (y.std(axis=0, ddof=1) ** 2).sum())
    assert ours["eta2_g"] == pytest.approx(hand, rel=1e-12)


def test_the_reference_studys_published_sds_cap_eta2_g_at_0_983():
    """With the published means and SDs (n = 50), η²G is 0.983 whatever the correlation; 0.997 is η²p."""
    rng = np.random.default_rng(1)
    common = rng.normal(size=(50, 1))
    raw = 0.87**0.5 * common + (1 - 0.87) ** 0.5 * rng.normal(size=(50, 3))
    z = (raw - raw.mean(axis=0)) / raw.std(axis=0, ddof=1)
    y = np.array([0.85, 0.62, 0.41]) + z * np.array([0.02, 0.03, 0.02])
    ours = rm_anova(_trials(y), "eval_loss")
    assert ours["eta2_g"] == pytest.approx(0.983, abs=5e-4)
    assert ours["eta2_p"] > 0.99


def test_sphericity_and_greenhouse_geisser_are_reported_with_three_budgets():
    ours = rm_anova(_trials(_study_like()), "eval_loss")
    assert 0.5 <= ours["eps_gg"] <= 1.0
    assert ours["df1_gg"] == pytest.approx(2 * ours["eps_gg"])
    assert ours["df2_gg"] == pytest.approx(38 * ours["eps_gg"])
    assert 0 <= ours["mauchly_p"] <= 1
    assert "GG ε =" in ours["apa"] and ours["apa"].startswith("F(2, 38) = ")


def test_incomplete_trials_are_dropped_and_listed():
    trials = _trials(_study_like(n=6)).filter(~((pl.col("trial") == 4) & (pl.col("budget") == 1_000_000)))
    trials = trials.with_columns(
        pl.when((pl.col("trial") == 2) & (pl.col("budget") == 500_000))
        .then(None)
        .otherwise(pl.col("eval_loss"))
        .alias("eval_loss")
    )
    ours = rm_anova(trials, "eval_loss")
    assert ours["dropped_trials"] == [2, 4] and ours["n_trials"] == 4 and ours["status"] == "ok"


def test_two_budgets_give_f_equal_to_the_paired_t_squared_and_no_sphericity():
    y = _study_like()[:, :2]
    ours = rm_anova(_trials(y), "eval_loss")
    t = posthoc(_trials(y), "eval_loss")[0]["t"]
    assert ours["F"] == pytest.approx(t**2, rel=1e-10)
    assert "eps_gg" not in ours and "GG" not in ours["apa"]


def test_two_trials_give_a_message_not_a_number():
    ours = rm_anova(_trials(_study_like(n=2)), "eval_loss")
    assert ours["status"] == "not tested" and "only 2 complete trials" in ours["message"] and "F" not in ours


def test_a_single_budget_gives_a_message():
    ours = rm_anova(_trials(_study_like()[:, :1]), "eval_loss")
    assert "only 1 budget" in ours["message"]


def test_zero_error_variance_gives_a_message_not_a_huge_f():
    y = np.array([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [5.0, 6.0, 7.0]])  # every trial changes identically
    ours = rm_anova(_trials(y), "eval_loss")
    assert ours["status"] == "not tested" and "no error variance" in ours["message"]
    constant = rm_anova(_trials(np.ones((4, 3))), "eval_loss")
    assert constant["status"] == "not tested"


def test_budgets_are_ordered_numerically_not_as_strings():
    """'1000000' < '500000' as strings; pairs and signs must follow the numbers."""
    y = _study_like()
    pairs = posthoc(_trials(y), "eval_loss")
    assert [(p["budget_a"], p["budget_b"]) for p in pairs] == [
        (500_000, 1_000_000),
        (500_000, 2_000_000),
        (1_000_000, 2_000_000),
    ]
    assert all(p["t"] > 0 for p in pairs)  # PE falls with the budget: A − B > 0
    assert all(p["p_holm"] >= p["p_unc"] for p in pairs)


def test_friedman_and_kendalls_w_for_a_perfectly_consistent_ranking():
    res = friedman(_trials(_study_like(n=10)), "eval_loss")
    assert res["kendall_w"] == pytest.approx(1.0) and res["Q"] == pytest.approx(20.0)


def test_analyse_reports_unmeasured_measures_instead_of_testing_nulls():
    trials = _trials(_study_like()).with_columns(pl.lit(None, dtype=pl.Float64).alias("energy_j"))
    out = analyse(trials, ["eval_loss", "energy_j"])
    assert set(out["anova"]) == {"eval_loss"} and "energy_j" in out["not_measured"]


@pytest.mark.parametrize(
    "p,cell,sentence",
    [
        (0.9061, ".906", "p = .906"),
        (0.0004, "< .001", "p < .001"),
        (0.001, ".001", "p = .001"),
        (0.04999, ".050", "p = .050"),
        (1.0, "1.000", "p = 1.000"),
    ],
)
def test_p_values_are_written_in_one_apa_style(p, cell, sentence):
    from tokenwatt.analysis.apa import fmt_p, p_value

    assert p_value(p) == cell and fmt_p(p) == sentence


def test_statistics_bounded_by_one_drop_the_leading_zero():
    from tokenwatt.analysis.apa import bounded

    assert (bounded(0.7134), bounded(0.05), bounded(1.0)) == (".713", ".050", "1.000")


def _factorial(n=8, seed=0, models=("tiny", "small"), precisions=None) -> pl.DataFrame:
    """Trials × budgets × models (× precisions) of an additive measure: a budget effect that grows with the model, plus noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(1, n + 1):
        subject = rng.normal()
        for b in BUDGETS:
            for i, m in enumerate(models):
                for p in precisions or [None]:
                    levels = {"levels_model": m, **({"levels_precision": p} if p else {})}
                    series = f"model={m}" + (f"/precision={p}" if p else "")
                    rows.append(
                        {
                            "trial": t,
                            "budget": b,
                            **levels,
                            "series": series,
                            "eval_loss": subject + b / 1e6 * (1 + i) + (p == "bf16") * 0.3 + rng.normal() * 0.5,
                        }
                    )
    return pl.DataFrame(rows)


@pytest.mark.parametrize("precisions", [None, ("fp32", "bf16")])
def test_factorial_f_matches_statsmodels_for_every_effect(precisions):
    trials = _factorial(precisions=precisions)
    within = ["budget", "levels_model", *(["levels_precision"] if precisions else [])]
    theirs = (
        AnovaRM(trials.to_pandas(), depvar="eval_loss", subject="trial", within=within)
        .fit()
        .anova_table["F Value"]
        .to_list()
    )
    ours = [e["F"] for e in rm_anova(trials, "eval_loss")["effects"]]
    assert ours == pytest.approx(theirs, rel=1e-8)


def test_two_way_greenhouse_geisser_and_generalized_eta_squared_match_pingouin():
    import pingouin as pg

    trials = _factorial()
    theirs = pg.rm_anova(
        data=trials.to_pandas(), dv="eval_loss", within=["budget", "levels_model"], subject="trial", effsize="ng2"
    )
    ours = rm_anova(trials, "eval_loss")["effects"]
    assert [e["eta2_g"] for e in ours] == pytest.approx(theirs["ng2"].to_list(), rel=1e-8)
    assert ours[0]["eps_gg"] == pytest.approx(theirs["eps"][0], rel=1e-8)
    assert ours[2]["eps_gg"] == pytest.approx(theirs["eps"][2], rel=1e-8)
    assert ours[2]["p_gg"] == pytest.approx(theirs["p_GG_corr"][2], rel=1e-8)


def test_mauchly_matches_pingouin_for_one_factor():
    import pingouin as pg

    trials = _trials(_study_like(n=12, seed=5))
    theirs = pg.sphericity(trials.to_pandas(), dv="eval_loss", within="budget", subject="trial")
    ours = rm_anova(trials, "eval_loss")
    assert (ours["mauchly_w"], ours["mauchly_p"]) == pytest.approx((theirs.W, theirs.pval), rel=1e-8)


def test_simple_effects_test_the_budget_within_each_level_holm_corrected():
    from tokenwatt.analysis.stats import holm, simple_effects

    trials = _factorial()
    rows = simple_effects(trials, "eval_loss")
    assert [r["series"] for r in rows] == ["model=tiny", "model=small"]
    alone = rm_anova(trials.filter(pl.col("series") == "model=small").drop("levels_model", "series"), "eval_loss")
    assert rows[1]["F"] == pytest.approx(alone["F"], rel=1e-12)
    assert [r["p_holm"] for r in rows] == pytest.approx(holm([r["p_gg"] for r in rows]))
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_an_interaction_contrast_compares_the_budget_change_between_two_levels():
    from tokenwatt.analysis.stats import interaction_contrasts

    row = interaction_contrasts(_factorial(), "eval_loss")[0]
    assert (row["series_a"], row["series_b"], row["df"]) == ("model=tiny", "model=small", 7)
    assert row["change_b"] > row["change_a"]  # the budget effect grows with the model


def test_with_one_budget_the_other_factors_are_still_tested():
    trials = _factorial().filter(pl.col("budget") == BUDGETS[0])
    ours = rm_anova(trials, "eval_loss")
    assert ours["status"] == "not tested" and "only 1 budget" in ours["message"]
    assert [e["effect"] for e in ours["effects"]] == ["model"] and ours["effects"][0]["status"] == "ok"
