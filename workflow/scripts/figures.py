"""Rule figures: every figure as PNG and SVG."""

import matplotlib.pyplot as plt
from tokenwatt.analysis.frame import energy_is_estimated, in_frame
from tokenwatt.analysis.tables import read_changes, read_conditions
from tokenwatt.common.files import logged, read_power_trace, read_table
from tokenwatt.presentation import figures as F

with logged(snakemake.log[0]):
    style = snakemake.params.style
    plt.style.use(style["style"])
    trials = read_table(snakemake.input.trials, "trials table")
    conditions = read_conditions(snakemake.input.conditions)
    changes = read_changes(snakemake.input.changes)
    estimated = energy_is_estimated(trials)
    traces = {tuple(key): read_power_trace(p) for key, p in zip(snakemake.params.trace_keys, snakemake.input.traces)}
    curves = in_frame(read_table(snakemake.input.curves, "eval curves table"), trials)
    made = F.make_all(trials, conditions, changes, traces, estimated, snakemake.params.currency, curves)
    for name, fig in made.items():
        fig.savefig(snakemake.output[f"{name}_png"], dpi=style["dpi"])
        fig.savefig(snakemake.output[f"{name}_svg"], metadata={"Date": None})  # no timestamp: same data, same file
        plt.close(fig)
        print(f"wrote {name}")
