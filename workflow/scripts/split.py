"""Rule split: held-out evaluation documents, shared by every trial and budget."""

import polars as pl
from tokenwatt.common.files import logged, write_parquet
from tokenwatt.data.split import split_documents

with logged(snakemake.log[0]):
    train, evaluation = split_documents(
        pl.read_parquet(snakemake.input[0]), snakemake.params.eval_documents, snakemake.params.seed
    )
    print(f"train documents: {train.height}, eval documents: {evaluation.height}")
    write_parquet(snakemake.output.train, train)
    write_parquet(snakemake.output.eval, evaluation)
