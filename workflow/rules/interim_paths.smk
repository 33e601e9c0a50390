# The interim report's inputs (interim.smk): the final rules' own, rewritten to the trials finished so far, each
# marked ancient, and outputs under results/interim/: finished trials only, never retrained.


def finished():
    """(cell, trial) of every trial whose files all exist now (metrics.json is written and restored last; a trial
    with one of its files deleted is left out rather than rebuilt: the interim report never runs a study's job).
    """
    return [
        (c, t) for c, t in EXPECTED if all(Path(f).exists() for f in trial_files(c, t))
    ]


def finished_files(kind):
    # ancient(): a finished trial is read as it is, never retrained for this report
    return lambda wildcards: [ancient(trial_files(c, t)[kind]) for c, t in finished()]


def interim_path(*parts):
    return res("interim", *parts)


def _interim(path):
    """A file of the analysis stage (results/analysis/…, results/figures/…, the report) moved under
    results/interim/; anything else (captions, the reference study) as it is."""
    staged = str(path).startswith(
        tuple(res(stage) + os.sep for stage in ("analysis", "figures"))
    )
    return (
        interim_path(os.path.relpath(path, RESULTS))
        if staged or str(path) == res("report.html")
        else path
    )


def interim_named(files, **replaced):
    """A final rule's named inputs or outputs for its interim twin (the interim rules are derived from the final
    ones, never listed twice); ``replaced`` names inputs the interim rule reads otherwise (only what exists now).
    """
    return {
        name: (
            replaced[name]
            if name in replaced
            else (
                [_interim(p) for p in value]
                if isinstance(value, list)
                else _interim(value)
            )
        )
        for name, value in ((name, files.get(name)) for name in files.keys())
    }


def interim_positional(files):
    """A final rule's unnamed inputs or outputs for its interim twin."""
    return [] if list(files.keys()) else [_interim(p) for p in files]


def existing_profiles(wildcards):
    # ancient(): a measured profile is read as it is, never measured again beside the running study
    return [ancient(p) for p in DEVICE_PROFILES if Path(p).exists()]


def existing(*paths):
    """An input function of the paths that exist now, each ancient: read as it is, never built for the interim report."""
    return lambda wildcards: [ancient(p) for p in paths if Path(p).exists()]


def interim_traces():
    """Per cell, the power trace of its first finished trial."""
    first = {}
    for c, t in finished():
        first.setdefault(c, t)
    return sorted(first.items())
