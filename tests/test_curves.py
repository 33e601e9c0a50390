"""The eval curves product: every curve analysis run on a study's frame of trials, as the report reads it."""

import json

import polars as pl
from curve_study import BUDGETS, budget_study, curves_table, run_rows
from tokenwatt.analysis.curves.stopping_replay import stopping_outcomes
from tokenwatt.analysis.curves.summary import analyse_curves, curves_product
from tokenwatt.analysis.curves.targets import default_targets, energy_to_target, energy_to_target_comparisons
from tokenwatt.analysis.curves.trajectory import trajectory
from tokenwatt.plan.stopping import StopRule
from tokenwatt.presentation.sections.curves import _pairs

SETTINGS = {"targets": [], "gain_fraction": 0.1, "stopping": {}}


def test_every_record_serialises_to_json():
    curves = budget_study(n=4, points=5)
    reached = energy_to_target(curves, default_targets(curves))
    records = [
        *energy_to_target_comparisons(reached),
        trajectory(curves),
        stopping_outcomes(curves, StopRule("marginal", 0.01, 2)),
    ]
    assert all(json.loads(json.dumps(r.to_dict())) for r in records)


def test_the_product_reads_the_frames_trials_and_replays_a_rule_on_the_runs_no_rule_stopped_online():
    curves = budget_study(n=4, points=5)
    runs = curves.select("cell", "trial").unique(maintain_order=True)
    trials = runs.with_columns(
        in_frame=pl.col("trial") != 4,  # subject 4 is out of the frame: none of its runs is analysed
        stop_rule_rule=pl.when((pl.col("cell") == "b100000") & (pl.col("trial") == 3))
        .then(pl.lit("marginal"))
        .otherwise(pl.lit(None)),  # null: trained all its tokens, as "none" does
    )
    rule = {"rule": "marginal", "min_gain_per_kj": 0.01, "patience": 2}
    got = curves_product(trials=trials, curves=curves, cost={}, settings={**SETTINGS, "stopping": {"m": rule}})
    assert got.summary == "curves: ok; 45 points of 9 trials"
    assert len(got.data["trajectory"]["trials"]) == 9
    replayed = {(r["cell"], r["trial"]) for r in got.data["stopping"]["m"]["trials"]}
    assert replayed == {(c, t) for c, t in runs.iter_rows() if t != 4} - {("b100000", 3)}
    assert json.dumps(got.data, allow_nan=False)  # strict JSON: no NaN reaches the file


def test_a_study_without_energy_has_its_trajectory_and_says_why_nothing_else():
    tokens = [1e4, 1e5, 1e6]
    curves = curves_table(*(run_rows(100_000, t, tokens, [4.0, 3.2, 2.9], [None] * 3) for t in (1, 2, 3)))
    got = analyse_curves(curves, SETTINGS)
    assert got["status"] == "no energy" and "meter none" in got["message"]
    assert len(got["trajectory"]["trials"]) == 3 and "energy_to_target" not in got


def test_one_evaluation_per_trial_reads_the_final_points_only_and_says_so():
    got = analyse_curves(budget_study(n=3, points=1), SETTINGS)
    assert got["status"] == "ok" and got["points_per_trial"] == 1
    assert got["message"].startswith("One evaluation per trial")


def test_a_trial_diverged_to_a_finite_loss_past_exps_range_keeps_its_loss_and_misses_only_its_perplexity():
    # A diverged run's loss can be finite yet past ~709 nats, where exp() overflows: 1000 nats on every point.
    diverged = (BUDGETS[-1], 2)
    got = analyse_curves(budget_study(n=4, points=5, shift={diverged: 1000.0}), SETTINGS)
    assert json.dumps(got, allow_nan=False)
    points = [p for p in got["trajectory"]["points"] if (p["budget"], p["trial"]) == diverged]
    assert len(points) == 5 and all(p["eval_loss"] > 1000 and p["perplexity"] is None for p in points)
    best = next(t for t in got["trajectory"]["trials"] if (t["budget"], t["trial"]) == diverged)
    assert best["best_loss"] > 1000 and best["best_perplexity"] is None
    # the comparison that pairs it keeps its loss change; the report shows the row, its perplexity change "—"
    compared = [r for r in got["quality_at_energy_comparison"] if r["budget_b"] == BUDGETS[-1]]
    assert compared and all(r["loss_change"] is not None for r in compared)
    assert "—" in str(_pairs(compared))
