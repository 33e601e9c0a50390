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
