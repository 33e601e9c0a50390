"""Rule scaling: L(N, D) for both counts of N, e(N) per hardware level, energy- and FLOP-optimal allocations."""

from tokenwatt.analysis.curves import in_frame
from tokenwatt.analysis.frame import frame
from tokenwatt.analysis.scaling_study import analyse_scaling
from tokenwatt.common.files import logged, read_table, write_json

with logged(snakemake.log[0]):
    trials = read_table(snakemake.input.trials, "trials table")
    curves = in_frame(read_table(snakemake.input.curves, "eval curves table"), trials)
    result = analyse_scaling(curves, frame(trials), snakemake.params.settings)
    write_json(snakemake.output[0], result)
    print(f"scaling: {result['status']} {result.get('message', '')}")
