"""The boxes at the top of the report: what a reader must know before any number (an interim report, estimated or
unmeasured energy, a disturbed device profile, a barely loaded device, how energy was read, flagged and missing
trials)."""

from __future__ import annotations

from markupsafe import Markup

from ...analysis.quality import device_load
from ..inputs import ReportInputs
from ..meter_notes import meter_warnings, why_estimated
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    trials = inputs.trials
    meters = set(trials["meter"].to_list()) if "meter" in trials.columns else set()
    return render_template(
        "sections/warnings.html.j2",
        interim=inputs.interim,
        n_trials=trials.height,
        estimated=inputs.estimated,
        # what the estimate's absolute joules rest on, and why no sensor was read
        tdp_w=inputs.config.get("meter", {}).get("cpu_tdp_w"),
        why_estimated=why_estimated(trials),
        power_untested="power_rms_w" in (inputs.product("stats").get("not_tested") or {}),
        unmetered="none" in meters,
        disturbed=inputs.disturbed_profile,
        load=device_load(trials),
        min_load=inputs.config.get("quality", {}).get("min_load", 0.1),
        # meter_notes writes each warning's HTML, its data already escaped
        meter_warnings=[Markup(w) for w in meter_warnings(trials)],
        n_flagged=inputs.n_flagged,
        missing=inputs.missing,
    )
