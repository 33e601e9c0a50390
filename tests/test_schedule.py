"""The learning-rate schedule: constant (bit for bit the loop without one), or warmup then cosine to the last step."""

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
    assert s.to_dict() == {"kind": "cosine", "warmup_fraction": 0.05, "final_fraction": 0.0}
    assert schedule_from_config(None) == Schedule()


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
