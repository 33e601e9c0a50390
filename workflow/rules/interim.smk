# Interim report: the analysis of the trials finished so far, while a long study still runs.
# `snakemake interim --cores 1 --nolock --rerun-triggers mtime` beside a running study (--nolock:
# the running study holds the folder's lock; this only reads finished trials, marked ancient, and
# writes under results/interim/).
# The final rules are reused with other inputs and outputs; every input of the study's own is one that exists
# now, marked ancient, so the interim target never runs a job of the study (no trial, no data stage).


use rule aggregate as interim_aggregate with:
    input:
        schema=METRICS_SCHEMA,
        metrics=finished_files(0),
        power=finished_files(1),
        steps=finished_files(2),
        curves=finished_files(3),
        profile=existing_profiles,
    output:
        trials=interim_path("analysis", "trials.parquet"),
        conditions=interim_path("analysis", "conditions.csv"),
        changes=interim_path("analysis", "changes.csv"),
        quality=interim_path("analysis", "quality.csv"),
        curves=interim_path("analysis", "curves.parquet"),
        flagged=interim_path("analysis", "flagged.txt"),
        missing=interim_path("analysis", "missing.json"),
        profile_check=interim_path("analysis", "profile_check.json"),
        cost=interim_path("analysis", "cost.json"),
    log:
        logfile("interim_aggregate"),
    params:
        expected=EXPECTED,
        paths=[trial_metrics(c, t) for c, t in EXPECTED],
        profiles=PROFILES,
        cs_keys=DESIGN.cs_profile_keys(),
        absent="not finished yet",
        metric=config["metric"],
        quality=QUALITY_SETTINGS,
        cost=config["cost"],
        exclude_flagged=config["quality"]["exclude_flagged"],
        # Mid-study most subjects are incomplete: describe every finished trial (the tests use complete ones).
        require_complete=False,
        code=code_digest("aggregate.py"),


use rule stats as interim_stats with:
    input:
        interim_path("analysis", "trials.parquet"),
    output:
        json=interim_path("analysis", "stats.json"),
        anova=interim_path("analysis", "anova.csv"),
        posthoc=interim_path("analysis", "posthoc.csv"),
    log:
        logfile("interim_stats"),


use rule curves as interim_curves with:
    input:
        trials=interim_path("analysis", "trials.parquet"),
        curves=interim_path("analysis", "curves.parquet"),
        cost=interim_path("analysis", "cost.json"),
    output:
        interim_path("analysis", "curves.json"),
    log:
        logfile("interim_curves"),


use rule scaling as interim_scaling with:
    input:
        trials=interim_path("analysis", "trials.parquet"),
        curves=interim_path("analysis", "curves.parquet"),
    output:
        interim_path("analysis", "scaling.json"),
    log:
        logfile("interim_scaling"),


use rule figures as interim_figures with:
    input:
        trials=interim_path("analysis", "trials.parquet"),
        conditions=interim_path("analysis", "conditions.csv"),
        changes=interim_path("analysis", "changes.csv"),
        curves=interim_path("analysis", "curves.parquet"),
        traces=lambda wildcards: [
            ancient(trial_files(c, t)[1]) for c, t in interim_traces()
        ],
    output:
        **{
            f"{name}_{ext}": interim_path("figures", f"{name}.{ext}")
            for name in FIGURES
            for ext in ("png", "svg")
        },
    log:
        logfile("interim_figures"),
    params:
        trace_keys=lambda wildcards: interim_traces(),
        style=config["figures"],
        currency=config["cost"]["currency"],
        code=code_digest("figures.py"),


use rule scaling_figures as interim_scaling_figures with:
    input:
        trials=interim_path("analysis", "trials.parquet"),
        curves=interim_path("analysis", "curves.parquet"),
        scaling=interim_path("analysis", "scaling.json"),
    output:
        **{
            f"{name}_{ext}": interim_path("figures", f"{name}.{ext}")
            for name in SCALING_FIGURES
            for ext in ("png", "svg")
        },
    log:
        logfile("interim_scaling_figures"),


use rule report as interim_report with:
    input:
        trials=interim_path("analysis", "trials.parquet"),
        conditions=interim_path("analysis", "conditions.csv"),
        changes=interim_path("analysis", "changes.csv"),
        missing=interim_path("analysis", "missing.json"),
        profile_check=interim_path("analysis", "profile_check.json"),
        cost=interim_path("analysis", "cost.json"),
        flagged=interim_path("analysis", "flagged.txt"),
        profile=existing_profiles,
        stats=interim_path("analysis", "stats.json"),
        curves=interim_path("analysis", "curves.json"),
        scaling=interim_path("analysis", "scaling.json"),
        figures=[interim_path("figures", f"{name}.png") for name in REPORT_FIGURES],
        captions=[
            shipped("workflow", "report", f"{name}.rst") for name in REPORT_FIGURES
        ],
        reference=shipped("resources", "reference_study.json"),
        # Only once it exists: mid data stage, asking for it would run the study's own corpus jobs beside the study.
        normalize=existing(res("data", "normalize_summary.json")),
    output:
        interim_path("report.html"),
    log:
        logfile("interim_report"),
    params:
        config=config,
        config_hash=CONFIG_HASH,
        profiles=PROFILES,
        figure_names=REPORT_FIGURES,
        interim=True,
        code=code_digest("report.py"),


rule interim:
    input:
        interim_path("report.html"),
