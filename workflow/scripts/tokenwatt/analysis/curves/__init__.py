"""The curves family: what each trial's evaluation points say about joules and quality (the curves product and the
analyses it runs: trajectories, quality at equal energy, marginal gain, energy to target as censored data, stopping
rules replayed), over the runs table they share (``runs.py``)."""
