# Allocation stage of a halving study (config allocation, plan/allocation.py): after each round's trials, one
# checkpoint job ranks the candidates at equal energy and writes who trains in the next round, or that the study
# stops there (the budget, or the last budget). Snakemake plans the next round's jobs only once it has run.


checkpoint halving_round:
    input:
        schema=STUDY.metrics_schema,
        # every trial of the rounds so far: a trial's loss at the common energy is read off its own earlier points
        metrics=lambda wildcards: [
            LAYOUT.trial(c, t).metrics
            for c, t in allocation.walk(
                STUDY.design, round_record, int(wildcards.round)
            ).trials
        ],
        # the stable runs' stretch records: the spend counts each stretch once
        stretches=lambda wildcards: LAYOUT.stretch_records(
            allocation.walk(STUDY.design, round_record, int(wildcards.round)).trials
        ),
        # what earlier settings trained up to this round's budget: spent, so counted against the budget
        beside=lambda wildcards: [
            ancient(p)
            for p in LAYOUT.records_beside(
                STUDY.design.budgets[int(wildcards.round)],
                allocation.walk(
                    STUDY.design, round_record, int(wildcards.round)
                ).trials,
            )
        ],
        before=lambda wildcards: (
            [LAYOUT.halving_round(int(wildcards.round) - 1)]
            if int(wildcards.round)
            else []
        ),
    output:
        json=LAYOUT.halving_round("{round}"),
    log:
        LAYOUT.log("halving_round", "round{round}"),
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        candidates=allocation.candidates(STUDY.design),
        settings=lambda wildcards: allocation.round_settings(
            STUDY.design, STUDY.allocation, int(wildcards.round)
        ),
        code=STUDY.code("halving_round.py"),
    script:
        "../scripts/halving_round.py"
