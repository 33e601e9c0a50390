# Analysis stage: per-trial table and condition summaries, then the analysis products and their figures.


rule aggregate:
    input:
        **{
            kind: per_trial(
                lambda trials, attr=attr: [
                    getattr(LAYOUT.trial(c, t), attr) for c, t in trials
                ]
            )
            for kind, attr in (
                ("metrics", "metrics"),
                ("power", "power"),
                ("steps", "steps"),
                ("curves", "curve"),
            )
        },
        schema=STUDY.metrics_schema,
        # every trial the study ran (a halving study's: its rounds', plan/allocation.py)
        profile=STUDY.device_profiles,
        # the stable runs' stretch records: the totals count each stretch once (train.schedule.branch_every)
        stretches=per_trial(
            lambda trials: LAYOUT.stretch_records(
                None if STUDY.allocation is None else trials
            )
        ),
    output:
        **{
            name: report(
                LAYOUT.analysis(file),
                caption=f"../report/{name}.rst",
                category="Tables",
            )
            for name, file in (
                ("trials", "trials.parquet"),
                ("conditions", "conditions.csv"),
                ("changes", "changes.csv"),
                ("quality", "quality.csv"),
            )
        },
        curves=LAYOUT.analysis("curves.parquet"),
        flagged=LAYOUT.analysis("flagged.txt"),
        missing=LAYOUT.analysis("missing.json"),
        profile_check=LAYOUT.analysis("profile_check.json"),
        cost=LAYOUT.analysis("cost.json"),
    log:
        LAYOUT.log("aggregate"),
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        **STUDY.aggregate_params(interim=False),
        # the trials it reads, each named by its own path (a halving study's are known once its rounds have run)
        expected=lambda wildcards, input: [
            trial_of(m) for m in records_among(input.metrics)
        ],
        paths=lambda wildcards, input: records_among(input.metrics),
    script:
        "../scripts/aggregate.py"


# One rule per analysis product (tokenwatt.analysis.products), and its interim twin reading the trials finished so
# far (interim.smk): both made here from the product's one entry, so no list of inputs is kept twice.
for _product, _twin in [(p, i) for p in STUDY.products for i in (False, True)]:

    rule:
        name:
            f"interim_{_product.name}" if _twin else _product.name
        input:
            **{
                keyword: analysis_input(file, _twin)
                for keyword, file in _product.reads.items()
            },
        output:
            **{
                table: analysis_output(f"{table}.csv", _twin, _product.table_category)
                for table in _product.tables
            },
            json=analysis_output(f"{_product.name}.json", _twin),
        log:
            LAYOUT.log(f"interim_{_product.name}" if _twin else _product.name),
        conda:
            "../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
        params:
            product=_product.name,
            settings=setting(config, _product.settings),
            code=STUDY.code("analyse.py", _product.module),
        script:
            "../scripts/analyse.py"


# One figures rule per product that draws figures, and its interim twin: each figure drawn from the product's own
# outputs (its JSON and tables) and the aggregate's tables it names (draws), never recomputed.
for _product, _twin in [
    (p, i) for p in STUDY.products if p.figures for i in (False, True)
]:

    rule:
        name:
            f"interim_{_product.name}_figures" if _twin else f"{_product.name}_figures"
        input:
            **{
                table: analysis_input(f"{table}.csv", _twin)
                for table in _product.tables
            },
            **{
                keyword: analysis_input(file, _twin)
                for keyword, file in _product.draws.items()
            },
            trials=analysis_input("trials.parquet", _twin),
            json=analysis_input(f"{_product.name}.json", _twin),
        output:
            **{
                f"{name}_{ext}": figure_output(name, ext, _twin)
                for name in _product.figures
                for ext in ("png", "svg")
            },
        log:
            LAYOUT.log(
                f"interim_{_product.name}_figures"
                if _twin
                else f"{_product.name}_figures"
            ),
        conda:
            "../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
        params:
            product=_product.name,
            style=lookup(dpath="figures", within=config),
            code=STUDY.code("product_figures.py", _product.draw_module),
        script:
            "../scripts/product_figures.py"
