"""Every path a study reads and writes, from its config: the rule files name files through this one object.

The results folder holds, per stage: ``data/`` (the corpus, its splits, each tokenizer's chunks, each selection level's
step outputs under ``sel=<level>/``), ``subsets/``, ``trials/<cell>/t<trial>/``, ``device/``, ``analysis/``,
``figures/``, ``logs/<rule>/``, ``benchmarks/<rule>/`` and the report; the interim report's analysis twins live under
``interim/``. A cell's folder is the design's (``b10000``, ``model=small/b10000``); a tokenizer key is ``""`` or
``tok=<model level>/``, a selection key ``""`` or ``sel=<level>/`` (plan.design).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .design import CELL_PATTERN, Cell, Design

# The steps every selection level shares, under this key in the level ↔ record mapping.
SHARED = ""


def checkpoint_folder(results: str, cell: str, trial: int | str) -> str:
    """A trial's checkpoint folder (training/checkpoint.py): under the results, outside the job's outputs, so that a
    failed job's cleanup keeps it."""
    return os.path.normpath(os.path.join(results, "checkpoints", cell, f"t{trial}"))


def trial_of(path: str) -> tuple[str, int]:
    """The (cell, trial) a trial's file belongs to, read from its own path (``Layout.trial``'s inverse: the last
    ``trials/<cell>/t<trial>/<file>`` of it, wherever the results folder is). A rule that reads some trials' files
    labels each by its path: a list of labels computed apart from the inputs could name other trials (Snakemake
    evaluates an interim rule's params again after its inputs, and a trial may finish in between)."""
    found = _TRIAL_FILE.search(Path(os.path.normpath(path)).as_posix())
    if found is None:
        raise ValueError(f"{path} is not a trial's file (results/trials/<cell>/t<trial>/<file>)")
    return found["cell"], int(found["trial"])


def records_among(paths: str | list[str]) -> list[str]:
    """The trials' records (metrics.json) among a job's input paths (one path or several): a halving study's aggregate
    job is planned first with the round checkpoint it waits for in their place, and its params are evaluated again
    once the checkpoint has run."""
    found = [paths] if isinstance(paths, str) else list(paths)
    return [p for p in found if os.path.basename(p) == "metrics.json"]


# A trial's file: the cell's parts are factor=level pairs and its budget, so no part of it is a bare "trials".
_TRIAL_FILE = re.compile(rf"(?:^|/)trials/(?P<cell>{CELL_PATTERN})/t(?P<trial>\d+)/[^/]+$")


@dataclass(frozen=True)
class TrialFiles:
    """A trial's four outputs; metrics.json is written (and restored) last, so a trial whose metrics exist is whole."""

    metrics: str
    power: str
    steps: str
    curve: str

    def __iter__(self) -> Iterator[str]:
        return iter((self.metrics, self.power, self.steps, self.curve))


