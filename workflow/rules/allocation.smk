# Allocation stage of a halving study (config allocation, plan/allocation.py): after each round's trials, one
# checkpoint job ranks the candidates at equal energy and writes who trains in the next round, or that the study
# stops there (the budget, or the last budget). Snakemake plans the next round's jobs only once it has run.


checkpoint halving_round:
    input:
        unpack(round_inputs),
        schema=STUDY.metrics_schema,
        # every trial of the rounds so far (a trial's loss at the common energy is read off its own earlier points),
        # their stretch records (each counted once), what earlier settings trained up to this round's budget (spent,
        # so counted against the budget) and the round before's record
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
