"""Checkpoint halving_round: one round of successive halving (tokenwatt.analysis.halving) ranked, its spend counted,
and who trains in the next round, or that the study stops here, written for the plan's next evaluation."""

import os

from tokenwatt.analysis.halving import round_decision
from tokenwatt.common.files import RERUN, logged, read_json_checked, write_json
from tokenwatt.common.records import load_validator, read_record
from tokenwatt.plan.allocation import RoundSettings
from tokenwatt.training.stretch import STRETCH_KEYS

with logged(snakemake.log[0]):
    p, inp = snakemake.params, snakemake.input
    validator = load_validator(inp.schema)
    records = [read_record(path, validator) for path in inp.metrics]
    fix = RERUN + "its stretch is trained again"
    stretches = [read_json_checked(path, "stable run's stretch record", fix, STRETCH_KEYS) for path in inp.stretches]
    # the round before's record: a list of one path (none in round 0)
    before = read_json_checked(inp.before[0], "halving round", RERUN + "it is ranked again") if inp.before else None
    entering = before["next_candidates"] if before else p.candidates
    # trials and stretches on disk up to this round's budget that the rounds no longer ask for: spent all the same
    beside = (
        [read_record(path, validator) for path in inp.beside if os.path.basename(path) == "metrics.json"],
        [
            read_json_checked(path, "stable run's stretch record", fix, STRETCH_KEYS)
            for path in inp.beside
            if os.path.basename(path) != "metrics.json"
        ],
    )
    decision = round_decision(records, stretches, entering, before, RoundSettings(**p.settings), beside)
    print(
        f"round {decision['round']}: kept {len(decision['kept'])} of {len(entering)} "
        f"({', '.join(decision['kept'])}); {decision['next']}: {decision['why']}"
    )
    write_json(snakemake.output.json, decision)
