import math

import pytest
from tokenwatt.analysis.efficiency import derived_metrics, efficiency_record, parameter_efficiency, training_flops


def test_pe_from_a_metrics_record_matches_the_formula_by_hand():
    rec = efficiency_record(
        eval_loss=2.0,
        params=1_000_000,
        flops=6e15,
        tokens=3_000_000,
        train_s=100.0,
        energy_j=50_000.0,
        rms_w=150.0,
        cs_tflops=30.0,
        K=2.0,
        tt_scale=1e6,
    )
    by_hand = 2.0 * math.exp(-2.0) * 30.0 * 1e6 / (1_000_000 * 3_000_000 * 150.0)
    assert rec["pe"] == pytest.approx(by_hand, rel=1e-12)
    assert rec["perplexity"] == pytest.approx(math.exp(2.0))
    assert rec["quality_per_mparam"] == pytest.approx(math.exp(-2.0) / 1.0)
    assert rec["quality_per_pflop"] == pytest.approx(math.exp(-2.0) / 6.0)
    assert rec["quality_per_kj"] == pytest.approx(math.exp(-2.0) / 50.0)
    assert rec["joules_per_token"] == pytest.approx(50_000 / 3_000_000)
    assert rec["mfu"] == pytest.approx(6e15 / 100 / 30e12)


def test_pe_is_missing_without_a_power_figure():
    assert parameter_efficiency(1, 0.5, 10, 1e6, 100, 1000, None) is None
    rec = efficiency_record(
        eval_loss=1.0,
        params=10,
        flops=1e9,
        tokens=100,
        train_s=1.0,
        energy_j=None,
        rms_w=None,
        cs_tflops=1.0,
        K=1.0,
        tt_scale=1.0,
    )
    assert rec["pe"] is None and rec["quality_per_kj"] is None and rec["joules_per_token"] is None


ARCH = {"params": 1100, "embedding_params": 100, "n_layers": 2, "hidden_size": 8}


def test_flops_are_six_n_t_plus_attention_without_the_embedding_lookup():
    assert training_flops(ARCH, context=64, tokens=10) == 6 * 1000 * 10 + 6 * 2 * 64 * 8 * 10


def test_derived_metrics_of_a_trial_record_use_its_architecture_and_the_given_constants():
    rec = {
        "params": 1100,
        "embedding_params": 100,
        "n_layers": 2,
        "hidden_size": 8,
        "context": 64,
        "real_tokens": 10,
        "energy_j": 5.0,
        "idle_power_w": 1.0,
        "duration_s": 2.0,
        "eval_loss": 1.0,
        "train_s": 1.0,
        "power_rms_w": 4.0,
    }
    got = derived_metrics(rec, cs_tflops=2.0, K=1.0, tt_scale=1.0)
    assert got["flops"] == training_flops(ARCH, 64, 10)
    assert (got["idle_energy_j"], got["dynamic_energy_j"]) == (2.0, 3.0)
    assert got["pe"] == pytest.approx(math.exp(-1.0) * 2.0 / (1100 * 10 * 4.0))


def test_a_head_tied_to_the_embedding_keeps_its_matmul_in_the_flops():
    untied = training_flops(ARCH, context=64, tokens=10)
    tied = training_flops({**ARCH, "tied_embeddings": True}, context=64, tokens=10)
    assert tied - untied == 6 * 100 * 10  # the shared matrix, multiplied once per token as the output head


def test_flops_count_the_padded_positions_the_model_computes():
    rec = {
        "params": 1100,
        "embedding_params": 100,
        "n_layers": 2,
        "hidden_size": 8,
        "context": 64,
        "real_tokens": 10,
        "padded_tokens": 16,
        "energy_j": 5.0,
        "idle_power_w": 1.0,
        "duration_s": 2.0,
        "eval_loss": 1.0,
        "train_s": 1.0,
        "power_rms_w": 4.0,
    }
    assert derived_metrics(rec, cs_tflops=2.0, K=1.0, tt_scale=1.0)["flops"] == training_flops(ARCH, 64, 16)


def test_a_tied_transformers_llama_is_described_as_tied():
    from tokenwatt.training.model import describe
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = dict(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    assert describe(LlamaForCausalLM(LlamaConfig(**cfg, tie_word_embeddings=True)))["tied_embeddings"] is True
    assert describe(LlamaForCausalLM(LlamaConfig(**cfg, tie_word_embeddings=False)))["tied_embeddings"] is False


def test_a_trial_on_two_devices_had_twice_one_devices_compute_for_its_pe_and_mfu():
    rec = {
        "params": 2_000_000,
        "embedding_params": 130_000,
        "n_layers": 4,
        "hidden_size": 128,
        "context": 64,
        "real_tokens": 200_000,
        "energy_j": 5_400.0,
        "idle_power_w": 60.0,
        "duration_s": 40.0,
        "eval_loss": 3.9,
        "train_s": 40.0,
        "power_rms_w": 140.0,
    }
    one = derived_metrics(rec, cs_tflops=50.0, K=1.0, tt_scale=1.0)
    two = derived_metrics({**rec, "devices": 2}, cs_tflops=50.0, K=1.0, tt_scale=1.0)
    assert two["mfu"] == pytest.approx(one["mfu"] / 2) and two["pe"] == pytest.approx(2 * one["pe"])
    assert two["cs_tflops"] == one["cs_tflops"] == 50.0  # the profile's, one device's
