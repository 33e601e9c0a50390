"""Rule aggregate: trials.parquet (measured + derived + quality), conditions, changes, quality flags, missing trials."""
import polars as pl
from tokenwatt.aggregate import changes_table, conditions_table, cs_tflops_of, trials_table
from tokenwatt.files import logged, read_json, write_json, write_parquet, write_text
from tokenwatt.quality import QUALITY_COLUMNS
from tokenwatt.records import RecordError, load_validator, read_record

with logged(snakemake.log[0]):
    p, inp, out = snakemake.params, snakemake.input, snakemake.output
    validator = load_validator(inp.schema)
    expected = [tuple(e) for e in p.expected]
    records = []
    for path in inp.metrics:
        try:
            records.append(read_record(path, validator))
        except RecordError as err:  # named in the report as a missing trial, with the fix
            records.append(str(err))
    profile = read_json(inp.profile[0]) if inp.profile else None
    cs_tflops, source = cs_tflops_of(p.metric, profile)
    print(f"CS_TFLOPS {cs_tflops:.4g}: {source}")
    trials, missing = trials_table(
        records, expected, traces=[pl.read_parquet(f) for f in inp.power], steps=[pl.read_parquet(f) for f in inp.steps],
        cs_tflops=cs_tflops, metric=p.metric, quality=p.quality, reference_tflops=profile["cs_tflops"] if profile else None,
    )
    for line in missing:
        print(f"MISSING: {line}")
    conditions = conditions_table(trials)
    write_parquet(out.trials, trials)
    conditions.write_csv(out.conditions)
    changes_table(conditions).write_csv(out.changes)
    trials.select([c for c in QUALITY_COLUMNS if c in trials.columns]).write_csv(out.quality)  # all of them once a trial finished
    flagged = trials.filter(pl.col("quality") == "flagged")
    path_of = dict(zip(expected, inp.metrics))
    write_text(out.flagged, "".join(f"{path_of[(b, t)]}\n" for b, t in flagged.select("budget", "trial").iter_rows()))
    write_json(out.missing, missing)
    print(f"{trials.height} trials aggregated, {flagged.height} flagged, {len(missing)} missing; CS_TFLOPS {source}")
