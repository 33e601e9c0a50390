"""Rule train_trial: train one (budget, trial) and write metrics.json, power.parquet, steps.parquet, curve.parquet,
or restore them from the result store when a trial with the same params and inputs was stored (tokenwatt/common/store.py).

Its full progress goes to the rule's log; the terminal gets one line when it starts, one when it
ends, and the study's progress (sys.__stderr__ is the terminal while the log holds stdout/stderr).
The process ends with ``os._exit`` once every output is written and closed: the interpreter's
teardown of torch costs about a second per trial and does nothing a finished trial needs.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
# torch.compile's cache beside the results, so every trial after the first compiles warm. Read from
# the config, not a param: params key the between-workflow cache, and where a study keeps its
# results must not keep another study from reusing its trials.
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR", os.path.abspath(os.path.join(snakemake.config["results"], "cache", "torchinductor"))
)

from tokenwatt.common.failures import stop_with_a_sentence  # noqa: E402
from tokenwatt.common.files import job_label, logged  # noqa: E402
from tokenwatt.common.store import job_key, job_store, named_paths  # noqa: E402

# The result store first, before torch is imported: a trial whose params and inputs match a stored one is
# restored, never trained again, whatever happened to its files in between (tokenwatt/common/store.py).
with logged(snakemake.log[0]):
    store = job_store(snakemake, "train_trial", last="metrics")
    restored = store.restore()
if restored:
    os._exit(0)

from tokenwatt.common.files import read_json, write_json, write_parquet  # noqa: E402
from tokenwatt.common.records import check_record, load_validator  # noqa: E402
from tokenwatt.plan.design import JOB_TRAIN_KEYS  # noqa: E402
from tokenwatt.plan.layout import checkpoint_folder  # noqa: E402
from tokenwatt.presentation.progress import expected_trials, first_look, study_progress, trial_finished, trial_started  # noqa: E402
from tokenwatt.training.checkpoint import remove  # noqa: E402
from tokenwatt.training.launch import run_on_devices  # noqa: E402
from tokenwatt.training.resume import CheckpointPlace  # noqa: E402
from tokenwatt.training.spec import TrialData, TrialSpec  # noqa: E402
from tokenwatt.training.trial import run_trial  # noqa: E402


def terminal(line: str) -> None:
    print(line, file=sys.__stderr__, flush=True)


p, out = snakemake.params, snakemake.output
# The checkpoint beside the results, outside the job's outputs (a failed job's cleanup keeps it), valid under the job's
# content key: the store's, or the same key computed when the store is off. Its folder comes from the config, not a
# param, for the reason the compile cache's does.
place = CheckpointPlace(
    Path(checkpoint_folder(snakemake.config["results"], p.cell, p.trial)),
    store.key or job_key("train_trial", dict(p.items()), named_paths(snakemake.input)),
)
if store.forced:  # forced to be measured again: from its first step, not from what a stopped run had measured
    remove(place.folder)
terminal(trial_started(p.budget, p.trial, p.levels))
stop_with_a_sentence()  # a trial stopped (mid-training: at its next step, after a checkpoint) removes its outputs and names itself
with logged(snakemake.log[0], append=True, job=job_label(snakemake.rule, snakemake.wildcards)):
    try:
        job = {k: snakemake.config["train"][k] for k in JOB_TRAIN_KEYS if k in snakemake.config["train"]}
        spec = TrialSpec.from_params(p, job)
        origin = Path(snakemake.input.origin) if hasattr(snakemake.input, "origin") else None  # a branched trial's
        if spec.train.devices > 1:  # one process per device, started by the torch launcher, one checkpoint for all
            metrics, power, steps, curve = run_on_devices(
                spec, named_paths(snakemake.input), place=place, origin=origin
            )
        else:
            metrics, power, steps, curve = run_trial(spec, TrialData.read(snakemake.input), place=place, origin=origin)
        check_record(metrics, load_validator(snakemake.input.schema), out.metrics)
        write_parquet(out.power, power)
        write_parquet(out.steps, steps)
        write_parquet(out.curve, curve)
        write_json(out.metrics, metrics)  # last: its presence marks a finished trial
        if not spec.train.keep_checkpoint:  # only now: a failed write resumes from it
            remove(place.folder)
    except BaseException:
        for path in out:  # never leave a half trial that aggregation could pick up
            if os.path.exists(path):
                os.remove(path)
        raise
    store.save()  # a copy under the trial's key: a later failed rerun cannot lose it
    print(trial_finished(metrics))

# The study's progress, from the finished trials beside this one (display only: read, never written;
# a failure here must never fail a trial whose outputs are already written).
try:
    expected = expected_trials(snakemake.config)
    finished = {}
    trials_folder = Path(out.metrics).parents[1 + metrics["cell"].count("/") + 1]
    for path in trials_folder.glob("**/metrics.json"):  # this trial's siblings, wherever results are
        try:
            record = read_json(path)
            finished[(record["cell"], record["trial"])] = record
        except (OSError, ValueError, KeyError, TypeError):
            continue  # an unreadable record is reported by the analysis, not here
    terminal(trial_finished(metrics, first_look(metrics, power, steps, snakemake.config)))
    terminal(study_progress({k: v for k, v in finished.items() if k in expected}, expected))
except Exception as err:  # noqa: BLE001
    terminal(f"  (progress line unavailable: {type(err).__name__}: {err})")
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