class Layout:
    """The paths of one validated config's study (``results`` is its ``results`` key, relative or absolute)."""

    def __init__(self, config: Mapping[str, Any], design: Design):
        self.root: str = config["results"]
        self.design = design
        self.eval_filters: Any = (config.get("selection") or {}).get("eval_filters")

    # --- single files
    def path(self, *parts: str) -> str:
        """A path under the results folder, normalised as pathlib would at a fifth of its cost (a 15 000-trial plan
        asks for some 200 000 paths)."""
        return os.path.normpath(os.path.join(self.root, *parts))

    def log(self, rule: str, *parts: str) -> str:
        return self.path("logs", rule, *parts) + ".log"

    def benchmark(self, rule: str, *parts: str) -> str:
        return self.path("benchmarks", rule, *parts) + ".tsv" if parts else self.path("benchmarks", f"{rule}.tsv")

    def trial(self, cell: str, trial: int | str) -> TrialFiles:
        prefix = self.path("trials", cell, f"t{trial}")
        return TrialFiles(*(os.path.join(prefix, name) for name in TRIAL_FILE_NAMES))

    def checkpoint(self, cell: str, trial: int | str) -> str:
        return checkpoint_folder(self.root, cell, trial)

    def stable_prefix(self, key: str, trial: int | str, point: int | str) -> str:
        """A stable run's saved point's files but their extension: the point (.pt) and its stretch record (.json)."""
        return self.path("stable", f"{key}t{trial}", f"p{point}")

    def stable(self, key: str, trial: int | str, point: int | str) -> str:
        """A stable run's saved point (train.schedule.branch_every): its state and whole meter session, which the next
        stretch and every budget's cooldown continue."""
        return self.stable_prefix(key, trial, point) + ".pt"

    def stretch(self, key: str, trial: int | str, point: int | str) -> str:
        """A stable run's stretch record beside its saved point: what the run spent up to it (training/stretch.py)."""
        return self.stable_prefix(key, trial, point) + ".json"

    def stretch_records(self, trials: list[tuple[str, int]] | None = None) -> list[str]:
        """Every stretch record of the study's stable runs (none without train.schedule.branch_every); of ``trials``
        (cell, trial) alone, each point up to theirs once, where given (a halving study runs only some)."""
        design = self.design
        if design.branch_every is None:
            return []
        if trials is None:
            return [self.stretch(key, t, point) for key, point in design.stable_points() for t in design.trials]
        last: dict[tuple[str, int], int] = {}
        for c, t in trials:
            key = design.stable_key(design.cell(c))
            last[(key, t)] = max(last.get((key, t), 0), design.branch_point(design.cell(c)))
        return [self.stretch(key, t, point) for (key, t), n in last.items() for point in range(1, n + 1)]

    def stable_targets(self) -> list[str]:
        return [self.stable(key, t, point) for key, point in self.design.stable_points() for t in self.design.trials]

    def data(self, tok: str, name: str) -> str:
        """A tokenizer's data ({tok}: "" for the study's tokenizer, tok=<model level>/ for a level's own)."""
        return self.path("data", f"{tok}{name}")

    def chunks(self, tok: str, sel: str, split: str) -> str:
        """A chunk job's chunks of one split ({sel}: "" for the eval split and a study without a selection factor)."""
        return self.data(tok, f"{sel}chunks_{split}.parquet")

    def chunk_record(self, tok: str, sel: str, split: str) -> str:
        """The chunk job's record beside its chunks: their settings, real tokens and size (plan.capacity), which the
        plan reads to refuse a budget above the corpus before any job."""
        return self.data(tok, f"{sel}chunks_{split}.settings.json")

    def subset(self, tok: str, sel: str, budget: int | str, trial: int | str) -> str:
        """A trial's subset of one tokenizer's chunks ({sel}: "" without a selection factor, sel=<level>/ with one)."""
        return self.path("subsets", f"{tok}{sel}b{budget}", f"t{trial}.json")

    def selection(self, level: str, name: str) -> str:
        """A selection level's step output (its training documents are docs_train.parquet); SHARED: the study's own."""
        return self.path("data", name) if level == SHARED else self.path("data", f"sel={level}", name)

    def profile(self, key: str) -> str:
        return self.path("device", f"{key}profile.json")

    def analysis(self, file: str) -> str:
        return self.path("analysis", file)

    def figure(self, name: str, ext: str = "png") -> str:
        return self.path("figures", f"{name}.{ext}")

    @property
    def report(self) -> str:
        return self.path("report.html")

    # --- the interim report's twins
    def interim(self, *parts: str) -> str:
        return self.path("interim", *parts)

    def interim_of(self, path: str) -> str:
        """A file of the analysis stage (analysis/…, figures/…, the report) moved under interim/; anything else
        (captions, the reference study, trials) as it is."""
        staged = str(path).startswith(tuple(self.path(stage) + os.sep for stage in ("analysis", "figures")))
        return self.interim(os.path.relpath(path, self.root)) if staged or str(path) == self.report else path

    # --- what the study runs
    @property
    def expected(self) -> list[tuple[str, int]]:
        """Every (cell, trial) the study runs; the trial is the subject of the repeated-measures design."""
        return self.design.keys()

    def trace_keys(self, trials: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
        """The trial whose power trace the figures show for each cell: its first (of ``trials`` where given: a halving
        study runs some cells only)."""
        if trials is None:
            return [(c.id, self.design.trials[0]) for c in self.design.cells]
        first: dict[str, int] = {}
        for c, t in trials:
            first[c] = min(first.get(c, t), t)
        return sorted(first.items())

    def round_inputs(self, round_: int, trials: list[tuple[str, int]]) -> dict[str, list[str]]:
        """A halving round's checkpoint inputs from the (cell, trial) of its rounds so far (plan/allocation.py's walk):
        their records and stretch records, what lies beside them on disk up to the round's budget
        (``records_beside``), and the round before's record."""
        return {
            "metrics": [self.trial(c, t).metrics for c, t in trials],
            "stretches": self.stretch_records(trials),
            "beside": self.records_beside(self.design.budgets[round_], trials),
            "before": [self.halving_round(round_ - 1)] if round_ else [],
        }

    def records_beside(self, budget: int, trials: list[tuple[str, int]]) -> list[str]:
        """The trial records (metrics.json) of every cell at a budget up to ``budget`` and their stretch records that
        exist now, but for those of ``trials`` and theirs: what a halving round counts as spent beside its own rounds'
        (trials trained under other settings). Fixed once the rounds before have run, so no round reruns for it."""
        design = self.design
        mine = set(self.trial(c, t).metrics for c, t in trials) | set(self.stretch_records(trials))
        upto = [(c, t) for c, t in self.expected if design.cell(c).budget <= budget]
        found = [self.trial(c, t).metrics for c, t in upto] + self.stretch_records(upto)
        return [p for p in found if p not in mine and os.path.exists(p)]

    def halving_round(self, round_: int | str) -> str:
        """A halving round's checkpoint record (plan/allocation.py): its ranking, spend and next survivors."""
        return self.path("allocation", f"round{round_}.json")

    def profiles(self) -> dict[str, str]:
        """One device profile per hardware level and precision (the design's profile keys; "" when one)."""
        return {key: self.profile(key) for key in self.design.profile_keys()}

    def trial_targets(self, trials: list[tuple[str, int]] | None = None) -> list[str]:
        """Every file of the study's trials (of ``trials`` where given: a halving study's rounds so far)."""
        return [f for c, t in (self.expected if trials is None else trials) for f in self.trial(c, t)]

    def data_targets(self) -> list[str]:
        """The data stage's last files: every tokenizer's eval chunks and every trial's subset."""
        design = self.design
        subsets = sorted({(design.tokenizer_key(c), design.selection_key(c), design.tokens(c)) for c in design.cells})
        return [self.data(tok, "chunks_eval.parquet") for tok in design.tokenizer_keys()] + [
            self.subset(tok, sel, tokens, t) for tok, sel, tokens in subsets for t in design.trials
        ]

    def finished(self, exists: Callable[[str], bool] = os.path.exists) -> list[tuple[str, int]]:
        """(cell, trial) of every trial whose files all exist now and whose inputs were not remade since (the interim
        report reads these, never trains)."""
        return [(c, t) for c, t in self.expected if all(map(exists, self.trial(c, t))) and self.inputs_kept(c, t)]

    def inputs_kept(self, cell: str, trial: int | str) -> bool:
        """Whether a trial's inputs (``trial_inputs``) are all there and none is newer than its record. A study that
        remakes its data stage (a changed config or corpus) deletes and rewrites them: the trial it finished before is
        then not finished under it, and Snakemake would train it again for any job that read it, an interim report's
        too. Times are a link's own, as Snakemake reads them (a cached output is a link)."""
        try:
            done = os.lstat(self.trial(cell, trial).metrics).st_mtime
            return all(os.lstat(path).st_mtime <= done for path in self.trial_inputs(cell, trial).values())
        except OSError:
            return False

    def first_finished(self, exists: Callable[[str], bool] = os.path.exists) -> list[tuple[str, int]]:
        """Per cell, its first finished trial: the interim figures' power traces."""
        first: dict[str, int] = {}
        for c, t in self.finished(exists):
            first.setdefault(c, t)
        return sorted(first.items())

    # --- the data stage's files
    def chunked_documents(self, sel: str, split: str) -> str:
        """The documents a chunk job tokenizes: a selection level's training documents (``sel=<level>/``), the study's
        cleared of eval copies, or the eval documents, chunked once for every level (those that pass
        selection.eval_filters, if set)."""
        if split == "eval":
            return self.path("data", "docs_eval_kept.parquet" if self.eval_filters else "docs_eval.parquet")
        return self.path("data", f"{sel}docs_train.parquet" if sel else "decontaminated.parquet")

    def trial_inputs(self, cell_id: str, trial: int | str) -> dict[str, str]:
        """What a trial trains on: its subset, its tokenizer's chunks and tokenizer, and, for a level that trains in
        an order of its own (as read, or a curriculum), that order by document."""
        design = self.design
        cell = design.cell(cell_id)
        tok, sel = design.tokenizer_key(cell), design.selection_key(cell)
        ordered = design.ordered_level(cell)
        point = design.branch_point(cell) if design.branch_every is not None else 0
        return {
            "subset": self.subset(tok, sel, design.tokens(cell), trial),
            **self._chunks(cell),
            **({"order": self.selection(ordered, "order.parquet")} if ordered is not None else {}),
            **({"origin": self.stable(design.stable_key(cell), trial, point)} if point else {}),
        }

    def stable_inputs(self, key: str, trial: int | str, point: int | str) -> dict[str, str]:
        """What a stretch of a stable run reads: its tokenizer's chunks (the stretch draws the head of the trial's order
        itself, ``stream_head``) and the point before it, which it continues."""
        before = int(point) - 1
        chunks = self._chunks(self.design.stable_cell(key))
        return {**chunks, **({"origin": self.stable(key, trial, before)} if before else {})}

    def _chunks(self, cell: Cell) -> dict[str, str]:
        tok, sel = self.design.tokenizer_key(cell), self.design.selection_key(cell)
        return {
            "train": self.data(tok, f"{sel}chunks_train.parquet"),
            "eval": self.data(tok, "chunks_eval.parquet"),
            "tokenizer": self.data(tok, "tokenizer"),
        }


TRIAL_FILE_NAMES = ("metrics.json", "power.parquet", "steps.parquet", "curve.parquet")


def answer_path(report: str | Path) -> str:
    """The answer's file beside a report (the report rule writes both): ``results/report.html`` ->
    ``results/answer.txt``."""
    return str(Path(report).with_name("answer.txt"))
