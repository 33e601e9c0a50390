"""Rule select_eval: the quality rules every level is scored through (selection.eval_filters), applied to the eval
documents once, in a metered window; refused here when no eval document is left."""

from tokenwatt.common.files import logged, read_documents, write_json, write_parquet
from tokenwatt.selection.steps import EVAL_FILTER, apply_filters, metered, refuse_empty_eval

with logged(snakemake.log[0]):
    params = snakemake.params
    docs = read_documents(snakemake.input.docs)
    (kept, step), energy = metered(
        params.meter, params.meter_kind, lambda: apply_filters(docs, params.thresholds, EVAL_FILTER)
    )
    print(f"eval filter: kept {step['kept']} of {step['documents_in']} eval documents ({energy['duration_s']:.2f} s)")
    refuse_empty_eval(step)
    write_parquet(snakemake.output.docs, kept)
    write_json(snakemake.output.record, {**step, "energy": energy})
