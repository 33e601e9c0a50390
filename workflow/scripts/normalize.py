"""Rule normalize: Unicode form, control/zero-width characters, whitespace, empties, duplicates."""

import polars as pl
from tokenwatt.common.files import logged, write_json, write_parquet
from tokenwatt.data.normalize import normalize_corpus

with logged(snakemake.log[0]):
    docs, summary = normalize_corpus(
        pl.read_parquet(snakemake.input[0]), snakemake.params.form, snakemake.params.dedupe
    )
    print(summary)
    write_parquet(snakemake.output.docs, docs)
    write_json(snakemake.output.summary, summary)
