# Selection stage (design.selection): between the decontaminated training documents (corpus.smk) and the chunks, one
# rule per step, so that changing a step's settings reruns that step and what follows it. The tokenizer and the eval set come from the split before any
# selection: the same for every level. The steps outrank every trial, as the subsets do, so that a level that keeps
# too little is refused before the trials the scheduler can choose instead of its steps.

# The quality rules every level is scored through (selection.eval_filters): the eval documents that pass them.
EVAL_FILTERS = config["selection"].get("eval_filters")
# Every step's record (the report's Data selection section); none without design.selection.
SELECTION_LEVELS = list(DESIGN.factors.get("selection", {}))
SELECTION_RECORDS = (
    [res("data", "decontaminate.json")]
    + ([res("data", "eval_filter.json")] if EVAL_FILTERS else [])
    + [
        selection_file(level, f"{step}.json")
        for level in SELECTION_LEVELS
        for step in ("near_dup", "filter")
    ]
    + [selection_file(level, "order.json") for level in DESIGN.ordered_levels()]
    if SELECTION_LEVELS
    else []
)


rule select_near_dup:
    input:
        docs=res("data", "decontaminated.parquet"),
    output:
        docs=selection_file("{level}", "near_dup.parquet"),
        record=selection_file("{level}", "near_dup.json"),
    log:
        logfile("select_near_dup", "{level}"),
    benchmark:
        res("benchmarks", "select_near_dup", "{level}.tsv")
    priority: SUBSET_PRIORITY
    conda:
        "../envs/data.yaml"
    threads: workflow.cores  # metered: alone on the machine, or the meter counts another job too
    resources:
        mem_mb=4000,
    params:
        settings=lambda wildcards: DESIGN.selection_config(wildcards.level)["near_dup"],
        seed=STUDY["seed"],
        meter=SELECTION_METER,
        meter_kind=config["selection"]["meter"],
        code=code_digest("select_near_dup.py"),
    script:
        "../scripts/select_near_dup.py"


rule select_filter:
    input:
        docs=selection_file("{level}", "near_dup.parquet"),
        records=[
            res("data", "decontaminate.json"),
            selection_file("{level}", "near_dup.json"),
        ],
    output:
        docs=selection_file("{level}", "docs_train.parquet"),
        record=selection_file("{level}", "filter.json"),
    log:
        logfile("select_filter", "{level}"),
    benchmark:
        res("benchmarks", "select_filter", "{level}.tsv")
    priority: SUBSET_PRIORITY
    conda:
        "../envs/data.yaml"
    threads: workflow.cores  # metered: alone on the machine, or the meter counts another job too
    resources:
        mem_mb=4000,
    params:
        thresholds=lambda wildcards: DESIGN.selection_config(wildcards.level)["filters"],
        level=lambda wildcards: wildcards.level,
        meter=SELECTION_METER,
        meter_kind=config["selection"]["meter"],
        code=code_digest("select_filter.py"),
    script:
        "../scripts/select_filter.py"


rule select_eval:
    input:
        docs=res("data", "docs_eval.parquet"),
    output:
        docs=res("data", "docs_eval_kept.parquet"),
        record=res("data", "eval_filter.json"),
    log:
        logfile("select_eval"),
    benchmark:
        res("benchmarks", "select_eval.tsv")
    priority: SUBSET_PRIORITY
    conda:
        "../envs/data.yaml"
    threads: workflow.cores  # metered: alone on the machine, or the meter counts another job too
    resources:
        mem_mb=2000,
    params:
        thresholds=EVAL_FILTERS,
        meter=SELECTION_METER,
        meter_kind=config["selection"]["meter"],
        code=code_digest("select_eval.py"),
    script:
        "../scripts/select_eval.py"


rule select_order:
    input:
        docs=selection_file("{level}", "docs_train.parquet"),
    output:
        order=selection_file("{level}", "order.parquet"),
        record=selection_file("{level}", "order.json"),
    log:
        logfile("select_order", "{level}"),
    benchmark:
        res("benchmarks", "select_order", "{level}.tsv")
    priority: SUBSET_PRIORITY
    conda:
        "../envs/data.yaml"
    threads: workflow.cores  # metered: alone on the machine, or the meter counts another job too
    resources:
        mem_mb=2000,
    params:
        order=lambda wildcards: DESIGN.selection_config(wildcards.level)["order"],
        meter=SELECTION_METER,
        meter_kind=config["selection"]["meter"],
        code=code_digest("select_order.py"),
    script:
        "../scripts/select_order.py"
