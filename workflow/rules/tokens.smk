# Token stage: tokenizer, fixed-length chunks per split, nested budget subsets per trial.


rule tokenizer:
    input:
        res("data", "docs_train.parquet"),
    output:
        directory(data_file("{tok}", "tokenizer")),
    cache: True
    params:
        # The study's tokenizer, or a model level's own ({tok}: tok=<level>/).
        options=lambda wildcards: DESIGN.tokenizer_config(wildcards.tok),
        code=code_digest("tokenizer.py"),
    log:
        logfile("tokenizer", "{tok}tokenizer"),
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/tokenizer.py"


rule chunk:
    input:
        docs=res("data", "docs_{split}.parquet"),
        tokenizer=data_file("{tok}", "tokenizer"),
    output:
        data_file("{tok}", "chunks_{split}.parquet"),
    cache: True
    params:
        # Wildcards are not part of the cache key; params are.
        split=lambda wildcards: wildcards.split,
        options=config["chunk"],
        code=code_digest("chunk.py"),
    log:
        logfile("chunk", "{tok}{split}"),
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/chunk.py"


rule subset:
    input:
        data_file("{tok}", "chunks_train.parquet"),
    output:
        subset_file("{tok}", "{budget}", "{trial}"),
    cache: True
    params:
        # The job's identity; it also keys the between-workflow cache, which hashes params and
        # inputs but not wildcards.
        budget=lambda wildcards: int(wildcards.budget),
        trial=lambda wildcards: int(wildcards.trial),
        study_seed=STUDY["seed"],
        code=code_digest("subset.py"),
    log:
        logfile("subset", "{tok}b{budget}", "t{trial}"),
    priority: SUBSET_PRIORITY
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../environment.yml"
    script:
        "../scripts/subset.py"
