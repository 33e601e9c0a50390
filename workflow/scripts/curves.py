"""Rule curves: the eval curves' analysis (energy to target, equal energy, marginal gain, trajectories, stopping rules)."""

from tokenwatt.analysis.curves import analyse_curves, full_runs, in_frame
from tokenwatt.common.files import logged, read_analysis_json, read_table, write_json

with logged(snakemake.log[0]):
    trials = read_table(snakemake.input.trials, "trials table")
    curves = in_frame(read_table(snakemake.input.curves, "eval curves table"), trials)
    cost = read_analysis_json(snakemake.input.cost, "cost summary")
    result = analyse_curves(curves, snakemake.params.settings, full_runs(curves, trials), cost)
    write_json(snakemake.output[0], result)
    print(f"curves: {result['status']}; {curves.height} points of {curves.select('cell', 'trial').n_unique()} trials")
