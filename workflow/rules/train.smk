# Training stage: the device profiles (CS_TFLOPS; one per hardware level and precision), then one job per cell × trial with its
# power log, loss curve and raw measurements.


rule device_profile:
    input:
        forced_jobs_noted,
    output:
        profile_file("{profile}"),
    log:
        logfile("device_profile", "{profile}profile"),
    cache: BETWEEN_WORKFLOW_CACHE
    priority: PROFILE_PRIORITY
    conda:
        "../envs/train.yaml"
    # All local cores: nothing else runs beside the profile, so the constant is not measured under load.
    threads: workflow.cores
    resources:
        **hardware_resources(lambda wildcards: DESIGN.profile_cell(wildcards.profile)),
        gpu=1,
        mem_mb=4000,
        runtime=30,
        # SLURM's CPUs for the job: the threads its matmuls run with (params.threads).
        cpus_per_task=config["train"]["threads"],
    params:
        profile={
            k: config["profile"][k]
            for k in (
                "matmul_size",
                "warmup_s",
                "windows",
                "window_s",
                "max_cv",
                "attempts",
            )
        },
        # Per hardware level and precision: each profile is measured the way its trials train. Its key
        # keys the between-workflow cache too (two GPU types with the same settings differ only by it).
        key=lambda wildcards: wildcards.profile,
        device=lambda wildcards: DESIGN.profile_settings(wildcards.profile)["device"],
        precision=lambda wildcards: DESIGN.profile_settings(wildcards.profile)[
            "precision"
        ],
        threads=config["train"]["threads"],
        code=code_digest("device_profile.py"),
    script:
        "../scripts/device_profile.py"


rule train_trial:
    input:
        forced_jobs_noted,
        unpack(trial_inputs),
        schema=METRICS_SCHEMA,
    output:
        multiext(
            res("trials", "{cell}", "t{trial}") + "/",
            metrics="metrics.json",
            power="power.parquet",
            steps="steps.parquet",
            curve="curve.parquet",
        ),
    log:
        logfile("train_trial", "{cell}", "t{trial}"),
    cache: BETWEEN_WORKFLOW_CACHE
    priority: train_priority
    conda:
        "../envs/train.yaml"
    # Metered: alone on the machine unless train.run_alone is false (nothing else loads the measurement).
    threads: workflow.cores if config["train"]["run_alone"] else config["train"]["threads"]
    resources:
        **hardware_resources(cell_of),
        gpu=1,
        mem_mb=8000,
        runtime=trial_runtime,
        # SLURM's CPUs for the job: the threads the trial trains with (a batch-1 step is host-bound).
        cpus_per_task=config["train"]["threads"],
    params:
        # The job's identity; it also keys the between-workflow cache, which hashes params and
        # inputs but not wildcards.
        budget=lambda wildcards: cell_of(wildcards).budget,
        trial=lambda wildcards: int(wildcards.trial),
        cell=lambda wildcards: wildcards.cell,
        levels=lambda wildcards: DESIGN.levels(cell_of(wildcards)),
        study_seed=STUDY["seed"],
        model=lambda wildcards: DESIGN.model_config(cell_of(wildcards)),
        train=lambda wildcards: DESIGN.train_config(cell_of(wildcards)),
        meter=config["meter"],
        check={
            "matmul_size": config["profile"]["matmul_size"],
            "window_s": config["profile"]["window_s"],
            "windows": config["profile"]["check_windows"],
        },
        evaluation=config["eval"],
        code=code_digest("train_trial.py"),
    script:
        "../scripts/train_trial.py"
