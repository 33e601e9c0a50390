"""Rule subset: the trial's chunks for one budget (a prefix of the trial's seeded order), or the same subset
restored from the result store (tokenwatt/common/store.py)."""

from tokenwatt.common.files import logged, read_chunks, write_json
from tokenwatt.common.store import job_store
from tokenwatt.data.subsets import draw_subset, trial_seed

with logged(snakemake.log[0]):
    store = job_store(snakemake, "subset")
    if not store.restore():
        budget, trial = snakemake.params.budget, snakemake.params.trial
        chunks = read_chunks(snakemake.input[0], columns=["chunk_id", "doc_id", "n_real"])
        seed = trial_seed(snakemake.params.study_seed, trial)
        # a selection level is named in the refusal, before any training (subsets outrank trials)
        level = snakemake.wildcards.sel.removeprefix("sel=").removesuffix("/")
        source = (
            f"design.selection level {level!r} ({chunks['doc_id'].n_unique()} documents after its selection)"
            if level
            else "the corpus"
        )
        subset = {
            "trial": trial,
            **draw_subset(chunks, budget, seed, source),
        }
        print(f"budget {budget}, trial {trial}: {subset['n_chunks']} chunks, {subset['real_tokens']} real tokens")
        write_json(snakemake.output[0], subset)
        store.save()
