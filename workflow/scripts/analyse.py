"""Rule of each analysis product (tokenwatt.analysis.products): its files read, its function run, its JSON and
tables written."""

import os

from tokenwatt.analysis.products import FULL_GRID, HALVING_ROUNDS, POWER_TRACES, STEP_RECORDS, STUDY_RECORDS, product
from tokenwatt.common.files import logged, read_analysis_json, read_power_trace, read_table, write_csv, write_json
from tokenwatt.plan.layout import trial_of


def read(keyword, file):
    """One of the product's inputs, as its function takes it: a table, a JSON, the step records by path, or the
    power traces by the (cell, trial) each one's path names, in the inputs' order."""
    paths = getattr(snakemake.input, keyword)
    paths = [paths] if isinstance(paths, str) else list(paths)  # Snakemake gives a single path as a string
    if file == STEP_RECORDS:
        return {p: read_analysis_json(p, "selection step record") for p in paths}
    if file == POWER_TRACES:
        # each by the (cell, trial) its own path names, never zipped with keys computed apart from the paths (the
        # interim twin's params are evaluated again after its inputs were fixed, and may name other trials); here,
        # not in the trials product's module, so that this script's code digest covers no product's module
        return {trial_of(p): read_power_trace(p) for p in paths}
    if file == HALVING_ROUNDS:
        return [read_analysis_json(p, "halving round") for p in paths]
    if file == STUDY_RECORDS:  # trial records (metrics.json) and stable runs' stretch records (p<k>.json)
        found = {p: read_analysis_json(p, "study record") for p in paths}
        return {
            "records": [r for p, r in found.items() if os.path.basename(p) == "metrics.json"],
            "stretches": [r for p, r in found.items() if os.path.basename(p) != "metrics.json"],
        }
    if file == FULL_GRID:  # absent until the full grid has run: its trials table and cost
        if not paths:
            return None
        table = next(p for p in paths if p.endswith(".parquet"))
        cost = next(p for p in paths if p.endswith(".json"))
        return {
            "trials": read_table(table, "full grid's trials table"),
            "cost": read_analysis_json(cost, "full grid's cost"),
        }
    if file.endswith(".parquet"):
        return read_table(paths[0], f"{file} table")
    return read_analysis_json(paths[0], file)


with logged(snakemake.log[0]):
    made = product(snakemake.params.product)
    result = made.run(snakemake.params.settings, **{k: read(k, f) for k, f in made.reads.items()})
    print(result.summary)
    write_json(snakemake.output.json, result.data)
    for name, table in result.tables.items():
        write_csv(getattr(snakemake.output, name), table)
