"""The study's design as data: the config turned into cells, their settings and their paths.

The budget is the within-subject factor every study has (``study.budgets``); ``design`` adds
further within-subject factors (selection, model, architecture, precision, optimizer, lr, batch_size, hardware, devices, stopping), each a named list of
levels. A cell is one level of every factor; trial *i* runs under every cell (the subject of the
repeated-measures design), on the data subset of its budget and trial alone, so every level trains
on the same tokens in the same order; except a selection level (its own documents), whose subset is the same order of
every chunk with the documents it removed left out (``data.subsets``: common random numbers), and a model level with
its own tokenizer (its own chunks), whose subsets are drawn with the same seed from other data.

This is the one module that spells a factor's name. Paths are stable and readable: a one-factor
study keeps ``trials/b{budget}/t{trial}``; a factorial one nests the other levels above it,
``trials/model=small/precision=bf16-mixed/b{budget}/t{trial}``. The analysis never asks the config:
each record carries its levels (``levels``), and the tables' ``levels_<factor>`` columns and
``series`` (every level but the budget's) are all it needs.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from typing import Any

from ..common.measures import budget_label
from .evalgrid import shared_grid

# The further factors, in the order of path parts, columns and labels.
FACTORS = (
    "selection",
    "model",
    "architecture",
    "precision",
    "optimizer",
    "lr",
    "batch_size",
    "hardware",
    "devices",
    "stopping",
)
# The factors whose levels train a different model or recipe, so that one law L(N, D) cannot describe their levels
# together: the scaling fit refuses a study that varies one (model is its N; lr is tuned per size and budget; hardware,
# precision and devices change what a token costs, which e(N) is fitted per profile for, not what is learned).
RECIPE_FACTORS = ("selection", "architecture", "optimizer", "batch_size")
# Column prefix of a factor's level in the analysis tables (a record's nested ``levels`` flattened).
LEVEL_PREFIX = "levels_"
# Snakemake wildcard patterns of the path fragments below.
CELL_PATTERN = r"(?:[a-z_]+=[^/]+/)*b\d+"
TOKENIZER_PATTERN = r"(?:tok=[^/]+/)?"
SELECTION_PATTERN = r"(?:sel=[^/]+/)?"
PROFILE_PATTERN = r"(?:[a-z_]+=[^/]+/)*"
STABLE_PATTERN = r"(?:[a-z_]+=[^/]+/)*"

# train.* keys that change nothing a trial measures (where it saves its state): the trial's job reads them from the
# config, and they stay out of its params, which key its reruns, its result-store entry and its checkpoint.
JOB_TRAIN_KEYS = ("checkpoint_every", "keep_checkpoint")


@dataclass(frozen=True)
class Cell:
    """One condition: a budget and one level of every further factor, as (factor, level name) pairs."""

    budget: int
    levels: tuple[tuple[str, str], ...] = ()

    @property
    def series(self) -> str:
        """Every level but the budget's ("" in a one-factor study): the line a figure draws across budgets."""
        return series_of(dict(self.levels))

    @property
    def id(self) -> str:
        """The cell's path fragment: ``b10000`` or ``model=small/precision=fp32/b10000``."""
        return f"{self.series}/b{self.budget}" if self.levels else f"b{self.budget}"


def series_of(levels: dict[str, str]) -> str:
    return "/".join(f"{f}={levels[f]}" for f in FACTORS if f in levels)


def series_label(series: str) -> str:
    """``model=small/precision=fp32`` -> ``model small, precision fp32``."""
    return ", ".join(part.replace("=", " ", 1) for part in series.split("/") if part)


def parse_cell(cell_id: str) -> Cell:
    *parts, budget = cell_id.split("/")
    return Cell(int(budget.removeprefix("b")), tuple(tuple(p.split("=", 1)) for p in parts))


def condition_name(series: str, budget: int) -> str:
    """A cell in tables, figures and terminal lines: ``10K`` or ``model small, 10K``."""
    return ", ".join(filter(None, [series_label(series), budget_label(budget)]))


def cell_label(cell_id: str) -> str:
    """How messages name a cell: ``budget 10000`` or ``model small, budget 10000``."""
    cell = parse_cell(cell_id)
    return ", ".join(filter(None, [series_label(cell.series), f"budget {cell.budget}"]))


def within_factors(columns: list[str]) -> list[str]:
    """The analysis tables' within-subject factor columns, budget first, in the design's order."""
    return ["budget", *(LEVEL_PREFIX + f for f in FACTORS if LEVEL_PREFIX + f in columns)]


