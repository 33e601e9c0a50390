# Analysis stage: per-trial table and condition summaries, statistics, figures.


rule aggregate:
    input:
        schema=METRICS_SCHEMA,
        metrics=[trial_metrics(c, t) for c, t in EXPECTED],
        power=[trial_files(c, t)[1] for c, t in EXPECTED],
        steps=[trial_files(c, t)[2] for c, t in EXPECTED],
        curves=[trial_files(c, t)[3] for c, t in EXPECTED],
        profile=DEVICE_PROFILES,
    output:
        trials=report(res("analysis", "trials.parquet"), caption="../report/trials.rst", category="Tables"),
        conditions=report(res("analysis", "conditions.csv"), caption="../report/conditions.rst", category="Tables"),
        changes=report(res("analysis", "changes.csv"), caption="../report/changes.rst", category="Tables"),
        quality=report(res("analysis", "quality.csv"), caption="../report/quality.rst", category="Tables"),
        curves=res("analysis", "curves.parquet"),
        flagged=res("analysis", "flagged.txt"),
        missing=res("analysis", "missing.json"),
        profile_check=res("analysis", "profile_check.json"),
        cost=res("analysis", "cost.json"),
    params:
        expected=EXPECTED,
        paths=[trial_metrics(c, t) for c, t in EXPECTED],
        profiles=PROFILES,
        cs_keys=DESIGN.cs_profile_keys(),
        absent="no metrics",
        metric=config["metric"],
        quality=QUALITY_SETTINGS,
        cost=config["cost"],
        exclude_flagged=config["quality"]["exclude_flagged"],
        require_complete=True,
        code=code_digest("aggregate.py"),
    log:
        logfile("aggregate"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/aggregate.py"


rule stats:
    input:
        res("analysis", "trials.parquet"),
    output:
        json=res("analysis", "stats.json"),
        anova=report(res("analysis", "anova.csv"), caption="../report/anova.rst", category="Tests"),
        posthoc=report(res("analysis", "posthoc.csv"), caption="../report/posthoc.rst", category="Tests"),
    params:
        exclude_flagged=config["quality"]["exclude_flagged"],
        code=code_digest("stats.py"),
    log:
        logfile("stats"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/stats.py"


rule figures:
    input:
        trials=res("analysis", "trials.parquet"),
        conditions=res("analysis", "conditions.csv"),
        changes=res("analysis", "changes.csv"),
        curves=res("analysis", "curves.parquet"),
        traces=[trial_files(c, t)[1] for c, t in TRACE_KEYS],
    output:
        **{
            f"{name}_{ext}": report(
                res("figures", f"{name}.{ext}"),
                caption=f"../report/{name}.rst",
                category="Figures",
                subcategory=ext.upper(),
            )
            for name in FIGURES
            for ext in ("png", "svg")
        },
    params:
        trace_keys=TRACE_KEYS,
        style=config["figures"],
        currency=config["cost"]["currency"],
        code=code_digest("figures.py"),
    log:
        logfile("figures"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/figures.py"


rule curves:
    input:
        trials=res("analysis", "trials.parquet"),
        curves=res("analysis", "curves.parquet"),
    output:
        res("analysis", "curves.json"),
    params:
        settings=config["analysis"],
        code=code_digest("curves.py"),
    log:
        logfile("curves"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/curves.py"


rule scaling:
    input:
        trials=res("analysis", "trials.parquet"),
        curves=res("analysis", "curves.parquet"),
    output:
        res("analysis", "scaling.json"),
    params:
        settings=config["scaling"],
        code=code_digest("scaling.py"),
    log:
        logfile("scaling"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/scaling.py"
