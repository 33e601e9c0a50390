# Token stage: tokenizer, fixed-length chunks per split, nested budget subsets per trial.
from tokenwatt.plan.capacity import chunk_job_settings


rule tokenizer:
    input:
        forced_jobs_noted,
        LAYOUT.path("data", "docs_train.parquet"),
    output:
        directory(LAYOUT.data("{tok}", "tokenizer")),
    log:
        LAYOUT.log("tokenizer", "{tok}tokenizer"),
    cache: workflow.workflow_settings.cache is not None
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        # The study's tokenizer, or a model level's own ({tok}: tok=<level>/).
        options=lambda wildcards: STUDY.design.tokenizer_config(wildcards.tok),
        code=STUDY.code("tokenizer.py"),
    script:
        "../scripts/tokenizer.py"


rule chunk:
    input:
        forced_jobs_noted,
        docs=lambda wildcards: LAYOUT.chunked_documents(wildcards.sel, wildcards.split),
        tokenizer=LAYOUT.data("{tok}", "tokenizer"),
    output:
        chunks=LAYOUT.chunks("{tok}", "{sel}", "{split}"),
        # the settings, real tokens and size of the chunks, which the plan checks the budgets against (capacity.py)
        record=LAYOUT.chunk_record("{tok}", "{sel}", "{split}"),
    log:
        LAYOUT.log("chunk", "{tok}{sel}{split}"),
    cache: workflow.workflow_settings.cache is not None
    priority: STUDY.subset_priority
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        # Wildcards are not part of the cache key; params are.
        split=lambda wildcards: wildcards.split,
        options=lookup(dpath="chunk", within=config),
        # what the record names: every setting these chunks depend on and no other (a change to any reruns them and
        # every trial on them), so that a restored record names its own
        settings=lambda wildcards: chunk_job_settings(
            config,
            STUDY.design,
            wildcards.tok,
            wildcards.sel.removeprefix("sel=").removesuffix("/") or None,
            wildcards.split,
        ),
        code=STUDY.code("chunk.py"),
    script:
        "../scripts/chunk.py"


rule subset:
    input:
        forced_jobs_noted,
        LAYOUT.data("{tok}", "{sel}chunks_train.parquet"),
    output:
        LAYOUT.subset("{tok}", "{sel}", "{budget}", "{trial}"),
    log:
        LAYOUT.log("subset", "{tok}{sel}b{budget}", "t{trial}"),
    cache: workflow.workflow_settings.cache is not None
    priority: STUDY.subset_priority
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
        study_seed=lookup(dpath="study/seed", within=config),
        code=STUDY.code("subset.py"),
    script:
        "../scripts/subset.py"
