"""Rule scaling_figures: the Scaling section's figures as PNG and SVG."""

import matplotlib.pyplot as plt
from tokenwatt.analysis.frame import energy_is_estimated, frame, in_frame
from tokenwatt.analysis.scaling.study import points, sizes, tuned_learning_rates
from tokenwatt.common.files import logged, read_analysis_json, read_table
from tokenwatt.presentation.scaling_figures import make_scaling

with logged(snakemake.log[0]):
    plt.style.use(snakemake.params.style["style"])
    trials = frame(read_table(snakemake.input.trials, "trials table"))
    curves = in_frame(read_table(snakemake.input.curves, "eval curves table"), trials)
    scaling = read_analysis_json(snakemake.input.scaling, "scaling analysis")
    estimated = energy_is_estimated(trials)
    # The trials the fit used: with a learning-rate sweep, each cell's best rate only.
    trials, _ = tuned_learning_rates(trials)
    chosen = points(curves, trials, scaling["points"]) if trials.height else None
    made = make_scaling(scaling, chosen, sizes(trials) if trials.height else None, estimated)
    for name, fig in made.items():
        fig.savefig(snakemake.output[f"{name}_png"], dpi=snakemake.params.style["dpi"])
        fig.savefig(snakemake.output[f"{name}_svg"], metadata={"Date": None})  # no timestamp: same data, same file
        plt.close(fig)
        print(f"wrote {name}")
