"""Rule stats: RM-ANOVA (sphericity, GG, η²G, η²p), post-hoc tests, Friedman, for every tested measure."""

import polars as pl
from tokenwatt.analysis.stats import analyse_study
from tokenwatt.common.files import logged, read_table, write_json
from tokenwatt.common.measures import TESTED

with logged(snakemake.log[0]):
    result = analyse_study(read_table(snakemake.input[0], "trials table"), TESTED, snakemake.params.exclude_flagged)
    for dv, a in result["anova"].items():
        print(f"{dv}: {a.get('apa', a.get('message'))}")
    write_json(snakemake.output.json, result)
    # One row per measure and effect (the budget's main effect, the other factors', their interactions).
    flat = [
        {"dv": dv, **{k: v for k, v in e.items() if not isinstance(v, (dict, list))}}
        for dv, a in result["anova"].items()
        for e in a.get("effects", [])
    ]
    flat += [
        {k: v for k, v in a.items() if not isinstance(v, (dict, list))}
        for a in result["anova"].values()
        if "effects" not in a
    ]
    pl.DataFrame(flat, infer_schema_length=None).write_csv(snakemake.output.anova)
    columns = [
        "dv",
        "scale",
        "series",
        "budget_a",
        "budget_b",
        "t",
        "df",
        "p_unc",
        "p_holm",
        "hedges_g",
        "ratio",
        "difference",
    ]
    pl.DataFrame([[r[c] for c in columns] for r in result["posthoc"]], schema=columns, orient="row").write_csv(
        snakemake.output.posthoc
    )