def recipe_columns(trials_columns: list[str]) -> list[str]:
    """The analysis tables' columns of the recipe factors (``RECIPE_FACTORS``) a study has."""
    return [LEVEL_PREFIX + f for f in RECIPE_FACTORS if LEVEL_PREFIX + f in trials_columns]


def factor_name(column: str) -> str:
    return column.removeprefix(LEVEL_PREFIX)


def level_name(factor: str, value: Any) -> str:
    """A level's name in paths and tables: the key for named levels, the value for listed ones."""
    return f"{value:g}" if factor == "lr" else str(value)


def profile_key_of(levels: dict[str, str]) -> str:
    """The device profile a cell's PE and matmul checks use: one per hardware level and precision."""
    return "".join(f"{f}={levels[f]}/" for f in ("hardware", "precision") if f in levels)


def cs_profile_key_of(levels: dict[str, str], basis: str, precision: str) -> str:
    """The device profile whose CS_TFLOPS a cell's PE uses (``metric.cs_basis``): its own (``training``), or the one
    of the reference precision on the same hardware level; ``precision`` is the study's (``train.precision``)."""
    if basis == "training" or levels.get("precision", precision) == basis:
        return profile_key_of(levels)
    hardware = f"hardware={levels['hardware']}/" if "hardware" in levels else ""
    return f"{hardware}precision={basis}/"


def per_profile(value: Any, levels: dict[str, str]) -> Any:
    """A per-device-profile value (a mapping by profile key) for a trial's levels; a plain value is every trial's."""
    return value.get(profile_key_of(levels)) if isinstance(value, dict) else value


