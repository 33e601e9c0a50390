"""Rule chunk: tokenize one split's documents into fixed-length padded chunks."""
import polars as pl
from tokenwatt.chunking import chunk_documents
from tokenwatt.files import logged, write_parquet
from tokenwatt.tokenizer import load_tokenizer

with logged(snakemake.log[0]):
    opts = snakemake.params.options
    tok = load_tokenizer(snakemake.input.tokenizer)
    chunks = chunk_documents(pl.read_parquet(snakemake.input.docs), tok, opts["length"], opts["add_bos"], opts["add_eos"])
    print(f"{snakemake.params.split}: {chunks.height} chunks, {chunks['n_real'].sum()} real tokens")
    write_parquet(snakemake.output[0], chunks)
