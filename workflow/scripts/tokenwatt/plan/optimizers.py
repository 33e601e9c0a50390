"""The optimizers a trial can train with (``train.optimizer``, the levels of ``design.optimizer``), as data: each
kind's library, its settings, the bytes of state it keeps per parameter, and what it asks of the machine.

Kept apart from the training code so the config check, the plan's memory arithmetic and the pre-flight check read
them without importing torch; ``training.optim`` builds the optimizer a kind names.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

# fp32 master weights and their gradients: 4 bytes a parameter each under every precision (autocast keeps the
# weights in fp32 and casts copies per op; ``train.precision`` changes the activations, not these).
WEIGHT_BYTES = 4
GRADIENT_BYTES = 4


@dataclass(frozen=True)
class OptimizerKind:
    """One optimizer: the distribution that provides it (None: tokenwatt's own), the settings a level may give, the
    width of its two moments (``moment_bits``; a quantized one keeps an fp32 scale per ``block_size`` values), whether its step is compiled (torchao's is: on a CPU that needs a C++ compiler), and
    whether it brings its own schedule (schedule-free averages instead of decaying the rate)."""

    distribution: str | None
    summary: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    moment_bits: int = 32
    compiles_step: bool = False
    own_schedule: bool = False

    def state_bytes(self, settings: Mapping[str, Any]) -> float:
        """Bytes of optimizer state per parameter at ``settings`` (the plan's figure; a trial records what its state
        really holds): two tensors at ``moment_bits`` (AdamW's moments; schedule-free's z and second moment), with
        one fp32 scale per block where quantized. torchao quantizes only tensors of at least 4 096 values whose size
        the block divides; the others stay fp32, a small model's share that this figure leaves out."""
        if self.moment_bits == 32:
            return 8.0
        return 2 * (self.moment_bits / 8 + 4 / settings.get("block_size", self.settings["block_size"]))


KINDS: dict[str, OptimizerKind] = {
    "adamw": OptimizerKind(None, "AdamW, fp32 moments (torch's fused kernel, tokenwatt's own loop around it)"),
    "adamw-8bit": OptimizerKind(
        "torchao",
        "AdamW with 8-bit block-quantized moments (torchao.optim.AdamW8bit)",
        settings={"block_size": 256},
        moment_bits=8,
        compiles_step=True,
    ),
    "adamw-4bit": OptimizerKind(
        "torchao",
        "AdamW with 4-bit block-quantized moments (torchao.optim.AdamW4bit)",
        settings={"block_size": 128},
        moment_bits=4,
        compiles_step=True,
    ),
    "adamw-schedulefree": OptimizerKind(
        "schedulefree",
        "schedule-free AdamW (Defazio et al. 2024; schedulefree.AdamWScheduleFree): evaluations read its averaged weights",
        settings={"weight_lr_power": 2.0, "r": 0.0},
        own_schedule=True,
    ),
}
DEFAULT = "adamw"


def normalized(choice: str | Mapping[str, Any]) -> dict[str, Any]:
    """A ``train.optimizer`` (a kind's name, or ``{kind, ...settings}``) as ``{kind, ...settings}``, the kind's
    defaults filled in."""
    given = {"kind": choice} if isinstance(choice, str) else dict(choice)
    return {"kind": given["kind"], **KINDS[given["kind"]].settings, **given}


def levels(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every optimizer the study trains with, by where the config names it (``train.optimizer``, or
    ``design.optimizer.<level>``), normalized."""
    named = config["design"].get("optimizer")
    if named is None:
        return {"train.optimizer": normalized(config["train"]["optimizer"])}
    pairs = named.items() if isinstance(named, Mapping) else ((n, n) for n in named)
    return {f"design.optimizer.{name}": normalized(spec) for name, spec in pairs}


def setting_problems(config: Mapping[str, Any]) -> list[str]:
    """Settings a kind does not take, and schedule-free under a schedule that decays (its averaging is the decay)."""
    problems = []
    for key, spec in levels(config).items():
        kind = KINDS[spec["kind"]]
        if extra := sorted(set(spec) - {"kind", *kind.settings}):
            takes = ", ".join(kind.settings) or "no settings"
            problems.append(f"{key}: {spec['kind']} takes {takes}, not {', '.join(extra)}")
        if kind.own_schedule and config["train"]["schedule"]["kind"] != "constant":
            problems.append(
                f"{key}: {spec['kind']} replaces the rate's decay by averaging its iterates, so it trains at a constant "
                f"rate after the warmup; set train.schedule.kind: constant (train.schedule.kind is "
                f"{config['train']['schedule']['kind']})"
            )
    return problems


def cpp_compiler() -> str | None:
    """The C++ compiler torch.compile's CPU backend would call ($CXX, else g++ or c++ on PATH), or None."""
    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    return next((found for name in names if (found := shutil.which(name))), None)


def machine_problems(config: Mapping[str, Any], cuda: bool) -> list[tuple[str, str]]:
    """(config key, sentence) for each optimizer level this machine cannot build: its library not installed, or a
    compiled step on a CPU without a C++ compiler (``cuda``: the study trains on a GPU, where Triton compiles)."""
    found = []
    for key, spec in levels(config).items():
        kind = KINDS[spec["kind"]]
        if kind.distribution is None:
            continue
        try:
            metadata.version(kind.distribution)
        except metadata.PackageNotFoundError:
            found.append(
                (
                    key,
                    f"{key}: {spec['kind']} needs the {kind.distribution} package, which is not installed in this "
                    f"Python; install it (requirements.txt pins it) or drop the level",
                )
            )
            continue
        if kind.compiles_step and not cuda and cpp_compiler() is None:
            found.append(
                (
                    key,
                    f"{key}: {kind.distribution} compiles {spec['kind']}'s step with torch.compile, whose CPU backend "
                    "needs a C++ compiler, and none is here ($CXX, g++, c++ or clang++ on PATH); install one or drop "
                    "the level",
                )
            )
    return found


def floor_bytes(parameters: int, spec: Mapping[str, Any]) -> int:
    """The bytes a trial holds before any activation: fp32 weights, their gradients and the optimizer's state."""
    per_parameter = WEIGHT_BYTES + GRADIENT_BYTES + KINDS[spec["kind"]].state_bytes(spec)
    return round(parameters * per_parameter)
