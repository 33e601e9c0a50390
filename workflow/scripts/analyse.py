"""Rule of each analysis product (tokenwatt.analysis.products): its files read, its function run, its JSON and
tables written."""

from tokenwatt.analysis.products import POWER_TRACES, STEP_RECORDS, product
from tokenwatt.analysis.traces import read_traces
from tokenwatt.common.files import logged, read_analysis_json, read_table, write_csv, write_json


def read(keyword, file):
    """One of the product's inputs, as its function takes it: a table, a JSON, the step records by path, or the
    power traces by the (cell, trial) each one's path names, in the inputs' order."""
    paths = getattr(snakemake.input, keyword)
    paths = [paths] if isinstance(paths, str) else list(paths)  # Snakemake gives a single path as a string
    if file == STEP_RECORDS:
        return {p: read_analysis_json(p, "selection step record") for p in paths}
    if file == POWER_TRACES:
        return read_traces(paths, snakemake.params.trials)
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
