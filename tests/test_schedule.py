"""The learning-rate schedule: constant (bit for bit the loop without one), warmup then cosine to the last step, or
warmup-stable-decay; a warmup that grows with the model."""

import math

import pytest
import torch
from tokenwatt.training.schedule import Schedule, schedule_from_config


def test_constant_is_exactly_one_at_every_step():
    assert {Schedule().factor(s, 100) for s in range(100)} == {1.0}


def test_cosine_warms_up_linearly_then_decays_to_its_final_fraction_at_the_trials_last_step():
    s = Schedule("cosine", warmup_fraction=0.1, final_fraction=0.1)
    factors = [s.factor(i, 100) for i in range(100)]
    assert factors[:10] == pytest.approx([(i + 1) / 10 for i in range(10)])
    assert factors[10] == pytest.approx(1.0) and factors[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(factors[10:], factors[11:], strict=False))  # never rises after the peak
    assert factors[55] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 45 / 89)))


def test_a_schedule_comes_from_train_schedule_and_is_recorded_whole():
    s = schedule_from_config({"kind": "cosine", "warmup_fraction": 0.05, "final_fraction": 0.0})
    assert s.to_dict() == {
        "kind": "cosine",
        "warmup_fraction": 0.05,
        "final_fraction": 0.0,
        "warmup_tokens_per_parameter": 0.0,
        "cooldown_fraction": 0.2,
        "branch_every": None,
    }
    assert schedule_from_config(None) == Schedule()


def test_a_branched_wsd_cools_down_from_the_step_its_tokens_reach_the_share_not_by_steps():
    s = Schedule(kind="wsd", cooldown_fraction=0.25, final_fraction=0.1, branch_every=10)
    assert s.cooldown_tokens(1000) == 750 and Schedule(kind="wsd").cooldown_tokens(1000) is None
    rates = [s.factor(step, 100, 0, cooldown_from=80) for step in range(100)]
    assert rates[:80] == [1.0] * 80 and rates[80] == pytest.approx(1 - 0.9 / 20) and rates[99] == pytest.approx(0.1)
    assert [s.factor(step, 100, 0) for step in (74, 75)] == [1.0, pytest.approx(1 - 0.9 / 25)]  # by steps: 25 of them


def test_the_training_loop_steps_at_the_scheduled_rate():
    """A one-parameter model whose gradient is 1: AdamW's first update is −lr·sign; with cosine the rates fall."""
    from tokenwatt.training.optim import FusedAdamW

    p = torch.nn.Parameter(torch.zeros(1))
    opt = FusedAdamW([p], lr=0.1, weight_decay=0.0)
    s = Schedule("cosine", warmup_fraction=0.0, final_fraction=0.0)
    seen = []
    for step in range(3):
        before = p.item()
        p.grad = torch.ones(1)
        opt.lr = 0.1 * s.factor(step, 3)
        opt.step()
        seen.append(before - p.item())
    assert seen[0] == pytest.approx(0.1, rel=1e-4) and seen[1] < seen[0] and seen[2] == pytest.approx(0.0, abs=1e-9)


def test_wsd_holds_the_rate_then_falls_linearly_to_its_final_fraction_over_the_last_steps():
    s = Schedule("wsd", final_fraction=0.0, cooldown_fraction=0.2)
    factors = [s.factor(i, 100) for i in range(100)]
    assert set(factors[:80]) == {1.0}
    assert factors[80:] == pytest.approx([1.0 - (i + 1) / 20 for i in range(20)])
    assert factors[-1] == 0.0


def test_wsd_s_stable_part_is_the_same_whatever_the_trials_length():
    # what lets one stable run stand for every budget up to where its cooldown would start
    s = Schedule("wsd", warmup_fraction=0.0, cooldown_fraction=0.2)
    short, long = [s.factor(i, 50, warmup=5) for i in range(40)], [s.factor(i, 400, warmup=5) for i in range(40)]
    assert short == long


def test_a_warmup_grows_with_the_model_and_is_the_longer_of_its_two_settings():
    s = Schedule("constant", warmup_fraction=0.01, warmup_tokens_per_parameter=1.0)
    # 100 000 parameters at 2 × 64 tokens a step: 782 steps, longer than 1 % of 10 000
    assert s.warmup_steps(10_000, parameters=100_000, tokens_per_step=128) == 782
    assert s.warmup_steps(10_000, parameters=1_000, tokens_per_step=128) == 100  # the share is longer
    assert s.warmup_steps(500, parameters=100_000, tokens_per_step=128) == 499  # never the whole trial
    factors = [s.factor(i, 10_000, warmup=782) for i in range(1000)]
    assert factors[0] == pytest.approx(1 / 782) and factors[781] == 1.0 and set(factors[782:]) == {1.0}


def test_the_room_after_a_warmup_depends_on_what_follows_it():
    assert Schedule("constant", warmup_fraction=0.5).room_after_warmup(10, 0, 1) is None
    assert Schedule("cosine", warmup_fraction=0.5).room_after_warmup(10, 0, 1) is None  # the schema's largest share
    assert Schedule("wsd", warmup_fraction=0.5, cooldown_fraction=0.5).room_after_warmup(10, 0, 1) is None
    assert "before the wsd decay" in Schedule("wsd", warmup_fraction=0.5, cooldown_fraction=0.6).room_after_warmup(
        10, 0, 1
    )
    assert "no stable rate" in Schedule("constant", warmup_tokens_per_parameter=1.0).room_after_warmup(10, 100, 10)
