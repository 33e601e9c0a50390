"""Rules decontaminate and select_near_dup: training documents that near-duplicate an eval document (decontaminate,
once per study) or an earlier training document (a selection level's near_dup step) removed, in a metered window."""

from tokenwatt.common.files import logged, read_documents, write_json, write_parquet
from tokenwatt.selection.steps import metered, remove_near_duplicates

with logged(snakemake.log[0]):
    docs = read_documents(snakemake.input.docs)
    reference = read_documents(snakemake.input.eval) if "eval" in snakemake.input.keys() else None
    params = snakemake.params
    (kept, step), energy = metered(
        params.meter, params.meter_kind, lambda: remove_near_duplicates(docs, params.settings, params.seed, reference)
    )
    print(f"near_dup: kept {step['kept']} of {step['documents_in']} documents ({energy['duration_s']:.2f} s)")
    write_parquet(snakemake.output.docs, kept)
    write_json(snakemake.output.record, {**step, "energy": energy})
