"""Rule report: results/report.html, self-contained (figures embedded)."""

import time
from pathlib import Path

from tokenwatt.analysis.products import products_of
from tokenwatt.common.files import logged
from tokenwatt.common.provenance import git_state, utc, versions
from tokenwatt.presentation.inputs import load_report_inputs
from tokenwatt.presentation.report import render_report
from tokenwatt.presentation.sections.summary import answer_lines

with logged(snakemake.log[0]):
    files, params = snakemake.input, snakemake.params
    measured = set(files.profile)  # the interim report has those measured so far
    # The data stage's summary; an interim report made before normalization finished has none yet.
    normalize = [files.normalize] if isinstance(files.normalize, str) else list(files.normalize)
    decontaminate = [files.decontaminate] if isinstance(files.decontaminate, str) else list(files.decontaminate)
    corpus_source = [files.corpus_source] if isinstance(files.corpus_source, str) else list(files.corpus_source)
    inputs = load_report_inputs(
        config=params.config,
        config_hash=params.config_hash,
        trials=files.trials,
        conditions=files.conditions,
        changes=files.changes,
        missing=files.missing,
        profile_check=files.profile_check,
        cost=files.cost,
        flagged=files.flagged,
        products={p.name: getattr(files, f"{p.name}_json") for p in products_of(params.config)},
        figures=dict(zip(params.figure_names, zip(files.figures, files.captions, strict=True), strict=True)),
        reference=files.reference,
        normalize=normalize[0] if normalize else None,
        decontaminate=decontaminate[0] if decontaminate else None,
        corpus_source=corpus_source[0] if corpus_source else None,
        profiles={key: path if path in measured else None for key, path in params.profiles.items()},
        interim=params.interim,
        made={"at": utc(time.time()), "git": git_state(Path(snakemake.scriptdir)), "versions": versions()},
    )
    page = render_report(inputs)
    Path(snakemake.output.page).write_text(page, encoding="utf-8")
    # the answer's short form, a sentence a line: what the run prints at its end (tokenwatt.presentation.finished)
    Path(snakemake.output.answer).write_text("\n".join(answer_lines(inputs)) + "\n", encoding="utf-8")
    print(f"wrote {snakemake.output.page} ({len(page) / 1e6:.1f} MB) and {snakemake.output.answer}")
