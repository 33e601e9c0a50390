"""Rule aggregate: trials.parquet (measured + derived + quality), conditions, changes, quality flags, missing trials."""

import polars as pl
from tokenwatt.analysis.aggregate import cost_summary, cs_tflops_of, curves_table, trials_table
from tokenwatt.analysis.conditions import changes_table, conditions_table
from tokenwatt.analysis.frame import frame_note, mark
from tokenwatt.analysis.quality import QUALITY_COLUMNS, profile_verdict
from tokenwatt.common.files import (
    RERUN,
    DamagedFileError,
    logged,
    read_curve,
    read_json_checked,
    read_power_trace,
    read_profile,
    read_steps,
    write_json,
    write_parquet,
    write_text,
)
from tokenwatt.common.records import RecordError, load_validator, read_record
from tokenwatt.plan.cost import carbon_intensity
from tokenwatt.plan.design import profile_key_of
from tokenwatt.training.stretch import STRETCH_KEYS

with logged(snakemake.log[0]):
    p, inp, out = snakemake.params, snakemake.input, snakemake.output
    validator = load_validator(inp.schema)
    expected = [tuple(e) for e in p.expected]
    # The inputs are every expected trial (final report) or the finished ones (interim report).
    present = {m: (pw, st, cv) for m, pw, st, cv in zip(inp.metrics, inp.power, inp.steps, inp.curves)}
    records, traces, steps, curves = [], [], [], []
    for path in p.paths:
        if path not in present:
            records.append(None)
            traces.append(None)
            steps.append(None)
            curves.append(None)
            continue
        try:  # every file of the trial checked; a damaged one is named in the report as a missing trial, with the fix
            found = (
                read_record(path, validator),
                read_power_trace(present[path][0]),
                read_steps(present[path][1]),
                read_curve(present[path][2]),
            )
        except (RecordError, DamagedFileError) as err:
            found = (str(err), None, None, None)
        for kept, value in zip((records, traces, steps, curves), found):
            kept.append(value)
    # One device profile per hardware level and precision (profile key -> file); those measured so far.
    measured = set(inp.profile)
    profiles = {key: read_profile(path) if path in measured else None for key, path in p.profiles.items()}
    valid = [r for r in records if isinstance(r, dict)]
    cs, verdicts = {}, []
    for key, profile in profiles.items():
        cs[key], source = cs_tflops_of(p.metric, profile)
        print(f"CS_TFLOPS {key or 'of the study'}: {cs[key]} ({source})")
        verdict = {
            "profile": key,
            **profile_verdict(profile, [r for r in valid if profile_key_of(r["levels"]) == key], p.quality),
        }
        print(
            f"device profile {key}: {verdict['status']}; matmul checks judged against {verdict['reference']} {verdict['reasons']}"
        )
        verdicts.append(verdict)
    intensity = carbon_intensity(p.cost["carbon_intensity"])
    print(f"carbon intensity: {intensity[0]} gCO2e/kWh ({intensity[1]})")
    trials, missing = trials_table(
        records,
        expected,
        traces=traces,
        steps=steps,
        absent=p.absent,
        cs_tflops=cs,
        metric=p.metric,
        quality=p.quality,
        reference_tflops={v["profile"]: v["reference_tflops"] for v in verdicts},
        cost=p.cost,
        intensity_g_per_kwh=intensity[0],
        cs_keys=p.cs_keys,
        profile_devices={key: (profile or {}).get("device_name") for key, profile in profiles.items()},
    )
    for line in missing:
        print(f"MISSING: {line}")
    # The analysis frame, marked once: every later table, figure and test reads `in_frame`.
    cells = list(dict.fromkeys(c for c, _ in expected))
    trials = mark(trials, cells, p.exclude_flagged, require_complete=p.require_complete)
    print(frame_note(trials, p.exclude_flagged))
    conditions = conditions_table(trials)
    write_parquet(out.trials, trials)
    write_parquet(out.curves, curves_table(records, curves))
    conditions.write_csv(out.conditions)
    changes_table(conditions).write_csv(out.changes)
    trials.select([c for c in QUALITY_COLUMNS if c in trials.columns]).write_csv(
        out.quality
    )  # all of them once a trial finished
    flagged = trials.filter(pl.col("quality") == "flagged")
    path_of = dict(zip(expected, p.paths))
    write_text(out.flagged, "".join(f"{path_of[(c, t)]}\n" for c, t in flagged.select("cell", "trial").iter_rows()))
    write_json(out.missing, missing)
    write_json(out.profile_check, verdicts)
    # the stable runs' stretch records (train.schedule.branch_every): each stretch counted once, its cooldowns or not
    fix = RERUN + "its stretch is restored from the store, or trained again if the store has none"
    stretches = [read_json_checked(path, "stable run's stretch record", fix, STRETCH_KEYS) for path in inp.stretches]
    totals = cost_summary(trials, p.cost, intensity, stretches)
    write_json(out.cost, totals)
    for name in ("totals_missing", "spent_missing"):
        if totals[name]:
            print(f"no {'spent' if name == 'spent_missing' else 'study'} total: {totals[name]}")
    print(f"{trials.height} trials aggregated, {flagged.height} flagged, {len(missing)} missing")
