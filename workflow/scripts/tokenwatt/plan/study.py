"""The validated config as the rule files read it: the design, every path (``Layout``), the order trials run in, and
each rule's params that are more than one config key. The rule files define rules with these and hold no logic of
their own, so what a rule is handed can be tested without Snakemake.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..common.codeclosure import Library, code_digest
from ..common.files import read_json
from ..common.installed import NotInstalled, installed_files
from . import allocation, disk
from .config import config_hash, quality_settings
from .design import Design
from .layout import Layout
from .preview import pilot_of, trial_runtime_min
from .runorder import trial_priorities

# What a metered data step's window needs (decontamination and the selection steps; selection.meter picks the meter):
# other meter keys rerun none of them.
WINDOW_METER_KEYS = ("interval_s", "cpu_tdp_w", "rapl_root")


class Study:
    """One validated config's study: ``products`` are the analysis products it runs (tokenwatt.analysis.products,
    handed in: the plan sits below the analysis); ``workflow_dir`` is tokenwatt's workflow/ folder on this machine
    and ``scripts`` the folder its library is imported from (rules/mirror.smk finds both)."""

    def __init__(self, config: Mapping[str, Any], products: Sequence[Any], workflow_dir: Path, scripts: Path):
        self.config = config
        self.design = Design(dict(config))
        self.layout = Layout(config, self.design)
        # energy-budgeted successive halving (plan/allocation.py), or None: every cell × trial trains
        self.allocation = allocation.allocation_of(config)
        self.products = tuple(products)
        self.workflow_dir, self.scripts = Path(workflow_dir), Path(scripts)
        self.library = Library(self.scripts)  # the library's files as this parse reads them, once for every rule
        self.hash = config_hash(dict(config))
        self.quality = quality_settings(dict(config))
        # The config's pilot (plan.*), if it measured this study's workload: the plan's time and each trial's limit.
        self.pilot, self.pilot_note = pilot_of(dict(config))
        expected = self.layout.expected
        # Computed once: a priority per trial (recomputing the order per job made planning quadratic).
        self.trial_priority = trial_priorities(expected, config["study"]["seed"], config["study"]["run_order"])
        # Subsets (and the metered data steps) outrank every trial, so that a budget the corpus cannot fill fails
        # before any training starts (the scheduler runs ready jobs by priority); the device profile outranks
        # everything, so CS_TFLOPS is measured before any trial heats the device.
        self.subset_priority = len(expected) + 1
        self.profile_priority = self.subset_priority + 1
        # A stable run's stretches as soon as the first trial branching from it would have run.
        self._stable_priority: dict[tuple[str, int], int] = {}
        if self.design.branch_every is not None:
            for (cell, trial), priority in self.trial_priority.items():
                key = (self.design.stable_key(self.design.cell(cell)), trial)
                self._stable_priority[key] = max(self._stable_priority.get(key, 0), priority)

    @property
    def report_figures(self) -> list[str]:
        """Every figure the report embeds: each product's (its own figures rule's), in the products' order."""
        return [name for p in self.products for name in p.figures]

    # --- files tokenwatt ships and files the config names
    def shipped(self, *parts: str) -> str:
        """A file tokenwatt ships (a caption, the reference study, the story grammar), wherever the study runs: relative
        to the working directory when tokenwatt lies inside it (this checkout; a project's own copy), so that moving
        the folder changes no job's set of inputs; else absolute (a checkout elsewhere)."""
        path = self.workflow_dir.parent.joinpath(*parts)
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)

    def user_or_shipped(self, path: str) -> str:
        """A file the config names: relative to the working directory, else (the embedded study's resources/...) to
        tokenwatt's own folder; returned as given when neither has it, so the error names the config's path."""
        if os.path.isabs(path) or os.path.exists(path) or not os.path.exists(self.shipped(path)):
            return path
        return self.shipped(path)

    def code(self, script: str, *modules: str) -> str:
        """Digest of a rule's script and every library module it imports, and of ``modules`` (dotted names the script
        imports at run time: an analysis product's function) with theirs. Snakemake cannot see modules a script
        imports; passed as a param, an edit to them reruns the job (and keys the between-workflow cache)."""
        return code_digest(self.scripts / script, self.scripts, modules, self.library)

    def corpus_inputs(self, wildcards: Any = None) -> list[str]:
        """The corpus job's input files: the grammar of the synthetic stories, the local files that exist, or the
        installed package's chosen files (so a new release reruns the corpus). A missing one is left to the pre-flight
        check, which names its key; a dry run plans all the same."""
        corpus = self.config["corpus"]
        if corpus["source"] == "synthetic":
            return [self.user_or_shipped(corpus["synthetic"]["grammar"])]
        if corpus["source"] == "local":
            return [f for f in corpus["local"]["files"] if os.path.exists(f)]
        if corpus["source"] == "package":
            package = corpus["package"]
            try:
                return [str(p) for d in package["distributions"] for p in installed_files(d, package["files"]).paths]
            except NotInstalled:
                return []
        return []

    # --- what the rules are handed
    @property
    def metrics_schema(self) -> str:
        """The typed record every trial writes; validated when written and when read."""
        return self.shipped("workflow", "schemas", "metrics.schema.yaml")

    @property
    def device_profiles(self) -> list[str]:
        """The device profiles the study measures (metric.cs_tflops: measure), one per hardware level and precision."""
        return list(self.layout.profiles().values()) if self.config["metric"]["cs_tflops"] == "measure" else []

    def window_meter(self, kind: str) -> dict[str, Any]:
        """The meter settings of a metered data step's window (``kind``: selection.meter)."""
        return {"kind": kind, **{key: self.config["meter"][key] for key in WINDOW_METER_KEYS}}

    def trial_runtime(self, cell_id: str) -> int:
        """A trial's time limit in minutes (SLURM's --time), from the plan's estimate of its length (plan.*) and its
        checkpoints' saves (``disk.checkpoint_seconds``)."""
        design = self.design
        cell = design.cell(cell_id)
        epochs = design.train_config(cell)["epochs"]
        params = disk.model_parameters(design.model_config(cell), design.tokenizer_config(design.tokenizer_key(cell)))
        tokens = design.tokens(cell)
        saving = disk.checkpoint_seconds(params, tokens * epochs, self.config["train"].get("checkpoint_every", 0))
        return trial_runtime_min(tokens, epochs, self.pilot, saving)

    def stable_priority(self, key: str, trial: int) -> int:
        return self._stable_priority[(key, trial)]

    def stable_runtime(self, key: str) -> int:
        """A stable run's stretch's time limit: its longest trial's (a stretch trains at most that)."""
        cells = [c for c in self.design.cells if self.design.stable_key(c) == key]
        return self.trial_runtime(max(cells, key=self.design.tokens).id)

    def by_cell(self, value_of: Callable[[str], Any], wildcard: str = "cell") -> Any:
        """A rule's value that depends on its job's cell alone, computed once per cell when the plan is read:
        ``value_of(key)`` for each key the ``wildcard`` takes (``cell``: a cell id; ``profile``: a device profile's
        key; ``stable``: a stable run's key). The value itself where every key gives the same, else a function of the
        job's wildcards that looks it up.

        Why: Snakemake calls each of a rule's functions once per job and inspects its signature every time; at
        15 000 trials those calls, not the values, were most of a dry run's own cost (benchmarks/plan.py)."""
        design = self.design
        keys = {
            "cell": lambda: [c.id for c in design.cells],
            "profile": design.profile_keys,
            "stable": lambda: sorted({design.stable_key(c) for c in design.cells}),
        }[wildcard]()
        values = {key: value_of(key) for key in keys}
        first = next(iter(values.values()))
        # by repr, not ==: 1, 1.0 and True are equal, as are dicts in another key order, yet a rule handed the first
        # cell's would pass another cell a value of another type or order (a param's repr is what Snakemake compares)
        if all(repr(value) == repr(first) for value in values.values()):
            return first
        return lambda wildcards: values[wildcards[wildcard]]

    def hardware_resources(self, wildcard: str) -> dict[str, Any]:
        """The scheduler resources the design's hardware levels set (gpu_model, slurm_partition, constraint), each by
        the cell its job's ``wildcard`` names (``by_cell``); "" where a level leaves one unset (the executor ignores
        it)."""
        design = self.design
        cell_for = {"cell": design.cell, "profile": design.profile_cell, "stable": design.stable_cell}[wildcard]
        names = sorted({name for c in design.cells for name in design.resources(c)})
        return {
            name: self.by_cell(lambda key, name=name: design.resources(cell_for(key)).get(name, ""), wildcard)
            for name in names
        }

    # --- params the final analysis rules and their interim twins share
    def aggregate_params(self, interim: bool) -> dict[str, Any]:
        """The aggregate rule's params, and its interim twin's: mid-study most subjects are incomplete, so the interim
        report describes every finished trial (the tests use complete ones) and names the rest as not finished yet.
        The final rule names its trials by its inputs' paths instead (rules/analysis.smk): a halving study's are
        known only once its rounds have run."""
        layout, named = self.layout, {}
        if interim:
            expected = layout.expected
            if self.allocation is not None:
                read = lambda k: allocation.record_on_disk(self.layout.halving_round(k), read_json)  # noqa: E731
                expected = allocation.walk(self.design, read).trials
            named = dict(expected=expected, paths=[layout.trial(c, t).metrics for c, t in expected])
        return dict(
            **named,
            profiles=layout.profiles(),
            cs_keys=self.design.cs_profile_keys(),
            absent="not finished yet" if interim else "no metrics",
            metric=self.config["metric"],
            quality=self.quality,
            cost=self.config["cost"],
            exclude_flagged=self.config["quality"]["exclude_flagged"],
            require_complete=not interim,
            code=self.code("aggregate.py"),
        )

    def full_grid_files(self) -> list[str]:
        """allocation.full_grid's trials table and cost where both exist (the allocation product reads them as they
        are; none where the folder has not both: the full grid has not run there)."""
        spec = self.config.get("allocation") or {}
        if not spec.get("full_grid"):
            return []
        found = [os.path.join(spec["full_grid"], "analysis", f) for f in ("trials.parquet", "cost.json")]
        return found if all(map(os.path.exists, found)) else []

    def report_params(self, interim: bool) -> dict[str, Any]:
        """The report rule's params, and the interim report's. The report imports each product's section by name: its
        code digest names them, as its imports do not."""
        sections = [f"tokenwatt.presentation.sections.{p.section}" for p in self.products]
        return dict(
            config=self.config,
            config_hash=self.hash,
            profiles=self.layout.profiles(),
            figure_names=self.report_figures,
            interim=interim,
            code=self.code("report.py", *sections),
        )
