"""Rule select_near_dup: a selection level's training documents that near-duplicate an earlier one removed, in a
metered window."""

from tokenwatt.common.files import logged, read_documents, write_json, write_parquet
from tokenwatt.selection.steps import metered, remove_near_duplicates

with logged(snakemake.log[0]):
    docs = read_documents(snakemake.input.docs)
    params = snakemake.params
    (kept, step), energy = metered(
        params.meter, params.meter_kind, lambda: remove_near_duplicates(docs, params.settings, params.seed)
    )
    print(f"near_dup: kept {step['kept']} of {step['documents_in']} documents ({energy['duration_s']:.2f} s)")
    write_parquet(snakemake.output.docs, kept)
    write_json(snakemake.output.record, {**step, "energy": energy})
