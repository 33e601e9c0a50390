"""Rule decontaminate: training documents that hold most of an eval document removed (split.decontaminate), in a
metered window, in every study before any selection level: no level, and no study without levels, trains on the
text it is scored on."""

from tokenwatt.common.files import logged, read_documents, write_json, write_parquet
from tokenwatt.selection.steps import metered, remove_eval_copies

with logged(snakemake.log[0]):
    docs, eval_docs = read_documents(snakemake.input.docs), read_documents(snakemake.input.eval)
    params = snakemake.params
    (kept, step), energy = metered(
        params.meter, params.meter_kind, lambda: remove_eval_copies(docs, eval_docs, params.settings)
    )
    print(f"decontaminate: kept {step['kept']} of {step['documents_in']} documents ({energy['duration_s']:.2f} s)")
    write_parquet(snakemake.output.docs, kept)
    write_json(snakemake.output.record, {**step, "energy": energy})
