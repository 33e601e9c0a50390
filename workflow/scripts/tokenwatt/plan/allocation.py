"""Energy-budgeted successive halving over a WSD ladder (the config's ``allocation``): the candidates, what each round
trains, and what the plan expects it to cost.

A candidate is one stable run's levels (every factor but the budget: a model size × a learning rate, …), kept or
dropped as a whole, across its trial ids. Round k trains every survivor's trials at the k-th budget (ascending): each
a cooldown branched from the survivor's stable run (train.schedule.branch_every), whose stretches up to that point
are trained on the way. After each round one checkpoint job (rules/allocation.smk, analysis/halving.py) ranks the
survivors at equal energy and writes who trains in the next round, or that the study stops there: Snakemake knows
round k+1's jobs only once round k's checkpoint has run, so a dry run plans the rounds it can know.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .design import Design

# What the budget counts: measured energy (J) or devices' seconds (device-hours in the config), each the study's
# totals' figure (analysis/totals.py) so the budget and the report's totals are one number.
MEASURES = {"energy_j": "J", "device_hours": "device-h"}


@dataclass(frozen=True)
class Allocation:
    """The validated ``allocation`` settings: ``limit`` in the measure's unit (J, or device-hours)."""

    keep: float
    measure: str
    limit: float
    confidence: float
    full_grid: str | None

    @property
    def unit(self) -> str:
        return MEASURES[self.measure]


def allocation_of(config: Mapping[str, Any]) -> Allocation | None:
    """The study's allocation, or None: every cell × trial trains (no ``allocation``)."""
    spec = config.get("allocation")
    if not spec:
        return None
    measure = next(m for m in MEASURES if spec.get(m) is not None)
    return Allocation(
        keep=float(spec["keep"]),
        measure=measure,
        limit=float(spec[measure]),
        confidence=float(spec["confidence"]),
        full_grid=spec.get("full_grid"),
    )


def problems(cfg: Mapping[str, Any]) -> list[str]:
    """What halving needs of the study, each naming its key: a ladder of branched WSD cooldowns, at least two budgets
    (rounds) and two candidates, two trial ids (a difference is told from noise across them), one budget limit."""
    spec = cfg.get("allocation")
    if not spec:
        return []
    found = []
    limits = [m for m in MEASURES if spec.get(m) is not None]
    if len(limits) != 1:
        found.append(
            "allocation: halving spends a budget; set exactly one of allocation.energy_j (J) or "
            f"allocation.device_hours (now {', '.join(limits) or 'neither'})"
        )
    if cfg["train"]["schedule"]["branch_every"] is None:
        found.append(
            "allocation.method: halving compares cooled points branched from one stable run per candidate; set "
            "train.schedule.kind: wsd and train.schedule.branch_every (config/frontier-halving.yaml)"
        )
    if len(cfg["study"]["budgets"]) < 2:
        found.append("allocation.method: halving's rounds are study.budgets; list at least two")
    if cfg["study"]["trials"] < 2:
        found.append(
            "allocation.method: halving keeps a candidate whose loss is within the noise across trial ids of the "
            f"kept share, and study.trials is {cfg['study']['trials']}; set it to 2 or more (3 for a usable noise)"
        )
    if cfg["meter"]["kind"] == "none":
        found.append("allocation.method: halving compares candidates at equal energy; meter.kind none measures none")
    design = cfg.get("design") or {}
    levels = math.prod(len(v) for k, v in design.items() if v)
    if levels < 2:
        found.append(
            "allocation.method: halving chooses among candidates; give design (model, lr, …) two levels or more"
        )
    return found


def candidates(design: Design) -> list[str]:
    """Every candidate: the cells' series (their levels but the budget), in the design's order."""
    return list(dict.fromkeys(c.series for c in design.cells))


def cell_id(design: Design, candidate: str, round_: int) -> str:
    """The cell a candidate trains in round ``round_``: its levels at the round's budget."""
    return design.cell_at(candidate, design.budgets[round_]).id


def round_trials(design: Design, survivors: Sequence[str], round_: int) -> list[tuple[str, int]]:
    """The (cell, trial) every survivor trains in round ``round_``."""
    return [(cell_id(design, c, round_), t) for c in survivors for t in design.trials]


def new_tokens(design: Design, candidate: str, round_: int) -> int:
    """The real tokens one trial id of ``candidate`` trains in jobs of round ``round_``: its cooldown, and its stable
    run's stretches from the previous round's point to this round's (round 0: from the first step)."""
    cell = design.cell_at(candidate, design.budgets[round_])
    point = design.branch_point(cell)
    before = design.branch_point(design.cell_at(candidate, design.budgets[round_ - 1])) if round_ else 0
    step = design.branch_tokens(cell)
    return design.tokens(cell) - point * step + max(0, point - before) * step


def kept_count(entering: int, keep: float) -> int:
    """The fewest candidates a round keeps: ``keep`` of those that entered it, rounded up, at least one (ties within
    the noise of the kept share are kept beside them)."""
    return max(1, math.ceil(keep * entering - 1e-9))


@dataclass(frozen=True)
class RoundPlan:
    """What a round trains when it keeps no more than ``kept_count`` each time: its candidates, trials and tokens."""

    round: int
    budget: int
    candidates: int
    trials: int
    tokens: int


