"""The optimizer as a factor (train.optimizer, design.optimizer): every kind trains a whole trial on CPU and resumes from
its checkpoint bit for bit, records the bytes its state holds and the peak memory above them; the default is today's
optimizer; what a machine or a config cannot do is said before any job."""

import contextlib
import dataclasses

import pytest
import torch
from test_checkpoint import KEY, Killed, _data, _same_training, _stop_after_checkpoint
from test_train import SIZES, TOK, _chunks, _model, _settings, _spec
from tokenwatt.common.records import check_record, load_validator
from tokenwatt.plan import optimizers
from tokenwatt.plan.optimizers import KINDS, floor_bytes, normalized
from tokenwatt.training.model import build_model, preset_sizes
from tokenwatt.training.optim import FusedAdamW, make_optimizer, state_bytes
from tokenwatt.training.resume import CheckpointPlace
from tokenwatt.training.spec import TrialData
from tokenwatt.training.train import TrainHooks, TrainSettings, train
from tokenwatt.training.trial import run_trial

# hidden 64 over a 64-token vocabulary: the embedding and the head hold 4 096 values each, which torchao quantizes
# (tensors of at least 4 096 values whose size its block divides); the layers' smaller tensors stay fp32
WIDE = {**SIZES, "hidden_size": 64, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}


def _trial(place, optimizer, **train):
    ids, mask = _data(n=24)
    chunks = _chunks(ids, mask)
    subset = {"chunk_ids": list(range(16)), "n_chunks": 16, "real_tokens": int(mask[:16].sum())}
    data = TrialData(subset=subset, train_chunks=chunks, eval_chunks=chunks[16:], tokenizer=TOK)
    spec = _spec("estimate", {"points": 3, "first_fraction": 0.2}, **{"epochs": 4, "checkpoint_every": 150, **train})
    model = {"source": "config", "preset": "llama-tiny", "overrides": WIDE}
    spec = dataclasses.replace(
        spec, model=model, train=dataclasses.replace(spec.train, optimizer=normalized(optimizer))
    )
    return run_trial(spec, data, log=lambda s: None, place=place)


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_trains_and_resumes_from_its_checkpoint_bit_for_bit(tmp_path, monkeypatch, kind):
    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY), kind)
    place = CheckpointPlace(tmp_path / "killed", KEY)
    with monkeypatch.context() as m:
        _stop_after_checkpoint(m, 2, "kill")
        with contextlib.suppress(Killed):
            _trial(place, kind)
    resumed = _trial(place, kind)
    _same_training(whole, resumed)
    metrics = resumed[0]
    assert metrics["resumed"] == 1 and metrics["optimizer_settings"]["kind"] == kind
    held = metrics["model_bytes"] + metrics["gradient_bytes"] + metrics["optimizer_state_bytes"]
    assert metrics["peak_memory_bytes"] > held and metrics["peak_memory_method"] == "vmhwm-reset-at-training"
    assert metrics["peak_memory_bytes"] >= metrics["memory_at_start_bytes"]
    per_parameter = metrics["optimizer_state_bytes_per_parameter"]
    # the quantized kinds keep the layers' small tensors in fp32, so this model sits between the two widths
    assert {"adamw": 8 <= per_parameter < 8.1, "adamw-schedulefree": per_parameter == 8}.get(
        kind, 1 < per_parameter < 7
    )
    check_record(metrics, load_validator("workflow/schemas/metrics.schema.yaml"), "metrics.json")


def test_four_bit_state_is_smaller_than_eight_bit_and_both_below_fp32_moments():
    held = {}
    for kind in KINDS:
        model, (ids, mask) = build_model(preset_sizes("llama-tiny", WIDE, TOK, 16), 0, "native"), _data()
        result = train(model, ids, mask, torch.device("cpu"), _settings(epochs=1, optimizer=normalized(kind)))
        held[kind] = state_bytes(result.state.optimizer)
    assert (
        held["adamw-4bit"] < held["adamw-8bit"] < held["adamw"] == pytest.approx(held["adamw-schedulefree"], rel=0.01)
    )


def test_the_default_is_todays_fused_adamw_and_naming_it_changes_no_bit():
    assert TrainSettings.from_config({**_config(), "optimizer": "adamw"}, 7) == TrainSettings.from_config(_config(), 7)
    torch.manual_seed(0)
    assert isinstance(make_optimizer(_model(), _settings()), FusedAdamW)
    runs = []
    for settings in (_settings(), _settings(optimizer={"kind": "adamw"})):
        model, (ids, mask) = _model(), _data()
        steps = train(model, ids, mask, torch.device("cpu"), settings).steps
        runs.append(([(r["step"], r["loss"]) for r in steps], model.state_dict()))
    assert runs[0][0] == runs[1][0] and all(torch.equal(a, b) for a, b in zip(*(r[1].values() for r in runs)))


