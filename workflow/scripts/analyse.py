"""Rule of each analysis product (tokenwatt.analysis.products): its files read, its function run, its JSON and
tables written."""

from tokenwatt.analysis.products import STEP_RECORDS, product
from tokenwatt.common.files import logged, read_analysis_json, read_table, write_csv, write_json


def read(keyword, file):
    """One of the product's inputs, as its function takes it: a table, a JSON, or the step records by path."""
    paths = getattr(snakemake.input, keyword)
    if file == STEP_RECORDS:  # a list of paths (Snakemake gives a single one as a string)
        return {
            p: read_analysis_json(p, "selection step record") for p in ([paths] if isinstance(paths, str) else paths)
        }
    if file.endswith(".parquet"):
        return read_table(paths, f"{file} table")
    return read_analysis_json(paths, file)


with logged(snakemake.log[0]):
    made = product(snakemake.params.product)
    result = made.run(snakemake.params.settings, **{k: read(k, f) for k, f in made.reads.items()})
    print(result.summary)
    write_json(snakemake.output.json, result.data)
    for name, table in result.tables.items():
        write_csv(getattr(snakemake.output, name), table)
