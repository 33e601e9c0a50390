"""The study's PE metric, its three layers and FLOP estimates: pure functions of what a trial
recorded, the device profile's CS_TFLOPS and the ``metric`` constants. Computed in the
analysis, never in a trial, so changing a constant or a formula never retrains."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..common.measures import LOG_MAX_FLOAT, exp_of_loss

# Forward operations per token, layer and state element of a selective scan (Gu & Dao 2023): Δ·A and its exp, Δ·B, its
# product with the input, the state's multiply and add, and C·h's multiply-add; training counts three times the forward
# pass, as 6N counts 2N.
SCAN_FORWARD_OPS = 8
# Families whose mixing is a state-space scan (no attention over the context); every other family attends.
STATE_SPACE_FAMILIES = frozenset({"mamba"})


@dataclass(frozen=True)
class FlopsPerToken:
    """A training step's FLOPs per position, by where they are spent."""

    dense: float  # 6 × every parameter a position multiplies once (matrices and the convolution's taps)
    attention: float = 0.0  # 6·L·C·d: attention scores over the context (Kaplan et al. 2020), causal-masked half
    scan: float = 0.0  # 3 × SCAN_FORWARD_OPS × L × inner × state: a state-space model's recurrence, context-free

    def times(self, tokens: int) -> float:
        return self.dense * tokens + self.attention * tokens + self.scan * tokens


def flops_per_token(arch: Mapping[str, Any], context: int) -> FlopsPerToken:
    """The family's own count (``arch``: a trial's record, ``training.model.describe``): 6·N for the dense weights plus
    attention's 6·L·C·d, or for a state-space model its scan, which grows with the state and not the context.

    N excludes the input embedding table where it is only a lookup, which does no multiply-adds; a table tied to the
    output head is also that head's matmul, so it stays in. A scan's A (inner × state per layer) and skip D (inner)
    are parameters its elementwise recurrence uses, counted in the scan, not as matrices. An estimate, labelled as one
    in the outputs; records from before model.architecture are Llamas."""
    weights = arch["params"] - (0 if arch.get("tied_embeddings") else arch["embedding_params"])
    layers = arch["n_layers"]
    if arch.get("family", "llama") not in STATE_SPACE_FAMILIES:
        return FlopsPerToken(dense=6.0 * weights, attention=6.0 * layers * context * arch["hidden_size"])
    inner, state = arch["ssm_inner_size"], arch["ssm_state_size"]
    elementwise = layers * inner * (state + 1)
    return FlopsPerToken(dense=6.0 * (weights - elementwise), scan=3.0 * SCAN_FORWARD_OPS * layers * inner * state)


def training_flops(arch: Mapping[str, Any], context: int, tokens: int) -> float:
    """The training FLOPs of ``tokens`` positions (padding included: a padded position costs the same arithmetic)."""
    return flops_per_token(arch, context).times(tokens)


def parameter_efficiency(
    K: float, inv_ppl: float, cs_tflops: float | None, tt_scale: float, params: int, tt_tokens: int, rms_w: float | None
) -> float | None:
    """PE = K · invPPL · CS_TFLOPS · TT_scale / (MS_params · TT_tokens · RMS(W)); None without a power figure or CS_TFLOPS."""
    if rms_w is None or rms_w <= 0 or cs_tflops is None:
        return None
    return K * inv_ppl * cs_tflops * tt_scale / (params * tt_tokens * rms_w)


def finite(x: float | None) -> float | None:
    """``x`` where it is a finite number, else None: a value the analysis cannot compute (a loss of 1e4 has no
    perplexity a float can hold; nothing divided by zero training time) is missing from every table, never inf or
    NaN, which a summary would spread to its whole cell and JSON cannot hold."""
    return None if x is None or not math.isfinite(x) else float(x)


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None where either is missing or b is zero (a trial that recorded no training time, no tokens)."""
    a, b = finite(a), finite(b)
    return None if a is None or not b else finite(a / b)


def efficiency_record(
    *,
    eval_loss: float | None,
    params: int,
    flops: float,
    tokens: int,
    train_s: float,
    energy_j: float | None,
    rms_w: float | None,
    cs_tflops: float | None,
    K: float,
    tt_scale: float,
) -> dict[str, Any]:
    """PE and the three layers the literature mixes up, each with its unit in the name.

    quality per parameter: invPPL per million parameters; per compute: invPPL per PFLOP;
    per energy: invPPL per kJ. A layer whose denominator is not positive (energy at or below zero) is missing.
    """
    loss = finite(eval_loss)
    # past a loss of ~709 nats the perplexity is missing, and its quality (invPPL) rounds to 0
    perplexity = exp_of_loss(loss)
    inv_ppl = None if loss is None else math.exp(-loss) if loss > -LOG_MAX_FLOAT else None
    per = lambda x, scale: None if inv_ppl is None or x is None or x <= 0 else ratio(inv_ppl, x / scale)  # noqa: E731
    energy = finite(energy_j)
    throughput = ratio(flops, train_s)
    return {
        "perplexity": perplexity,
        "inv_ppl": inv_ppl,
        "pe": None
        if inv_ppl is None
        else finite(parameter_efficiency(K, inv_ppl, cs_tflops, tt_scale, params, tokens, finite(rms_w))),
        "quality_per_mparam": per(params, 1e6),
        "quality_per_pflop": per(flops, 1e15),
        "quality_per_kj": per(energy, 1e3),
        "tokens_per_s": ratio(tokens, train_s),
        "joules_per_token": ratio(energy, tokens),
        "tokens_per_joule": ratio(tokens, energy),
        "achieved_tflops": None if throughput is None else throughput / 1e12,
        "mfu": ratio(throughput, None if cs_tflops is None else cs_tflops * 1e12),
    }


def derived_metrics(trial: dict[str, Any], *, cs_tflops: float | None, K: float, tt_scale: float) -> dict[str, Any]:
    """Everything the analysis derives from one trial's record: FLOPs, idle and dynamic energy, PE and its layers.
    ``cs_tflops`` is one device's (its profile's); a trial on several devices had their sum to compute with, which
    its PE and MFU divide by (its power and energy are the devices' sums too)."""
    flops = training_flops(trial, trial["context"], trial.get("padded_tokens") or trial["real_tokens"])
    energy, idle_w = finite(trial["energy_j"]), finite(trial["idle_power_w"])
    idle_j = None if idle_w is None else finite(idle_w * trial["duration_s"])
    return {
        "flops": flops,
        "flops_is_estimate": True,
        "cs_tflops": cs_tflops,
        "K": K,
        "tt_scale": tt_scale,
        "idle_energy_j": idle_j,
        # may be zero or negative (a noisy idle baseline): analysed on the raw scale (measures.py)
        "dynamic_energy_j": None if energy is None or idle_j is None else energy - idle_j,
        **efficiency_record(
            eval_loss=trial["eval_loss"],
            params=trial["params"],
            flops=flops,
            tokens=trial["real_tokens"],
            train_s=trial["train_s"],
            energy_j=energy,
            rms_w=trial["power_rms_w"],
            cs_tflops=None if cs_tflops is None else cs_tflops * (trial.get("devices") or 1),
            K=K,
            tt_scale=tt_scale,
        ),
    }
