"""Rule device_profile: the device's sustained matmul throughput (CS_TFLOPS) -> profile.json, or the profile
measured before with the same settings, restored from the result store (tokenwatt/common/store.py): to measure it
again, --forcerun it."""

import sys

from tokenwatt.common.failures import stop_with_a_sentence
from tokenwatt.common.files import job_label, logged, read_profile, write_json
from tokenwatt.common.store import job_store
from tokenwatt.presentation.progress import profile_estimate

stop_with_a_sentence()
with logged(snakemake.log[0], job=job_label(snakemake.rule, snakemake.wildcards)):
    store = job_store(snakemake, "device_profile")
    if not store.restore():
        from tokenwatt.measurement.throughput import profile_device

        p = snakemake.params
        write_json(
            snakemake.output[0],
            profile_device(
                device_name=p.device,
                precision=p.precision,
                threads=p.threads,
                size=p.profile["matmul_size"],
                window_s=p.profile["window_s"],
                windows=p.profile["windows"],
                warmup_s=p.profile["warmup_s"],
                max_cv=p.profile["max_cv"],
                attempts=p.profile["attempts"],
            ),
        )
        store.save()

# The study's time on this machine, on the terminal before the first trial (display only: the config is read here,
# never a param, so that neither the profile's key nor its code digest depends on the study's budgets).
# A failure here must never fail the job, whose profile is already written and stored.
try:
    line = profile_estimate(snakemake.config, snakemake.params.key, read_profile(snakemake.output[0])["cs_tflops"])
except Exception as err:  # noqa: BLE001
    line = f"  (time estimate unavailable: {type(err).__name__}: {err})"
if line:
    print(line, file=sys.__stderr__)
