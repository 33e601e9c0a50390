"""Rule tokenizer: train a byte-level BPE on the training documents, or load a pretrained one (or restore the
tokenizer of the same documents and settings from the result store, tokenwatt/common/store.py)."""

from tokenwatt.common.files import logged, read_documents, write_json
from tokenwatt.common.store import job_store
from tokenwatt.data import tokenizer as tk

with logged(snakemake.log[0]):
    store = job_store(snakemake, "tokenizer")
    if not store.restore():
        opts = snakemake.params.options
        if opts["source"] == "train":
            texts = read_documents(snakemake.input[0])["text"].to_list()
            tok = tk.train_bpe(texts, opts["vocab_size"], opts["min_frequency"])
        else:
            tok = tk.load_tokenizer(opts["name"], opts["revision"])
        tk.save_tokenizer(tok, snakemake.output[0])
        info = tk.tokenizer_info(tok, opts["source"])
        print(info)
        write_json(f"{snakemake.output[0]}/tokenwatt.json", info)
        store.save()