def planned_rounds(design: Design, allocation: Allocation) -> list[RoundPlan]:
    """Each round as the plan can know it before it runs: its candidates are the fewest the rounds before keep (ties
    within the noise keep more: every figure of a later round is a lower bound), the mean new tokens of the design's
    candidates standing for those not known yet."""
    everyone = candidates(design)
    plans, entering = [], len(everyone)
    for k, budget in enumerate(design.budgets):
        per = sum(new_tokens(design, c, k) for c in everyone) / len(everyone)
        plans.append(
            RoundPlan(k, budget, entering, entering * len(design.trials), round(per * entering * len(design.trials)))
        )
        entering = kept_count(entering, allocation.keep)
    return plans


def plan_lines(
    design: Design, allocation: Allocation, joules_per_token: float | None, origin: str
) -> tuple[list[str], str | None]:
    """The plan's lines for a halving study, and why it cannot start (round 0 alone is estimated above the budget), or
    None. ``joules_per_token``: from finished trials or the pilot (``origin`` says which); None: not known yet."""
    rounds = planned_rounds(design, allocation)
    lines = [
        f"Halving (allocation): {len(candidates(design))} candidates × {len(design.trials)} trial ids, "
        f"{len(rounds)} rounds at the budgets {', '.join(f'{b:,}' for b in design.budgets)}; each keeps "
        f"{allocation.keep:g} of its candidates (more where a loss is within the noise); budget "
        f"{allocation.limit:,.6g} {allocation.unit}. A round's jobs are planned once the round before has run."
    ]
    for plan in rounds:
        cost = ""
        if joules_per_token is not None and allocation.measure == "energy_j":
            cost = f", ~{plan.tokens * joules_per_token:,.0f} J of training (ESTIMATE: {origin})"
        lines.append(
            f"  round {plan.round}: {'' if plan.round == 0 else 'at least '}{plan.candidates} candidates, "
            f"{plan.trials} trials, ~{plan.tokens:,} tokens{cost}"
        )
    if joules_per_token is not None and allocation.measure == "energy_j":
        lines.append("  (training energy only: the budget also counts evaluations, checkpoint saves and lost work)")
    if joules_per_token is None or allocation.measure != "energy_j":
        lines.append(
            "  (each round's spend is said before it starts by the checkpoint of the round before, from its measured "
            "figures; round 0's is not known before a trial has finished here)"
        )
        return lines, None
    first = rounds[0].tokens * joules_per_token
    if first > allocation.limit:
        return lines, (
            f"allocation.energy_j: round 0 alone, every candidate's trials at the first budget, needs ~{first:,.0f} J "
            f"of training (ESTIMATE: {origin}; evaluations come on top), above the budget of {allocation.limit:,.6g} J; raise allocation.energy_j, or give "
            "study.budgets a smaller first budget or the design fewer candidates"
        )
    return lines, None


@dataclass(frozen=True)
class RoundSettings:
    """A round's checkpoint params (rules/allocation.py, read by analysis/halving.py): the round, the study's budgets
    (the rounds), the trial ids' count, the allocation's settings and the new tokens one trial id of each candidate
    would train in the next round (None after the last)."""

    round: int
    budgets: tuple[int, ...]
    trials: int
    keep: float
    measure: str
    limit: float
    confidence: float
    next_tokens: Mapping[str, int] | None


def round_settings(design: Design, allocation: Allocation, round_: int) -> dict[str, Any]:
    """Round ``round_``'s ``RoundSettings`` as a plain dict: Snakemake compares only built-in values among params, so a
    dataclass param would never rerun the round for a changed setting (``energy_j``)."""
    last = round_ + 1 >= len(design.budgets)
    settings = RoundSettings(
        round=round_,
        budgets=tuple(design.budgets),
        trials=len(design.trials),
        keep=allocation.keep,
        measure=allocation.measure,
        limit=allocation.limit,
        confidence=allocation.confidence,
        next_tokens=None if last else {c: new_tokens(design, c, round_ + 1) for c in candidates(design)},
    )
    return asdict(settings)


def record_on_disk(path: str, read: Callable[[str], Any]) -> dict[str, Any] | None:
    """A round's record as it is on disk (``read``: a JSON reader), or None where there is none or it cannot be read
    (the interim report and the progress line then name the rounds before it only)."""
    try:
        return read(path)
    except (OSError, ValueError):
        return None


# What a damaged round record asks of the user (rules/common.smk says it with the file and the error).
DAMAGED_ROUND = "delete it and rerun; its round is ranked again from its trials"


@dataclass(frozen=True)
class Walk:
    """The rounds a halving study has reached: every (cell, trial) they train, and how many rounds there are."""

    trials: list[tuple[str, int]]
    rounds: int


def walk(design: Design, read_round: Callable[[int], Mapping[str, Any] | None], through: int | None = None) -> Walk:
    """Round 0's trials, then each later round's survivors, as long as the round before's record (``read_round(k)``;
    None: not written yet) says to continue; with ``through``, rounds 0 to ``through`` alone, reading the records
    of the rounds before it only. In the workflow ``read_round`` asks for the round's checkpoint, so an input function
    that walks waits for the rounds it needs; the interim report and the progress line read the records on disk."""
    survivors, found = candidates(design), []
    last = len(design.budgets) - 1 if through is None else through
    for k in range(last + 1):
        found += round_trials(design, survivors, k)
        if k == through:
            break
        record = read_round(k)
        if record is None or record.get("next") != "continue":
            break
        survivors = record["next_candidates"]
    return Walk(found, k + 1)
