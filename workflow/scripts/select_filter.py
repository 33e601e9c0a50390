"""Rule select_filter: a selection level's quality rules, in a metered window; its documents are the level's training
documents, refused here when none is left."""

from tokenwatt.common.files import logged, read_documents, read_json, write_json, write_parquet
from tokenwatt.selection.steps import apply_filters, metered, refuse_empty

with logged(snakemake.log[0]):
    params = snakemake.params
    docs = read_documents(snakemake.input.docs)
    (kept, step), energy = metered(params.meter, params.meter_kind, lambda: apply_filters(docs, params.thresholds))
    print(f"filter: kept {step['kept']} of {step['documents_in']} documents ({energy['duration_s']:.2f} s)")
    refuse_empty(params.level, [*map(read_json, snakemake.input.records), step])
    write_parquet(snakemake.output.docs, kept)
    write_json(snakemake.output.record, {**step, "energy": energy})
