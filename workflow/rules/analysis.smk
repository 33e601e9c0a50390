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
        trials=report(
            res("analysis", "trials.parquet"),
            caption="../report/trials.rst",
            category="Tables",
        ),
        conditions=report(
            res("analysis", "conditions.csv"),
            caption="../report/conditions.rst",
            category="Tables",
        ),
        changes=report(
            res("analysis", "changes.csv"),
            caption="../report/changes.rst",
            category="Tables",
        ),
        quality=report(
            res("analysis", "quality.csv"),
            caption="../report/quality.rst",
            category="Tables",
        ),
        curves=res("analysis", "curves.parquet"),
        flagged=res("analysis", "flagged.txt"),
        missing=res("analysis", "missing.json"),
        profile_check=res("analysis", "profile_check.json"),
        cost=res("analysis", "cost.json"),
    log:
        logfile("aggregate"),
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        **aggregate_params(interim=False),
    script:
        "../scripts/aggregate.py"


# One rule per analysis product (tokenwatt.analysis.products), and its interim twin reading the trials finished so
# far (interim.smk): both made here from the product's one entry, so no list of inputs is kept twice.
for _product, _twin in [(p, i) for p in STUDY_PRODUCTS for i in (False, True)]:

    rule:
        name:
            f"interim_{_product.name}" if _twin else _product.name
        input:
            **{
                keyword: product_input(file, _twin)
                for keyword, file in _product.reads.items()
            },
        output:
            **{
                table: product_output(f"{table}.csv", _twin, _product.table_category)
                for table in _product.tables
            },
            json=product_output(f"{_product.name}.json", _twin),
        log:
            logfile(f"interim_{_product.name}" if _twin else _product.name),
        conda:
            "../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
        params:
            product=_product.name,
            settings=setting(config, _product.settings),
            code=code_digest("analyse.py", _product.module),
        script:
            "../scripts/analyse.py"


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
    log:
        logfile("figures"),
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        **figures_params(TRACE_KEYS),
    script:
        "../scripts/figures.py"


rule scaling_figures:
    input:
        trials=res("analysis", "trials.parquet"),
        curves=res("analysis", "curves.parquet"),
        scaling=res("analysis", "scaling.json"),
    output:
        **{
            f"{name}_{ext}": report(
                res("figures", f"{name}.{ext}"),
                caption=f"../report/{name}.rst",
                category="Figures",
                subcategory=ext.upper(),
            )
            for name in SCALING_FIGURES
            for ext in ("png", "svg")
        },
    log:
        logfile("scaling_figures"),
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        style=config["figures"],
        code=code_digest("scaling_figures.py"),
    script:
        "../scripts/scaling_figures.py"
