"""Rule select_order: a selection level's training order (design.selection.<level>.order: as read, or a curriculum
by a per-document measure), in a metered window; its trials train their subsets' chunks in this order every epoch."""

from tokenwatt.common.files import logged, read_documents, write_json, write_parquet
from tokenwatt.selection.order import order_documents
from tokenwatt.selection.steps import metered

with logged(snakemake.log[0]):
    params = snakemake.params
    docs = read_documents(snakemake.input.docs)
    (ranks, step), energy = metered(params.meter, params.meter_kind, lambda: order_documents(docs, params.order))
    print(f"order: {step['documents_in']} documents ranked ({energy['duration_s']:.2f} s)")
    write_parquet(snakemake.output.order, ranks)
    write_json(snakemake.output.record, {**step, "energy": energy})
