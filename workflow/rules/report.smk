# Report stage: one self-contained HTML file with the answer, its evidence and provenance.


rule report:
    input:
        **{p.name: product_output(f"{p.name}.json", False) for p in STUDY_PRODUCTS},
        trials=res("analysis", "trials.parquet"),
        conditions=res("analysis", "conditions.csv"),
        changes=res("analysis", "changes.csv"),
        missing=res("analysis", "missing.json"),
        profile_check=res("analysis", "profile_check.json"),
        cost=res("analysis", "cost.json"),
        flagged=res("analysis", "flagged.txt"),
        profile=DEVICE_PROFILES,
        figures=[res("figures", f"{name}.png") for name in REPORT_FIGURES],
        captions=[
            shipped("workflow", "report", f"{name}.rst") for name in REPORT_FIGURES
        ],
        reference=shipped("resources", "reference_study.json"),
        normalize=res("data", "normalize_summary.json"),
        decontaminate=res("data", "decontaminate.json"),
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
        **report_params(interim=False),
    script:
        "../scripts/report.py"
