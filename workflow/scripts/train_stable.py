"""Rule train_stable: one stretch of a stable run (train.schedule.branch_every), from the point before it (or the first
step) to its own saved point, written with its whole meter session and, beside it, its stretch record (what the stable
run spent up to the point, which the study's totals count once: training/stretch.py); or both restored from the result
store.

The stretch trains the head of the trial's drawn order (``stream_head``) at the peak rate and evaluates nothing: only
the budgets' cooldowns, which continue these points, are evaluated and recorded. Its kill-resume checkpoint lives
outside the job's outputs, as a trial's does.
"""

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
# torch.compile's cache beside the results, as the trials keep it (train_trial.py says why it is not a param).
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR", os.path.abspath(os.path.join(snakemake.config["results"], "cache", "torchinductor"))
)

from tokenwatt.common.failures import stop_with_a_sentence  # noqa: E402
from tokenwatt.common.files import job_label, logged, write_json  # noqa: E402
from tokenwatt.common.store import job_key, job_store, named_paths  # noqa: E402

with logged(snakemake.log[0]):
    store = job_store(snakemake, "train_stable")
    restored = store.restore()
if restored:
    os._exit(0)

from tokenwatt.plan.design import JOB_TRAIN_KEYS, series_of  # noqa: E402
from tokenwatt.plan.layout import checkpoint_folder  # noqa: E402
from tokenwatt.training.checkpoint import remove  # noqa: E402
from tokenwatt.training.launch import stable_on_devices  # noqa: E402
from tokenwatt.training.resume import CheckpointPlace  # noqa: E402
from tokenwatt.training.spec import TrialData, TrialSpec  # noqa: E402
from tokenwatt.training.stretch import combine_stretches, stretch_record  # noqa: E402
from tokenwatt.training.trial import run_stable  # noqa: E402

p, out, record = snakemake.params, Path(snakemake.output.point), Path(snakemake.output.record)
place = CheckpointPlace(
    Path(checkpoint_folder(snakemake.config["results"], p.cell, p.trial)),
    store.key or job_key("train_stable", dict(p.items()), named_paths(snakemake.input)),
)
if store.forced:
    remove(place.folder)
stop_with_a_sentence()
with logged(snakemake.log[0], append=True, job=job_label(snakemake.rule, snakemake.wildcards)):
    try:
        job = {k: snakemake.config["train"][k] for k in JOB_TRAIN_KEYS if k in snakemake.config["train"]}
        spec = TrialSpec.from_params(p, job)
        origin = Path(snakemake.input.origin) if hasattr(snakemake.input, "origin") else None
        if spec.train.devices > 1:  # one process per device, every rank's state saved in the one point
            ranks = stable_on_devices(spec, named_paths(snakemake.input), out, p.point, place, origin)
        else:
            ranks = [
                run_stable(spec, TrialData.stable(snakemake.input, spec), out, p.point, place=place, origin=origin)
            ]
        done = ranks[0]
        print(
            f"stable run, trial {p.trial}: point {p.point} at step {done['step']} ({done['real_tokens']:,} real "
            f"tokens, {done['train_s']:.1f} s of training so far)"
            + (" (diverged before it)" if done["diverged"] else "")
        )
        # written after the point: a record only beside a point that is whole; each rank's stretch, combined
        stretches = [
            stretch_record(
                d["session"],
                series=series_of(p.levels),
                trial=p.trial,
                point=p.point,
                real_tokens=d["real_tokens"],
                train_s=d["train_s"],
                diverged=d["diverged"],
            )
            for d in ranks
        ]
        write_json(record, combine_stretches(stretches))
        remove(place.folder)
    except BaseException:
        for written in (out, record):
            if written.exists():
                written.unlink()
        raise
    store.save()
os._exit(0)
