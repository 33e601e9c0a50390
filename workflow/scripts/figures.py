"""Rule figures: every figure as PNG and SVG."""
import matplotlib.pyplot as plt
import polars as pl
from tokenwatt import figures as F
from tokenwatt.files import logged

with logged(snakemake.log[0]):
    style = snakemake.params.style
    plt.style.use(style["style"])
    trials = pl.read_parquet(snakemake.input.trials)
    conditions = pl.read_csv(snakemake.input.conditions)
    changes = pl.read_csv(snakemake.input.changes)
    estimated = "estimate" in trials["meter"].to_list()
    traces = {b: pl.read_parquet(p) for b, p in zip(snakemake.params.budgets, snakemake.input.traces)}
    made = {
        "pe_by_budget": F.pe_by_budget(trials, conditions, estimated),
        "power_energy_by_budget": F.power_energy_by_budget(trials, conditions, estimated),
        "time_by_budget": F.time_by_budget(trials, conditions, estimated),
        "perplexity_vs_tokens": F.perplexity_vs_tokens(trials, conditions, estimated),
        "tradeoff": F.tradeoff(changes, estimated),
        "power_traces": F.power_traces(traces, snakemake.params.trace_trial, estimated),
        "measurement_quality": F.measurement_quality(trials, estimated),
    }
    for name, fig in made.items():
        fig.savefig(snakemake.output[f"{name}_png"], dpi=style["dpi"])
        fig.savefig(snakemake.output[f"{name}_svg"], metadata={"Date": None})  # no timestamp: same data, same file
        plt.close(fig)
        print(f"wrote {name}")
