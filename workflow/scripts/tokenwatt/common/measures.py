"""The measures the analysis reports: one place for their labels, units and how their numbers are written."""

from __future__ import annotations

import math
import sys
from typing import Any, NamedTuple

# The largest x whose exp() a float holds (exp(709.78) ≈ 1.8e308); a diverged run's loss can pass it.
LOG_MAX_FLOAT = math.log(sys.float_info.max)


def exp_of_loss(x: float | None) -> float | None:
    """exp(x) of a loss or a loss difference (nats): a perplexity or a perplexity ratio.

    None where x is None or NaN, and where exp would overflow (a diverged run's loss past ~709 nats): such a
    perplexity is not a number a table holds, so it is missing, and its loss stays in the loss columns.
    """
    if x is None or x != x or x > LOG_MAX_FLOAT:
        return None
    return math.exp(x)


class Measure(NamedTuple):
    """A measure's label and unit, and the scale it is analysed on.

    ``log``: a ratio-scale quantity whose effects multiply (PE ∝ invPPL / (params · tokens · W); energy =
    power × time), so factors that change its level change its differences in proportion. Tested on log
    values, summarised as geometric means, compared as ratios: on the raw scale two series that both halve
    per doubling of the budget would show an "interaction" that is their difference in level.
    ``raw``: additive quantities (eval loss is already a log: log perplexity), and differences that can be
    zero or negative (energy above idle).
    """

    label: str
    unit: str
    scale: str


# name -> Measure; the order is the order of tables and figures; the scale is declared here only.
MEASURES: dict[str, Measure] = {
    "pe": Measure("PE (energy-aware parameter efficiency)", "a.u.", "log"),
    "quality_per_mparam": Measure("Quality per parameter", "invPPL / M params", "log"),
    "quality_per_pflop": Measure("Quality per compute", "invPPL / PFLOP", "log"),
    "quality_per_kj": Measure("Quality per energy", "invPPL / kJ", "log"),
    "power_rms_w": Measure("RMS power", "W", "log"),
    "power_mean_w": Measure("Mean power", "W", "log"),
    "energy_j": Measure("Energy", "J", "log"),
    "dynamic_energy_j": Measure("Energy above idle", "J", "raw"),
    "joules_per_token": Measure("Energy per token", "J/token", "log"),
    "train_s": Measure("Training time", "s", "log"),
    "tokens_per_s": Measure("Throughput", "tokens/s", "log"),
    "eval_loss": Measure("Eval loss", "nats/token", "raw"),
    "perplexity": Measure("Perplexity", "", "log"),
    "inv_ppl": Measure("Quality (invPPL = 1 / perplexity)", "", "log"),
    "kwh": Measure("Energy at the facility (× PUE)", "kWh", "log"),
    "kg_co2e": Measure("Emissions", "kg CO2e", "log"),
    "electricity_cost": Measure("Electricity cost", "{currency}", "log"),
    "device_cost": Measure("Device-hour cost", "{currency}", "log"),
    "total_cost": Measure("Cost, electricity + device-hours", "{currency}", "log"),
    "cost_per_inv_ppl": Measure("Cost per unit of quality", "{currency} / invPPL", "log"),
    "energy_to_target_j": Measure("Training energy to reach a target quality", "J", "log"),
}


def scale_of(name: str) -> str:
    """``log`` or ``raw``: the scale every test and summary of ``name`` uses."""
    return MEASURES[name].scale


# The report's conditions tables: one per family of measures.
FAMILIES: dict[str, list[str]] = {
    "Efficiency": ["pe", "quality_per_mparam", "quality_per_pflop", "quality_per_kj"],
    "Power and energy": ["power_rms_w", "power_mean_w", "energy_j", "dynamic_energy_j", "joules_per_token"],
    "Time and quality": ["train_s", "tokens_per_s", "eval_loss", "perplexity", "inv_ppl"],
    "Carbon and money": ["kwh", "kg_co2e", "electricity_cost", "device_cost", "total_cost", "cost_per_inv_ppl"],
}

# Measures tested with the repeated-measures ANOVA (the list: PE, its layers, power, energy, time).
TESTED = ["pe", "quality_per_mparam", "quality_per_pflop", "quality_per_kj", "power_rms_w", "energy_j", "train_s"]


# The figures of the aggregate's tables, in the report's order (an analysis product's figures are in its entry,
# tokenwatt.analysis.products); each has a caption in workflow/report/<name>.rst.
FIGURES = [
    "pe_by_budget",
    "efficiency_layers",
    "power_energy_by_budget",
    "time_by_budget",
    "perplexity_vs_tokens",
    "tradeoff",
    "power_traces",
    "measurement_quality",
    "quality_vs_cost",
    "quality_vs_energy",
]


def display_exponent(values) -> int:
    """Power of ten, a multiple of 3, that brings the largest magnitude into [0.01, 10 000) for display."""
    big = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    if big == 0 or 0.01 <= big < 1e4:
        return 0
    return int(math.floor(math.log10(big) / 3) * 3)


def fixed(x: Any, scale: int = 0) -> str:
    """A number in fixed notation with four significant digits after dividing by 10^scale; never "e-08"."""
    if x is None or x != x:
        return "—"
    if math.isinf(x):  # e.g. a paired t with identical differences
        return "∞" if x > 0 else "−∞"
    v = x / 10**scale
    digits = max(0, 3 - math.floor(math.log10(abs(v)))) if v else 0
    return f"{v:,.{digits}f}"


_PREFIXES = {-12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G"}


def si(x: float | None, unit: str) -> str:
    """A quantity with an SI prefix and four significant digits: 0.2998 Wh -> "299.8 mWh", 8.994e-05 EUR ->
    "89.94 µEUR"; never exponent notation."""
    if x is None or x != x:
        return "—"
    exponent = 0 if x == 0 else max(-12, min(9, int(math.floor(math.log10(abs(x)) / 3) * 3)))
    return f"{fixed(x, exponent)} {_PREFIXES[exponent]}{unit}"


def duration(seconds: float) -> str:
    """ "42.0 s", "3.5 min", "2.1 h"."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def power_of_ten(exponent: int) -> str:
    """ " ×10⁻⁹" for -9; "" for 0."""
    return f" ×10{str(exponent).translate(str.maketrans('-0123456789', '⁻⁰¹²³⁴⁵⁶⁷⁸⁹'))}" if exponent else ""


def label(name: str, currency: str = "") -> str:
    """ "Energy (J)"; a money unit names the study's currency (``cost.currency``)."""
    text, unit, _ = MEASURES[name]
    unit = unit.format(currency=currency or "currency")
    return f"{text} ({unit})" if unit else text


def budget_label(tokens: int) -> str:
    """500000 -> '500K', 2000000 -> '2M' (as the study names its conditions)."""
    for div, suffix in ((1_000_000, "M"), (1_000, "K")):
        if tokens >= div and tokens % (div // 10 or 1) == 0:
            value = tokens / div
            return f"{value:g}{suffix}"
    return str(tokens)
