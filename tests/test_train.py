import math
from dataclasses import FrozenInstanceError
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch
from tokenwatt.measurement.meters import MeterSettings
from tokenwatt.measurement.throughput import ThroughputCheck
from tokenwatt.training.evalplan import EvalSchedule
from tokenwatt.training.model import ModelError, build_model, check_tokenizer_matches, load_pretrained, preset_sizes
from tokenwatt.training.setup import set_up
from tokenwatt.training.spec import TrialData, TrialSpec
from tokenwatt.training.train import (
    Diverged,
    TrainHooks,
    TrainingError,
    TrainSettings,
    blowup_loss,
    check_precision,
    evaluate,
    labels_for,
    should_compile,
    train,
)
from tokenwatt.training.trial import run_trial

TOK = {"vocab_size": 64, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
SIZES = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


def _model(seed=0, implementation="native"):
    return build_model(preset_sizes("llama-tiny", SIZES, TOK, 16), seed, implementation)


def _data(n=48, length=16, seed=0):
    """Repetitive sequences a tiny model can learn, with padded tails."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((n, length), dtype=np.int64)
    mask = np.zeros((n, length), dtype=np.int64)
    for i in range(n):
        k = rng.integers(length // 2, length + 1)
        start = rng.integers(3, 10)
        ids[i, :k] = 3 + (start + np.arange(k)) % 12
        mask[i, :k] = 1
    return torch.from_numpy(ids), torch.from_numpy(mask)


def _settings(**kw):
    base = dict(epochs=2, batch_size=4, lr=3e-3, weight_decay=0.0, precision="fp32", seed=7, log_every=4)
    return TrainSettings(**{**base, **kw})


def test_loss_decreases_on_a_tiny_model():
    torch.set_num_threads(1)
    model = _model()
    ids, mask = _data()
    before = evaluate(model, ids, mask, torch.device("cpu"), "fp32", 16)
    result = train(model, ids, mask, torch.device("cpu"), _settings(epochs=6))
    after = evaluate(model, ids, mask, torch.device("cpu"), "fp32", 16)
    assert after < before - 0.5
    assert result.steps[-1]["loss"] < result.steps[0]["loss"]


def test_same_seed_gives_the_same_loss_curve_bit_for_bit():
    torch.set_num_threads(1)
    ids, mask = _data()
    curves = [[s["loss"] for s in train(_model(), ids, mask, torch.device("cpu"), _settings()).steps] for _ in range(2)]
    assert curves[0] == curves[1]
    other = [s["loss"] for s in train(_model(), ids, mask, torch.device("cpu"), _settings(seed=8)).steps]
    assert other != curves[0]


def _mean_log_z_squared(model, ids, mask) -> float:
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask)
        logits = out if isinstance(out, torch.Tensor) else out.logits
        return float(torch.logsumexp(logits.float(), -1)[mask.bool()].square().mean())


def test_the_z_loss_is_trained_on_but_the_loss_recorded_is_the_cross_entropy():
    torch.set_num_threads(1)
    ids, mask = _data()
    plain = train(_model(), ids, mask, torch.device("cpu"), _settings(log_every=1))
    with_z = train(_model(), ids, mask, torch.device("cpu"), _settings(log_every=1, z_loss=1e-3))
    # the first step's forward pass precedes any update: its record is the same cross-entropy, nothing added
    assert with_z.steps[0]["loss"] == pytest.approx(plain.steps[0]["loss"], rel=1e-6)
    assert with_z.steps[-1]["loss"] != plain.steps[-1]["loss"]  # what is trained differs


def test_the_z_loss_keeps_the_softmax_normaliser_near_one_and_trains_bit_for_bit_again():
    torch.set_num_threads(1)
    ids, mask = _data()
    plain, with_z, again = _model(), _model(), _model()
    train(plain, ids, mask, torch.device("cpu"), _settings(epochs=4, lr=3e-2))
    first = train(with_z, ids, mask, torch.device("cpu"), _settings(epochs=4, lr=3e-2, z_loss=0.1))
    second = train(again, ids, mask, torch.device("cpu"), _settings(epochs=4, lr=3e-2, z_loss=0.1))
    assert _mean_log_z_squared(with_z, ids, mask) < 0.5 * _mean_log_z_squared(plain, ids, mask)
    assert [s["loss"] for s in first.steps] == [s["loss"] for s in second.steps]


def test_a_given_order_trains_the_chunks_as_given_every_epoch_and_no_seed_reorders_them():
    torch.set_num_threads(1)
    ids, mask = _data()
    given = [[s["loss"] for s in train(_model(), ids, mask, torch.device("cpu"), _settings(order="given", seed=s)).steps]
             for s in (7, 8)]  # fmt: skip
    assert given[0] == given[1]  # the seed orders nothing (it still initialises the model: both are seed 0 here)
    reversed_ = [
        s["loss"]
        for s in train(_model(), ids.flip(0), mask.flip(0), torch.device("cpu"), _settings(order="given")).steps
    ]
    assert reversed_ != given[0]  # the order given is the order trained
    shuffled = [s["loss"] for s in train(_model(), ids, mask, torch.device("cpu"), _settings()).steps]
    assert shuffled != given[0]


def test_padding_is_masked_out_of_labels():
    ids = torch.tensor([[5, 6, 7, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    assert labels_for(ids, mask).tolist() == [[5, 6, 7, -100, -100]]


def test_what_sits_in_padding_does_not_change_the_loss():
    model = _model()
    ids, mask = _data(n=8)
    garbage = ids.masked_fill(mask == 0, 63)
    cpu = torch.device("cpu")
    assert evaluate(model, ids, mask, cpu, "fp32", 8) == evaluate(model, garbage, mask, cpu, "fp32", 8)


def test_real_tokens_count_only_unpadded_positions():
    ids, mask = _data(n=8)
    result = train(_model(), ids, mask, torch.device("cpu"), _settings(epochs=3))
    assert result.real_tokens == int(mask.sum()) * 3
    assert result.padded_tokens == ids.numel() * 3


@pytest.mark.parametrize("precision", ["bf16-mixed", "fp16-mixed"])
def test_mixed_precisions_run_on_cpu_or_fail_clearly(precision):
    cpu = torch.device("cpu")
    try:
        check_precision(cpu, precision)
    except TrainingError as err:
        assert "not supported on cpu" in str(err) and "use fp32" in str(err)
        return
    ids, mask = _data(n=8)
    result = train(_model(), ids, mask, cpu, _settings(precision=precision))
    assert all(math.isfinite(s["loss"]) for s in result.steps)


def test_non_finite_loss_stops_with_the_step():
    model = _model()
    with torch.no_grad():
        model.model.norm.weight.fill_(float("nan"))
    ids, mask = _data(n=8)
    with pytest.raises(TrainingError, match=r"non-finite loss \(nan\) at step 1 \(epoch 1\)"):
        train(model, ids, mask, torch.device("cpu"), _settings(log_every=3))


def test_a_finite_loss_past_the_blowup_limit_stops_training_as_divergence():
    # one CPU carries lr 50 as losses of 1e4 nats, another as NaN: both are divergence; a limit below any real
    # loss makes the first record trip it here
    ids, mask = _data(n=8)
    with pytest.raises(Diverged, match=r"loss \S+ nats at step 1, past 0.001 .*\(epoch 1\)") as err:
        train(_model(), ids, mask, torch.device("cpu"), _settings(log_every=3), hooks=TrainHooks(diverged_above=1e-3))
    assert err.value.step == 1 and math.isfinite(err.value.loss) and err.value.partial.steps == []


def test_the_blowup_limit_is_ten_uniform_guesses_over_the_vocabulary():
    assert blowup_loss(300) == pytest.approx(10 * math.log(300))


def test_vocab_mismatch_fails_with_both_numbers():
    with pytest.raises(ModelError, match="tokenizer has 100 tokens but the model's embedding has 64 rows"):
        check_tokenizer_matches(_model(), {**TOK, "vocab_size": 100})


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ModelError, match="model.preset is 'gpt-9'; choose one of"):
        preset_sizes("gpt-9", {}, TOK, 16)


def test_tinyllama_preset_has_the_reference_architecture():
    cfg = preset_sizes("tinyllama-1.1b", {}, {**TOK, "vocab_size": 32000}, 64)
    assert [
        cfg[k]
        for k in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads")
    ] == [22, 2048, 5632, 32, 4]


def test_pretrained_model_loads_offline_from_safetensors_with_identical_weights(tmp_path):
    original = _model(seed=3, implementation="hf")
    original.save_pretrained(tmp_path, safe_serialization=True)
    assert (tmp_path / "model.safetensors").exists()
    a, b = load_pretrained(str(tmp_path)), load_pretrained(str(tmp_path))
    ids, mask = _data(n=4)
    with torch.no_grad():
        assert torch.equal(a(input_ids=ids).logits, original(input_ids=ids).logits)
        assert torch.equal(a(input_ids=ids).logits, b(input_ids=ids).logits)


def test_pretrained_model_with_only_pickled_weights_is_refused(tmp_path):
    model = _model(implementation="hf")
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ModelError, match="safetensors"):
        load_pretrained(str(tmp_path))


def _chunks(ids, mask):
    return pl.DataFrame(
        {
            "chunk_id": np.arange(len(ids)),
            "doc_id": np.arange(len(ids)),
            "input_ids": ids.numpy(),
            "attention_mask": mask.numpy().astype(np.int8),
            "n_real": mask.sum(1).numpy(),
        }
    )


def _run(meter_kind, eval_cfg=None, nvml=None, **train_overrides):
    ids, mask = _data(n=24)
    chunks = _chunks(ids, mask)
    subset = {"chunk_ids": list(range(16)), "n_chunks": 16, "real_tokens": int(mask[:16].sum())}
    data = TrialData(subset=subset, train_chunks=chunks, eval_chunks=chunks[16:], tokenizer=TOK)
    return run_trial(_spec(meter_kind, eval_cfg, **train_overrides), data, log=lambda s: None, nvml=nvml)


def _spec(meter_kind, eval_cfg=None, **train_overrides):
    train_cfg = {
        **dict(
            epochs=1,
            batch_size=2,
            lr=3e-3,
            weight_decay=0.0,
            precision="fp32",
            device="cpu",
            threads=1,
            log_every=4,
            eval_batch_size=8,
            on_divergence="record",
            compile=False,
            compile_min_steps=1000,
        ),
        **train_overrides,
    }
    spec = TrialSpec(
        budget=100,
        trial=1,
        cell="b100",
        model={"source": "config", "preset": "llama-tiny", "overrides": SIZES},
        train=TrainSettings.from_config(train_cfg, seed=5),
        evaluation=EvalSchedule(**(eval_cfg or {})),
        meter=MeterSettings(
            kind=meter_kind,
            interval_s=0.05,
            idle_seconds=0.1,
            cpu_tdp_w=65.0,
            rapl_root="/nonexistent",
            cooldown_s=0,
            cooldown_below_c=None,
            cooldown_timeout_s=0,
        ),
        check=ThroughputCheck(matmul_size=64, window_s=0.01, windows=2),
    )
    return spec


def _ordered_data(order):
    """24 chunks, two per document; a subset of 5 chunks; ``order``: the level's ranks (the last document first)."""
    ids, mask = _data(n=24)
    chunks = _chunks(ids, mask).with_columns(doc_id=pl.col("chunk_id") // 2)
    subset = {"chunk_ids": [0, 5, 3, 10, 11], "n_chunks": 5, "real_tokens": int(mask[[0, 5, 3, 10, 11]].sum())}
    return ids, TrialData(subset=subset, train_chunks=chunks, eval_chunks=chunks[16:], tokenizer=TOK, order=order)


LAST_DOCUMENT_FIRST = pl.DataFrame({"doc_id": list(range(12))[::-1], "rank": list(range(12))})


def test_a_levels_order_puts_the_subsets_chunks_in_document_rank_order_and_reaches_training():
    ids, data = _ordered_data(LAST_DOCUMENT_FIRST)
    assert data.chunk_ids("given") == [10, 11, 5, 3, 0]  # docs 5, 2, 1, 0; a document's chunks as cut
    setup = set_up(_spec("estimate", order="given"), data, log=lambda s: None)
    assert torch.equal(setup.ids, ids[[10, 11, 5, 3, 0]])


def test_an_order_setting_without_its_order_table_or_the_reverse_is_refused():
    with pytest.raises(ValueError, match="data_order given but no order"):
        _ordered_data(None)[1].chunk_ids("given")
    with pytest.raises(ValueError, match="an order table but data_order shuffled"):
        _ordered_data(LAST_DOCUMENT_FIRST)[1].chunk_ids("shuffled")


def test_a_trial_spec_is_built_once_from_the_rule_params_with_every_train_key_typed(root):
    import yaml
    from tokenwatt.data.subsets import trial_seed
    from tokenwatt.plan.config import load_schema, validate_config
    from tokenwatt.plan.stopping import StopRule

    config = validate_config(
        yaml.safe_load((root / "config/config.yaml").read_text()),
        load_schema(root / "workflow/schemas/config.schema.yaml"),
    )
    profile = config["profile"]
    params = SimpleNamespace(  # the rule train_trial's params (workflow/rules/train.smk)
        budget=100,
        trial=2,
        cell="b100",
        levels={},
        study_seed=config["study"]["seed"],
        model=config["model"],
        train=config["train"],
        meter=config["meter"],
        check={
            "matmul_size": profile["matmul_size"],
            "window_s": profile["window_s"],
            "windows": profile["check_windows"],
        },
        evaluation=config["eval"],
    )
    spec = TrialSpec.from_params(params)
    assert spec.seed == spec.train.seed == trial_seed(config["study"]["seed"], 2)
    assert spec.train.stop == StopRule() and spec.train.schedule.kind == config["train"]["schedule"]["kind"]
    assert spec.meter.kind == config["meter"]["kind"] and spec.check.windows == profile["check_windows"]
    with pytest.raises(FrozenInstanceError):
        spec.budget = 200


def test_a_trial_with_the_estimate_meter_records_energy_and_labels_the_estimate():
    metrics, power, steps, _ = _run("estimate")
    assert metrics["meter"] == "estimate" and metrics["meter_is_estimate"]
    assert metrics["energy_j"] > 0 and "ESTIMATE" in metrics["meter_note"]
    assert metrics["real_tokens"] == metrics["subset_real_tokens"]
    assert power.filter(power["window"].str.starts_with("train")).height == metrics["samples"] and steps.height >= 2


def test_a_trial_records_measurements_only_never_derived_metrics():
    metrics, _, _, _ = _run("estimate")
    for derived in ("pe", "cs_tflops", "flops", "mfu", "quality_per_kj", "joules_per_token", "dynamic_energy_j"):
        assert derived not in metrics, derived


def test_a_trial_record_satisfies_the_metrics_schema(root):
    from tokenwatt.common.records import load_validator, problems

    metrics, _, _, _ = _run("estimate")
    assert problems(metrics, load_validator(root / "workflow/schemas/metrics.schema.yaml")) == []


def test_a_trial_takes_throughput_checks_before_and_after_training():
    metrics, _, _, _ = _run("none")
    assert len(metrics["check_before_tflops"]) == 2 and len(metrics["check_after_tflops"]) == 2
    assert all(x > 0 for x in metrics["check_before_tflops"] + metrics["check_after_tflops"])


def test_a_trial_without_a_meter_has_null_energy_and_power():
    metrics, _, _, _ = _run("none")
    assert metrics["energy_j"] is None and metrics["power_rms_w"] is None and metrics["idle_power_w"] is None


def test_a_diverged_trial_is_recorded_as_a_result_with_its_step_and_partial_loss_curve(root):
    from tokenwatt.common.records import load_validator, problems

    metrics, power, steps, curve = _run("estimate", lr=1e30, log_every=1)
    assert metrics["status"] == "diverged" and metrics["diverged_at_step"] >= 1 and metrics["eval_loss"] is None
    assert steps.height == metrics["diverged_at_step"] - 1  # every record before the non-finite step
    assert (
        metrics["energy_j"] > 0 and power.filter(power["window"].str.starts_with("train")).height == metrics["samples"]
    )
    assert not curve["final"].any()  # no final evaluation of a diverged model
    assert problems(metrics, load_validator(root / "workflow/schemas/metrics.schema.yaml")) == []


def test_a_diverged_trial_fails_when_asked_to():
    with pytest.raises(
        TrainingError, match=r"budget 100, trial 1: .* at step \d+ .*training diverged at train.lr 1e\+30"
    ):
        _run("none", lr=1e30, on_divergence="fail")


def test_every_trial_has_its_eval_curve_ending_in_the_final_evaluation_on_the_whole_set():
    metrics, _, _, curve = _run("estimate", eval_cfg={"points": 3, "first_fraction": 0.25, "max_tokens": 20})
    assert curve["point"].to_list() == [1, 2, 3] and curve["final"].to_list() == [False, False, True]
    assert curve["real_tokens"].is_sorted() and curve["real_tokens"][-1] == metrics["real_tokens"]
    assert curve["eval_loss_whole_set"][-1] == metrics["eval_loss"]  # the trial's result: the whole eval set
    assert (
        curve["eval_tokens"].n_unique() == 1 and curve["eval_tokens"][0] <= 20
    )  # every point on the same leading chunks
    assert curve["train_energy_j"].is_sorted() and curve["train_energy_j"][-1] == pytest.approx(metrics["energy_j"])
    assert (curve["eval_energy_j"] > 0).all() and curve["train_s"][-1] == pytest.approx(metrics["train_s"])


def test_evaluations_are_metered_beside_training_never_inside_it():
    metrics, _, steps, curve = _run("estimate", eval_cfg={"points": 3, "first_fraction": 0.25})
    names = [w["name"] for w in metrics["windows"]]
    assert names == [
        "idle",
        "check_before",
        "train_1",
        "eval_1",
        "train_2",
        "eval_2",
        "train_3",
        "check_after",
        "eval_final",
    ]
    training = sum(w["energy_j"] for w in metrics["windows"] if w["name"].startswith("train"))
    assert metrics["energy_j"] == pytest.approx(training)
    assert metrics["eval_energy_j"] == pytest.approx(
        sum(w["energy_j"] for w in metrics["windows"] if w["name"].startswith("eval"))
    )
    assert (
        metrics["train_s"] <= sum(w["duration_s"] for w in metrics["windows"] if w["name"].startswith("train")) + 1e-6
    )
    assert steps["elapsed_s"][-1] <= metrics["train_s"] + 1e-6  # the loss curve's clock stops while evaluating


def test_training_with_pauses_for_evaluation_is_the_same_training_bit_for_bit():
    _, _, plain, _ = _run("none", log_every=1)
    _, _, paused, _ = _run("none", eval_cfg={"points": 4, "first_fraction": 0.1}, log_every=1)
    assert plain["loss"].to_list() == paused["loss"].to_list()


def test_a_model_name_that_is_neither_a_folder_nor_a_hub_id_names_the_key():
    with pytest.raises(ModelError, match=r"model.name 'no such model!' could not be loaded"):
        load_pretrained("no such model!")


def test_a_model_embedding_larger_than_the_tokenizer_is_noted_not_silent():
    notes = check_tokenizer_matches(_model(), {**TOK, "vocab_size": TOK["vocab_size"] - 10})
    assert notes and "10 rows are never used, yet counted in params" in notes[0]


def test_a_trial_records_its_training_stack_and_settle_pause():
    metrics, _, _, _ = _run("estimate")
    assert (metrics["implementation"], metrics["compiled"], metrics["compile_s"]) == ("native", False, None)
    assert metrics["architecture"] == "NativeLlama" and metrics["settle_s"] == 0.0


def test_compile_auto_compiles_a_cuda_trial_from_min_steps_and_never_a_cpu_one():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert [should_compile("auto", cuda, steps, 1000) for steps in (999, 1000)] == [False, True]
    assert should_compile("auto", cpu, 10**6, 1000) is False
    assert (should_compile(True, cpu, 1, 1000), should_compile(False, cuda, 10**6, 1000)) == (True, False)


def test_a_stopping_rule_ends_training_at_an_evaluation_point_and_the_trial_says_where_and_why():
    # Any gain is below 1e12 nats/kJ: the rule stops at the second point, after one segment of patience.
    metrics, _, _, curve = _run(
        "estimate",
        eval_cfg={"points": 4, "first_fraction": 0.1},
        stop={"rule": "marginal", "min_gain_per_kj": 1e12, "patience": 1},
    )
    assert (
        metrics["stopped"] and metrics["stopped_at_point"] == 2 and "fell below 1e+12 nats/kJ" in metrics["stop_reason"]
    )
    assert metrics["real_tokens"] == metrics["stopped_at_tokens"] < metrics["subset_real_tokens"]
    assert curve["final"].to_list() == [False, False, True] and curve["real_tokens"][-1] == metrics["real_tokens"]
    assert [w["name"] for w in metrics["windows"]][-3:] == ["eval_2", "check_after", "eval_final"]
    assert "train_3" not in [w["name"] for w in metrics["windows"]]  # no training window opened after the stop


def test_without_a_rule_every_trial_trains_all_its_tokens():
    metrics, _, _, _ = _run("estimate", eval_cfg={"points": 4, "first_fraction": 0.1})
    assert not metrics["stopped"] and metrics["stop_rule"] == {"rule": "none"}


def _on_a_fake_gpu(monkeypatch):
    """The fake NVML's GPU stands for the trial's device: the CPU trains, NVML meters (tests/fake_nvml.py)."""
    import tokenwatt.training.session as session
    from fake_nvml import FakeNvml

    monkeypatch.setattr(session, "gpu_uuid", lambda device, nvml=None: "GPU-fake-0001")
    return FakeNvml({"GPU-fake-0001": 100.0})


def test_a_trial_refuses_an_evaluation_too_short_for_the_nvml_counter_by_its_key(monkeypatch):
    nvml = _on_a_fake_gpu(monkeypatch)
    with pytest.raises(
        TrainingError, match=r"budget 100, trial 1: eval.max_tokens: .* ms \(measured at the first point\)"
    ):
        _run("nvml", eval_cfg={"points": 3, "first_fraction": 0.25, "max_tokens": 20}, nvml=nvml)


def test_a_trial_records_its_meter_choice_and_measures_idle_only_after_the_meter_settle_time(monkeypatch):
    metrics, _, _, _ = _run("nvml", nvml=_on_a_fake_gpu(monkeypatch))
    assert metrics["meter_choice"] == "meter.kind nvml" and metrics["mig"] is False
    assert metrics["idle_after_s"] >= metrics["settle_s"] >= 1.0  # NVML's averaged reading lags a second


def test_the_steps_the_grad_scaler_skipped_are_counted(monkeypatch):
    """fp16-mixed skips a step whose scaled gradients overflow; a loss scale of 1e38 overflows the first steps."""
    cpu = torch.device("cpu")
    try:
        check_precision(cpu, "fp16-mixed")
    except TrainingError:
        pytest.skip("fp16 autocast is not supported on this CPU build")
    scaler = torch.amp.GradScaler
    monkeypatch.setattr(
        torch.amp, "GradScaler", lambda device, enabled: scaler(device, init_scale=1e38, enabled=enabled)
    )
    ids, mask = _data(n=8)
    assert train(_model(), ids, mask, cpu, _settings(precision="fp16-mixed")).grad_scaler_skips >= 1


def test_a_trial_trains_with_the_betas_and_warmup_its_settings_give_and_records_them():
    metrics, _, _, _ = _run("none", betas=[0.9, 0.95], schedule={"kind": "wsd", "warmup_tokens_per_parameter": 0.001})
    parameters = metrics["params"]
    assert metrics["adam_betas"] == [0.9, 0.95] and metrics["lr_schedule"]["kind"] == "wsd"
    # 16 chunks of 16 tokens in batches of 2: 8 steps of 32 tokens; N / 1000 tokens of warmup, never all 8
    assert metrics["lr_warmup_steps"] == min(7, math.ceil(0.001 * parameters / 32))


def test_a_warmup_that_would_leave_a_trial_no_schedule_fails_it_before_its_first_step_naming_the_key():
    from tokenwatt.training.schedule import Schedule

    ids, mask = _data(n=8)
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    grown = _settings(schedule=Schedule("wsd", warmup_tokens_per_parameter=10.0))  # N × 10 tokens: far beyond 4 steps
    with pytest.raises(TrainingError, match=r"train\.schedule: its warmup of \d+ optimizer steps leaves no room"):
        train(model, ids, mask, torch.device("cpu"), grown)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # nothing trained
