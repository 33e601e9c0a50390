"""Rule report: results/report.html, self-contained (figures embedded)."""

import time
from pathlib import Path

from tokenwatt.analysis.aggregate import cs_tflops_of
from tokenwatt.analysis.selection import level_of
from tokenwatt.analysis.tables import read_changes, read_conditions
from tokenwatt.common.files import logged, read_analysis_json, read_json, read_profile, read_table
from tokenwatt.common.provenance import git_state, utc, versions
from tokenwatt.presentation.report import render_report

with logged(snakemake.log[0]):
    figures = {
        name: (Path(png).read_bytes(), Path(caption).read_text(encoding="utf-8").strip())
        for name, png, caption in zip(snakemake.params.figure_names, snakemake.input.figures, snakemake.input.captions)
    }
    measured = set(snakemake.input.profile)  # the interim report has those measured so far
    profiles = {
        key: read_profile(path) if path in measured else None for key, path in snakemake.params.profiles.items()
    }
    cs = {key: cs_tflops_of(snakemake.params.config["metric"], profile) for key, profile in profiles.items()}
    # The data stage's summary; an interim report made before normalization finished has none yet.
    normalize = (
        [snakemake.input.normalize] if isinstance(snakemake.input.normalize, str) else list(snakemake.input.normalize)
    )
    summary = read_analysis_json(normalize[0], "normalization summary") if normalize else {}
    selection = {}  # each selection step's record by level (design.selection); the interim report's: those done
    for path in snakemake.input.selection:
        selection.setdefault(level_of(path), []).append(read_analysis_json(path, "selection step record"))
    page = render_report(
        config=snakemake.params.config,
        config_hash=snakemake.params.config_hash,
        trials=read_table(snakemake.input.trials, "trials table"),
        conditions=read_conditions(snakemake.input.conditions),
        changes=read_changes(snakemake.input.changes),
        stats=read_analysis_json(snakemake.input.stats, "statistics"),
        curves=read_analysis_json(snakemake.input.curves, "eval curves analysis"),
        scaling=read_analysis_json(snakemake.input.scaling, "scaling analysis"),
        missing=read_analysis_json(snakemake.input.missing, "list of missing trials"),
        figures=figures,
        reference=read_json(snakemake.input.reference),
        data_summary=summary,
        profiles=profiles,
        cs=cs,
        rerun=Path(snakemake.input.flagged).read_text(encoding="utf-8").split(),
        interim=snakemake.params.interim,
        profile_check=read_analysis_json(snakemake.input.profile_check, "device profile check"),
        cost=read_analysis_json(snakemake.input.cost, "cost summary"),
        selection=selection,
        made={"at": utc(time.time()), "git": git_state(Path(snakemake.scriptdir)), "versions": versions()},
    )
    Path(snakemake.output[0]).write_text(page, encoding="utf-8")
    print(f"wrote {snakemake.output[0]} ({len(page) / 1e6:.1f} MB)")
