# Token stage: tokenizer, fixed-length chunks per split, nested budget subsets per trial.


rule tokenizer:
    input:
        forced_jobs_noted,
        res("data", "docs_train.parquet"),
    output:
        directory(data_file("{tok}", "tokenizer")),
    log:
        logfile("tokenizer", "{tok}tokenizer"),
    cache: BETWEEN_WORKFLOW_CACHE
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        # The study's tokenizer, or a model level's own ({tok}: tok=<level>/).
        options=lambda wildcards: DESIGN.tokenizer_config(wildcards.tok),
        code=code_digest("tokenizer.py"),
    script:
        "../scripts/tokenizer.py"


rule chunk:
    input:
        forced_jobs_noted,
        docs=chunked_documents,
        tokenizer=data_file("{tok}", "tokenizer"),
    output:
        data_file("{tok}", "{sel}chunks_{split}.parquet"),
    log:
        logfile("chunk", "{tok}{sel}{split}"),
    cache: BETWEEN_WORKFLOW_CACHE
    priority: SUBSET_PRIORITY
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        # Wildcards are not part of the cache key; params are.
        split=lambda wildcards: wildcards.split,
        options=config["chunk"],
        code=code_digest("chunk.py"),
    script:
        "../scripts/chunk.py"


rule subset:
    input:
        forced_jobs_noted,
        data_file("{tok}", "{sel}chunks_train.parquet"),
    output:
        subset_file("{tok}", "{sel}", "{budget}", "{trial}"),
    log:
        logfile("subset", "{tok}{sel}b{budget}", "t{trial}"),
    cache: BETWEEN_WORKFLOW_CACHE
    priority: SUBSET_PRIORITY
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        # The job's identity; it also keys the between-workflow cache, which hashes params and
        # inputs but not wildcards.
        budget=lambda wildcards: int(wildcards.budget),
        trial=lambda wildcards: int(wildcards.trial),
        study_seed=STUDY["seed"],
        code=code_digest("subset.py"),
    script:
        "../scripts/subset.py"
