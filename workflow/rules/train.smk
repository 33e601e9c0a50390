# Training stage: the device profile (CS_TFLOPS), then one job per budget × trial with its
# power log, loss curve and raw measurements.


rule device_profile:
    output:
        DEVICE_PROFILE,
    cache: True
    params:
        profile={k: config["profile"][k] for k in ("matmul_size", "warmup_s", "windows", "window_s", "max_cv", "attempts")},
        device=config["train"]["device"],
        precision=config["train"]["precision"],
        threads=config["train"]["threads"],
        code=code_digest("device_profile.py"),
    log:
        logfile("device_profile"),
    priority: PROFILE_PRIORITY
    # All local cores: nothing else runs beside the profile, so the constant is not measured under load.
    threads: workflow.cores
    resources:
        gpu=1,
        mem_mb=4000,
        runtime=30,
    conda:
        "../../environment.yml"
    script:
        "../scripts/device_profile.py"


rule train_trial:
    input:
        schema=METRICS_SCHEMA,
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
        # The job's identity; it also keys the between-workflow cache, which hashes params and
        # inputs but not wildcards.
        budget=lambda wildcards: int(wildcards.budget),
        trial=lambda wildcards: int(wildcards.trial),
        study_seed=STUDY["seed"],
        model=config["model"],
        train=config["train"],
        meter=config["meter"],
        check={
            "matmul_size": config["profile"]["matmul_size"],
            "window_s": config["profile"]["window_s"],
            "windows": config["profile"]["check_windows"],
        },
        code=code_digest("train_trial.py"),
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
