"""Rule train_trial: train one (budget, trial) and write metrics.json, power.parquet, steps.parquet."""
import os

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import polars as pl  # noqa: E402
from tokenwatt.files import logged, read_json, write_json, write_parquet  # noqa: E402
from tokenwatt.records import check_record, load_validator  # noqa: E402
from tokenwatt.subsets import trial_seed  # noqa: E402
from tokenwatt.trial import run_trial  # noqa: E402

with logged(snakemake.log[0]):
    p, out = snakemake.params, snakemake.output
    budget, trial = p.budget, p.trial
    try:
        metrics, power, steps = run_trial(
            budget=budget, trial=trial, seed=trial_seed(p.study_seed, trial), subset=read_json(snakemake.input.subset),
            train_chunks=pl.read_parquet(snakemake.input.train), eval_chunks=pl.read_parquet(snakemake.input.eval),
            tokenizer=read_json(f"{snakemake.input.tokenizer}/tokenwatt.json"),
            model_cfg=p.model, train_cfg=p.train, meter_cfg=p.meter, check_cfg=p.check,
        )
        check_record(metrics, load_validator(snakemake.input.schema), out.metrics)
        write_parquet(out.power, power)
        write_parquet(out.steps, steps)
        write_json(out.metrics, metrics)  # last: its presence marks a finished trial
    except BaseException:
        for path in out:  # never leave a half trial that aggregation could pick up
            if os.path.exists(path):
                os.remove(path)
        raise
    loss = "none (diverged)" if metrics["eval_loss"] is None else f"{metrics['eval_loss']:.4f}"
    print(f"done: {metrics['status']}, eval loss {loss}, energy {metrics['energy_j']} J ({metrics['meter']}), "
          f"{metrics['real_tokens'] / metrics['train_s']:,.0f} tokens/s")
