"""Rule <product>_figures: an analysis product's figures as PNG and SVG, drawn from its JSON and tables and the
aggregate's tables it names (Product.draws)."""

import matplotlib.pyplot as plt
from tokenwatt.analysis.frame import energy_is_estimated, frame
from tokenwatt.analysis.products import product
from tokenwatt.analysis.tables import read_aggregate_table, read_product_table
from tokenwatt.common.files import logged, read_analysis_json, read_table

with logged(snakemake.log[0]):
    made = product(snakemake.params.product)
    style = snakemake.params.style
    plt.style.use(style["style"])
    data = read_analysis_json(snakemake.input.json, made.what)
    trials = read_table(snakemake.input.trials, "trials table")
    tables = {
        "trials": trials,
        **{name: read_product_table(getattr(snakemake.input, name), name) for name in made.tables},
        **{name: read_aggregate_table(getattr(snakemake.input, name), file) for name, file in made.draws.items()},
    }
    for name, fig in made.draw_figures(data, tables, energy_is_estimated(frame(trials))).items():
        fig.savefig(snakemake.output[f"{name}_png"], dpi=style["dpi"])
        # The SVG keeps the layout the PNG's draw computed (its positions differ by well under a point from one laid
        # out again): laying out every figure twice was a third of the figures' drawing time.
        fig.set_layout_engine("none")
        fig.savefig(snakemake.output[f"{name}_svg"], metadata={"Date": None})  # no timestamp: same data, same file
        plt.close(fig)
        print(f"wrote {name}")
