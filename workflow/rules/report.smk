# Report stage: one self-contained HTML file with the answer, its evidence and provenance.

# The report imports each product's section by name (Product.section): its code digest names them, as its imports
# do not.
REPORT_SECTIONS = [
    f"tokenwatt.presentation.sections.{p.section}" for p in STUDY_PRODUCTS
]


def report_params(interim):
    """The report rule's params, and the interim report's."""
    return dict(
        config=config,
        config_hash=CONFIG_HASH,
        profiles=PROFILES,
        figure_names=REPORT_FIGURES,
        interim=interim,
        code=code_digest("report.py", *REPORT_SECTIONS),
    )


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
