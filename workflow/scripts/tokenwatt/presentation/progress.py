"""The lines a study prints to the terminal while it runs: each trial's start and end, and the
study's progress with the time and energy still to go.

Display only: these functions return text and write nothing, so the code digest of the trial
rule leaves this module out (``codeclosure.DISPLAY_ONLY``) and editing it never retrains.
"""

from __future__ import annotations

import statistics
from typing import Any

import polars as pl

from ..analysis.quality import assess, diagnose
from ..common.files import read_json
from ..common.measures import duration
from ..plan import allocation
from ..plan.config import quality_settings
from ..plan.design import Design, condition_name, parse_cell, series_of
from ..plan.layout import Layout
from ..plan.preview import own_job, pilot_of


def _condition(budget: int, levels: dict[str, str]) -> str:
    return condition_name(series_of(levels), budget)


def trial_started(budget: int, trial: int, levels: dict[str, str] | None = None) -> str:
    return f"▶ {_condition(budget, levels or {})} · trial {trial}: started (progress lines in its log)"


def first_look(m: dict[str, Any], power: pl.DataFrame, steps: pl.DataFrame, config: dict[str, Any]) -> str:
    """The quality rules a trial can be judged by on its own (steadiness, power steps, samples, reads,
    start temperature); the analysis judges it again beside the other trials and the device profile."""
    if m["status"] != "ok":
        return "not judged (the trial diverged)"
    q = quality_settings(config)
    verdict = assess([m], diagnose([m], [power], [steps], None, q), q)[0]
    if verdict["quality"] != "ok":
        return f"FLAGGED: {verdict['quality_reasons']}"
    if (config.get("profile") or {}).get("check_windows", 3):
        return (
            "quality ok so far (throughput and matmul checks are judged after the study, against the other trials "
            "and the device profile)"
        )
    return "quality ok so far (throughput is judged after the study, against the other trials)"


def trial_finished(m: dict[str, Any], look: str = "") -> str:
    """One line: throughput, mean power, energy (labelled when estimated), eval loss, seconds, first quality look."""
    estimate = " estimated" if m["meter_is_estimate"] else ""
    power = "power not measured" if m["power_mean_w"] is None else f"{m['power_mean_w']:.1f} W{estimate}"
    energy = "" if m["energy_j"] is None else f", {m['energy_j']:,.1f} J{estimate}"
    loss = (
        f"DIVERGED at step {m['diverged_at_step']}" if m["status"] == "diverged" else f"eval loss {m['eval_loss']:.4f}"
    )
    return (
        f"■ {_condition(m['budget'], m.get('levels', {}))} · trial {m['trial']}: {m['real_tokens'] / m['train_s']:,.0f} tokens/s, {power}{energy}, "
        f"{loss}, {m['train_s']:.1f} s training / {m['run_s']:.1f} s in all{_branched(m)}"
        + (f"; {look}" if look else "")
    )


def _branched(m: dict[str, Any]) -> str:
    """A branched trial's share of those seconds that its stable run's jobs trained (not in its job's ``in all``)."""
    branch = m.get("branch") or {}
    if not branch.get("from_point"):
        return ""
    return f" ({branch['stable_train_s']:.1f} s of the training in its stable run's jobs, point {branch['from_point']})"


def expected_trials(config: dict[str, Any]) -> dict[tuple[str, int], int]:
    """Every (cell, trial) of the study and the real tokens it trains on, for the progress line. Asked here, in
    display-only code (left out of every code digest), so that the trial script's digest does not include the design
    module."""
    design = Design(config)
    keys = design.keys()
    if allocation.allocation_of(config) is not None:  # a halving study: the rounds its checkpoints have asked for
        layout = Layout(config, design)
        keys = allocation.walk(design, lambda k: allocation.record_on_disk(layout.halving_round(k), read_json)).trials
    return {(c, t): design.tokens_of(c) for c, t in keys}


