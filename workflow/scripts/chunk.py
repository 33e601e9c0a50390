"""Rule chunk: tokenize one split's documents into fixed-length padded chunks (or restore the chunks of the same
documents, tokenizer and settings from the result store, tokenwatt/common/store.py), and record beside them their
settings and real tokens, which the plan checks the study's budgets against."""

from tokenwatt.common.files import logged, read_documents, write_parquet
from tokenwatt.common.store import job_store
from tokenwatt.data.chunking import chunk_documents, write_chunk_record
from tokenwatt.data.tokenizer import load_tokenizer

with logged(snakemake.log[0]):
    store = job_store(snakemake, "chunk")
    if not store.restore():
        opts = snakemake.params.options
        tok = load_tokenizer(snakemake.input.tokenizer)
        chunks = chunk_documents(
            read_documents(snakemake.input.docs), tok, opts["length"], opts["add_bos"], opts["add_eos"]
        )
        print(f"{snakemake.params.split}: {chunks.height} chunks, {chunks['n_real'].sum()} real tokens")
        write_parquet(snakemake.output.chunks, chunks)
        write_chunk_record(snakemake.output.record, snakemake.output.chunks, snakemake.params.settings)
        store.save()
