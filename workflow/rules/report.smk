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
        figures=[res("figures", f"{name}.png") for name in FIGURES],
        captions=[f"workflow/report/{name}.rst" for name in FIGURES],
        reference="resources/reference_study.json",
        normalize=res("data", "normalize_summary.json"),
    output:
        res("report.html"),
    params:
        config=config,
        config_hash=CONFIG_HASH,
        profiles=PROFILES,
        figure_names=FIGURES,
        interim=False,
        code=code_digest("report.py"),
    log:
        logfile("report"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/report.py"
