"""Rule figures: every figure as PNG and SVG."""
import matplotlib.pyplot as plt
import polars as pl
from tokenwatt import figures as F
from tokenwatt.tables import read_changes, read_conditions
from tokenwatt.files import logged

with logged(snakemake.log[0]):
    style = snakemake.params.style
    plt.style.use(style["style"])
    trials = pl.read_parquet(snakemake.input.trials)
    conditions = read_conditions(snakemake.input.conditions)
    changes = read_changes(snakemake.input.changes)
    estimated = "meter" in trials.columns and "estimate" in trials["meter"].to_list()
    traces = {tuple(key): pl.read_parquet(p) for key, p in zip(snakemake.params.trace_keys, snakemake.input.traces)}
    made = F.make_all(trials, conditions, changes, traces, estimated, snakemake.params.currency)
    for name, fig in made.items():
        fig.savefig(snakemake.output[f"{name}_png"], dpi=style["dpi"])
        fig.savefig(snakemake.output[f"{name}_svg"], metadata={"Date": None})  # no timestamp: same data, same file
        plt.close(fig)
        print(f"wrote {name}")