def _nearest(cell: str, done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finished trials whose cells share the most levels with ``cell`` (all of them where none shares any)."""
    mine = set(parse_cell(cell).levels)
    shared = [len(mine & set(parse_cell(m["cell"]).levels)) for m in done]
    return [m for m, k in zip(done, shared, strict=True) if k == max(shared)]


def study_progress(finished: dict[tuple[str, int], dict[str, Any]], expected: dict[tuple[str, int], int]) -> str:
    """Trials done of all, and the time and energy still to go, estimated from finished trials of the
    same cell (or, for a cell with none yet, from those that share most of its levels, a model level's speed above all,
    scaled by the tokens each is asked for)."""
    todo = [key for key in expected if key not in finished]
    line = f"  study: {len(expected) - len(todo)} of {len(expected)} trials done"
    if not todo:
        return line + "."
    done = [own_job(m) for m in finished.values()]  # a branched trial's own job, not its stable run's
    tokens_per_asked = [m["real_tokens"] / expected[key] for key, m in finished.items() if key in expected]
    if not done:
        return line + "; time to go unknown until a trial finishes."

    def per_token(values: list[tuple[float, int]]) -> float | None:
        rates = [v / tokens for v, tokens in values if v is not None and tokens]
        return statistics.median(rates) if rates else None

    seconds = joules = 0.0
    energy_known = True
    for cell, trial in todo:
        same = [m for m in done if m["cell"] == cell]  # same cell first: its workload matches
        tokens = (
            statistics.median(m["real_tokens"] for m in same)
            if same
            else statistics.median(tokens_per_asked or [1.0]) * expected[(cell, trial)]
        )
        same = same or _nearest(cell, done)
        seconds += per_token([(m["run_s"], m["real_tokens"]) for m in same]) * tokens
        rate = per_token([(m["energy_j"], m["real_tokens"]) for m in same])
        energy_known = energy_known and rate is not None
        joules += (rate or 0.0) * tokens
    estimated = any(m["meter_is_estimate"] for m in done)
    energy = f" and ~{joules / 1e3:,.2f} kJ{' of estimated energy' if estimated else ''}" if energy_known else ""
    # One short line per trial: how it is estimated is said once, in the plan (preview.PROGRESS_NOTE).
    return f"{line}; ~{seconds / 60:,.1f} min{energy} to go"


# Rescaling a pilot's tokens/s by matmul throughput holds between machines of one kind (two CPUs, two GPUs), not
# across kinds, where small models run far from the matmul peak on a GPU: beyond this range of ratios, no estimate.
RESCALABLE = (0.2, 5.0)


def profile_estimate(config: dict[str, Any], profile_key: str, cs_here: float | None) -> str | None:
    """The study's time here, said when a device profile is measured (before the first trial): the config's pilot
    (plan.tokens_per_s, measured on the machine plan.cs_tflops names by its own profile) rescaled by this device's
    CS_TFLOPS over the pilot's, for the trials that run on this profile; None without a pilot to rescale."""
    pilot = pilot_of(config)[0]
    if not (pilot.get("tokens_per_s") and pilot.get("cs_tflops") and cs_here):
        return None
    ratio = cs_here / pilot["cs_tflops"]
    if not RESCALABLE[0] <= ratio <= RESCALABLE[1]:
        return (
            f"Time here: unknown until the first trial finishes (this device's CS_TFLOPS {cs_here:.3g} is {ratio:.3g}× "
            f"the pilot machine's, plan.cs_tflops: too unlike it for its throughput to be rescaled)."
        )
    design = Design(config)
    keys = [(c, t) for c, t in design.keys() if design.profile_key(design.cell(c)) == profile_key]
    tokens = sum(design.tokens_of(c) for c, _ in keys) * config["train"]["epochs"]
    tokens_per_s = pilot["tokens_per_s"] * cs_here / pilot["cs_tflops"]
    seconds = tokens / tokens_per_s + len(keys) * pilot.get("fixed_s", 0)
    source = f"; {pilot['source']}" if pilot.get("source") else ""
    return (
        f"Time here: ~{duration(seconds)} for {len(keys)} trials (ESTIMATE from this device's profile, before the first "
        f"trial: the pilot's {pilot['tokens_per_s']:,.0f} tokens/s × this device's CS_TFLOPS {cs_here:.3g} / the "
        f"pilot's {pilot['cs_tflops']:.3g} = {tokens_per_s:,.0f} tokens/s, + {pilot.get('fixed_s', 0):g} s per trial "
        f"beside training (plan.*{source}))."
    )
