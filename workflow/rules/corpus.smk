# Corpus stage: load documents, normalize them, hold out the evaluation documents. Decontamination, which follows the
# split in every study, is a metered data step declared with the selection steps (selection.smk).


rule corpus:
    input:
        STUDY.corpus_inputs,
        start_checked,
    output:
        docs=LAYOUT.path("data", "corpus.parquet"),
        source=LAYOUT.path("data", "corpus_source.json"),
    log:
        LAYOUT.log("corpus"),
    benchmark:
        LAYOUT.benchmark("corpus")
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        source=lookup(dpath="corpus/source", within=config),
        options=lambda wildcards: config["corpus"][config["corpus"]["source"]],
        code=STUDY.code("corpus.py"),
    script:
        "../scripts/corpus.py"


rule normalize:
    input:
        LAYOUT.path("data", "corpus.parquet"),
    output:
        docs=LAYOUT.path("data", "normalized.parquet"),
        summary=LAYOUT.path("data", "normalize_summary.json"),
    log:
        LAYOUT.log("normalize"),
    benchmark:
        LAYOUT.benchmark("normalize")
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        form=lookup(dpath="normalize/form", within=config),
        dedupe=lookup(dpath="normalize/dedupe", within=config),
        code=STUDY.code("normalize.py"),
    script:
        "../scripts/normalize.py"


rule split:
    input:
        LAYOUT.path("data", "normalized.parquet"),
    output:
        train=LAYOUT.path("data", "docs_train.parquet"),
        eval=LAYOUT.path("data", "docs_eval.parquet"),
    log:
        LAYOUT.log("split"),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        eval_documents=lookup(dpath="split/eval_documents", within=config),
        seed=lookup(dpath="study/seed", within=config),
        code=STUDY.code("split.py"),
    script:
        "../scripts/split.py"
