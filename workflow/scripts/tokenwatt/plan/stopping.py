"""Energy-aware early stopping: a rule the training loop asks at each evaluation point, and the analysis
replays offline on full runs to price it.

A rule is ``none`` (train to the budget) or ``marginal``: stop when the quality gained per kJ of training
energy, ``−Δ eval loss / Δ kJ`` between consecutive evaluation points (nats per kJ), fell below
``min_gain_per_kj`` over each of the last ``patience`` segments. Patience guards against one noisy
evaluation (a backslide) ending a run that is still improving; a threshold of 0 stops once the loss has
risen over ``patience`` segments in a row. The threshold is study-specific: a CPU trial of a few hundred
joules gains nats per kJ, a GPU trial of 1e6 J thousandths of one.

Pure and free of torch: the same function decides online and offline, so the replay prices exactly the
rule that training would run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RULES = ("none", "marginal")


class StopRuleError(ValueError):
    """A stopping rule no training can run; the message says which part."""


@dataclass(frozen=True)
class StopRule:
    """``rule`` ``none`` never stops; ``marginal`` stops when the gain per kJ stayed below ``min_gain_per_kj``
    (nats/kJ) for ``patience`` consecutive segments."""

    rule: str = "none"
    min_gain_per_kj: float = 0.0
    patience: int = 1

    def to_dict(self) -> dict[str, Any]:
        """The config form: ``{"rule": "none"}`` or the full marginal rule; ``stop_rule`` reads it back."""
        if self.rule == "none":
            return {"rule": "none"}
        return {"rule": self.rule, "min_gain_per_kj": self.min_gain_per_kj, "patience": self.patience}


def stop_rule(config: str | Mapping[str, Any] | None) -> StopRule:
    """The rule of ``train.stop`` (or of a ``design.stopping`` level): ``"none"``, ``None``, ``{"rule": "none"}``
    or ``{"rule": "marginal", "min_gain_per_kj": x, "patience": n}``; anything else is refused with a sentence,
    because a misspelt rule that silently never stops would price nothing."""
    if config is None or config == "none":
        return StopRule()
    if isinstance(config, str):
        raise StopRuleError(
            f"stopping rule {config!r}: a rule is 'none' or a mapping such as "
            "{rule: marginal, min_gain_per_kj: 0.05, patience: 2}"
        )
    config = dict(config)
    rule = config.pop("rule", None)
    if rule not in RULES:
        raise StopRuleError(f"stopping rule {rule!r}: the rule is one of {', '.join(RULES)}")
    if rule == "none":
        if config:
            raise StopRuleError(f"stopping rule none takes no settings; got {', '.join(sorted(config))}")
        return StopRule()
    unknown = sorted(set(config) - {"min_gain_per_kj", "patience"})
    if unknown:
        raise StopRuleError(f"stopping rule marginal: unknown setting(s) {', '.join(unknown)}")
    gain, patience = config.get("min_gain_per_kj"), config.get("patience", 1)
    if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not math.isfinite(gain) or gain < 0:
        raise StopRuleError(
            f"stopping rule marginal: min_gain_per_kj must be a finite number ≥ 0 (nats per kJ); got {gain!r}"
        )
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        raise StopRuleError(f"stopping rule marginal: patience must be a whole number ≥ 1 (segments); got {patience!r}")
    return StopRule("marginal", float(gain), patience)


def segment_gain(before: Mapping[str, Any], after: Mapping[str, Any]) -> float | None:
    """Quality gained per kJ over the segment between two consecutive points, ``−Δ eval_loss / Δ kJ`` of training
    energy (``train_energy_j``), in nats per kJ. None where it has no value: an energy missing (meter none) or a
    segment the meter saw no energy in (Δ J ≤ 0, e.g. a counter that had not ticked). No rule counts None as a
    low gain, so a run never stops on a segment its meter could not see."""
    if before["train_energy_j"] is None or after["train_energy_j"] is None:
        return None
    kj = (after["train_energy_j"] - before["train_energy_j"]) / 1000.0
    return -(after["eval_loss"] - before["eval_loss"]) / kj if kj > 0 else None


def should_stop(points_so_far: Sequence[Mapping[str, Any]], rule: StopRule) -> str | None:
    """Why training should stop after the last of ``points_so_far`` (each a mapping with ``train_energy_j``, the
    cumulative training energy in J, and ``eval_loss`` in nats, in order), or None to go on. ``marginal`` needs
    ``patience`` segments, so it never stops before point ``patience + 1``."""
    if rule.rule == "none" or len(points_so_far) < rule.patience + 1:
        return None
    window = points_so_far[-(rule.patience + 1) :]
    if any(p["train_energy_j"] is None for p in window):
        raise StopRuleError(
            "the marginal rule needs the training energy at every evaluation point, and a point "
            "has none (meter none records no energy)"
        )
    recent = [segment_gain(a, b) for a, b in zip(window, window[1:])]
    if not all(g is not None and g < rule.min_gain_per_kj for g in recent):
        return None
    shown = ", ".join(f"{g:.4g}" for g in recent)
    last = points_so_far[-1]
    return (
        f"quality gained per kJ fell below {rule.min_gain_per_kj:g} nats/kJ over each of the last {rule.patience} "
        f"segment(s) ({shown} nats/kJ), at {last['train_energy_j']:.6g} J of training energy"
    )
