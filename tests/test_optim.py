"""tokenwatt's AdamW is torch.optim.AdamW(fused=True), bit for bit (that no trial imports the compiler: test_llama.py)."""

import pytest
import torch
from tokenwatt.training.optim import FusedAdamW


def model_pair(seed=0):
    torch.manual_seed(seed)
    a = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 20))
    b = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 20))
    b.load_state_dict(a.state_dict())
    return a, b


def loss_of(model, step):
    ids = torch.arange(step, step + 12).remainder(20)
    return torch.nn.functional.cross_entropy(model(ids), ids.roll(1))


def assert_same_parameters(a, b):
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name


def test_steps_equal_torch_fused_adamw_bit_for_bit():
    ours, theirs = model_pair()
    opt_ours = FusedAdamW(ours.parameters(), lr=3e-3, weight_decay=0.1)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=3e-3, weight_decay=0.1, fused=True)
    for step in range(25):
        for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            loss_of(model, step).backward()
            opt.step()
    assert_same_parameters(ours, theirs)
    assert not torch.equal(ours[2].weight, model_pair()[0][2].weight)  # it did train


def test_under_a_grad_scaler_it_steps_and_skips_like_torch():
    ours, theirs = model_pair(1)
    opts = [
        FusedAdamW(ours.parameters(), lr=1e-2, weight_decay=0.0),
        torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.0, fused=True),
    ]
    scalers = [torch.amp.GradScaler("cpu", init_scale=2.0**10) for _ in opts]
    for step in range(8):
        for model, opt, scaler in zip((ours, theirs), opts, scalers):
            opt.zero_grad()
            loss = loss_of(model, step) * (float("inf") if step == 3 else 1.0)  # step 3 overflows: skipped
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    assert_same_parameters(ours, theirs)
    assert opts[0].state_steps[0].item() == 7  # the skipped step did not count
    assert scalers[0].get_scale() == scalers[1].get_scale() < 2.0**10


def test_parameters_without_a_gradient_keep_their_state():
    ours, _ = model_pair()
    opt = FusedAdamW(ours.parameters(), lr=1e-2, weight_decay=0.1)
    frozen = ours[0].weight.detach().clone()
    ours[2](ours[1](torch.randn(4, 8))).sum().backward()  # the embedding takes no part
    opt.step()
    assert torch.equal(ours[0].weight, frozen) and opt.state_steps[0].item() == 0
    assert opt.state_steps[1].item() == 1


def test_parameters_on_two_devices_or_dtypes_are_refused():
    with pytest.raises(
        ValueError, match="torch.float32 on cpu, torch.float64 on cpu; the fused AdamW step needs one dtype"
    ):
        FusedAdamW(
            [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))], 1e-3, 0.0
        )
