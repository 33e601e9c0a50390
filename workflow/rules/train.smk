# Training stage: one job per budget × trial, with its power log and metrics.


rule train_trial:
    input:
        subset=res("subsets", "b{budget}", "t{trial}.json"),
        train=res("data", "chunks_train.parquet"),
        eval=res("data", "chunks_eval.parquet"),
        tokenizer=res("data", "tokenizer"),
    output:
        multiext(
            res("trials", "b{budget}", "t{trial}") + "/",
            metrics="metrics.json",
            power="power.parquet",
            steps="steps.parquet",
        ),
    cache: True
    params:
        budget=lambda wildcards: int(wildcards.budget),
        trial=lambda wildcards: int(wildcards.trial),
        study_seed=STUDY["seed"],
        model=config["model"],
        train=config["train"],
        meter=config["meter"],
        metric=config["metric"],
        code=code_digest(
            "train_trial.py",
            "tokenwatt/trial.py",
            "tokenwatt/train.py",
            "tokenwatt/model.py",
            "tokenwatt/meters.py",
            "tokenwatt/efficiency.py",
        ),
    log:
        logfile("train_trial", "b{budget}", "t{trial}"),
    priority: train_priority
    threads: config["train"]["threads"]
    resources:
        gpu=1,
        mem_mb=8000,
        runtime=60,
    conda:
        "../../environment.yml"
    script:
        "../scripts/train_trial.py"
