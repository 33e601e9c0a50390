# The metered data steps (tokenwatt.selection.catalog): decontamination in every study, then with design.selection
# the eval filter and each level's steps, one rule per step, so that changing a step's settings reruns that step and
# what follows it. The tokenizer and the eval set come from the split before any selection: the same for every level.
# The steps outrank every trial, as the subsets do, so that a level that keeps too little is refused before the trials
# the scheduler could choose instead of its steps.


for _step in STEPS:

    rule:
        name:
            _step.name
        input:
            **_step.inputs(LAYOUT),
        output:
            **_step.outputs(LAYOUT),
        log:
            LAYOUT.log(_step.name, *_step.log_parts()),
        benchmark:
            LAYOUT.benchmark(_step.name, *_step.log_parts())
        priority: STUDY.subset_priority
        conda:
            "../envs/data.yaml"
        threads: workflow.cores  # metered: alone on the machine, or the meter counts another job too
        resources:
            mem_mb=_step.mem_mb,
        params:
            step=_step.name,
            level=(lambda wildcards: wildcards.level) if _step.per_level else None,
            settings=lambda wildcards, step=_step: step.settings_of(
                STUDY.design, wildcards.get("level")
            ),
            seed=lookup(dpath="study/seed", within=config),
            meter=STUDY.window_meter(config["selection"]["meter"]),
            code=STUDY.code("select_step.py"),
        script:
            "../scripts/select_step.py"
