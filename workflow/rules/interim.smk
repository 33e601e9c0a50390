# Interim report: the analysis of the trials finished so far, while a long study still runs.
# `snakemake interim --cores 1 --nolock --rerun-triggers mtime` beside a running study (--nolock:
# the running study holds the folder's lock; this only reads finished trials, marked ancient, and
# writes under results/interim/).
# The final rules are reused with other inputs and outputs; every input of the study's own is one that exists
# now, marked ancient, so the interim target never runs a job of the study (no trial, no data stage). The analysis
# products' twins are made beside their rules (analysis.smk), from the same entry.


use rule aggregate as interim_aggregate with:
    input:
        schema=METRICS_SCHEMA,
        metrics=finished_files(0),
        power=finished_files(1),
        steps=finished_files(2),
        curves=finished_files(3),
        profile=existing_profiles,
    output:
        **interim_named(rules.aggregate.output),
    log:
        logfile("interim_aggregate"),
    params:
        **aggregate_params(interim=True),


use rule figures as interim_figures with:
    input:
        **interim_named(
            rules.figures.input,
            traces=lambda wildcards: [
                ancient(trial_files(c, t)[1]) for c, t in interim_traces()
            ],
        ),
    output:
        **interim_named(rules.figures.output),
    log:
        logfile("interim_figures"),
    params:
        **figures_params(lambda wildcards: interim_traces()),


use rule scaling_figures as interim_scaling_figures with:
    input:
        *interim_positional(rules.scaling_figures.input),
        **interim_named(rules.scaling_figures.input),
    output:
        *interim_positional(rules.scaling_figures.output),
        **interim_named(rules.scaling_figures.output),
    log:
        logfile("interim_scaling_figures"),


use rule report as interim_report with:
    # Only the device profiles and data summary that exist now: mid data stage, asking for them would run the
    # study's own jobs beside the study.
    input:
        *interim_positional(rules.report.input),
        **interim_named(
            rules.report.input,
            profile=existing_profiles,
            normalize=existing(res("data", "normalize_summary.json")),
            decontaminate=existing(res("data", "decontaminate.json")),
        ),
    output:
        *interim_positional(rules.report.output),
        **interim_named(rules.report.output),
    log:
        logfile("interim_report"),
    params:
        **report_params(interim=True),


rule interim:
    input:
        interim_path("report.html"),