def _config():
    return dict(epochs=2, batch_size=4, lr=3e-3, weight_decay=0.0, precision="fp32", log_every=4)


def test_a_schedule_free_evaluation_reads_the_average_and_leaves_training_as_it_was():
    """Evaluations switch schedule-free to its averaged weights and back exactly: the run with pauses trains the same
    bits as the run without, and its evaluations read other weights than the ones it steps from."""
    settings = _settings(optimizer=normalized("adamw-schedulefree"))
    seen, finals = [], []
    for pauses in ([], [100, 300]):
        model, (ids, mask) = _model(), _data()
        hooks = TrainHooks(pause_at_tokens=pauses, pause=lambda at, m=model: seen.append(m.lm_head.weight.clone()))
        result = train(model, ids, mask, torch.device("cpu"), settings, hooks=hooks)
        finals.append(model.state_dict())
        with result.evaluating():
            averaged = model.lm_head.weight.clone()
        assert not torch.equal(averaged, model.lm_head.weight)
    assert all(torch.equal(a, b) for a, b in zip(finals[0].values(), finals[1].values()))
    assert len(seen) == 2


def test_a_kind_takes_only_its_settings_and_schedule_free_only_a_constant_rate():
    cfg = {
        "design": {
            "optimizer": {"small": {"kind": "adamw-8bit", "block_size": 128, "r": 1.0}, "sf": "adamw-schedulefree"}
        },
        "train": {"optimizer": "adamw", "schedule": {"kind": "cosine"}},
    }
    problems = optimizers.setting_problems(cfg)
    assert problems[0] == "design.optimizer.small: adamw-8bit takes block_size, not r"
    assert problems[1].startswith("design.optimizer.sf: adamw-schedulefree replaces the rate's decay")
    assert "train.schedule.kind: constant" in problems[1]


def test_a_kind_this_machine_cannot_build_is_named_with_why(monkeypatch):
    cfg = {"design": {"optimizer": ["adamw", "adamw-8bit", "adamw-schedulefree"]}, "train": {}}
    monkeypatch.setattr(optimizers, "cpp_compiler", lambda: None)
    real = optimizers.metadata.version
    monkeypatch.setattr(
        optimizers.metadata,
        "version",
        lambda d: real("nonexistent-tokenwatt-dist") if d == "schedulefree" else real(d),
    )
    found = dict(optimizers.machine_problems(cfg, cuda=False))
    assert set(found) == {"design.optimizer.adamw-8bit", "design.optimizer.adamw-schedulefree"}
    assert "needs a C++ compiler" in found["design.optimizer.adamw-8bit"]
    assert "not installed" in found["design.optimizer.adamw-schedulefree"]
    assert dict(optimizers.machine_problems(cfg, cuda=True)).keys() == {"design.optimizer.adamw-schedulefree"}


def test_the_paper_protocols_floor_fits_an_a10g_only_with_smaller_state():
    """TinyLlama-1.1B (1 100 048 384 parameters): fp32 weights and gradients with AdamW's moments, 17.6 GB, against an
    A10G's 24 GB (22.5 usable); 8-bit moments 11.0 GB, 4-bit 10.0 GB (docs/factorial-designs.md)."""
    n = 1_100_048_384
    assert floor_bytes(n, normalized("adamw")) / 1e9 == pytest.approx(17.60, abs=0.01)
    assert floor_bytes(n, normalized("adamw-8bit")) / 1e9 == pytest.approx(11.04, abs=0.01)
    assert floor_bytes(n, normalized("adamw-4bit")) / 1e9 == pytest.approx(9.97, abs=0.01)


def test_the_plan_warns_where_weights_gradients_and_state_exceed_the_devices_memory(tmp_path):
    from test_plan_checks import _config as study_config
    from test_plan_checks import _study
    from tokenwatt.plan import startup

    config = study_config(tmp_path)
    config["design"] = {"optimizer": ["adamw", "adamw-4bit"]}
    config["plan"] = {"device_memory_gb": 0.0012}  # llama-tiny: ~100 K parameters, 1.6 MB with AdamW, 0.9 with 4-bit
    warnings = [w for w in startup.design_warnings(_study(config)) if "before any activation" in w]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING: optimizer adamw: ")
    assert (
        "over the device's 0.0 GB (plan.device_memory_gb)" in warnings[0]
        and "train.optimizer: adamw-8bit" in warnings[0]
    )
    config["plan"] = {"device_memory_gb": 1.0}
    assert not [w for w in startup.design_warnings(_study(config)) if "before any activation" in w]