class Design:
    """The cells, trials and per-cell settings of a validated config."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        study, design = config["study"], config.get("design") or {}
        self.budgets: list[int] = sorted(study["budgets"])
        self.trials: list[int] = list(range(1, study["trials"] + 1))
        self.factors: dict[str, dict[str, Any]] = {
            f: (
                {name: spec for name, spec in design[f].items()}
                if isinstance(design[f], dict)
                else {level_name(f, v): v for v in design[f]}
            )
            for f in FACTORS
            if f in design
        }
        combos = itertools.product(*[[(f, name) for name in levels] for f, levels in self.factors.items()])
        self.cells: list[Cell] = [Cell(b, tuple(combo)) for combo in combos for b in self.budgets]
        self._by_id = {c.id: c for c in self.cells}
        self._by_series = {(c.series, c.budget): c for c in self.cells}
        # train.compile: auto decides once for the whole study, by its shortest cell: compiled and eager
        # training differ in speed, power and the last digits of the loss, so a study whose small budgets
        # ran eager and large ones compiled would confound the budget with the training stack.
        self.shortest: Cell = min(self.cells, key=self.min_steps)
        self.auto_compiles: bool = self.min_steps(self.shortest) >= config["train"]["compile_min_steps"]

    def shape(self) -> str:
        """How the design makes its trials, for the plan: ``3 budgets × 2 model levels × 5 trials``."""
        parts = [f"{len(self.budgets)} budget{'s' * (len(self.budgets) > 1)}"]
        parts += [f"{len(levels)} {f} level{'s' * (len(levels) > 1)}" for f, levels in self.factors.items()]
        scaled = [
            f"{name} ×{spec['budget_scale']:g}"
            for name, spec in self.factors.get("model", {}).items()
            if spec.get("budget_scale", 1.0) != 1.0
        ]
        note = f" (budgets × budget_scale per model level: {', '.join(scaled)})" if scaled else ""
        return " × ".join([*parts, f"{len(self.trials)} trial{'s' * (len(self.trials) > 1)}"]) + note

    def cell(self, cell_id: str) -> Cell:
        return self._by_id[cell_id]

    def cell_at(self, series: str, budget: int) -> Cell:
        """The cell of one series (every level but the budget, ``Cell.series``) at ``budget``."""
        return self._by_series[(series, budget)]

    def keys(self) -> list[tuple[str, int]]:
        """Every (cell id, trial) the study runs, cell by cell."""
        return [(c.id, t) for c in self.cells for t in self.trials]

    def tokens(self, cell: Cell) -> int:
        """The real tokens a cell's trials train on: its budget, times its model level's ``budget_scale`` (an
        equal-energy ladder gives each size tokens ∝ 1/e(N)); the cell keeps the budget as its name and factor level,
        so the design stays crossed."""
        return max(1, round(cell.budget * self._scale(cell)))

    def _scale(self, cell: Cell) -> float:
        return (self._level(cell, "model") or {}).get("budget_scale", 1.0)

    def tokens_of(self, cell_id: str) -> int:
        return self.tokens(self._by_id[cell_id])

    def _level(self, cell: Cell, factor: str) -> Any:
        name = dict(cell.levels).get(factor)
        return None if name is None else self.factors[factor][name]

    def model_config(self, cell: Cell) -> dict[str, Any]:
        """The cell's model section: its model level over the study's, in its architecture level's family (at the
        same named size: ``architectures.family_config``)."""
        spec = self._level(cell, "model")
        model = self.config["model"] if spec is None else merged_model(self.config["model"], spec)
        family = self._level(cell, "architecture")
        return model if family is None else {**model, "architecture": family}

    def tokenizer_config(self, tokenizer_key: str) -> dict[str, Any]:
        level = tokenizer_key.removeprefix("tok=").removesuffix("/")
        if not level:
            return self.config["tokenizer"]
        return {**self.config["tokenizer"], **self.factors["model"][level]["tokenizer"]}

    def tokenizer_key(self, cell: Cell) -> str:
        """``""`` for the study's tokenizer, ``tok=<model level>/`` for a model level that brings its own."""
        name = dict(cell.levels).get("model")
        return f"tok={name}/" if name is not None and "tokenizer" in self.factors["model"][name] else ""

    def tokenizer_keys(self) -> list[str]:
        return sorted({self.tokenizer_key(c) for c in self.cells})

    def selection_key(self, cell: Cell) -> str:
        """``""`` without a selection factor (training reads the split as it is), ``sel=<level>/`` with one."""
        name = dict(cell.levels).get("selection")
        return "" if name is None else f"sel={name}/"

    def selection_config(self, level: str) -> dict[str, Any]:
        """A selection level's steps: ``near_dup`` (its keys over ``selection.near_dup``) and ``filters``, each None
        when the level leaves that step out, and the ``order`` it trains in (shuffled unless it names one)."""
        spec = self.factors["selection"][level]
        spec = {} if spec == "none" else spec
        near_dup = spec.get("near_dup")
        return {
            "near_dup": None if near_dup is None else {**self.config["selection"]["near_dup"], **near_dup},
            "filters": spec.get("filters"),
            "order": spec.get("order", "shuffled"),
        }

    def ordered_levels(self) -> list[str]:
        """The selection levels that train in an order of their own (as read, or a curriculum), not reshuffled."""
        return [
            level for level in self.factors.get("selection", {}) if self.selection_config(level)["order"] != "shuffled"
        ]

    def ordered_level(self, cell: Cell) -> str | None:
        """The cell's selection level if it trains in an order of its own: the one test behind both the trial's order
        input (its level's order.parquet) and its ``train.order: given``, so the two cannot disagree."""
        level = dict(cell.levels).get("selection")
        return level if level in self.ordered_levels() else None

    def train_config(self, cell: Cell) -> dict[str, Any]:
        train = self._train_settings(cell)
        if train["compile"] == "auto" and not self.auto_compiles:
            train["compile"] = False
        if train["compile"] == "auto" and self.branch_every is not None:
            # decided for the study (auto_compiles), not by each stable run's stretch on its own steps: one mode for
            # every stretch and cooldown (on a GPU it compiles, on a CPU auto never does)
            train["compile_min_steps"] = 0
        return train

    def _train_settings(self, cell: Cell) -> dict[str, Any]:
        train = {k: v for k, v in self.config["train"].items() if k not in JOB_TRAIN_KEYS}
        for factor in ("precision", "optimizer", "lr", "batch_size", "devices"):
            if (value := self._level(cell, factor)) is not None:
                train[factor] = value
        if (hardware := self._level(cell, "hardware")) is not None:
            train["device"] = hardware["device"]
        if (stop := self._level(cell, "stopping")) is not None:
            train["stop"] = stop
        if self.ordered_level(cell) is not None:
            train["order"] = "given"  # the subset in its level's order, every epoch (tokenwatt.data.order)
        if self.branch_every is not None:
            train["order"] = "drawn"  # the subset as drawn, whose head every smaller budget's subset is
            train["schedule"] = {**train["schedule"], "branch_every": self.branch_tokens(cell)}
        return train

    def eval_config(self, cell: Cell) -> dict[str, Any]:
        """A cell's eval.*: with log-spaced points (eval.points, no eval.at_tokens), ``grid``, its series' shared
        points (``evalgrid.shared_grid`` over every budget's trained tokens at this cell's levels) below its own end,
        so every budget is evaluated at the same token counts; eval.at_tokens (already absolute) or a single final
        evaluation as the config has them."""
        schedule = self.config["eval"]
        if schedule["at_tokens"] or schedule["points"] <= 1:
            return schedule
        epochs = self._train_settings(cell)["epochs"]
        ends = [self.tokens(Cell(b, cell.levels)) * epochs for b in self.budgets]
        own = self.tokens(cell) * epochs
        grid = shared_grid(ends, schedule["points"], schedule["first_fraction"])
        return {**schedule, "grid": [t for t in grid if t < own]}

    # --- branched cooldowns (train.schedule.branch_every): one stable run per trial and every level but the budget
    @property
    def branch_every(self) -> int | None:
        """The stable run's saved points' spacing in real tokens; None: every trial trains alone."""
        return self.config["train"]["schedule"]["branch_every"]

    def branch_tokens(self, cell: Cell) -> int:
        """The real tokens between a cell's stable run's saved points: ``branch_every`` in the budgets' tokens, scaled
        as its model level scales the budgets (``budget_scale``), so an equal-energy ladder's sizes branch at the same
        fractions of their budgets."""
        assert self.branch_every is not None
        return max(1, round(self.branch_every * self._scale(cell)))

    def stable_tokens(self, key: str, point: int) -> int:
        """The real tokens at a stable run's saved point."""
        return point * self.branch_tokens(self.stable_cell(key))

    def stable_key(self, cell: Cell) -> str:
        """The stable run a cell's trials branch from: its levels but the budget (``""``, or ``model=small/``)."""
        return f"{cell.series}/" if cell.levels else ""

    def branch_point(self, cell: Cell) -> int:
        """The stable run's saved point a cell's trial resumes (0: none, it trains from its first step): the last at
        or before (1 − cooldown_fraction) of its tokens, so its cooldown starts after it (train.py finds that step
        on the subset's real tokens, which reach the cell's at least)."""
        share = 1.0 - self.config["train"]["schedule"]["cooldown_fraction"]
        return math.floor(share * self.tokens(cell) / self.branch_tokens(cell))

    def stable_points(self) -> list[tuple[str, int]]:
        """Every (stable run, saved point) the study's trials branch from or pass through on the way."""
        last: dict[str, int] = {}
        for cell in self.cells:
            key = self.stable_key(cell)
            last[key] = max(last.get(key, 0), self.branch_point(cell))
        return [(key, point) for key, n in last.items() for point in range(1, n + 1)]

    def trained_tokens(self) -> dict[str, int]:
        """The real tokens each cell's trial trains in jobs of its own: its tokens; a branched trial its cooldown's part
        past its point, and one cell per stable run (its longest) the stable run's too, so the sum is the study's."""
        if self.branch_every is None:
            return {c.id: self.tokens(c) for c in self.cells}
        own = {c.id: self.tokens(c) - self.branch_point(c) * self.branch_tokens(c) for c in self.cells}
        for key in {self.stable_key(c) for c in self.cells}:
            longest = max((c for c in self.cells if self.stable_key(c) == key), key=self.branch_point)
            own[longest.id] += self.branch_point(longest) * self.branch_tokens(longest)
        return own

    def stable_cell(self, key: str) -> Cell:
        """A cell of the stable run ``key`` (its settings but the budget are the run's)."""
        return next(c for c in self.cells if self.stable_key(c) == key)

    def stable_train_config(self, key: str) -> dict[str, Any]:
        """The stable run's train.*: its cells' own, at the peak rate after the same warmup (by size: the schema's rules
        refuse a warmup by share), none of the cooldown's keys, so a new cooldown setting never retrains it."""
        train = self.train_config(self.stable_cell(key))
        warmup = train["schedule"]["warmup_tokens_per_parameter"]
        return {**train, "schedule": {"kind": "constant", "warmup_tokens_per_parameter": warmup}}

    def min_steps(self, cell: Cell) -> int:
        """The fewest optimizer steps a cell's trials can take: its budget in full chunks (a chunk holds
        at most ``chunk.length`` real tokens), in batches, times the epochs."""
        train = self._train_settings(cell)
        chunks = math.ceil(self.tokens(cell) / self.config["chunk"]["length"])
        return train["epochs"] * math.ceil(chunks / train["batch_size"])

    def compile_note(self) -> str | None:
        """Why ``train.compile: auto`` compiles no trial of a study that asks for CUDA, where its longer cells
        alone would have compiled (``device: auto`` says nothing: on a CPU auto never compiles)."""
        cuda = [c for c in self.cells if self._train_settings(c)["device"].startswith("cuda")]  # cuda or cuda:N
        threshold = self.config["train"]["compile_min_steps"]
        if (
            self.config["train"]["compile"] != "auto"
            or self.auto_compiles
            or max(map(self.min_steps, cuda), default=0) < threshold
        ):
            return None
        return (
            f"train.compile auto: no trial compiles, because {cell_label(self.shortest.id)} trains at least "
            f"{self.min_steps(self.shortest):,} steps, under train.compile_min_steps ({threshold:,}); one mode for the "
            "whole study keeps its conditions comparable. Set train.compile: true to compile every trial."
        )

    def levels(self, cell: Cell) -> dict[str, str]:
        return dict(cell.levels)

    def profile_key(self, cell: Cell) -> str:
        return profile_key_of(dict(cell.levels))

    def cs_profile_key(self, cell: Cell) -> str:
        """The profile whose CS_TFLOPS the cell's PE uses (``metric.cs_basis``)."""
        return cs_profile_key_of(
            dict(cell.levels), self.config["metric"]["cs_basis"], self.config["train"]["precision"]
        )

    def profile_keys(self) -> list[str]:
        """Every profile to measure: each cell's own (its matmul checks are judged against it) and its CS_TFLOPS one."""
        return sorted({k for c in self.cells for k in (self.profile_key(c), self.cs_profile_key(c))})

    def cs_profile_keys(self) -> dict[str, str]:
        """Cell id -> the profile key of its CS_TFLOPS."""
        return {c.id: self.cs_profile_key(c) for c in self.cells}

    def profile_cell(self, key: str) -> Cell:
        """A cell on the hardware of a device profile (for its device and scheduler resources)."""
        hardware = key.split("/")[0] + "/" if key.startswith("hardware=") else ""
        return next(c for c in self.cells if self.profile_key(c) == key or self.profile_key(c).startswith(hardware))

    def profile_settings(self, key: str) -> dict[str, Any]:
        """Device and precision of a device profile: those of its trials (or the reference precision it names)."""
        train = self.train_config(self.profile_cell(key))
        named = [part.removeprefix("precision=") for part in key.split("/") if part.startswith("precision=")]
        return {"device": train["device"], "precision": named[0] if named else train["precision"]}

    @property
    def meter_extra(self) -> dict[str, int]:
        """What a trial's meter settings add to meter.*: in a study with multi-device trials, the most devices any
        trains on (``MeterSettings.study_devices``); nothing otherwise, so one-device studies keep their params."""
        most = max(self.devices(c) for c in self.cells)
        return {"study_devices": most} if most > 1 else {}

    def devices(self, cell: Cell) -> int:
        """The devices a cell's trials train on (train.devices, or its devices level): its job asks for that many."""
        return int(self._train_settings(cell)["devices"])

    def resources(self, cell: Cell) -> dict[str, Any]:
        """Scheduler resources of a cell's trials: its hardware level's GPU model, partition and constraint."""
        hardware = self._level(cell, "hardware") or {}
        names = {"gpu_model": "gpu_model", "partition": "slurm_partition", "constraint": "constraint"}
        return {res: hardware[key] for key, res in names.items() if hardware.get(key)}


# A model level's keys that are not the model's: its own tokenizer, and how it scales the study's budgets.
LEVEL_ONLY_KEYS = ("tokenizer", "budget_scale")


def merged_model(base: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A model level over the study's ``model`` section (its ``tokenizer`` belongs to the tokenizer, its
    ``budget_scale`` to the design).

    A level that names a preset or pretrained weights replaces what the base said about the other
    source, so ``{preset: llama-small}`` never inherits the base's overrides by accident.
    """
    model = copy.deepcopy(base)
    level = {k: v for k, v in spec.items() if k not in LEVEL_ONLY_KEYS}
    if "preset" in level and "overrides" not in level:
        model["overrides"] = {}
    model.update(copy.deepcopy(level))
    return model
