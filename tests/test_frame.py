"""One analysis frame: a subject enters every table, figure and test whole, or not at all."""

import polars as pl
from tokenwatt.analysis.conditions import changes_table, conditions_table
from tokenwatt.analysis.frame import energy_is_estimated, frame
from tokenwatt.analysis.stats import analyse_study, stats_product
from tokenwatt.common.measures import TESTED
from tokenwatt.presentation import figures as F
from tokenwatt.presentation.inputs import ReportInputs
from tokenwatt.presentation.sections.summary import sentences
from trial_records import QUALITY, aggregate, raw_record

BUDGETS = [10_000, 20_000, 40_000]


def _records(n=5, flagged=(), missing=()):
    """A study's records; a (budget, trial) in ``flagged`` got too few power samples, one in ``missing`` never finished."""
    out = []
    for t in range(1, n + 1):
        for i, b in enumerate(BUDGETS):
            if (b, t) in missing:
                out.append(None)
                continue
            train_s = 2.0 * 2**i * (1 + 0.01 * t)
            out.append(
                raw_record(
                    b,
                    t,
                    eval_loss=3.0 - 0.3 * i + 0.01 * t,
                    train_s=train_s,
                    duration_s=train_s,
                    energy_j=32.0 * train_s * (1 + 0.02 * t),
                    power_rms_w=32.0 + 0.1 * t + 0.05 * i,
                    samples_with_power=5 if (b, t) in flagged else 100,
                )
            )
    return out


def _aggregate(records, exclude_flagged=False, n=5):
    return aggregate(
        records, [(b, t) for t in range(1, n + 1) for b in BUDGETS], quality=QUALITY, exclude_flagged=exclude_flagged
    )[0]


def test_a_subject_flagged_in_one_cell_leaves_every_cell_when_flagged_trials_are_excluded():
    trials = _aggregate(_records(flagged=[(20_000, 2)]), exclude_flagged=True)
    kept = frame(trials)
    assert sorted(kept["trial"].unique().to_list()) == [1, 3, 4, 5]
    n = conditions_table(trials).filter(pl.col("measure") == "pe")["n"].to_list()
    assert n == [4, 4, 4]  # every budget, not just the one the flag was in


def test_a_subject_missing_a_cell_leaves_every_cell():
    trials = _aggregate(_records(missing=[(40_000, 3)]))
    assert 3 not in frame(trials)["trial"].to_list()
    assert conditions_table(trials).filter(pl.col("measure") == "energy_j")["n"].to_list() == [4, 4, 4]
    assert analyse_study(trials, TESTED, exclude_flagged=False)["anova"]["pe"]["n_trials"] == 4


def test_every_subject_flagged_in_one_cell_means_no_sensitivity_analysis_not_a_smaller_design():
    trials = _aggregate(_records(flagged=[(10_000, t) for t in range(1, 6)]))
    stats = analyse_study(trials, TESTED, exclude_flagged=False)
    assert stats["sensitivity"]["anova"] == {}
    assert "No sensitivity analysis is possible: only 0 subject(s)" in stats["sensitivity"]["message"]
    assert stats["anova"]["pe"]["df1"] == 2  # the primary analysis keeps all three budgets


def test_some_subjects_flagged_give_a_sensitivity_analysis_on_the_others_in_every_cell():
    trials = _aggregate(_records(flagged=[(10_000, 1), (40_000, 2)]))
    sens = analyse_study(trials, TESTED, exclude_flagged=False)["sensitivity"]
    assert sens["subjects"] == 3 and sens["anova"]["pe"]["n_trials"] == 3 and sens["anova"]["pe"]["df1"] == 2


def test_excluding_flagged_trials_changes_the_conditions_the_summary_and_the_figures_too():
    records = _records(flagged=[(10_000, 5), (20_000, 4)])
    every, clean = _aggregate(records), _aggregate(records, exclude_flagged=True)
    pe = lambda t: conditions_table(t).filter(pl.col("measure") == "energy_j")["center"].to_list()  # noqa: E731
    assert pe(every) != pe(clean)
    summary = lambda t, ex: " ".join(  # noqa: E731
        sentences(ReportInputs(config={}, trials=t, products={"stats": stats_product(t, ex).data}))
    )
    assert "over 5 trials" in summary(every, False) and "over 3 trials" in summary(clean, True)

    def lines(t):
        made = F.make_all(t, conditions_table(t), changes_table(conditions_table(t)), {}, False)
        return len(made["pe_by_budget"].axes[0].lines)

    assert lines(clean) < lines(every)


def test_estimated_energy_is_read_from_the_record_not_from_the_meter_name():
    assert energy_is_estimated(pl.DataFrame({"meter": ["rapl", "rapl"], "meter_is_estimate": [False, True]}))
    assert not energy_is_estimated(pl.DataFrame({"meter": ["estimate"], "meter_is_estimate": [False]}))
    assert not energy_is_estimated(pl.DataFrame({"trial": []}))  # no trial finished: nothing to label
