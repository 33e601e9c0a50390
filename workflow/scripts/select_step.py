"""Rules decontaminate and select_*: one metered data step (tokenwatt.selection.catalog), in its own meter window;
its table and its record, which names its level and the window's energy. What the study cannot train on (a level or
an eval set left empty) is refused here, naming the counts and the key to change."""

from tokenwatt.common.files import logged, read_documents, read_json, write_json, write_parquet
from tokenwatt.selection.catalog import step
from tokenwatt.selection.steps import metered

with logged(snakemake.log[0]):
    params = snakemake.params
    chosen = step(params.step)
    docs = {keyword: read_documents(snakemake.input[keyword]) for keyword in chosen.reads}
    (table, record), energy = metered(params.meter, lambda: chosen.run(docs, params.settings, params.seed))
    print(
        f"{record['step']}: kept {record['kept']} of {record['documents_in']} documents ({energy['duration_s']:.2f} s)"
    )
    if chosen.check is not None:
        chosen.check(params.level, [*map(read_json, snakemake.input.records), record])
    write_parquet(snakemake.output.table, table)
    write_json(snakemake.output.record, {**record, "level": params.level, "energy": energy})
