"""Rule corpus: load the configured source into results/data/corpus.parquet, and where it came from beside it."""

from tokenwatt.common.files import logged, write_json, write_parquet
from tokenwatt.data import corpus

with logged(snakemake.log[0]):
    source, opts = snakemake.params.source, snakemake.params.options
    if source == "synthetic":
        # The input, not the config's path: an embedded study run from another folder reads tokenwatt's own grammar.
        docs = corpus.synthetic_corpus(
            corpus.load_grammar(snakemake.input[0]),
            opts["documents"],
            opts["seed"],
            opts["near_duplicates"],
            opts["boilerplate"],
            opts["garbled"],
        )
    elif source == "local":
        docs = corpus.local_corpus(opts["files"], opts["text_column"], opts["encoding_errors"])
    elif source == "package":
        docs = corpus.package_corpus(opts["distributions"], opts["files"], opts["extract"], opts["document_words"])
    else:
        docs = corpus.hf_corpus(
            opts["name"], opts["split"], opts["text_column"], opts["config"], opts["revision"], opts["max_documents"]
        )
    print(f"{source} corpus: {docs.height} documents")
    write_parquet(snakemake.output.docs, docs)
    write_json(snakemake.output.source, corpus.source_record(source, dict(opts), list(snakemake.input), docs.height))
