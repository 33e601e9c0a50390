"""The evaluation schedule: log-spaced points in real tokens, shared by every budget of a study, explicit points,
the intermediate eval subset."""

import math

import pytest
import torch
import yaml
from tokenwatt.plan.config import load_schema, validate_config
from tokenwatt.plan.design import Design
from tokenwatt.plan.evalgrid import shared_grid
from tokenwatt.training.evalplan import EvalSchedule, eval_thresholds, subset_chunks
from workflow_helpers import ROOT


def test_points_are_log_spaced_from_the_first_fraction_to_the_end():
    thresholds = eval_thresholds(1_200_000, EvalSchedule(points=8, first_fraction=0.01))
    assert len(thresholds) == 7 and thresholds[0] == 12_000  # the eighth point is the final evaluation, at the end
    ratios = [b / a for a, b in zip(thresholds, thresholds[1:])]
    assert all(math.isclose(r, 100 ** (1 / 7), rel_tol=1e-3) for r in ratios)


def test_zero_or_one_point_keeps_the_single_final_evaluation():
    assert eval_thresholds(10_000, EvalSchedule(points=0)) == eval_thresholds(10_000, EvalSchedule(points=1)) == []


def test_explicit_points_inside_the_run_are_kept_in_order_and_the_rest_dropped():
    assert eval_thresholds(10_000, EvalSchedule(points=8, at_tokens=[5_000, 1_000, 10_000, 20_000])) == [1_000, 5_000]


def test_intermediate_evaluations_use_the_leading_chunks_that_fit_the_token_limit():
    mask = torch.tensor([[1] * 10 + [0] * 6, [1] * 16, [1] * 4 + [0] * 12])
    assert subset_chunks(mask, 26) == 2 and subset_chunks(mask, 5) == 1 and subset_chunks(mask, None) == 3


def test_a_grid_of_no_point_inside_the_run_keeps_the_final_evaluation_alone_not_the_trials_own_spacing():
    # [] is a study's grid with no point below this trial's end; None (no study) spaces the trial's own points
    assert eval_thresholds(10_000, EvalSchedule(points=8, grid=[])) == []
    assert eval_thresholds(10_000, EvalSchedule(points=8, grid=[2_000, 5_000, 10_000, 40_000])) == [2_000, 5_000]


def test_the_studys_grid_is_the_smallest_budgets_own_spacing_continued_to_the_largest_budget():
    grid = shared_grid([50_000, 200_000, 100_000], points=8, first_fraction=0.01)
    assert grid[0] == 500 and grid[7] == 50_000  # the smallest budget's 8 points, its final one among them
    spaced = [t for t in grid if t != 100_000]
    steps = [math.log(b / a, 100 ** (1 / 7)) for a, b in zip(spaced, spaced[1:])]
    assert all(math.isclose(s, 1.0, abs_tol=0.01) for s in steps) and grid[-1] < 200_000  # one ratio, below the end


def test_every_smaller_budgets_end_is_a_point_so_two_budgets_share_every_segment_up_to_it():
    # a budget's default target is crossed near its end: the larger budgets must be evaluated there too
    grid = shared_grid([50_000, 100_000, 200_000], points=8, first_fraction=0.01)
    assert {50_000, 100_000} <= set(grid) and 200_000 not in grid
    for small, large in ((50_000, 100_000), (50_000, 200_000), (100_000, 200_000)):
        below = [*eval_thresholds(small, EvalSchedule(points=8, grid=grid)), small]
        assert eval_thresholds(large, EvalSchedule(points=8, grid=grid))[: len(below)] == below


def test_a_budget_added_above_moves_no_point_and_one_in_between_adds_only_its_end():
    # a moved point changes a trial's eval settings, and the trial (a branched study's cooldown) trains again
    before = shared_grid([1_000, 2_000], points=3, first_fraction=0.01)
    assert shared_grid([1_000, 2_000, 3_000], points=3, first_fraction=0.01) == [*before, 2_000]
    assert shared_grid([1_000, 1_500, 2_000], points=3, first_fraction=0.01) == sorted([*before, 1_500])


def test_a_grid_too_fine_to_reach_the_largest_budget_is_refused_naming_the_settings():
    with pytest.raises(ValueError, match="eval.first_fraction 0.9999"):
        shared_grid([50_000, 200_000], points=8, first_fraction=0.9999)


def test_one_budget_alone_gets_the_same_points_as_a_trial_spacing_its_own_tokens():
    assert shared_grid([1_200_000], 8, 0.01) == eval_thresholds(1_200_000, EvalSchedule(points=8, first_fraction=0.01))
    assert shared_grid([1_000, 2_000], 1, 0.01) == shared_grid([1_000, 2_000], 0, 0.01) == []


def _design(**changes) -> Design:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["study"]["budgets"] = [50_000, 100_000, 200_000]
    for section, values in changes.items():
        config[section] = {**config.get(section, {}), **values}
    return Design(validate_config(config, load_schema(ROOT / "workflow/schemas/config.schema.yaml")))


def test_the_design_gives_every_budget_the_shared_grid_below_its_own_end():
    d = _design(eval={"points": 8, "first_fraction": 0.01})
    grid = shared_grid([50_000, 100_000, 200_000], 8, 0.01)
    for budget in (50_000, 100_000, 200_000):
        got = d.eval_config(d.cell(f"b{budget}"))
        assert got == {**d.config["eval"], "grid": [t for t in grid if t < budget]}


def test_the_grid_is_in_trained_tokens_and_scales_with_a_model_levels_budgets():
    d = _design(train={"epochs": 2}, design={"model": {"small": {"preset": "llama-tiny", "budget_scale": 2.0}}})
    got = d.eval_config(d.cell("model=small/b50000"))["grid"]
    assert got == [t for t in shared_grid([200_000, 400_000, 800_000], 8, 0.01) if t < 200_000]


def test_explicit_points_or_a_final_evaluation_alone_keep_the_configs_eval_settings_as_they_are():
    for schedule in ({"at_tokens": [1_000, 60_000]}, {"points": 1}):
        d = _design(eval=schedule)
        assert d.eval_config(d.cell("b200000")) == d.config["eval"]
