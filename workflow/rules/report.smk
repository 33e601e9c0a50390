# Report stage: one self-contained HTML file with the answer, its evidence and provenance.


rule report:
    input:
        trials=res("analysis", "trials.parquet"),
        conditions=res("analysis", "conditions.csv"),
        changes=res("analysis", "changes.csv"),
        missing=res("analysis", "missing.json"),
        profile_check=res("analysis", "profile_check.json"),
        cost=res("analysis", "cost.json"),
        flagged=res("analysis", "flagged.txt"),
        profile=DEVICE_PROFILES,
        stats=res("analysis", "stats.json"),
        curves=res("analysis", "curves.json"),
        scaling=res("analysis", "scaling.json"),
        figures=[res("figures", f"{name}.png") for name in REPORT_FIGURES],
        captions=[
            shipped("workflow", "report", f"{name}.rst") for name in REPORT_FIGURES
        ],
        reference=shipped("resources", "reference_study.json"),
        normalize=res("data", "normalize_summary.json"),
        selection=SELECTION_RECORDS,
    output:
        res("report.html"),
    log:
        logfile("report"),
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        config=config,
        config_hash=CONFIG_HASH,
        profiles=PROFILES,
        figure_names=REPORT_FIGURES,
        interim=False,
        code=code_digest("report.py"),
    script:
        "../scripts/report.py"
