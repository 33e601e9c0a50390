# Report stage: one self-contained HTML file with the answer, its evidence and provenance.
from tokenwatt.plan.layout import answer_path  # noqa: E402


rule report:
    input:
        # each product's JSON, named apart from the aggregate's tables (the trials product beside trials.parquet)
        **{
            f"{p.name}_json": analysis_output(f"{p.name}.json", False)
            for p in STUDY.products
        },
        **{
            name: LAYOUT.analysis(file)
            for name, file in (
                ("trials", "trials.parquet"),
                ("conditions", "conditions.csv"),
                ("changes", "changes.csv"),
                ("missing", "missing.json"),
                ("profile_check", "profile_check.json"),
                ("cost", "cost.json"),
                ("flagged", "flagged.txt"),
            )
        },
        profile=STUDY.device_profiles,
        figures=[LAYOUT.figure(name) for name in STUDY.report_figures],
        captions=[
            STUDY.shipped("workflow", "report", f"{name}.rst")
            for name in STUDY.report_figures
        ],
        reference=STUDY.shipped("resources", "reference_study.json"),
        normalize=LAYOUT.path("data", "normalize_summary.json"),
        decontaminate=LAYOUT.path("data", "decontaminate.json"),
        corpus_source=LAYOUT.path("data", "corpus_source.json"),
    output:
        page=LAYOUT.report,
        # the answer's few sentences, which the run prints at its end (Snakefile onsuccess)
        answer=answer_path(LAYOUT.report),
    log:
        LAYOUT.log("report"),
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        **STUDY.report_params(interim=False),
    script:
        "../scripts/report.py"
