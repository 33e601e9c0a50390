# Training stage: the device profiles (CS_TFLOPS; one per hardware level and precision), then one job per cell × trial
# with its power log, loss curve and raw measurements.


rule device_profile:
    input:
        forced_jobs_noted,
    output:
        LAYOUT.profile("{profile}"),
    log:
        LAYOUT.log("device_profile", "{profile}profile"),
    cache: workflow.workflow_settings.cache is not None
    priority: STUDY.profile_priority
    conda:
        "../envs/train.yaml"
    # All local cores: nothing else runs beside the profile, so the constant is not measured under load.
    threads: workflow.cores
    resources:
        **STUDY.hardware_resources("profile"),
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
        device=lambda wildcards: STUDY.design.profile_settings(wildcards.profile)[
            "device"
        ],
        precision=lambda wildcards: STUDY.design.profile_settings(wildcards.profile)[
            "precision"
        ],
        threads=lookup(dpath="train/threads", within=config),
        code=STUDY.code("device_profile.py"),
    script:
        "../scripts/device_profile.py"


rule train_trial:
    input:
        forced_jobs_noted,
        unpack(lambda wildcards: LAYOUT.trial_inputs(wildcards.cell, wildcards.trial)),
        schema=STUDY.metrics_schema,
    output:
        multiext(
            LAYOUT.path("trials", "{cell}", "t{trial}") + "/",
            metrics="metrics.json",
            power="power.parquet",
            steps="steps.parquet",
            curve="curve.parquet",
        ),
    log:
        LAYOUT.log("train_trial", "{cell}", "t{trial}"),
    cache: workflow.workflow_settings.cache is not None
    priority: lambda wildcards: STUDY.trial_priority[(wildcards.cell, int(wildcards.trial))]
    conda:
        "../envs/train.yaml"
    # Metered: alone on the machine unless train.run_alone is false (nothing else loads the measurement).
    threads: trial_threads()
    resources:
        **STUDY.hardware_resources("cell"),
        # one per device the trial's ranks train on (train.devices; SLURM's --gpus)
        gpu=per_cell(STUDY.design.devices),
        mem_mb=per_cell(lambda cell: 8000 * STUDY.design.devices(cell)),
        runtime=STUDY.by_cell(STUDY.trial_runtime),
        # SLURM's CPUs for the job: the threads each rank trains with (a batch-1 step is host-bound).
        cpus_per_task=per_cell(
            lambda cell: config["train"]["threads"] * STUDY.design.devices(cell)
        ),
    params:
        # The job's identity; it also keys the between-workflow cache, which hashes params and
        # inputs but not wildcards. Each a value per cell (per_cell), computed once when the plan is read.
        budget=per_cell(lambda cell: cell.budget),
        trial=lambda wildcards: int(wildcards.trial),
        cell="{cell}",
        levels=per_cell(STUDY.design.levels),
        study_seed=lookup(dpath="study/seed", within=config),
        model=per_cell(STUDY.design.model_config),
        train=per_cell(STUDY.design.train_config),
        # meter.*, and in a study with multi-device trials the most devices any trains on: auto decides once for it
        meter={**config["meter"], **STUDY.design.meter_extra},
        check={
            "matmul_size": config["profile"]["matmul_size"],
            "window_s": config["profile"]["window_s"],
            "windows": config["profile"]["check_windows"],
        },
        # eval.* with the study's shared grid: every budget evaluated at the same token counts
        evaluation=per_cell(STUDY.design.eval_config),
        code=STUDY.code("train_trial.py"),
    script:
        "../scripts/train_trial.py"


rule train_stable:
    input:
        forced_jobs_noted,
        unpack(
            lambda wildcards: LAYOUT.stable_inputs(
                wildcards.stable, wildcards.trial, wildcards.point
            )
        ),
    output:
        # the saved point, and its stretch record: what the stable run spent up to it, which the study's totals
        # count once (multiext: the between-workflow cache takes several outputs only so)
        multiext(
            LAYOUT.stable_prefix("{stable}", "{trial}", "{point}"),
            point=".pt",
            record=".json",
        ),
    log:
        LAYOUT.log("train_stable", "{stable}t{trial}", "p{point}"),
    cache: workflow.workflow_settings.cache is not None
    priority: lambda wildcards: STUDY.stable_priority(wildcards.stable, int(wildcards.trial))
    conda:
        "../envs/train.yaml"
    # Metered as a trial is: alone on the machine unless train.run_alone is false.
    threads: workflow.cores if config["train"]["run_alone"] else config["train"]["threads"]
    resources:
        **STUDY.hardware_resources("stable"),
        # its cells' devices, as their trials ask for them (every rank saves its part of the point)
        gpu=per_cell(STUDY.design.devices, "stable"),
        mem_mb=per_cell(lambda cell: 8000 * STUDY.design.devices(cell), "stable"),
        runtime=STUDY.by_cell(STUDY.stable_runtime, "stable"),
        cpus_per_task=per_cell(
            lambda cell: config["train"]["threads"] * STUDY.design.devices(cell),
            "stable",
        ),
    params:
        # The stretch's identity (its end, in real tokens, as a trial's budget) and how it trains: its cells' settings
        # at the peak rate; no evaluation (only the budgets' cooldowns are evaluated).
        budget=lambda wildcards: STUDY.design.stable_tokens(
            wildcards.stable, int(wildcards.point)
        ),
        trial=lambda wildcards: int(wildcards.trial),
        point=lambda wildcards: int(wildcards.point),
        cell=lambda wildcards: f"stable/{wildcards.stable}p{wildcards.point}",
        levels=per_cell(STUDY.design.levels, "stable"),
        study_seed=lookup(dpath="study/seed", within=config),
        model=per_cell(STUDY.design.model_config, "stable"),
        train=STUDY.by_cell(STUDY.design.stable_train_config, "stable"),
        meter=lookup(dpath="meter", within=config),
        check={
            "matmul_size": config["profile"]["matmul_size"],
            "window_s": config["profile"]["window_s"],
            "windows": config["profile"]["check_windows"],
        },
        evaluation={},
        code=STUDY.code("train_stable.py"),
    script:
        "../scripts/train_stable.py"
