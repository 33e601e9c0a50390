"""Model families at one named size (model.architecture, design.architecture): matched parameter counts, each family's
FLOP count against PyTorch's profiler, training and resuming bit for bit, the config's refusals and the design."""

import contextlib
import copy

import pytest
import torch
import yaml
from test_train import _data, _settings
from tokenwatt.analysis.efficiency import SCAN_FORWARD_OPS, flops_per_token
from tokenwatt.plan.architectures import FAMILIES, MATCH_TOLERANCE, family_config, non_embedding_params
from tokenwatt.plan.config import load_schema, validate_config
from tokenwatt.plan.design import Design
from tokenwatt.training import checkpoint
from tokenwatt.training.checkpoint import Checkpoint
from tokenwatt.training.model import build_model, describe, parameter_count, preset_sizes
from tokenwatt.training.train import Checkpointing, TrainHooks, token_loss_sum, train
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from workflow_helpers import config_error

TOK = {"vocab_size": 64, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
# The tiny study's size (.test/config/config.yaml): one layer, hidden 16.
TINY = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
CPU = torch.device("cpu")


def _model(family, overrides=TINY, preset="llama-tiny", seed=0):
    sizes = preset_sizes(preset, overrides, TOK, 32)
    return build_model(sizes, seed, "native" if family == "llama" else "hf", family)


def _non_embedding(model):
    return parameter_count(model) - 2 * model.get_input_embeddings().weight.numel()  # the input table and the head


@pytest.mark.parametrize("preset, overrides", [("llama-tiny", TINY), ("llama-tiny", {}), ("llama-small", {})])
def test_every_family_at_a_named_size_matches_the_llamas_non_embedding_parameters(preset, overrides):
    sizes = preset_sizes(preset, overrides, TOK, 32)
    built = {family: _non_embedding(_model(family, overrides, preset)) for family in FAMILIES}
    for family, count in built.items():
        assert count == non_embedding_params(family, family_config(family, sizes))  # the closed form the check uses
        assert abs(count / built["llama"] - 1) <= MATCH_TOLERANCE, (family, count, built["llama"])


def test_the_reference_size_has_a_matched_shape_in_every_family():
    sizes = preset_sizes("tinyllama-1.1b", {}, {**TOK, "vocab_size": 32000}, 2048)
    llama = non_embedding_params("llama", sizes)
    for family in FAMILIES:
        assert abs(non_embedding_params(family, family_config(family, sizes)) / llama - 1) <= MATCH_TOLERANCE


def _profiled_step(model, context):
    """The FLOPs PyTorch's counter sees in one training step (forward and backward), per position, by op; attention
    through the math kernel, whose matmuls it counts (the CPU's fused kernel has no formula there)."""
    ids = torch.randint(3, 64, (2, context), generator=torch.Generator().manual_seed(0))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss, _ = token_loss_sum(model, ids, torch.ones_like(ids))
        loss.backward()
    return {str(op): n / ids.numel() for op, n in counter.get_flop_counts()["Global"].items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_familys_flop_count_agrees_with_the_profilers_on_a_tiny_model(family):
    """The profiler counts matrix products alone: not the norms' gains and the biases (which our count, as 6N does,
    takes as 6 FLOPs per parameter), the masked half of causal attention (which it computes and Kaplan's 6·L·C·d
    leaves out), nor a scan's elementwise recurrence but its C·h product (2 of its SCAN_FORWARD_OPS); its depthwise
    convolution's backward is taken as twice the forward (torch's formula for the weight's gradient ignores groups)."""
    torch.manual_seed(0)
    model = _model(family)
    arch = describe(model)
    vectors = sum(p.numel() for name, p in model.named_parameters() if p.ndim == 1 and not name.endswith(".D"))
    for context in (16, 32):  # attention grows with the context, a scan does not
        ops = _profiled_step(model, context)
        if "aten.convolution_backward" in ops:
            ops["aten.convolution_backward"] = 2 * ops["aten.convolution"]
        ours = flops_per_token(arch, context)
        seen = ours.dense - 6 * vectors + 2 * ours.attention + ours.scan * 2 / SCAN_FORWARD_OPS
        assert sum(ops.values()) == pytest.approx(seen, rel=0.01), (context, ops, ours)
        assert (ours.attention > 0) == (family != "mamba") and (ours.scan > 0) == (family == "mamba")


class Killed(Exception):
    """What a SIGKILL does to the process, in a test: nothing after it runs."""


def _run(folder, family, kill_after=None, resume=None):
    """Two epochs of four steps, a checkpoint every second step; 'killed' right after checkpoint ``kill_after``."""
    model, (ids, mask), written = _model(family), _data(n=16), []

    def save(state, tokens):
        written.append(state.step)
        checkpoint.save(folder, Checkpoint(key="a" * 64, number=len(written), train=state))
        if kill_after == len(written):
            raise Killed

    due = lambda step, tokens: step % 2 == 0  # noqa: E731
    hooks = TrainHooks(checkpoints=Checkpointing(due=due, save=save))
    return model, train(model, ids, mask, CPU, _settings(log_every=1), hooks=hooks, resume=resume)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_trains_and_resumes_from_its_checkpoint_bit_for_bit(tmp_path, family):
    torch.set_num_threads(1)
    whole, whole_result = _run(tmp_path / "whole", family)
    assert whole_result.n_steps == 8 and all(torch.isfinite(torch.tensor([r["loss"] for r in whole_result.steps])))
    assert not all(torch.equal(a, b) for a, b in zip(whole.state_dict().values(), _model(family).state_dict().values()))
    with contextlib.suppress(Killed):
        _run(tmp_path / "killed", family, kill_after=2)
    saved, _ = checkpoint.load(tmp_path / "killed", "a" * 64)
    assert saved is not None and saved.train.step == 4
    resumed, resumed_result = _run(tmp_path / "killed", family, resume=saved.train)
    assert [r["loss"] for r in resumed_result.steps] == [r["loss"] for r in whole_result.steps]
    assert all(torch.equal(a, b) for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()))


def test_a_family_is_recorded_with_what_its_flop_count_needs():
    assert describe(_model("llama"))["family"] == "llama" and "ssm_state_size" not in describe(_model("llama"))
    assert describe(_model("gpt-neox"))["family"] == "gpt-neox"
    mamba = describe(_model("mamba"))
    assert (mamba["family"], mamba["ssm_state_size"], mamba["ssm_inner_size"]) == ("mamba", 16, 22)


@pytest.fixture(scope="module")
def schema(root):
    return load_schema(root / "workflow/schemas/config.schema.yaml")


@pytest.fixture
def tiny(root):
    return yaml.safe_load((root / ".test/config/config.yaml").read_text())


def test_the_architecture_level_sets_the_family_of_each_cells_model_and_its_path(schema, tiny):
    tiny["design"] = {"architecture": ["llama", "gpt-neox", "mamba"], "model": {"a": {}, "b": {}}}
    design = Design(validate_config(tiny, schema))
    cell = design.cell("model=a/architecture=mamba/b1000")
    assert design.model_config(cell)["architecture"] == "mamba" and design.model_config(cell)["preset"] == "llama-tiny"
    # a study without the factor keeps its model section, and so its trials' params, as they were
    plain = Design(validate_config({**copy.deepcopy(tiny), "design": {}}, schema))
    assert "architecture" not in plain.model_config(plain.cells[0])


def test_families_need_a_preset_transformers_and_a_size_they_can_match(schema, tiny, tmp_path):
    tiny["design"] = {"architecture": ["llama", "mamba"]}
    pretrained = copy.deepcopy(tiny)
    pretrained["model"] = {"source": "pretrained", "name": str(tmp_path)}
    assert "design.architecture: mamba take the size of a preset; model loads pretrained weights" in config_error(
        schema, pretrained
    )
    tiny["model"]["implementation"] = "native"
    assert "model.implementation: native is tokenwatt's Llama" in config_error(schema, tiny)
    tiny["model"]["implementation"] = "auto"
    tiny["design"] = {"architecture": ["gpt-neox"]}
    tiny["model"]["overrides"] = {**tiny["model"]["overrides"], "num_attention_heads": 4, "num_key_value_heads": 1}
    assert "gpt-neox rotates a quarter of each head's dimensions" in config_error(schema, tiny)
