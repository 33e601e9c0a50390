"""What the report shows, as one typed object, and the one loader that reads it from the rule's files.

``load_report_inputs`` is the edge: it reads every file the report rule names (the aggregate's tables, each analysis
product's JSON by product name, the figures with their captions, the device profiles, the data summary) and the
sections only ever see the ReportInputs it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ..analysis.aggregate import cs_tflops_of
from ..analysis.frame import energy_is_estimated
from ..analysis.products import product
from ..analysis.tables import read_changes, read_conditions
from ..common.files import read_analysis_json, read_json, read_profile, read_table

PathLike = str | Path


@dataclass(frozen=True, kw_only=True)
class ReportInputs:
    """Everything the report shows. ``products`` holds each analysis product's JSON by product name
    (tokenwatt.analysis.products); ``figures`` maps name → (PNG bytes, caption); ``profiles`` and ``cs`` (CS_TFLOPS
    and where it came from) are keyed by device profile (one per hardware level and precision, "" when one; a profile
    not measured yet is None); ``rerun`` names the flagged trials' files; ``made`` says when and with what the report
    was made (git state, report time, package versions)."""

    config: dict[str, Any]
    trials: pl.DataFrame
    config_hash: str = ""
    conditions: pl.DataFrame = field(default_factory=pl.DataFrame)
    changes: pl.DataFrame = field(default_factory=pl.DataFrame)
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    figures: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    reference: dict[str, Any] = field(default_factory=dict)
    data_summary: dict[str, Any] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    cs: dict[str, tuple[float | None, str]] = field(default_factory=dict)
    rerun: list[str] = field(default_factory=list)
    profile_check: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    interim: bool = False
    made: dict[str, Any] = field(default_factory=dict)

    def product(self, name: str) -> dict[str, Any]:
        """A product's JSON; empty when the study has no such product."""
        return self.products.get(name) or {}

    @property
    def estimated(self) -> bool:
        return energy_is_estimated(self.trials)

    @property
    def n_flagged(self) -> int:
        return self.trials.filter(pl.col("quality") == "flagged").height if "quality" in self.trials.columns else 0

    @property
    def exclude_flagged(self) -> bool:
        return self.config.get("quality", {}).get("exclude_flagged", False)

    @property
    def disturbed_profile(self) -> bool:
        return any(v.get("status") == "disturbed" for v in self.profile_check)


def load_report_inputs(
    *,
    config: dict[str, Any],
    config_hash: str,
    trials: PathLike,
    conditions: PathLike,
    changes: PathLike,
    missing: PathLike,
    profile_check: PathLike,
    cost: PathLike,
    flagged: PathLike,
    products: Mapping[str, PathLike],
    figures: Mapping[str, tuple[PathLike, PathLike]],
    reference: PathLike,
    normalize: PathLike | None,
    profiles: Mapping[str, PathLike | None],
    decontaminate: PathLike | None = None,
    corpus_source: PathLike | None = None,
    interim: bool = False,
    made: Mapping[str, Any] | None = None,
) -> ReportInputs:
    """The report's inputs from the rule's files: ``products`` maps product name → its JSON, ``figures`` name →
    (PNG, caption file), ``profiles`` key → device profile (None: not measured yet, as in an interim report made
    early); ``normalize`` is the data stage's summary, None before normalization finished, ``decontaminate`` the
    decontamination step's record (its ``decontaminate`` key), None before it ran, ``corpus_source`` where the corpus
    came from (its ``corpus`` key), None before the corpus job ran."""
    read = {key: read_profile(path) if path is not None else None for key, path in profiles.items()}
    return ReportInputs(
        config=config,
        config_hash=config_hash,
        trials=read_table(trials, "trials table"),
        conditions=read_conditions(conditions),
        changes=read_changes(changes),
        products={name: read_analysis_json(path, product(name).what) for name, path in products.items()},
        missing=read_analysis_json(missing, "list of missing trials"),
        figures={
            name: (Path(png).read_bytes(), Path(caption).read_text(encoding="utf-8").strip())
            for name, (png, caption) in figures.items()
        },
        reference=read_json(reference),
        data_summary={
            **(read_analysis_json(normalize, "normalization summary") if normalize is not None else {}),
            **(
                {"decontaminate": read_analysis_json(decontaminate, "decontamination record")}
                if decontaminate is not None
                else {}
            ),
            **(
                {"corpus": read_analysis_json(corpus_source, "corpus source record")}
                if corpus_source is not None
                else {}
            ),
        },
        profiles=read,
        cs={key: cs_tflops_of(config["metric"], profile) for key, profile in read.items()},
        rerun=Path(flagged).read_text(encoding="utf-8").split(),
        profile_check=read_analysis_json(profile_check, "device profile check"),
        cost=read_analysis_json(cost, "cost summary"),
        interim=interim,
        made=dict(made or {}),
    )
