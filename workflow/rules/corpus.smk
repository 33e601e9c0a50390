# Corpus stage: load documents, normalize them, hold out the evaluation documents.


rule corpus:
    input:
        corpus_inputs,
        start_checked,
    output:
        res("data", "corpus.parquet"),
    log:
        logfile("corpus"),
    benchmark:
        res("benchmarks", "corpus.tsv")
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        source=config["corpus"]["source"],
        options=lambda wildcards: config["corpus"][config["corpus"]["source"]],
        code=code_digest("corpus.py"),
    script:
        "../scripts/corpus.py"


rule normalize:
    input:
        res("data", "corpus.parquet"),
    output:
        docs=res("data", "normalized.parquet"),
        summary=res("data", "normalize_summary.json"),
    log:
        logfile("normalize"),
    benchmark:
        res("benchmarks", "normalize.tsv")
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        form=config["normalize"]["form"],
        dedupe=config["normalize"]["dedupe"],
        code=code_digest("normalize.py"),
    script:
        "../scripts/normalize.py"


rule split:
    input:
        res("data", "normalized.parquet"),
    output:
        train=res("data", "docs_train.parquet"),
        eval=res("data", "docs_eval.parquet"),
    log:
        logfile("split"),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        eval_documents=config["split"]["eval_documents"],
        seed=STUDY["seed"],
        code=code_digest("split.py"),
    script:
        "../scripts/split.py"


# Training documents that hold most of an eval document leave training, in every study, before any selection level.
rule decontaminate:
    input:
        docs=res("data", "docs_train.parquet"),
        eval=res("data", "docs_eval.parquet"),
    output:
        docs=res("data", "decontaminated.parquet"),
        record=res("data", "decontaminate.json"),
    log:
        logfile("decontaminate"),
    benchmark:
        res("benchmarks", "decontaminate.tsv")
    priority: SUBSET_PRIORITY
    conda:
        "../envs/data.yaml"
    threads: workflow.cores  # metered: alone on the machine, or the meter counts another job too
    resources:
        mem_mb=4000,
    params:
        settings=config["split"]["decontaminate"],
        meter=SELECTION_METER,
        meter_kind=config["selection"]["meter"],
        code=code_digest("decontaminate.py"),
    script:
        "../scripts/decontaminate.py"
