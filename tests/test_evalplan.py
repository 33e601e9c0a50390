"""The evaluation schedule: log-spaced points in real tokens, explicit points, the intermediate eval subset."""

import math

import torch
from tokenwatt.training.evalplan import EvalSchedule, eval_thresholds, subset_chunks


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
