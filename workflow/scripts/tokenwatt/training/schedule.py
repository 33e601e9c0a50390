"""The learning rate over a trial's steps: constant (the reference study's), warmup then cosine decay, or
warmup-stable-decay (WSD).

At small scale the optimiser's settings decide which model wins: Porian et al. (2024) traced the
Kaplan–Chinchilla disagreement to a learning rate not tuned per size, no warmup and a decay whose length did
not match the token count, and warmed up for as many tokens as the model has parameters; Hoffmann et al. (2022)
matched each run's cosine cycle to its own tokens. So the cosine here always ends at the trial's own last step: each
budget is a complete schedule, not the head of a longer one. WSD (Hägele et al. 2024) holds the rate and decays it
linearly over the trial's last ``cooldown_fraction`` of steps; it matches cosine, and its stable part does not depend
on where the trial ends. The factor is a pure function of the step, so a trial's learning rates are the same on every
rerun (and exactly 1.0 throughout for ``constant`` without warmup, whose trials are bit for bit those without a
schedule).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Schedule:
    """``kind`` constant, cosine or wsd; every kind first warms up linearly over ``warmup_steps`` (the longer of
    ``warmup_fraction`` of the trial's steps and ``warmup_tokens_per_parameter`` × N tokens). cosine then falls as a
    half cosine from the peak to ``final_fraction`` of it at the last step; wsd holds the peak, then falls linearly to
    ``final_fraction`` over the last ``cooldown_fraction`` of the steps."""

    kind: str = "constant"
    warmup_fraction: float = 0.0
    final_fraction: float = 0.1
    warmup_tokens_per_parameter: float = 0.0
    cooldown_fraction: float = 0.2
    # wsd branched from a shared stable run: its saved points' spacing in real tokens, and the cooldown begins at the
    # first step whose real tokens reach (1 - cooldown_fraction) of the trial's (``cooldown_start``), not by steps
    branch_every: int | None = None

    def warmup_steps(self, total: int, parameters: int = 0, tokens_per_step: int = 1) -> int:
        """The steps of the linear warmup for a trial of ``total`` steps of a model of ``parameters``, each step
        ``tokens_per_step`` tokens (padded: the rate follows the steps, not the documents drawn); never the whole
        trial (a trial whose warmup would leave no room fails before training, ``room_after_warmup``)."""
        return min(self.asked_warmup(total, parameters, tokens_per_step), max(0, total - 1))

    def asked_warmup(self, total: int, parameters: int, tokens_per_step: int) -> int:
        """The warmup the settings ask for: the longer of ``warmup_fraction`` of the steps and
        ``warmup_tokens_per_parameter`` × N tokens."""
        by_share = round(self.warmup_fraction * total)
        by_size = math.ceil(self.warmup_tokens_per_parameter * parameters / max(1, tokens_per_step))
        return max(by_share, by_size)

    def room_after_warmup(self, total: int, parameters: int, tokens_per_step: int) -> str | None:
        """Why a trial of ``total`` steps has no schedule left after the warmup asked for (constant: it never reaches
        lr; cosine: the warmup takes over half the steps; wsd: it runs into the cooldown), or None."""
        warmup = self.asked_warmup(total, parameters, tokens_per_step)
        # after the warmup: a step at the peak (constant), a step of decay (cosine), the whole cooldown (wsd)
        after = {"constant": 1, "cosine": 1, "wsd": max(1, round(self.cooldown_fraction * total))}[self.kind]
        if warmup + after <= total:
            return None
        return (
            f"its warmup of {warmup} optimizer steps leaves no {'stable rate' if self.kind == 'constant' else 'room'}"
            f" in its {total} steps{'' if self.kind == 'constant' else f' before the {self.kind} decay'}"
        )

    def factor(self, step: int, total: int, warmup: int | None = None, cooldown_from: int | None = None) -> float:
        """The multiplier of the peak learning rate for step ``step`` (0-based) of ``total``, after ``warmup`` steps
        of warmup (``warmup_steps``; by default its share of the steps); wsd's cooldown over its last
        ``cooldown_fraction`` of the steps, or from step ``cooldown_from`` on (a branched trial's, by tokens)."""
        warmup = round(self.warmup_fraction * total) if warmup is None else warmup
        if step < warmup:
            return (step + 1) / warmup
        if self.kind == "constant":
            return 1.0
        if self.kind == "wsd":
            decay = max(
                1, total - cooldown_from if cooldown_from is not None else round(self.cooldown_fraction * total)
            )
            into = step - (total - decay) + 1  # 1 at the cooldown's first step, ``decay`` at the trial's last
            if into <= 0:
                return 1.0
            return 1.0 - (1.0 - self.final_fraction) * min(into, decay) / decay
        progress = (step - warmup) / max(1, total - warmup - 1)
        return self.final_fraction + (1 - self.final_fraction) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    def cooldown_tokens(self, real_tokens: int) -> int | None:
        """A branched wsd trial of ``real_tokens``: the real tokens after which its cooldown begins (the step that
        first reaches them is the last at the peak rate); None for any other schedule."""
        if self.kind != "wsd" or self.branch_every is None:
            return None
        return max(1, math.ceil((1.0 - self.cooldown_fraction) * real_tokens))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def schedule_from_config(cfg: dict[str, Any] | None) -> Schedule:
    """``train.schedule`` as a Schedule (the schema has checked its keys and ranges)."""
    return Schedule(**(cfg or {}))
