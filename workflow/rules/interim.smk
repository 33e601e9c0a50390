# Interim report: the analysis of the trials finished so far, while a long study still runs.
# `snakemake interim --cores 1 --nolock --rerun-triggers mtime --ignore-incomplete` beside a running study (--nolock:
# the running study holds the folder's lock; --ignore-incomplete: the study marks the outputs of its running jobs
# incomplete, and this only reads files that exist, each written whole by an atomic rename; it reads finished trials,
# marked ancient, and writes under results/interim/).
# The final rules are reused with other inputs and outputs (each moved under results/interim/ by LAYOUT.interim_of);
# every input of the study's own is one that exists now, marked ancient, so the interim target never runs a job of the
# study (no trial, no data stage). The analysis products' twins, and their figures', are made beside their rules
# (analysis.smk).


use rule aggregate as interim_aggregate with:
    input:
        schema=STUDY.metrics_schema,
        metrics=finished_files("metrics"),
        power=finished_files("power"),
        steps=finished_files("steps"),
        curves=finished_files("curve"),
        profile=existing(*STUDY.device_profiles),
        stretches=existing(*LAYOUT.stretch_records()),
    output:
        **interim_files(rules.aggregate.output),
    log:
        LAYOUT.log("interim_aggregate"),
    params:
        **STUDY.aggregate_params(interim=True),


use rule report as interim_report with:
    # Only the device profiles and data summaries that exist now: mid data stage, asking for them would run the
    # study's own jobs beside the study.
    input:
        **interim_files(
            rules.report.input,
            profile=existing(*STUDY.device_profiles),
            normalize=existing(LAYOUT.path("data", "normalize_summary.json")),
            decontaminate=existing(LAYOUT.path("data", "decontaminate.json")),
            corpus_source=existing(LAYOUT.path("data", "corpus_source.json")),
        ),
    output:
        page=LAYOUT.interim("report.html"),
        answer=answer_path(LAYOUT.interim("report.html")),
    log:
        LAYOUT.log("interim_report"),
    params:
        **STUDY.report_params(interim=True),


rule interim:
    input:
        LAYOUT.interim("report.html"),
