"""Rule aggregate: trials.parquet, conditions.csv, changes.csv and the list of missing trials."""
import os

from tokenwatt.aggregate import changes_table, conditions_table, trials_table
from tokenwatt.files import logged, read_json, write_json, write_parquet

with logged(snakemake.log[0]):
    records = [read_json(p) if os.path.exists(p) else None for p in snakemake.input.metrics]
    trials, missing = trials_table(records, [tuple(e) for e in snakemake.params.expected])
    for line in missing:
        print(f"MISSING: {line}")
    conditions = conditions_table(trials)
    write_parquet(snakemake.output.trials, trials)
    conditions.write_csv(snakemake.output.conditions)
    changes_table(conditions).write_csv(snakemake.output.changes)
    write_json(snakemake.output.missing, missing)
    print(f"{trials.height} trials aggregated, {len(missing)} missing")
