"""The native Llama is the same model as transformers' LlamaForCausalLM."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenwatt.plan.presets import NATIVE_FIELDS
from tokenwatt.training.llama import ImplementationError, LlamaSizes, check_right_padded
from tokenwatt.training.model import ModelError, build_model, preset_sizes
from tokenwatt.training.train import TrainHooks, TrainSettings, compile_model, evaluate, token_loss_sum, train
from transformers import LlamaConfig, LlamaForCausalLM

TOK = {"vocab_size": 96, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
# Grouped-query attention (4 heads, 2 KV heads) and a non-default RoPE base, so both are exercised.
SIZES = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    rope_theta=500.0,
    rms_norm_eps=1e-5,
)
CPU = torch.device("cpu")


def sizes():
    return preset_sizes("llama-tiny", SIZES, TOK, 24)


def right_padded_batch(n=6, length=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, TOK["vocab_size"], (n, length), generator=g)
    lengths = torch.randint(length // 2, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    return ids.masked_fill(mask == 0, 0), mask


def real_logits(model, ids, mask):
    out = model(input_ids=ids, attention_mask=mask)
    logits = out if isinstance(out, torch.Tensor) else out.logits
    return logits[mask.bool()]


def test_both_implementations_start_from_the_same_weights():
    native, hf = build_model(sizes(), 5, "native"), build_model(sizes(), 5, "hf")
    a, b = native.state_dict(), hf.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_weights_load_both_ways_by_the_transformers_parameter_names():
    hf = LlamaForCausalLM(LlamaConfig(**sizes()))
    native = build_model(sizes(), 0, "native")
    native.load_state_dict(hf.state_dict(), strict=True)
    hf.load_state_dict(native.state_dict(), strict=True)


@pytest.mark.parametrize("precision,atol", [("fp32", 1e-5), ("bf16-mixed", 3e-2)])
def test_same_weights_give_the_same_logits_and_loss(precision, atol):
    hf = LlamaForCausalLM(LlamaConfig(**sizes()))
    native = build_model(sizes(), 0, "native")
    native.load_state_dict(hf.state_dict())
    ids, mask = right_padded_batch()
    dtype = {"fp32": None, "bf16-mixed": torch.bfloat16}[precision]
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
        torch.testing.assert_close(
            real_logits(native, ids, mask).float(), real_logits(hf, ids, mask).float(), atol=atol, rtol=0
        )
        (ln, nn_), (lh, nh) = token_loss_sum(native, ids, mask), token_loss_sum(hf, ids, mask)
    assert nn_ == nh
    assert ln.item() == pytest.approx(lh.item(), rel=1e-5 if dtype is None else 1e-2)


def test_positions_beyond_max_position_embeddings_rotate_as_transformers_does():
    short = {**sizes(), "max_position_embeddings": 16}  # the batch has 24 positions: past the precomputed tables
    hf = LlamaForCausalLM(LlamaConfig(**short))
    native = build_model(short, 0, "native")
    native.load_state_dict(hf.state_dict())
    ids, mask = right_padded_batch()
    with torch.no_grad():
        torch.testing.assert_close(real_logits(native, ids, mask), real_logits(hf, ids, mask), atol=1e-5, rtol=0)


def test_training_either_implementation_reaches_the_same_eval_loss():
    ids, mask = right_padded_batch(n=48, seed=1)
    settings = TrainSettings(epochs=2, batch_size=4, lr=3e-3, weight_decay=0.0, precision="fp32", seed=3, log_every=6)
    losses = {}
    for implementation in ("native", "hf"):
        model = build_model(sizes(), 3, implementation)
        train(model, ids, mask, CPU, settings)
        losses[implementation] = evaluate(model, ids, mask, CPU, "fp32", 16)
    assert losses["native"] == pytest.approx(losses["hf"], rel=1e-4)


def test_the_config_check_knows_exactly_the_fields_the_native_model_takes():
    assert {f.name for f in dataclasses.fields(LlamaSizes)} == NATIVE_FIELDS


def test_an_override_the_native_model_lacks_names_the_key_and_the_way_out():
    with pytest.raises(ModelError, match=r"model.overrides \['attention_bias'\].*implementation: hf"):
        build_model({**sizes(), "attention_bias": True}, 0, "native")


def test_left_padding_is_refused_by_the_mask_free_attention():
    check_right_padded(torch.tensor([[1, 1, 0], [1, 1, 1]]), "chunks")
    with pytest.raises(ImplementationError, match="chunks has padding before real tokens"):
        check_right_padded(torch.tensor([[0, 1, 1]]), "chunks")


def test_compiled_training_repeats_bit_for_bit_and_leaves_the_weights_untouched(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch.set_num_threads(1)
    ids, mask = right_padded_batch(n=10, seed=2)
    settings = TrainSettings(epochs=1, batch_size=4, lr=3e-3, weight_decay=0.0, precision="fp32", seed=3, log_every=1)
    curves = []
    one_layer = preset_sizes("llama-tiny", {**SIZES, "num_hidden_layers": 1}, TOK, 24)  # what a compile repeats or not
    for _ in range(2):
        model = build_model(one_layer, 3, "native")
        before = {k: v.clone() for k, v in model.state_dict().items()}
        forward, seconds = compile_model(model, ids, mask, CPU, settings)
        assert seconds > 0 and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
        assert all(p.grad is None for p in model.parameters())
        curves.append([s["loss"] for s in train(model, ids, mask, CPU, settings, hooks=TrainHooks(forward)).steps])
    assert curves[0] == curves[1] and len(curves[0]) == 3  # batches of 4, 4 and 2: both shapes compiled


def test_an_eager_native_trial_imports_neither_transformers_nor_dynamo_up_to_its_last_step():
    # Built, made deterministic and trained (torch.optim's optimizers would import torch._dynamo at their first call).
    code = (
        "import sys, torch; from tokenwatt.training.model import build_model, preset_sizes; "
        "from tokenwatt.measurement.devices import make_deterministic; import tokenwatt.training.trial; "
        "from tokenwatt.training.train import TrainSettings, train; "
        "make_deterministic(torch.device('cpu'), compiling=False); "
        f"m = build_model(preset_sizes('llama-tiny', {{}}, {TOK!r}, 16), 0, 'native'); "
        "ids = torch.randint(3, 96, (4, 16)); "
        "s = TrainSettings(epochs=1, batch_size=2, lr=1e-3, weight_decay=0.0, precision='fp32', seed=0, log_every=1); "
        "assert train(m, ids, torch.ones_like(ids), torch.device('cpu'), s).n_steps == 2; "
        "print(sorted(m for m in ('transformers', 'torch._dynamo', 'scipy') if m in sys.modules)); "
        "print(torch.are_deterministic_algorithms_enabled())"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "workflow" / "scripts")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.split("\n")
    assert out[:2] == ["[]", "True"]
